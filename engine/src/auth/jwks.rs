//! Keys from a JWKS file (RFC 7517): RSA keys for RS256, P-256 keys for ES256, `oct` for HS256.

use std::path::Path;

use base64::Engine as _;
use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};

use super::config::{AuthConfigError, KeyAlg, key_label};
use super::keys::{VerifyKey, check_public_key, hs256_key, read_text};

/// Largest JWKS file read, in bytes.
const MAX_JWKS_BYTES: u64 = 1 << 20;

/// Loads every signing key of the JWKS file at `path`. Keys marked `"use": "enc"` are skipped;
/// any other key that Bulkhead cannot verify with is a configuration error (fail closed and loud).
pub(crate) fn load_jwks(path: &Path) -> Result<Vec<VerifyKey>, AuthConfigError> {
    let file_label = format!("jwks_file {}", path.display());
    if let Ok(meta) = std::fs::metadata(path)
        && meta.len() > MAX_JWKS_BYTES
    {
        return Err(AuthConfigError::BadJwks {
            path: path.to_owned(),
            reason: format!("larger than {MAX_JWKS_BYTES} bytes"),
        });
    }
    let text = read_text(&file_label, path)?;
    let set: JwkSet = serde_json::from_str(&text).map_err(|e| AuthConfigError::BadJwks {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let mut keys = Vec::with_capacity(set.keys.len());
    for (index, jwk) in set.keys.iter().enumerate() {
        if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
            continue;
        }
        let label = key_label(&file_label, index, jwk.common.key_id.as_deref());
        keys.push(load_jwk(label, jwk)?);
    }
    Ok(keys)
}

/// Checks one JWK and turns it into a key. The algorithm comes from `alg` when present, else
/// from the key type (RSA → RS256, EC P-256 → ES256); `oct` keys must state `alg: HS256`.
pub(crate) fn load_jwk(label: String, jwk: &Jwk) -> Result<VerifyKey, AuthConfigError> {
    let bad = |reason: &str| AuthConfigError::BadJwk {
        key: label.clone(),
        reason: reason.into(),
    };
    let declared = match jwk.common.key_algorithm {
        None => None,
        Some(KeyAlgorithm::HS256) => Some(KeyAlg::HS256),
        Some(KeyAlgorithm::RS256) => Some(KeyAlg::RS256),
        Some(KeyAlgorithm::ES256) => Some(KeyAlg::ES256),
        Some(_) => return Err(bad("unsupported alg (only HS256, RS256, ES256)")),
    };
    let (alg, key) = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => {
            if declared.is_some_and(|a| a != KeyAlg::RS256) {
                return Err(bad("RSA key with a non-RSA alg"));
            }
            (
                KeyAlg::RS256,
                DecodingKey::from_jwk(jwk).map_err(|_| bad("bad RSA parameters"))?,
            )
        }
        AlgorithmParameters::EllipticCurve(ec) => {
            if declared.is_some_and(|a| a != KeyAlg::ES256) {
                return Err(bad("EC key with a non-EC alg"));
            }
            if ec.curve != EllipticCurve::P256 {
                return Err(bad("unsupported curve (only P-256)"));
            }
            (
                KeyAlg::ES256,
                DecodingKey::from_jwk(jwk).map_err(|_| bad("bad EC parameters"))?,
            )
        }
        AlgorithmParameters::OctetKey(oct) => {
            if declared != Some(KeyAlg::HS256) {
                return Err(bad("oct key without alg HS256"));
            }
            let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(&oct.value)
                .map_err(|_| bad("oct key value is not base64url"))?;
            (KeyAlg::HS256, hs256_key(&label, &secret)?)
        }
        _ => return Err(bad("unsupported key type")),
    };
    check_public_key(&label, alg, &key)?;
    Ok(VerifyKey {
        label,
        kid: jwk.common.key_id.clone(),
        alg,
        key,
    })
}
