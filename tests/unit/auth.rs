//! Adversarial tests of `bulkhead::auth`: forged, confused, expired, misaddressed and hostile
//! tokens against a real configuration with HS256, RS256, ES256 and JWKS keys.
//!
//! `bad_tokens` holds the table of refused tokens, `config` the refused configurations; the
//! shared helpers below sign arbitrary claims with the key pairs in `tests/fixtures/auth/`.

mod bad_tokens;
mod config;
mod remembered;

use std::path::PathBuf;

use base64::Engine as _;
use bulkhead::auth::mint::{self, MintClaims};
use bulkhead::auth::{AuthConfig, AuthConfigError, AuthError, KeyAlg, KeyConfig, Verifier};
use jsonwebtoken::{Algorithm, EncodingKey, Header, get_current_timestamp};
use serde_json::{Value, json};

const SECRET: &str = "test-only-hs256-secret-0123456789abcdef";
const ISS: &str = "https://issuer.test";
const AUD: &str = "bulkhead-records";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/auth")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

fn key(kid: Option<&str>, alg: KeyAlg) -> KeyConfig {
    KeyConfig {
        kid: kid.map(Into::into),
        alg,
        secret: None,
        public_key_pem: None,
        public_key_file: None,
    }
}

fn hs_key(kid: Option<&str>, secret: &str) -> KeyConfig {
    KeyConfig {
        secret: Some(secret.into()),
        ..key(kid, KeyAlg::HS256)
    }
}

fn rs_key(kid: Option<&str>) -> KeyConfig {
    KeyConfig {
        public_key_file: Some(fixture("rsa_public.pem")),
        ..key(kid, KeyAlg::RS256)
    }
}

fn es_key(kid: Option<&str>) -> KeyConfig {
    KeyConfig {
        public_key_pem: Some(read("ec_public.pem")),
        ..key(kid, KeyAlg::ES256)
    }
}

fn config(keys: Vec<KeyConfig>) -> AuthConfig {
    AuthConfig {
        issuer: ISS.into(),
        audience: AUD.into(),
        leeway_secs: 30,
        max_token_bytes: 8192,
        verified_tokens: 4096,
        keys,
        jwks_file: None,
        jwks_url: None,
        oidc_discovery: false,
        jwks_refresh_secs: 300,
        jwks_min_refetch_secs: 30,
        jwks_timeout_ms: 5000,
        jwks_ca_file: None,
        scopes: Default::default(),
        session_claim: None,
    }
}

/// Every kind of key at once: HS256 (kid hs-1), RS256 (rs-1), ES256 (es-1), and the JWKS file
/// (jwks-rs-1, jwks-es-1).
fn full_verifier() -> Verifier {
    let mut cfg = config(vec![
        hs_key(Some("hs-1"), SECRET),
        rs_key(Some("rs-1")),
        es_key(Some("es-1")),
    ]);
    cfg.jwks_file = Some(fixture("jwks.json"));
    Verifier::new(&cfg).unwrap()
}

fn now() -> u64 {
    get_current_timestamp()
}

fn good_claims() -> Value {
    json!({"sub": "alice", "session_id": "sess-1", "iss": ISS, "aud": AUD,
           "exp": now() + 300, "nbf": now() - 5, "iat": now() - 5})
}

fn with(changes: Value) -> Value {
    let mut claims = good_claims();
    for (k, v) in changes.as_object().unwrap() {
        claims[k] = v.clone();
    }
    claims
}

fn without(name: &str) -> Value {
    let mut claims = good_claims();
    claims.as_object_mut().unwrap().remove(name);
    claims
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn signing_key(alg: Algorithm, material: &[u8]) -> EncodingKey {
    match alg {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
            EncodingKey::from_secret(material)
        }
        Algorithm::ES256 => EncodingKey::from_ec_pem(material).unwrap(),
        _ => EncodingKey::from_rsa_pem(material).unwrap(),
    }
}

/// Signs `claims` with jsonwebtoken itself: a well-formed token whose content we choose.
fn sign(alg: Algorithm, material: &[u8], kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(Into::into);
    jsonwebtoken::encode(&header, claims, &signing_key(alg, material)).unwrap()
}

