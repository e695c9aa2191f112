//! The `token_service:` section of `config.yaml`: this deployment issues session tokens.

use std::path::PathBuf;

use serde::Deserialize;

use crate::auth::AuthConfig;

/// Default lifetime of a session token, in seconds.
pub const DEFAULT_TTL_SECS: u64 = 600;
/// Default lifetime of a refresh token (counted from the exchange; refreshing does not extend
/// it), in seconds.
pub const DEFAULT_REFRESH_TTL_SECS: u64 = 8 * 3600;
/// Longest accepted `ttl_secs`: a session token is a bearer token; it should not outlive a day.
pub const MAX_TTL_SECS: u64 = 24 * 3600;

/// The deployment's token service (OAuth 2.0 Token Exchange, RFC 8693): an identity provider's
/// token in, a short-lived session token of this deployment out. Absent: no token endpoint, and
/// tokens must carry the session claim themselves.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenServiceConfig {
    /// The ES256 private key (PKCS#8 PEM) that signs session tokens. Every instance of the
    /// deployment that serves the token endpoint reads the same file; instances that only verify
    /// need the public key (`/.well-known/jwks.json`, or `auth.jwks_url`). Unset in development:
    /// a key is made once under `state.dir` (`session-signing-key.pem`, mode 0600); production
    /// refuses to start without it.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub signing_key_file: Option<PathBuf>,
    /// Lifetime of a session token, in seconds (at most a day); one minted by exchange never
    /// outlives the subject token it was minted from (its refresh token may: `refresh_ttl_secs`).
    #[serde(default = "default_ttl")]
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub ttl_secs: u64,
    /// Lifetime of a refresh token, counted from the exchange, in seconds; a refresh keeps the
    /// session and the refresh token's expiry. 0 issues no refresh tokens.
    #[serde(default = "default_refresh_ttl")]
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub refresh_ttl_secs: u64,
    /// Claims of the identity provider's token copied into the session token (strings of at most
    /// 512 bytes), for tool parameters bound with `from_claim` and approver rules.
    #[serde(default = "default_claims")]
    #[schemars(extend("x-review" = "changed"))]
    pub claims: Vec<String>,
    /// Sign-in through the provider for MCP clients that follow the specification's authorization
    /// flow (authorization code with PKCE, clients registered at `POST /register`). Absent: the
    /// token endpoint exchanges and refreshes only.
    #[serde(default)]
    pub login: Option<LoginConfig>,
    /// Tokens for other services, in the user's name (`from_claim: "exchange:<audience>"`): the
    /// provider's token the session started from is kept sealed in the session token and
    /// exchanged at the provider (RFC 8693) for one of that service's audience, as this client.
    /// Absent: such parameters are refused.
    #[serde(default)]
    pub upstream: Option<UpstreamConfig>,
    /// Opaque provider tokens (not JWTs: Google's, GitHub's, Auth0's without an audience,
    /// `oidc-provider`'s without a resource indicator) offered for exchange are verified by
    /// token introspection (RFC 7662) at the provider, as this client. Absent: only JWT subject
    /// tokens are exchanged.
    #[serde(default)]
    pub introspection: Option<IntrospectionConfig>,
    /// The identity provider whose tokens are exchanged: its issuer, the audience its tokens name
    /// for this deployment, and its keys (inline, JWKS file, JWKS URL or OIDC discovery), read as
    /// `auth:` is. Its `session_claim` and `scopes` are not used.
    pub provider: AuthConfig,
}

fn default_ttl() -> u64 {
    DEFAULT_TTL_SECS
}

fn default_refresh_ttl() -> u64 {
    DEFAULT_REFRESH_TTL_SECS
}

fn default_claims() -> Vec<String> {
    vec!["email".into()]
}

