//! Minting tokens for development (`bulkhead token`) and tests. Production tokens come from an
//! identity provider; the server itself only verifies.

use jsonwebtoken::{EncodingKey, Header, encode, get_current_timestamp};
use serde::Serialize;

use super::config::{KeyAlg, MIN_HS256_SECRET_BYTES};
use super::error::AuthError;
use crate::identity::Identity;

/// What a minted token says; `exp`, `iat` and `nbf` are set from the current time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MintClaims {
    /// User id (`sub`); must pass [`Identity::new`].
    pub sub: String,
    /// Session id (`session_id`); must pass [`Identity::new`].
    pub session_id: String,
    /// Issuer (`iss`).
    pub iss: String,
    /// Audience (`aud`, written as a single string).
    pub aud: String,
    /// Lifetime: `exp = now + ttl_secs`.
    pub ttl_secs: u64,
}

#[derive(Serialize)]
struct Payload<'a> {
    sub: &'a str,
    session_id: &'a str,
    iss: &'a str,
    aud: &'a str,
    exp: u64,
    nbf: u64,
    iat: u64,
}

/// Mints an HS256 token with `secret` (at least 32 bytes).
pub fn mint_hs256(secret: &[u8], claims: &MintClaims) -> Result<String, AuthError> {
    mint(KeyAlg::HS256, secret, None, claims)
}

/// Mints an RS256 token with a PEM RSA private key.
pub fn mint_rs256(private_key_pem: &[u8], claims: &MintClaims) -> Result<String, AuthError> {
    mint(KeyAlg::RS256, private_key_pem, None, claims)
}

/// Mints an ES256 token with a PEM (PKCS#8) P-256 private key.
pub fn mint_es256(private_key_pem: &[u8], claims: &MintClaims) -> Result<String, AuthError> {
    mint(KeyAlg::ES256, private_key_pem, None, claims)
}

/// Mints a token of `alg`, with `kid` in the header when given. `key` is the HS256 secret or the
/// RS256/ES256 private key PEM.
pub fn mint(
    alg: KeyAlg,
    key: &[u8],
    kid: Option<&str>,
    claims: &MintClaims,
) -> Result<String, AuthError> {
    Identity::new(claims.sub.as_str(), claims.session_id.as_str())
        .map_err(|e| AuthError::Mint(e.to_string()))?;
    let encoding_key = match alg {
        KeyAlg::HS256 => {
            if key.len() < MIN_HS256_SECRET_BYTES {
                return Err(AuthError::Mint(format!(
                    "HS256 secret must be at least {MIN_HS256_SECRET_BYTES} bytes"
                )));
            }
            EncodingKey::from_secret(key)
        }
        KeyAlg::RS256 => {
            EncodingKey::from_rsa_pem(key).map_err(|e| AuthError::Mint(e.to_string()))?
        }
        KeyAlg::ES256 => {
            EncodingKey::from_ec_pem(key).map_err(|e| AuthError::Mint(e.to_string()))?
        }
    };
    let now = get_current_timestamp();
    let exp = now
        .checked_add(claims.ttl_secs)
        .ok_or_else(|| AuthError::Mint("ttl_secs overflows".into()))?;
    let payload = Payload {
        sub: &claims.sub,
        session_id: &claims.session_id,
        iss: &claims.iss,
        aud: &claims.aud,
        exp,
        nbf: now,
        iat: now,
    };
    let mut header = Header::new(alg.jwt_alg());
    header.kid = kid.map(str::to_owned);
    encode(&header, &payload, &encoding_key).map_err(|e| AuthError::Mint(e.to_string()))
}