/// Builds a token from raw header and payload text, signed over exactly those bytes.
fn sign_raw(alg: Algorithm, material: &[u8], header: &str, payload: &str) -> String {
    let message = format!("{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()));
    let sig =
        jsonwebtoken::crypto::sign(message.as_bytes(), &signing_key(alg, material), alg).unwrap();
    format!("{message}.{sig}")
}

fn hs(claims: &Value) -> String {
    sign(Algorithm::HS256, SECRET.as_bytes(), None, claims)
}

#[test]
fn hostile_claim_values_never_reach_the_error_message() {
    let verifier = full_verifier();
    for value in ["../../etc/shadow", "evil\nlog line", "<script>x</script>"] {
        let err = verifier
            .verify(&hs(&with(json!({"sub": value}))))
            .unwrap_err();
        assert!(
            matches!(err, AuthError::BadClaim { ref claim, .. } if claim == "sub"),
            "{err:?}"
        );
        assert!(!err.to_string().contains(value), "{err}");
        assert!(!format!("{err:?}").contains(value), "{err:?}");
    }
}

#[test]
fn good_tokens_of_every_algorithm_are_accepted() {
    let verifier = full_verifier();
    let rsa_priv = read("rsa_private.pem");
    let ec_priv = read("ec_private.pem");
    let cases = [
        ("HS256 without kid", hs(&good_claims())),
        (
            "HS256 with kid",
            sign(
                Algorithm::HS256,
                SECRET.as_bytes(),
                Some("hs-1"),
                &good_claims(),
            ),
        ),
        (
            "RS256 with kid",
            sign(
                Algorithm::RS256,
                rsa_priv.as_bytes(),
                Some("rs-1"),
                &good_claims(),
            ),
        ),
        (
            "RS256 without kid",
            sign(Algorithm::RS256, rsa_priv.as_bytes(), None, &good_claims()),
        ),
        (
            "ES256 with kid",
            sign(
                Algorithm::ES256,
                ec_priv.as_bytes(),
                Some("es-1"),
                &good_claims(),
            ),
        ),
        (
            "ES256 without kid",
            sign(Algorithm::ES256, ec_priv.as_bytes(), None, &good_claims()),
        ),
        (
            "aud list holding ours",
            hs(&with(json!({"aud": ["other", AUD]}))),
        ),
        (
            "expired within leeway",
            hs(&with(json!({"exp": now() - 10}))),
        ),
        ("nbf within leeway", hs(&with(json!({"nbf": now() + 10})))),
        (
            "no nbf, no iat",
            hs(
                &json!({"sub": "alice", "session_id": "sess-1", "iss": ISS, "aud": AUD, "exp": now() + 60}),
            ),
        ),
        (
            "extra claims ignored",
            hs(&with(json!({"scope": "read", "roles": ["x"]}))),
        ),
    ];
    for (what, token) in cases {
        let got = verifier
            .verify(&token)
            .unwrap_or_else(|e| panic!("{what}: refused: {e:?}"));
        assert_eq!(
            (got.identity.user(), got.identity.session()),
            ("alice", "sess-1"),
            "{what}"
        );
        assert_eq!(got.claims.iss, ISS, "{what}");
        assert!(got.claims.aud.iter().any(|a| a == AUD), "{what}");
    }
}

#[test]
fn identity_comes_from_the_token_claims() {
    let verifier = full_verifier();
    let claims = with(json!({"sub": "bob@example.com", "session_id": "S-42_x.y+z", "iat": 1000}));
    let got = verifier.verify(&hs(&claims)).unwrap();
    assert_eq!(got.identity.user(), "bob@example.com");
    assert_eq!(got.identity.session(), "S-42_x.y+z");
    assert_eq!(got.claims.sub, "bob@example.com");
    assert_eq!(got.claims.exp, claims["exp"].as_u64().unwrap());
    assert_eq!(got.claims.iat, Some(1000));
}

#[test]
fn jwks_file_keys_are_accepted() {
    let verifier = full_verifier();
    let jwks_rsa = read("jwks_rsa_private.pem");
    let jwks_ec = read("jwks_ec_private.pem");
    let rs = sign(
        Algorithm::RS256,
        jwks_rsa.as_bytes(),
        Some("jwks-rs-1"),
        &good_claims(),
    );
    assert_eq!(verifier.verify(&rs).unwrap().identity.user(), "alice");
    let es = sign(
        Algorithm::ES256,
        jwks_ec.as_bytes(),
        Some("jwks-es-1"),
        &good_claims(),
    );
    assert_eq!(verifier.verify(&es).unwrap().identity.user(), "alice");
    // Without kid, the JWKS key is found among the keys of its algorithm.
    let es = sign(Algorithm::ES256, jwks_ec.as_bytes(), None, &good_claims());
    assert_eq!(verifier.verify(&es).unwrap().identity.session(), "sess-1");

    // A verifier with only the JWKS file.
    let mut cfg = config(vec![]);
    cfg.jwks_file = Some(fixture("jwks.json"));
    let only = Verifier::new(&cfg).unwrap();
    assert_eq!(only.verify(&rs).unwrap().identity.user(), "alice");
    let hs_token = hs(&good_claims());
    assert_eq!(only.verify(&hs_token), Err(AuthError::AlgorithmNotAllowed));
}

#[test]
fn confusion_against_single_algorithm_verifiers() {
    let rs_only = Verifier::new(&config(vec![rs_key(None)])).unwrap();
    let rsa_pub = read("rsa_public.pem");
    let forged = sign(Algorithm::HS256, rsa_pub.as_bytes(), None, &good_claims());
    assert_eq!(rs_only.verify(&forged), Err(AuthError::AlgorithmNotAllowed));
    let forged_der_like = sign(
        Algorithm::HS256,
        rsa_pub.trim().as_bytes(),
        None,
        &good_claims(),
    );
    assert_eq!(
        rs_only.verify(&forged_der_like),
        Err(AuthError::AlgorithmNotAllowed)
    );

    let es_only = Verifier::new(&config(vec![es_key(None)])).unwrap();
    let rs = sign(
        Algorithm::RS256,
        read("rsa_private.pem").as_bytes(),
        None,
        &good_claims(),
    );
    assert_eq!(es_only.verify(&rs), Err(AuthError::AlgorithmNotAllowed));
    assert_eq!(rs_only.verify(&rs).unwrap().identity.user(), "alice");
}

#[test]
fn several_keys_of_one_algorithm_are_all_tried() {
    let other = "second-secret-for-rotation-0123456789";
    let verifier = Verifier::new(&config(vec![hs_key(None, SECRET), hs_key(None, other)])).unwrap();
    let token = sign(Algorithm::HS256, other.as_bytes(), None, &good_claims());
    assert_eq!(verifier.verify(&token).unwrap().identity.user(), "alice");
    // The claim checks still apply once a later key verifies the signature.
    let expired = sign(
        Algorithm::HS256,
        other.as_bytes(),
        None,
        &with(json!({"exp": now() - 3600})),
    );
    assert_eq!(verifier.verify(&expired), Err(AuthError::Expired));
}

#[test]
fn minted_tokens_verify() {
    let verifier = full_verifier();
    let claims = MintClaims {
        sub: "carol".into(),
        session_id: "s9".into(),
        iss: ISS.into(),
        aud: AUD.into(),
        ttl_secs: 120,
    };
    let hs = mint::mint_hs256(SECRET.as_bytes(), &claims).unwrap();
    let rs = mint::mint_rs256(read("rsa_private.pem").as_bytes(), &claims).unwrap();
    let es = mint::mint_es256(read("ec_private.pem").as_bytes(), &claims).unwrap();
    let es_kid = mint::mint(
        KeyAlg::ES256,
        read("jwks_ec_private.pem").as_bytes(),
        Some("jwks-es-1"),
        &claims,
    )
    .unwrap();
    for token in [hs, rs, es, es_kid] {
        let got = verifier.verify(&token).unwrap();
        assert_eq!(got.identity.user(), "carol");
        assert_eq!(got.claims.exp - got.claims.iat.unwrap(), 120);
    }
    let wrong_aud = MintClaims {
        aud: "elsewhere".into(),
        ..claims
    };
    let token = mint::mint_hs256(SECRET.as_bytes(), &wrong_aud).unwrap();
    assert_eq!(verifier.verify(&token), Err(AuthError::WrongAudience));
}

#[test]
fn leeway_is_configurable() {
    let mut cfg = config(vec![hs_key(None, SECRET)]);
    cfg.leeway_secs = 0;
    let strict = Verifier::new(&cfg).unwrap();
    let token = hs(&with(json!({"exp": now() - 10})));
    assert_eq!(strict.verify(&token), Err(AuthError::Expired));
    cfg.leeway_secs = 30;
    assert!(Verifier::new(&cfg).unwrap().verify(&token).is_ok());
}

#[test]
fn max_token_bytes_is_configurable() {
    let mut cfg = config(vec![hs_key(None, SECRET)]);
    let token = hs(&good_claims());
    cfg.max_token_bytes = token.len();
    assert!(Verifier::new(&cfg).unwrap().verify(&token).is_ok());
    cfg.max_token_bytes = token.len() - 1;
    assert_eq!(
        Verifier::new(&cfg).unwrap().verify(&token),
        Err(AuthError::TooLarge {
            max: token.len() - 1
        })
    );
}
