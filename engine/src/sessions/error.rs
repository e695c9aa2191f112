//! Why the token service cannot start, and why it refuses a request (RFC 6749 §5.2 errors).

use std::path::PathBuf;

/// The token service cannot be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum TokenServiceError {
    /// The signing key file cannot be read.
    #[error("token_service.signing_key_file {path}: {source}")]
    ReadKey {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The signing key file holds no usable ES256 private key.
    #[error("token_service.signing_key_file {path}: {reason}")]
    BadKey {
        /// Where.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The development key could not be made.
    #[error("cannot make the development session key at {path}: {source}")]
    MakeKey {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Production without a signing key file.
    #[error(
        "token_service.signing_key_file is required in production (an ES256 PKCS#8 PEM, e.g. `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`)"
    )]
    NoKeyInProduction,
    /// A lifetime out of range.
    #[error("token_service.ttl_secs is {0}: give 1 to {max}", max = super::config::MAX_TTL_SECS)]
    BadTtl(u64),
    /// The sign-in settings are unusable.
    #[error("token_service.login: {0}")]
    Login(String),
    /// The provider section sets what only `auth:` uses.
    #[error("token_service.provider.{0} is not used: set it under `auth:`")]
    Unused(&'static str),
    /// The provider section is unusable.
    #[error("token_service.provider: {0}")]
    Provider(#[from] crate::auth::AuthConfigError),
}

/// A refused token request, answered as `400 {"error", "error_description"}`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {description}")]
pub struct OAuthError {
    /// The RFC 6749 / RFC 8693 error code (`invalid_request`, `invalid_grant`, …).
    pub code: &'static str,
    /// What is wrong; never a token or a claim value.
    pub description: String,
}

impl OAuthError {
    /// `invalid_request`: a parameter is missing, repeated or malformed.
    pub fn request(description: impl Into<String>) -> Self {
        Self::new("invalid_request", description)
    }

    /// `invalid_grant`: the subject, actor or refresh token is not accepted.
    pub fn grant(description: impl Into<String>) -> Self {
        Self::new("invalid_grant", description)
    }

    /// An error with `code`.
    pub fn new(code: &'static str, description: impl Into<String>) -> Self {
        OAuthError {
            code,
            description: description.into(),
        }
    }
}
