//! Bearer-token verification: JWTs (HS256, RS256, ES256) checked against configured keys, issuer
//! and audience, turned into a validated [`Identity`](crate::identity::Identity).
//!
//! Each key accepts its own algorithm only; a token's `kid` selects one key, without `kid` every
//! key of the header's algorithm is tried. Oversized tokens are refused before parsing. Keys come
//! from the configuration, a JWKS file, or the identity provider (a JWKS URL or OIDC discovery,
//! refreshed without restart: see `remote`).

mod claims;
mod config;
mod error;
mod jwks;
mod keys;
pub mod mint;
mod remote;
mod verify;

pub(crate) use claims::introspected;
pub use claims::{Claims, Grants};
pub use config::{
    AuthConfig, AuthConfigError, DEFAULT_LEEWAY_SECS, DEFAULT_MAX_TOKEN_BYTES, KeyAlg, KeyConfig,
    MAX_LEEWAY_SECS, MIN_HS256_SECRET_BYTES, MIN_RSA_BITS, ScopeRequirements,
};
pub use error::AuthError;
pub use mint::MintClaims;
pub use verify::{Verified, Verifier, is_jws_shaped};

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn config() -> AuthConfig {
        AuthConfig {
            issuer: "https://issuer.test".into(),
            audience: "bulkhead-test".into(),
            leeway_secs: 30,
            max_token_bytes: 4096,
            verified_tokens: 4096,
            keys: vec![KeyConfig {
                kid: None,
                alg: KeyAlg::HS256,
                secret: Some(SECRET.into()),
                public_key_pem: None,
                public_key_file: None,
            }],
            jwks_file: None,
            jwks_url: None,
            oidc_discovery: false,
            jwks_refresh_secs: 300,
            jwks_min_refetch_secs: 30,
            jwks_timeout_ms: 5000,
            jwks_ca_file: None,
            scopes: ScopeRequirements::default(),
            session_claim: None,
        }
    }

    fn claims(sub: &str) -> MintClaims {
        MintClaims {
            sub: sub.into(),
            session_id: "s1".into(),
            iss: "https://issuer.test".into(),
            aud: "bulkhead-test".into(),
            ttl_secs: 60,
        }
    }

    #[test]
    fn mint_then_verify_round_trip() {
        let verifier = Verifier::new(&config()).unwrap();
        let token = mint::mint_hs256(SECRET.as_bytes(), &claims("alice")).unwrap();
        let got = verifier.verify(&token).unwrap();
        assert_eq!(got.identity.user(), "alice");
        assert_eq!(got.claims.session_id, "s1");
        assert_eq!(got.claims.aud, vec!["bulkhead-test".to_string()]);
        assert!(got.claims.exp >= got.claims.iat.unwrap() + 60);
    }

    #[test]
    fn mint_refuses_hostile_identity_and_short_secret() {
        assert!(matches!(
            mint::mint_hs256(SECRET.as_bytes(), &claims("../bob")),
            Err(AuthError::Mint(_))
        ));
        assert!(matches!(
            mint::mint_hs256(b"short", &claims("alice")),
            Err(AuthError::Mint(_))
        ));
    }

    #[test]
    fn config_defaults_and_unknown_fields() {
        let cfg: AuthConfig = serde_json::from_value(serde_json::json!({
            "issuer": "i", "audience": "a",
            "keys": [{"alg": "HS256", "secret": SECRET}]
        }))
        .unwrap();
        assert_eq!((cfg.leeway_secs, cfg.max_token_bytes), (30, 8192));
        let bad = serde_json::from_value::<AuthConfig>(serde_json::json!({
            "issuer": "i", "audience": "a", "keys": [], "algorithms": ["none"]
        }));
        assert!(bad.is_err());
        let bad_alg = serde_json::from_value::<KeyConfig>(
            serde_json::json!({"alg": "none", "secret": SECRET}),
        );
        assert!(bad_alg.is_err());
    }

    #[test]
    fn size_limit_is_checked_before_parsing() {
        let verifier = Verifier::new(&config()).unwrap();
        let junk = "x".repeat(4097);
        assert_eq!(
            verifier.verify(&junk),
            Err(AuthError::TooLarge { max: 4096 })
        );
        assert!(matches!(
            verifier.verify(&junk[..4096]),
            Err(AuthError::Malformed(_))
        ));
    }
}