/// How Bulkhead signs users in at the provider (`token_service.login`). The provider's endpoints
/// come from its discovery document (`{provider.issuer}/.well-known/openid-configuration`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginConfig {
    /// Bulkhead's client id at the provider. Unset: Bulkhead registers itself at the provider's
    /// `registration_endpoint` (RFC 7591) on the first sign-in of each process.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub client_id: Option<String>,
    /// A file holding the client's secret (`client_secret_basic`); unset: a public client.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub client_secret_file: Option<PathBuf>,
    /// The provider's public client for `bulkhead connect`'s device authorization grant
    /// (RFC 8628): with it, `connect` signs the user in instead of reading `BULKHEAD_TOKEN`.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub device_client_id: Option<String>,
    /// The provider's public native client for `bulkhead connect`'s browser sign-in: the
    /// authorization code with PKCE, redirected to a loopback port `connect` listens on
    /// (RFC 8252). Preferred over the device grant unless `connect --device` is given.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub native_client_id: Option<String>,
    /// Scopes asked of the provider (space-separated).
    #[serde(default = "default_login_scope")]
    #[schemars(extend("x-review" = "changed"))]
    pub scope: String,
    /// The resource indicator (RFC 8707) the provider knows this deployment by, sent with the
    /// authorization and token requests; unset: none is sent (the provider's default audience).
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub resource: Option<String>,
    /// `https` origins (`https://host[:port]`) whose redirect URIs a client may register, beside
    /// loopback (`http://127.0.0.1`, `localhost`, `[::1]`, any port: the native and desktop
    /// clients MCP has). Empty by default: a web origin is trusted only when listed, since a
    /// registered redirect URI receives the codes of whoever follows a sign-in link.
    #[serde(default)]
    #[schemars(extend("x-review" = "allowlist"))]
    pub redirect_origins: Vec<String>,
    /// Seconds a sign-in may take, from the client's request to the provider's answer.
    #[serde(default = "default_login_secs")]
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub timeout_secs: u64,
    /// Time limit of each request to the provider, in milliseconds.
    #[serde(default = "default_login_request_ms")]
    #[schemars(extend("x-review" = "neutral"))]
    pub request_timeout_ms: u64,
}

fn default_login_scope() -> String {
    "openid email".into()
}

fn default_login_secs() -> u64 {
    600
}

fn default_login_request_ms() -> u64 {
    10_000
}

/// Bulkhead's client at the provider for upstream exchanges (`token_service.upstream`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The client id (allowed the token-exchange grant at the provider).
    #[schemars(extend("x-review" = "changed"))]
    pub client_id: String,
    /// A file holding its secret (`client_secret_basic`).
    #[schemars(extend("x-review" = "changed"))]
    pub client_secret_file: PathBuf,
    /// Upstream tokens kept until they expire (per user and audience), at most this many.
    #[serde(default = "default_upstream_cache")]
    #[schemars(extend("x-review" = "neutral"))]
    pub cache_entries: usize,
}

fn default_upstream_cache() -> usize {
    10_000
}

/// Bulkhead's client at the provider's introspection endpoint (`token_service.introspection`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// The client id it authenticates as (`client_secret_basic`).
    #[schemars(extend("x-review" = "changed"))]
    pub client_id: String,
    /// A file holding its secret.
    #[schemars(extend("x-review" = "changed"))]
    pub client_secret_file: PathBuf,
    /// The endpoint; unset: the `introspection_endpoint` of the provider's discovery document.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub endpoint: Option<String>,
    /// The clients (the answer's `client_id`) whose tokens without an audience are accepted. A
    /// token whose answer names audiences must name `provider.audience`; one that names none
    /// (a provider's tokens for its own user-info endpoint) is accepted only from these clients,
    /// so a token someone obtained for another application does not sign them in here.
    #[serde(default)]
    #[schemars(extend("x-review" = "allowlist"))]
    pub clients: Vec<String>,
    /// Longest time, in seconds, an active answer is reused (never past the token's `exp`): a
    /// token the provider revokes is refused at most this long after.
    #[serde(default = "default_introspection_cache_secs")]
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub cache_secs: u64,
    /// Answers kept, at most this many.
    #[serde(default = "default_upstream_cache")]
    #[schemars(extend("x-review" = "neutral"))]
    pub cache_entries: usize,
}

fn default_introspection_cache_secs() -> u64 {
    60
}
