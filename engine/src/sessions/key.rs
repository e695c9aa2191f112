//! The key that signs session tokens: read from its file (or, in development, made once), with
//! its public half as a JWK for `/.well-known/jwks.json` and for the verifiers of the deployment.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use jsonwebtoken::jwk::{Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};
use sha2::Digest as _;

use super::TokenServiceError;

/// The signing key and what verifiers need of it.
pub struct SigningKey {
    /// Signs session and refresh tokens (ES256).
    pub(crate) encoding: EncodingKey,
    /// Verifies this service's refresh tokens.
    pub(crate) decoding: DecodingKey,
    /// The public key as published (`kid`, `alg: ES256`, `use: sig`).
    pub(crate) jwk: Jwk,
    /// A digest of the private key, from which the sign-in flow's sealing key is derived.
    pub(crate) secret_digest: [u8; 32],
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.jwk.common.key_id)
            .finish_non_exhaustive()
    }
}

/// Where a development deployment keeps the key it made, under `state.dir`.
pub fn development_key_path(state_dir: &Path) -> PathBuf {
    state_dir.join("session-signing-key.pem")
}

impl SigningKey {
    /// Reads the PKCS#8 PEM at `path`.
    pub fn read(path: &Path) -> Result<SigningKey, TokenServiceError> {
        let pem = std::fs::read(path).map_err(|source| TokenServiceError::ReadKey {
            path: path.to_owned(),
            source,
        })?;
        warn_if_readable_by_others(path);
        SigningKey::from_pem(&pem).map_err(|reason| TokenServiceError::BadKey {
            path: path.to_owned(),
            reason,
        })
    }

    /// Reads the key at `path`, making a fresh P-256 key there first when there is none. Two
    /// processes starting at once agree: the file is created whole (written aside, then linked
    /// in without replacing), and the one that loses reads the winner's key.
    pub fn read_or_make(path: &Path) -> Result<SigningKey, TokenServiceError> {
        if !path.exists() {
            make(path)?;
        }
        SigningKey::read(path)
    }

    /// Parses an ES256 private key (PKCS#8 PEM) and derives its public JWK, whose `kid` is the
    /// RFC 7638 thumbprint (so every process reading one file publishes one `kid`).
    pub fn from_pem(pem: &[u8]) -> Result<SigningKey, String> {
        let encoding = EncodingKey::from_ec_pem(pem).map_err(|e| e.to_string())?;
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::ES256)
            .map_err(|e| format!("not a P-256 private key: {e}"))?;
        let jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(ec) = &jwk.algorithm else {
            return Err("not an EC key".into());
        };
        // RFC 7638 §3.2: the required members in lexicographic order, no whitespace.
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            ec.x, ec.y
        );
        let thumbprint = base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            sha2::Sha256::digest(canonical.as_bytes()),
        );
        jwk.common.key_id = Some(thumbprint);
        jwk.common.key_algorithm = Some(KeyAlgorithm::ES256);
        jwk.common.public_key_use = Some(PublicKeyUse::Signature);
        let decoding = DecodingKey::from_jwk(&jwk).map_err(|e| e.to_string())?;
        Ok(SigningKey {
            encoding,
            decoding,
            jwk,
            secret_digest: scalar_digest(pem)?,
        })
    }

    /// The key id published and written in every token's header.
    pub fn kid(&self) -> &str {
        self.jwk.common.key_id.as_deref().unwrap_or_default()
    }

    /// The public key as a JWK.
    pub fn public_jwk(&self) -> &Jwk {
        &self.jwk
    }
}

/// Makes a P-256 key at `path` (mode 0600), unless another process made one first.
fn make(path: &Path) -> Result<(), TokenServiceError> {
    use p256::pkcs8::EncodePrivateKey as _;
    let fail = |source: std::io::Error| TokenServiceError::MakeKey {
        path: path.to_owned(),
        source,
    };
    let secret = loop {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| fail(std::io::Error::other(e.to_string())))?;
        // A 32-byte string is a valid scalar except with probability about 2^-32.
        if let Ok(key) = p256::SecretKey::from_slice(&bytes) {
            break key;
        }
    };
    let pem = secret
        .to_pkcs8_pem(p256::pkcs8::LineEnding::LF)
        .map_err(|e| fail(std::io::Error::other(e.to_string())))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut file = tempfile::Builder::new()
        .prefix(".session-key")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(fail)?;
    file.write_all(pem.as_bytes()).map_err(fail)?;
    file.as_file().sync_all().map_err(fail)?;
    match file.persist_noclobber(path) {
        Ok(_) => {
            tracing::info!(path = %path.display(), "made a development key for session tokens");
            Ok(())
        }
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(fail(e.error)),
    }
}

/// A signing key others can read is a key others can sign with.
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::MetadataExt as _;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", meta.mode() & 0o777),
            "the session signing key is readable by group or others; chmod 600 it"
        );
    }
}

/// A digest of the private scalar: every encoding of one key (PEM line breaks, a re-export)
/// gives every replica the same sealing key.
fn scalar_digest(pem: &[u8]) -> Result<[u8; 32], String> {
    use p256::pkcs8::DecodePrivateKey as _;
    let text = std::str::from_utf8(pem).map_err(|_| "the key file is not PEM text".to_string())?;
    let key = p256::SecretKey::from_pkcs8_pem(text)
        .map_err(|e| format!("not a PKCS#8 P-256 private key: {e}"))?;
    Ok(sha2::Sha256::digest(key.to_bytes()).into())
}
