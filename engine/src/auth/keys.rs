//! Turning configured key material into checked verification keys.

use std::path::Path;

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};

use super::config::{
    AuthConfigError, KeyAlg, KeyConfig, MIN_HS256_SECRET_BYTES, MIN_RSA_BITS, key_label,
};

/// A key ready for verification: it accepts tokens of `alg` only.
#[derive(Clone)]
pub(crate) struct VerifyKey {
    /// How error messages name this key (`keys[0] (kid "a")`).
    pub label: String,
    /// Key id, if configured.
    pub kid: Option<String>,
    /// The one algorithm this key verifies.
    pub alg: KeyAlg,
    /// The material.
    pub key: DecodingKey,
}

impl std::fmt::Debug for VerifyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyKey")
            .field("label", &self.label)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

/// Checks one `keys[index]` entry and loads its material.
pub(crate) fn load_key(index: usize, cfg: &KeyConfig) -> Result<VerifyKey, AuthConfigError> {
    let label = key_label("keys", index, cfg.kid.as_deref());
    let given = [
        cfg.secret.is_some(),
        cfg.public_key_pem.is_some(),
        cfg.public_key_file.is_some(),
    ]
    .iter()
    .filter(|&&g| g)
    .count();
    if given == 0 {
        return Err(AuthConfigError::MissingMaterial { key: label });
    }
    if given > 1 {
        return Err(AuthConfigError::ConflictingMaterial { key: label });
    }
    let key = match (cfg.alg, &cfg.secret) {
        (KeyAlg::HS256, Some(secret)) => hs256_key(&label, secret.as_bytes())?,
        (KeyAlg::HS256, None) => {
            return Err(AuthConfigError::WrongMaterial {
                key: label,
                alg: cfg.alg,
                needs: "`secret` (a shared secret), not a public key",
            });
        }
        (alg, Some(_)) => {
            return Err(AuthConfigError::WrongMaterial {
                key: label,
                alg,
                needs: "`public_key_pem` or `public_key_file`, not a secret",
            });
        }
        (alg, None) => {
            let pem = match (&cfg.public_key_pem, &cfg.public_key_file) {
                (Some(pem), _) => pem.clone(),
                (None, Some(path)) => read_text(&label, path)?,
                (None, None) => return Err(AuthConfigError::MissingMaterial { key: label }),
            };
            public_key_from_pem(&label, alg, pem.as_bytes())?
        }
    };
    Ok(VerifyKey {
        label,
        kid: cfg.kid.clone(),
        alg: cfg.alg,
        key,
    })
}

/// An HS256 key, refusing short secrets.
pub(crate) fn hs256_key(label: &str, secret: &[u8]) -> Result<DecodingKey, AuthConfigError> {
    if secret.len() < MIN_HS256_SECRET_BYTES {
        return Err(AuthConfigError::SecretTooShort {
            key: label.to_owned(),
            len: secret.len(),
        });
    }
    Ok(DecodingKey::from_secret(secret))
}

/// Reads a key file named in the configuration.
pub(crate) fn read_text(label: &str, path: &Path) -> Result<String, AuthConfigError> {
    std::fs::read_to_string(path).map_err(|source| AuthConfigError::ReadFile {
        key: label.to_owned(),
        path: path.to_owned(),
        source,
    })
}

/// Parses an RS256/ES256 public key PEM and checks it is usable for `alg`.
fn public_key_from_pem(
    label: &str,
    alg: KeyAlg,
    pem: &[u8],
) -> Result<DecodingKey, AuthConfigError> {
    if pem
        .windows(b"PRIVATE KEY".len())
        .any(|w| w == b"PRIVATE KEY")
    {
        return Err(AuthConfigError::PrivateKeyGiven {
            key: label.to_owned(),
        });
    }
    let bad = |reason: String| AuthConfigError::BadPublicKey {
        key: label.to_owned(),
        alg,
        reason,
    };
    let key = match alg {
        KeyAlg::RS256 => DecodingKey::from_rsa_pem(pem),
        KeyAlg::ES256 => DecodingKey::from_ec_pem(pem),
        KeyAlg::HS256 => return Err(bad("HS256 takes a secret".into())),
    }
    .map_err(|e| bad(e.to_string()))?;
    check_public_key(label, alg, &key)?;
    Ok(key)
}

