//! The `auth:` section of `config.yaml` and the errors a bad one produces.

use std::path::PathBuf;

use serde::Deserialize;

/// Default clock-skew allowance for `exp` and `nbf`, in seconds.
pub const DEFAULT_LEEWAY_SECS: u64 = 30;
/// Largest accepted `leeway_secs`; more than this would make expiry meaningless.
pub const MAX_LEEWAY_SECS: u64 = 600;
/// Default upper bound on a token's length, in bytes.
pub const DEFAULT_MAX_TOKEN_BYTES: usize = 8192;
/// Default number of verified tokens remembered (`auth.verified_tokens`).
pub const DEFAULT_VERIFIED_TOKENS: usize = 4096;
/// Shortest accepted HS256 secret, in bytes (the hash output size, RFC 7518 §3.2).
pub const MIN_HS256_SECRET_BYTES: usize = 32;
/// Smallest accepted RSA modulus, in bits.
pub const MIN_RSA_BITS: usize = 2048;

/// How bearer tokens are verified: who may issue them, for which audience, with which keys.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The only accepted `iss`.
    #[schemars(extend("x-review" = "changed"))]
    pub issuer: String,
    /// The resource this server is; a token's `aud` must contain it.
    #[schemars(extend("x-review" = "changed"))]
    pub audience: String,
    /// Clock-skew allowance for `exp` and `nbf`, in seconds (at most [`MAX_LEEWAY_SECS`]).
    #[serde(default = "default_leeway")]
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub leeway_secs: u64,
    /// Tokens longer than this are refused before any parsing.
    #[serde(default = "default_max_token_bytes")]
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_token_bytes: usize,
    /// Tokens remembered as verified (until they expire or the provider's keys change), so a
    /// session's every request does not check the same signature again; 0 checks every time.
    #[serde(default = "default_verified_tokens")]
    #[schemars(extend("x-review" = "neutral"))]
    pub verified_tokens: usize,
    /// Keys given inline or by file.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub keys: Vec<KeyConfig>,
    /// A JWKS JSON file whose keys are added to `keys`.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub jwks_file: Option<PathBuf>,
    /// The identity provider's JWKS URL (`https://`; `http://` only to localhost): keys are
    /// fetched, cached and refreshed (see `jwks_refresh_secs`, `jwks_min_refetch_secs`).
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub jwks_url: Option<String>,
    /// Find the JWKS URL through OIDC discovery at `{issuer}/.well-known/openid-configuration`
    /// (the issuer must then be the provider's URL).
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub oidc_discovery: bool,
    /// Seconds between scheduled refreshes of remote keys.
    #[serde(default = "default_jwks_refresh")]
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub jwks_refresh_secs: u64,
    /// Shortest time between two fetches caused by tokens naming an unknown `kid`.
    #[serde(default = "default_jwks_min_refetch")]
    #[schemars(extend("x-review" = "neutral"))]
    pub jwks_min_refetch_secs: u64,
    /// Time limit of one fetch (discovery document or key set), in milliseconds.
    #[serde(default = "default_jwks_timeout")]
    #[schemars(extend("x-review" = "neutral"))]
    pub jwks_timeout_ms: u64,
    /// Extra root certificates (PEM) trusted for the identity provider's TLS, beside the system's
    /// (an internal CA).
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub jwks_ca_file: Option<PathBuf>,
    /// Scopes a token must carry to call tools of each permission (none required by default).
    #[serde(default)]
    pub scopes: ScopeRequirements,
    /// The claim that names the agent's session (default `session_id`). For identity providers
    /// that can put a per-conversation value into their tokens. `sid` (one per login) and `jti`
    /// (one per token) are refused: see [`AuthConfigError::SessionClaim`].
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub session_claim: Option<String>,
}

