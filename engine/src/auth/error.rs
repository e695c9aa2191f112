//! Why a token was refused. Messages are safe to log: they never carry the token or a claim value.

use std::borrow::Cow;

/// A refused token. Every variant maps to HTTP 401 at the edge; the variant is for logs and tests.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// `exp` is in the past (beyond the leeway).
    #[error("token expired")]
    Expired,
    /// `nbf` is in the future (beyond the leeway).
    #[error("token not yet valid")]
    NotYetValid,
    /// No configured key of the token's algorithm verifies its signature.
    #[error("bad token signature")]
    BadSignature,
    /// `aud` does not contain this server's audience.
    #[error("token is for another audience")]
    WrongAudience,
    /// `iss` is not the configured issuer.
    #[error("token from an unexpected issuer")]
    WrongIssuer,
    /// A required claim is absent.
    #[error("token lacks required claim `{0}`")]
    MissingClaim(Cow<'static, str>),
    /// A claim has the wrong type or a value that is not allowed.
    #[error("token claim `{claim}` is invalid: {reason}")]
    BadClaim {
        /// The claim's name.
        claim: Cow<'static, str>,
        /// Why, without the value itself.
        reason: String,
    },
    /// The token needs a key from the identity provider and none could be fetched yet.
    #[error("signing keys are unavailable")]
    KeysUnavailable,
    /// The header names a `kid` that no configured key has.
    #[error("token names an unknown key id")]
    UnknownKid,
    /// The header's `alg` is not one this server accepts, or not the alg of the key it names.
    #[error("token algorithm not allowed")]
    AlgorithmNotAllowed,
    /// The token is longer than `max_token_bytes`.
    #[error("token is larger than {max} bytes")]
    TooLarge {
        /// The configured limit.
        max: usize,
    },
    /// Not a compact JWS: wrong segment count, bad base64url, bad header JSON.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// Minting a token failed (bad signing key or claims); never returned by verification.
    #[error("cannot mint token: {0}")]
    Mint(String),
}

impl AuthError {
    /// Maps a `jsonwebtoken` error from decoding with an already-chosen key.
    pub(crate) fn from_jwt(err: &jsonwebtoken::errors::Error) -> Self {
        use jsonwebtoken::errors::ErrorKind as K;
        match err.kind() {
            K::ExpiredSignature => AuthError::Expired,
            K::ImmatureSignature => AuthError::NotYetValid,
            K::InvalidSignature => AuthError::BadSignature,
            K::InvalidAudience => AuthError::WrongAudience,
            K::InvalidIssuer => AuthError::WrongIssuer,
            K::MissingRequiredClaim(c) => AuthError::MissingClaim(claim_name(c).into()),
            K::InvalidClaimFormat(c) => AuthError::BadClaim {
                claim: claim_name(c).into(),
                reason: "wrong type".into(),
            },
            K::InvalidAlgorithm | K::InvalidAlgorithmName | K::UnsupportedAlgorithm => {
                AuthError::AlgorithmNotAllowed
            }
            K::Base64(_) => AuthError::Malformed("bad base64url"),
            K::Json(_) => AuthError::Malformed("bad JSON"),
            K::Utf8(_) => AuthError::Malformed("bad UTF-8"),
            _ => AuthError::Malformed("not a valid token"),
        }
    }
}

/// The static name of a registered claim that `jsonwebtoken` reports by string.
fn claim_name(name: &str) -> &'static str {
    match name {
        "exp" => "exp",
        "nbf" => "nbf",
        "iss" => "iss",
        "aud" => "aud",
        "sub" => "sub",
        _ => "unknown",
    }
}