/// Proves an RSA or EC key parses for `alg` now, so a bad key fails at startup rather than on
/// every request; RSA keys must be at least [`MIN_RSA_BITS`].
pub(crate) fn check_public_key(
    label: &str,
    alg: KeyAlg,
    key: &DecodingKey,
) -> Result<(), AuthConfigError> {
    let bad = |reason: String| AuthConfigError::BadPublicKey {
        key: label.to_owned(),
        alg,
        reason,
    };
    match alg {
        KeyAlg::RS256 => {
            let jwk =
                Jwk::from_decoding_key(key, Some(alg.jwt_alg())).map_err(|e| bad(e.to_string()))?;
            let AlgorithmParameters::RSA(rsa) = &jwk.algorithm else {
                return Err(bad("not an RSA key".into()));
            };
            let bits = rsa_modulus_bits(&rsa.n).ok_or_else(|| bad("bad modulus".into()))?;
            if bits < MIN_RSA_BITS {
                return Err(AuthConfigError::RsaKeyTooSmall {
                    key: label.to_owned(),
                    bits,
                });
            }
        }
        KeyAlg::ES256 => {
            // The verifier parses the point when it is built; a probe signature only checks that.
            jsonwebtoken::crypto::verify("AA", b"probe", key, alg.jwt_alg())
                .map_err(|_| bad("not a P-256 public key".into()))?;
        }
        KeyAlg::HS256 => {}
    }
    Ok(())
}

/// Bit length of a base64url big-endian modulus.
pub(crate) fn rsa_modulus_bits(n_b64: &str) -> Option<usize> {
    use base64::Engine as _;
    let n = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(n_b64)
        .ok()?;
    let first = n.iter().position(|&b| b != 0)?;
    let lead = n[first];
    Some((n.len() - first - 1) * 8 + (8 - lead.leading_zeros() as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modulus_bits() {
        use base64::Engine as _;
        let enc = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        assert_eq!(rsa_modulus_bits(&enc(&[0x00, 0x80, 0x00])), Some(16));
        assert_eq!(rsa_modulus_bits(&enc(&[0x01])), Some(1));
        assert_eq!(rsa_modulus_bits(&enc(&[0x00])), None);
    }

    #[test]
    fn refuses_short_secret_and_mixed_material() {
        let mut cfg = KeyConfig {
            kid: Some("k".into()),
            alg: KeyAlg::HS256,
            secret: Some("x".repeat(31)),
            public_key_pem: None,
            public_key_file: None,
        };
        let err = load_key(3, &cfg).unwrap_err();
        assert!(
            matches!(err, AuthConfigError::SecretTooShort { len: 31, .. }),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "keys[3] (kid \"k\"): HS256 secret is 31 bytes, at least 32 are required"
        );
        cfg.secret = Some("x".repeat(32));
        load_key(3, &cfg).unwrap();
        cfg.public_key_pem = Some("pem".into());
        assert!(matches!(
            load_key(0, &cfg),
            Err(AuthConfigError::ConflictingMaterial { .. })
        ));
        cfg.secret = None;
        assert!(matches!(
            load_key(0, &cfg),
            Err(AuthConfigError::WrongMaterial { .. })
        ));
        cfg.public_key_pem = None;
        assert!(matches!(
            load_key(0, &cfg),
            Err(AuthConfigError::MissingMaterial { .. })
        ));
        cfg.alg = KeyAlg::RS256;
        cfg.secret = Some("x".repeat(40));
        assert!(matches!(
            load_key(0, &cfg),
            Err(AuthConfigError::WrongMaterial { .. })
        ));
    }
}