/// The scope each permission requires (`auth.scopes.read|write|connect`); `None` requires none.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeRequirements {
    /// Scope needed by `read` tools (and resource reads).
    #[serde(default)]
    #[schemars(extend("x-review" = "scope"))]
    pub read: Option<String>,
    /// Scope needed by `write` tools.
    #[serde(default)]
    #[schemars(extend("x-review" = "scope"))]
    pub write: Option<String>,
    /// Scope needed by `connect` tools.
    #[serde(default)]
    #[schemars(extend("x-review" = "scope"))]
    pub connect: Option<String>,
}

impl ScopeRequirements {
    /// The scope tools of `permission` require, if any.
    pub fn for_permission(&self, permission: crate::policy::Permission) -> Option<&str> {
        use crate::policy::Permission;
        match permission {
            Permission::Read => self.read.as_deref(),
            Permission::Write => self.write.as_deref(),
            Permission::Connect => self.connect.as_deref(),
        }
    }

    /// Every configured scope, once each, in permission order (for `scopes_supported`).
    pub fn all(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in [&self.read, &self.write, &self.connect]
            .into_iter()
            .flatten()
        {
            if !out.contains(s) {
                out.push(s.clone());
            }
        }
        out
    }
}

/// Default seconds between scheduled refreshes of remote keys.
pub const DEFAULT_JWKS_REFRESH_SECS: u64 = 300;

fn default_jwks_refresh() -> u64 {
    DEFAULT_JWKS_REFRESH_SECS
}

fn default_jwks_min_refetch() -> u64 {
    30
}

fn default_jwks_timeout() -> u64 {
    5000
}

fn default_leeway() -> u64 {
    DEFAULT_LEEWAY_SECS
}

fn default_max_token_bytes() -> usize {
    DEFAULT_MAX_TOKEN_BYTES
}

fn default_verified_tokens() -> usize {
    DEFAULT_VERIFIED_TOKENS
}

/// One verification key. A key accepts tokens of its own algorithm only.
#[derive(Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// Key id; a token whose header names a `kid` is checked against this key only.
    #[serde(default)]
    pub kid: Option<String>,
    /// The one algorithm this key verifies.
    pub alg: KeyAlg,
    /// HS256 shared secret (UTF-8 bytes, at least [`MIN_HS256_SECRET_BYTES`]).
    #[serde(default)]
    pub secret: Option<String>,
    /// RS256/ES256 public key in PEM (`BEGIN PUBLIC KEY` or `BEGIN RSA PUBLIC KEY`).
    #[serde(default)]
    pub public_key_pem: Option<String>,
    /// RS256/ES256 public key PEM file.
    #[serde(default)]
    pub public_key_file: Option<PathBuf>,
}

impl std::fmt::Debug for KeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyConfig")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("public_key_pem", &self.public_key_pem.is_some())
            .field("public_key_file", &self.public_key_file)
            .finish()
    }
}

/// The algorithms Bulkhead verifies. Everything else (`none`, HS384, PS256, …) is refused.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Hash, schemars::JsonSchema)]
pub enum KeyAlg {
    /// HMAC with SHA-256 and a shared secret.
    HS256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    RS256,
    /// ECDSA on P-256 with SHA-256.
    ES256,
}

impl KeyAlg {
    /// The JOSE name (`"HS256"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            KeyAlg::HS256 => "HS256",
            KeyAlg::RS256 => "RS256",
            KeyAlg::ES256 => "ES256",
        }
    }

    /// Parses a JOSE header `alg`; `None` for every algorithm Bulkhead refuses.
    pub fn from_jose(name: &str) -> Option<Self> {
        match name {
            "HS256" => Some(KeyAlg::HS256),
            "RS256" => Some(KeyAlg::RS256),
            "ES256" => Some(KeyAlg::ES256),
            _ => None,
        }
    }

    /// The matching `jsonwebtoken` algorithm.
    pub fn jwt_alg(self) -> jsonwebtoken::Algorithm {
        match self {
            KeyAlg::HS256 => jsonwebtoken::Algorithm::HS256,
            KeyAlg::RS256 => jsonwebtoken::Algorithm::RS256,
            KeyAlg::ES256 => jsonwebtoken::Algorithm::ES256,
        }
    }
}

impl std::fmt::Display for KeyAlg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an `auth:` section cannot be used. `key` names the entry as `keys[i]` (with its kid)
/// or `jwks_file keys[i]`.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// `issuer` is empty.
    #[error("auth.issuer is empty")]
    EmptyIssuer,
    /// `audience` is empty.
    #[error("auth.audience is empty")]
    EmptyAudience,
    /// `leeway_secs` is larger than [`MAX_LEEWAY_SECS`].
    #[error("auth.leeway_secs is {0}, more than the allowed {MAX_LEEWAY_SECS}")]
    LeewayTooLarge(u64),
    /// `max_token_bytes` is zero.
    #[error("auth.max_token_bytes must be greater than zero")]
    ZeroTokenLimit,
    /// Neither `keys`, `jwks_file`, `jwks_url` nor `oidc_discovery` gives a key.
    #[error("auth has no keys: add `keys`, `jwks_file`, `jwks_url` or `oidc_discovery: true`")]
    NoKeys,
    /// The remote key source is misconfigured.
    #[error("auth: {0}")]
    Remote(String),
    /// An HS256 secret is shorter than [`MIN_HS256_SECRET_BYTES`].
    #[error("{key}: HS256 secret is {len} bytes, at least {MIN_HS256_SECRET_BYTES} are required")]
    SecretTooShort {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A key has more than one of `secret`, `public_key_pem`, `public_key_file`.
    #[error("{key}: give exactly one of `secret`, `public_key_pem`, `public_key_file`")]
    ConflictingMaterial {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
    },
    /// A key has none of `secret`, `public_key_pem`, `public_key_file`.
    #[error("{key}: no key material: give `secret` (HS256) or `public_key_pem`/`public_key_file`")]
    MissingMaterial {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
    },
    /// An HS256 key with a public key, or an RS256/ES256 key with a secret instead of a public key.
    #[error("{key}: {alg} needs {needs}")]
    WrongMaterial {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
        /// Its algorithm.
        alg: KeyAlg,
        /// What the algorithm needs instead.
        needs: &'static str,
    },
    /// The PEM holds a private key; only public keys belong in the server's configuration.
    #[error("{key}: the PEM holds a private key; configure the public key only")]
    PrivateKeyGiven {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
    },
    /// The public key does not parse or does not fit the algorithm.
    #[error("{key}: invalid {alg} public key: {reason}")]
    BadPublicKey {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
        /// Its algorithm.
        alg: KeyAlg,
        /// What is wrong.
        reason: String,
    },
    /// An RSA modulus shorter than [`MIN_RSA_BITS`].
    #[error("{key}: RSA key has {bits} bits, at least {MIN_RSA_BITS} are required")]
    RsaKeyTooSmall {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
        /// Its modulus size in bits.
        bits: usize,
    },
    /// A key file (PEM or JWKS) could not be read.
    #[error("{key}: cannot read {path}: {source}")]
    ReadFile {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The JWKS file is not a JWK set.
    #[error("jwks_file {path}: not a JWK set: {reason}")]
    BadJwks {
        /// Where.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A JWKS entry is unusable (unsupported algorithm or curve, missing fields).
    #[error("{key}: {reason}")]
    BadJwk {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// `session_claim` names a claim that cannot hold an agent's session.
    #[error("auth.session_claim `{claim}` cannot name a session: {reason}")]
    SessionClaim {
        /// The configured claim.
        claim: String,
        /// Why not.
        reason: &'static str,
    },
    /// Two keys share a kid, so a token's kid would be ambiguous.
    #[error("{key}: kid {kid:?} is used by another key too")]
    DuplicateKid {
        /// Which key (`keys[i]`, with its kid when it has one).
        key: String,
        /// The kid both keys have.
        kid: String,
    },
}

/// Names a configured key for error messages: `keys[2] (kid "a")`.
pub(crate) fn key_label(prefix: &str, index: usize, kid: Option<&str>) -> String {
    match kid {
        Some(kid) => format!("{prefix}[{index}] (kid {kid:?})"),
        None => format!("{prefix}[{index}]"),
    }
}
