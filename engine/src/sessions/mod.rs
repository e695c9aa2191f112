//! The deployment's token service: an identity provider's token in, a short-lived session token
//! of this deployment out (OAuth 2.0 Token Exchange, RFC 8693), so that tokens every provider
//! issues reach tools with the session their ratchet belongs to.
//!
//! Invariants enforced here:
//! - A session token names the provider's `sub` unchanged and a session that is either fresh
//!   (128 random bits) or named by the caller: a caller can only ever reach sessions of the user
//!   its subject token proves, since the ratchet is keyed by (`sub`, session).
//! - A refresh keeps the session (and so its level) and never outlives the refresh token's
//!   expiry, fixed at the exchange; a refresh token is never accepted as an access token (its
//!   audience is not the deployment's) nor an access token as a refresh token (`token_use`).
//! - A refresh token is used once (RFC 9700 §4.14.2 rotation): its `jti` is consumed in the state
//!   store, by the store's clock; a second use revokes its whole family (every token descending
//!   from the same sign-in or exchange) and the family's upstream exchanges. One issued to a
//!   client (the authorization code flow) is honoured only with that client's `client_id`.
//! - The signing key is read from its file by this process only; nothing here hands it on.

mod config;
mod error;
pub mod http;
mod introspect;
mod key;
mod login;
mod seal;
mod upstream;

pub use config::{
    DEFAULT_REFRESH_TTL_SECS, DEFAULT_TTL_SECS, IntrospectionConfig, LoginConfig, MAX_TTL_SECS,
    TokenServiceConfig, UpstreamConfig,
};
pub use error::{OAuthError, TokenServiceError};
pub use key::{SigningKey, development_key_path};
pub use upstream::{UpstreamToken, unverified_claims};

use base64::Engine as _;
use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::auth::{AuthConfig, Claims, Verifier};
use crate::config::{Config, Environment};
use crate::identity::validate_id;

/// RFC 8693 grant type.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 §3: the token types accepted as subject and actor tokens (all JWTs here).
pub const SUBJECT_TYPES: [&str; 3] = [
    "urn:ietf:params:oauth:token-type:access_token",
    "urn:ietf:params:oauth:token-type:jwt",
    "urn:ietf:params:oauth:token-type:id_token",
];
/// The type of the token issued.
pub const ISSUED_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Claims a session token's own fields use; none is copied from the provider.
const RESERVED_CLAIMS: [&str; 17] = [
    "sub",
    "session_id",
    "iss",
    "aud",
    "exp",
    "nbf",
    "iat",
    "jti",
    "scope",
    "scp",
    "act",
    "token_use",
    "refresh_exp",
    "idp",
    "client_id",
    "fam",
    "cid",
];
/// Longest value accepted for a copied claim, in bytes.
const MAX_COPIED_CLAIM: usize = 512;

/// Issues session tokens; one per process that serves the token endpoint.
pub struct TokenService {
    issuer: String,
    audience: String,
    key: SigningKey,
    ttl: u64,
    refresh_ttl: u64,
    claims: Vec<String>,
    provider: Verifier,
    refresh_validation: Validation,
    /// Seals what the sign-in flow hands out (clients, sign-ins, codes).
    sealer: seal::Sealer,
    /// Sign-in at the provider, when configured.
    login: Option<login::Login>,
    /// Authorization codes and refresh tokens already used, and revoked refresh-token
    /// families, across the deployment (set when serving).
    used: std::sync::OnceLock<crate::approval::UsedIds>,
    /// Exchanges for other services' audiences, when configured.
    upstream: Option<upstream::Upstream>,
    /// Verifies opaque subject tokens at the provider, when configured.
    introspection: Option<introspect::Introspection>,
}

impl std::fmt::Debug for TokenService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenService")
            .field("issuer", &self.issuer)
            .field("kid", &self.key.kid())
            .finish_non_exhaustive()
    }
}

/// A token request, as parsed from the form (each parameter at most once).
#[derive(Clone, Debug, Default)]
pub struct TokenRequest {
    /// `grant_type`.
    pub grant_type: String,
    /// Every other parameter.
    pub params: std::collections::BTreeMap<String, String>,
}

impl TokenRequest {
    /// Parses `application/x-www-form-urlencoded` pairs; a repeated parameter is refused
    /// (RFC 6749 §3.2).
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Result<TokenRequest, OAuthError> {
        let mut params = std::collections::BTreeMap::new();
        for (k, v) in pairs {
            if params.insert(k.clone(), v).is_some() {
                return Err(OAuthError::request(format!(
                    "`{k}` is given more than once"
                )));
            }
        }
        let grant_type = params
            .remove("grant_type")
            .ok_or_else(|| OAuthError::request("`grant_type` is missing"))?;
        Ok(TokenRequest { grant_type, params })
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.params
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn need(&self, name: &str) -> Result<&str, OAuthError> {
        self.get(name)
            .ok_or_else(|| OAuthError::request(format!("`{name}` is missing")))
    }
}

/// A successful answer (RFC 8693 §2.2.1).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Issued {
    /// The session token.
    pub access_token: String,
    /// Always [`ISSUED_TYPE`].
    pub issued_token_type: String,
    /// `Bearer`.
    pub token_type: String,
    /// Seconds until the session token expires.
    pub expires_in: u64,
    /// Keeps the session past `expires_in` (absent when refresh tokens are off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The scopes granted, space-separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The session the token names (an extension: hosts show or log it).
    pub session_id: String,
}

/// What a session or refresh token says.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Payload {
    sub: String,
    session_id: String,
    iss: String,
    aud: String,
    exp: u64,
    nbf: u64,
    iat: u64,
    jti: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
    /// RFC 8693 §4.1: the party acting for the subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    act: Option<Actor>,
    /// `refresh` on refresh tokens only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_use: Option<String>,
    /// The refresh token's fixed expiry (refresh tokens only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_exp: Option<u64>,
    /// The identity provider's token the session started from, sealed (only with
    /// `token_service.upstream`): exchanged for other services' tokens in the user's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idp: Option<String>,
    /// The refresh-token family: fixed at the sign-in or exchange, kept by every refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fam: Option<String>,
    /// The client a refresh token was issued to (SHA-256 of its `client_id`), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cid: Option<String>,
    /// Claims copied from the provider's token.
    #[serde(flatten)]
    copied: Map<String, Value>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Actor {
    sub: String,
}

/// Everything a new token pair carries.
struct Grant {
    sub: String,
    session_id: String,
    scope: Option<String>,
    act: Option<Actor>,
    copied: Map<String, Value>,
    /// The provider's token, sealed (see [`Payload`]).
    idp: Option<String>,
    /// The refresh-token family (see [`Payload`]).
    family: String,
    /// The client refresh tokens are bound to (SHA-256 of its `client_id`).
    client: Option<String>,
    /// Refresh tokens stop here (seconds since the epoch).
    refresh_exp: u64,
    /// The session token stops here at the latest: an exchanged subject token's expiry (a
    /// session token never outlives the token it was minted from; its refresh token, the
    /// refresh policy `token_service.refresh_ttl_secs`, may).
    until: Option<u64>,
}

impl TokenService {
    /// The token service of `config`, or `None` when it has no `token_service:` section. The
    /// session tokens it issues name `auth.issuer` and `auth.audience`, so the deployment's
    /// verifiers accept them once they trust [`SigningKey::public_jwk`].
    pub fn from_config(config: &Config) -> Result<Option<TokenService>, TokenServiceError> {
        let Some(ts) = &config.token_service else {
            return Ok(None);
        };
        // In production the instances accept session tokens, not the provider's: one issuer for
        // both would let a provider token past the exchange (its claim filter, lifetime and fresh
        // session). Development shares one on purpose (the development key plays both).
        if config.environment == Environment::Production && config.auth.issuer == ts.provider.issuer
        {
            return Err(TokenServiceError::Login(
                "auth.issuer equals token_service.provider.issuer: in production the instances must trust only the session tokens (set auth.issuer to this deployment's own issuer)".into(),
            ));
        }
        // An empty path (`${BULKHEAD_SESSION_KEY_FILE:-}` unset) counts as none.
        let file = ts
            .signing_key_file
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let key = match (file, config.environment) {
            (Some(path), _) => SigningKey::read(path)?,
            (None, Environment::Production) => return Err(TokenServiceError::NoKeyInProduction),
            (None, Environment::Development) => {
                SigningKey::read_or_make(&development_key_path(&config.state.dir))?
            }
        };
        TokenService::new(&config.auth, ts, key).map(Some)
    }

    /// A token service issuing for `auth`'s issuer and audience with `key`.
    pub fn new(
        auth: &AuthConfig,
        ts: &TokenServiceConfig,
        key: SigningKey,
    ) -> Result<TokenService, TokenServiceError> {
        if ts.ttl_secs == 0 || ts.ttl_secs > MAX_TTL_SECS {
            return Err(TokenServiceError::BadTtl(ts.ttl_secs));
        }
        if ts.provider.session_claim.is_some() {
            return Err(TokenServiceError::Unused("session_claim"));
        }
        if let Some(name) = ts
            .claims
            .iter()
            .find(|c| RESERVED_CLAIMS.contains(&c.as_str()))
        {
            return Err(TokenServiceError::Login(format!(
                "token_service.claims: `{name}` is a claim the token service writes itself"
            )));
        }
        if ts.provider.scopes != Default::default() {
            return Err(TokenServiceError::Unused("scopes"));
        }
        let provider = Verifier::new(&ts.provider)?;
        let login = ts
            .login
            .as_ref()
            .map(|l| login::Login::new(l, &ts.provider.issuer))
            .transpose()?;
        let upstream = ts
            .upstream
            .as_ref()
            .map(|u| upstream::Upstream::new(u, &ts.provider.issuer))
            .transpose()?;
        let introspection = ts
            .introspection
            .as_ref()
            .map(|i| introspect::Introspection::new(i, &ts.provider))
            .transpose()?;
        let mut refresh_validation = Validation::new(Algorithm::ES256);
        refresh_validation.leeway = auth.leeway_secs;
        refresh_validation.set_issuer(&[&auth.issuer]);
        refresh_validation.set_audience(&[refresh_audience(&auth.audience)]);
        refresh_validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        Ok(TokenService {
            issuer: auth.issuer.clone(),
            audience: auth.audience.clone(),
            ttl: ts.ttl_secs,
            refresh_ttl: ts.refresh_ttl_secs,
            claims: ts.claims.clone(),
            provider,
            refresh_validation,
            sealer: seal::Sealer::from_secret(&key.secret_digest),
            login,
            used: std::sync::OnceLock::new(),
            upstream,
            introspection,
            key,
        })
    }

    /// Records used authorization codes and refresh tokens in `used` (the state store's table,
    /// shared by every replica); without it both grants are refused.
    pub fn use_store(&self, used: crate::approval::UsedIds) {
        let _ = self.used.set(used);
    }

    fn used(&self) -> Result<&crate::approval::UsedIds, OAuthError> {
        self.used.get().ok_or_else(|| {
            OAuthError::new(
                "server_error",
                "this process keeps no record of used codes and refresh tokens",
            )
        })
    }

    /// Whether sign-in for MCP clients (`/authorize`, `/register`) is offered.
    pub fn offers_login(&self) -> bool {
        self.login.is_some()
    }

    /// The key that signs (its public half goes to every verifier of the deployment).
    pub fn key(&self) -> &SigningKey {
        &self.key
    }

    /// The issuer session tokens name.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The verifier of the identity provider's tokens (keeps remote keys fresh when started).
    pub fn provider(&self) -> &Verifier {
        &self.provider
    }

    /// Answers a token request: token exchange or refresh.
    pub async fn answer(&self, req: &TokenRequest) -> Result<Issued, OAuthError> {
        match req.grant_type.as_str() {
            TOKEN_EXCHANGE => self.exchange(req).await,
            "refresh_token" => self.refresh(req).await,
            "authorization_code" if self.login.is_some() => self.redeem(req).await,
            other => Err(OAuthError::new(
                "unsupported_grant_type",
                format!(
                    "`{other}` is not supported here: use `{TOKEN_EXCHANGE}` or `refresh_token`"
                ),
            )),
        }
    }

    /// RFC 8693 §2.1: verifies the subject token (and the actor token, when given) with the
    /// provider's keys, issuer and audience, and issues a token for a fresh session or the one
    /// the caller names in `session_id`.
    async fn exchange(&self, req: &TokenRequest) -> Result<Issued, OAuthError> {
        let subject_token = req.need("subject_token")?;
        token_type(req.need("subject_token_type")?, "subject_token_type")?;
        let subject = self
            .subject(subject_token)
            .await
            .map_err(|e| OAuthError::grant(format!("subject_token refused: {e}")))?;
        validate_id("sub", &subject.sub).map_err(|e| {
            OAuthError::grant(format!("the subject's `sub` cannot name a user here: {e}"))
        })?;
        let act = match req.get("actor_token") {
            None => None,
            Some(actor_token) => {
                token_type(req.need("actor_token_type")?, "actor_token_type")?;
                let actor = self
                    .subject(actor_token)
                    .await
                    .map_err(|e| OAuthError::grant(format!("actor_token refused: {e}")))?;
                Some(Actor { sub: actor.sub })
            }
        };
        if let Some(audience) = req.get("audience")
            && audience != self.audience
        {
            return Err(OAuthError::new(
                "invalid_target",
                format!(
                    "this service issues tokens for audience `{}` only",
                    self.audience
                ),
            ));
        }
        let session_id = match req.get("session_id") {
            Some(named) => {
                validate_id("session_id", named).map_err(|e| OAuthError::request(e.to_string()))?;
                named.to_owned()
            }
            None => fresh_session(),
        };
        let scope = granted_scope(req.get("scope"), &subject)?;
        let now = jsonwebtoken::get_current_timestamp();
        self.issue(Grant {
            sub: subject.sub.clone(),
            session_id,
            scope,
            act,
            copied: self.copy_claims(&subject),
            idp: self.seal_idp(subject_token),
            family: random_id(),
            // A client that names itself here binds the session's refresh tokens to it.
            client: req.get("client_id").map(login::s256),
            refresh_exp: now.saturating_add(self.refresh_ttl),
            until: Some(subject.exp),
        })
    }

    /// The claims of a provider token offered for exchange: a JWT verified with the provider's
    /// keys, an opaque token by introspection (when configured).
    async fn subject(&self, token: &str) -> Result<Claims, String> {
        match &self.introspection {
            Some(introspection) if !crate::auth::is_jws_shaped(token) => {
                if token.len() > crate::auth::DEFAULT_MAX_TOKEN_BYTES {
                    return Err("token too large".into());
                }
                introspection.claims(token).await
            }
            _ => self
                .provider
                .verify_subject(token)
                .await
                .map_err(|e| e.to_string()),
        }
    }

    /// RFC 6749 §6: a new session token for the refresh token's session, until the refresh
    /// token's fixed expiry, and a new refresh token: this one is used up (RFC 9700 §4.14.2).
    async fn refresh(&self, req: &TokenRequest) -> Result<Issued, OAuthError> {
        let token = req.need("refresh_token")?;
        let data =
            jsonwebtoken::decode::<Payload>(token, &self.key.decoding, &self.refresh_validation)
                .map_err(|e| {
                    OAuthError::grant(format!(
                        "refresh_token refused: {}",
                        crate::auth::AuthError::from_jwt(&e)
                    ))
                })?;
        let p = data.claims;
        if p.token_use.as_deref() != Some("refresh") {
            return Err(OAuthError::grant(
                "refresh_token refused: not a refresh token",
            ));
        }
        // The fixed expiry holds without leeway: a refresh token is never honoured past it.
        let refresh_exp = p.refresh_exp.unwrap_or(p.exp);
        if jsonwebtoken::get_current_timestamp() >= refresh_exp {
            return Err(OAuthError::grant("refresh_token refused: token expired"));
        }
        if let Some(cid) = &p.cid
            && req.get("client_id").map(login::s256).as_ref() != Some(cid)
        {
            return Err(OAuthError::grant(
                "refresh_token refused: it was issued to another client (send its `client_id`)",
            ));
        }
        // A token from before families existed is a family of its own.
        let family = p.fam.clone().unwrap_or_else(|| p.jti.clone());
        self.use_refresh(&p.jti, &family, refresh_exp).await?;
        let scope = match req.get("scope") {
            None => p.scope.clone(),
            Some(asked) => {
                let had: Vec<&str> = p
                    .scope
                    .as_deref()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                if let Some(extra) = asked.split_whitespace().find(|s| !had.contains(s)) {
                    return Err(OAuthError::new(
                        "invalid_scope",
                        format!("scope `{extra}` was not granted to this session"),
                    ));
                }
                Some(asked.to_owned())
            }
        };
        self.issue(Grant {
            sub: p.sub,
            session_id: p.session_id,
            scope,
            act: p.act,
            copied: p.copied,
            idp: p.idp,
            family,
            client: p.cid,
            refresh_exp,
            until: None,
        })
    }

    /// RFC 6749 §4.1.3 with PKCE: a code from [`callback`](Self::callback), once, by the client
    /// it was given to, with the verifier of its challenge; a fresh session.
    async fn redeem(&self, req: &TokenRequest) -> Result<Issued, OAuthError> {
        let code: login::Code = self
            .sealer
            .open(seal::Kind::Code, req.need("code")?)
            .ok_or_else(|| OAuthError::grant("`code` is not one this service issued"))?;
        if login::now() > code.exp {
            return Err(OAuthError::grant("the code expired"));
        }
        // RFC 6749 §4.1.3: the client and redirect URI of the authorization request, both
        // required (every authorization request here named them).
        if login::s256(req.need("client_id")?) != code.client_id {
            return Err(OAuthError::grant("the code was issued to another client"));
        }
        if req.need("redirect_uri")? != code.redirect_uri {
            return Err(OAuthError::grant(
                "`redirect_uri` differs from the authorization request's",
            ));
        }
        if code.aud != login::code_audience(&self.issuer, &self.audience) {
            return Err(OAuthError::grant(
                "the code was issued by another deployment",
            ));
        }
        let verifier = req.need("code_verifier")?;
        if !login::pkce_shaped(verifier) || login::s256(verifier) != code.challenge {
            return Err(OAuthError::grant(
                "`code_verifier` does not match the challenge",
            ));
        }
        match self
            .used()?
            .consume(&format!("oauth-code:{}", code.id), code.exp)
            .await
        {
            Ok(true) => {}
            Ok(false) => return Err(OAuthError::grant("the code was used already")),
            Err(e) => {
                tracing::warn!(error = %e, "cannot record a used code");
                return Err(OAuthError::new("temporarily_unavailable", "try again"));
            }
        }
        let now = login::now();
        self.issue(Grant {
            sub: code.sub,
            session_id: fresh_session(),
            scope: code.scope,
            act: None,
            copied: code.copied,
            idp: code.idp,
            family: random_id(),
            client: Some(code.client_id),
            refresh_exp: now.saturating_add(self.refresh_ttl),
            until: None,
        })
    }

    /// `POST /register`: a public client, its id sealed.
    pub fn register(&self, body: &Value) -> Result<Value, OAuthError> {
        let Some(login) = &self.login else {
            return Err(OAuthError::new(
                "invalid_request",
                "sign-in is not configured",
            ));
        };
        login::register(&self.sealer, body, login.redirect_origins())
    }

    /// `GET /authorize`: a 302 to the provider (or to the client with an error), or a refusal.
    pub async fn authorize(
        &self,
        callback: &str,
        query: &std::collections::BTreeMap<String, String>,
    ) -> Result<(String, Option<String>), String> {
        let Some(login) = &self.login else {
            return Err("sign-in is not configured".into());
        };
        match login.authorize(&self.sealer, callback, query).await {
            login::Step::Redirect(url) => Ok((url, None)),
            login::Step::RedirectSetting(url, cookie) => Ok((url, Some(cookie))),
            login::Step::Refuse(why) => Err(why),
        }
    }

    /// `GET /oauth/callback`: verifies the provider's token as an exchange's subject and sends
    /// the client a sealed single-use code (with `iss`, RFC 9207).
    pub async fn callback(
        &self,
        callback: &str,
        query: &std::collections::BTreeMap<String, String>,
        cookies: &str,
    ) -> Result<String, String> {
        let Some(login) = &self.login else {
            return Err("sign-in is not configured".into());
        };
        let (tokens, sign_in) = match login.callback(&self.sealer, callback, query, cookies).await {
            Ok(done) => done,
            Err(login::Step::Redirect(url) | login::Step::RedirectSetting(url, _)) => {
                return Ok(url);
            }
            Err(login::Step::Refuse(why)) => return Err(why),
        };
        let back = |error: &str, description: &str| {
            login::with_query(
                &sign_in.redirect_uri,
                &[
                    ("error", Some(error)),
                    ("error_description", Some(description)),
                    ("state", sign_in.state.as_deref()),
                    ("iss", Some(&self.issuer)),
                ],
            )
        };
        let token = tokens.access_token.clone();
        let subject = match self.signed_in(tokens).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "the provider's token was refused");
                return Ok(back(
                    "access_denied",
                    "the identity provider's token was refused",
                ));
            }
        };
        if let Err(e) = validate_id("sub", &subject.sub) {
            return Ok(back(
                "access_denied",
                &format!("the user cannot be named here: {e}"),
            ));
        }
        let scope = match &sign_in.scope {
            None if subject.scopes.is_empty() => None,
            None => Some(subject.scopes.join(" ")),
            Some(asked) => {
                let kept: Vec<&str> = asked
                    .split_whitespace()
                    .filter(|s| subject.scopes.iter().any(|g| g == s))
                    .collect();
                (!kept.is_empty()).then(|| kept.join(" "))
            }
        };
        let code = login::Code {
            id: login::random(16),
            sub: subject.sub.clone(),
            scope,
            copied: self.copy_claims(&subject),
            idp: self.seal_idp(&token),
            client_id: sign_in.client_id,
            redirect_uri: sign_in.redirect_uri.clone(),
            challenge: sign_in.challenge,
            exp: login::now().saturating_add(login::CODE_SECS),
            aud: login::code_audience(&self.issuer, &self.audience),
        };
        let sealed = self.sealer.seal(seal::Kind::Code, &code);
        tracing::info!(user = %subject.sub, "signed in at the identity provider");
        Ok(login::with_query(
            &sign_in.redirect_uri,
            &[
                ("code", Some(&sealed)),
                ("state", sign_in.state.as_deref()),
                ("iss", Some(&self.issuer)),
            ],
        ))
    }

    /// Who signed in at the provider: its access token's claims when it is a JWT (for this
    /// deployment: verified as an exchange's subject is); otherwise the ID token's, verified as
    /// its relying party (audience Bulkhead's client, this sign-in's `nonce`), with the scopes
    /// the token endpoint said it granted.
    async fn signed_in(&self, tokens: login::ProviderTokens) -> Result<Claims, String> {
        if crate::auth::is_jws_shaped(&tokens.access_token) {
            return self
                .provider
                .verify_subject(&tokens.access_token)
                .await
                .map_err(|e| e.to_string());
        }
        let id_token = tokens.id_token.as_deref().ok_or(
            "the access token is opaque and the provider sent no ID token (add `openid` to token_service.login.scope)",
        )?;
        let mut claims = self
            .provider
            .verify_id_token(id_token, &tokens.client_id)
            .await
            .map_err(|e| format!("ID token: {e}"))?;
        if claims.other.get("nonce").and_then(Value::as_str) != Some(tokens.nonce.as_str())
            || tokens.nonce.is_empty()
        {
            return Err("ID token: its nonce is not this sign-in's".into());
        }
        claims.scopes = tokens
            .scope
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        Ok(claims)
    }

    /// Signs the session token, and a refresh token while the grant's refresh expiry is ahead.
    fn issue(&self, grant: Grant) -> Result<Issued, OAuthError> {
        let now = jsonwebtoken::get_current_timestamp();
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.key.kid().to_owned());
        let payload = Payload {
            sub: grant.sub,
            session_id: grant.session_id,
            iss: self.issuer.clone(),
            aud: self.audience.clone(),
            // Never past the refresh token's fixed expiry (a refresh cannot extend a session),
            // nor past the subject token it was minted from.
            exp: now
                .saturating_add(self.ttl)
                .min(grant.refresh_exp.max(now + 1))
                .min(grant.until.unwrap_or(u64::MAX).max(now + 1)),
            nbf: now,
            iat: now,
            jti: random_id(),
            scope: grant.scope,
            act: grant.act,
            token_use: None,
            refresh_exp: None,
            idp: grant.idp,
            fam: Some(grant.family),
            cid: None,
            copied: grant.copied,
        };
        let sign = |p: &Payload| {
            jsonwebtoken::encode(&header, p, &self.key.encoding)
                .map_err(|e| OAuthError::new("server_error", format!("cannot sign: {e}")))
        };
        let access_token = sign(&payload)?;
        let expires_in = payload.exp.saturating_sub(now);
        let refresh_token = if self.refresh_ttl > 0 && grant.refresh_exp > now {
            let refresh = Payload {
                aud: refresh_audience(&self.audience),
                exp: grant.refresh_exp,
                jti: random_id(),
                token_use: Some("refresh".into()),
                refresh_exp: Some(grant.refresh_exp),
                cid: grant.client.clone(),
                ..payload.clone()
            };
            Some(sign(&refresh)?)
        } else {
            None
        };
        tracing::info!(
            user = %payload.sub,
            session = %payload.session_id,
            actor = payload.act.as_ref().map(|a| a.sub.as_str()),
            "issued a session token"
        );
        Ok(Issued {
            access_token,
            issued_token_type: ISSUED_TYPE.into(),
            token_type: "Bearer".into(),
            expires_in,
            refresh_token,
            scope: payload.scope,
            session_id: payload.session_id,
        })
    }

    /// Uses up the refresh token `jti` of `family`: refused when the family is revoked, and a
    /// second use revokes it. Decided in the state store (by its clock), so across replicas.
    async fn use_refresh(&self, jti: &str, family: &str, exp: u64) -> Result<(), OAuthError> {
        let used = self.used()?;
        let unavailable = |e: String| {
            tracing::warn!(error = %e, "cannot record a used refresh token");
            OAuthError::new("temporarily_unavailable", "try again")
        };
        if used
            .seen(&revoked_family(family))
            .await
            .map_err(unavailable)?
        {
            return Err(OAuthError::grant(
                "refresh_token refused: its session was revoked (a refresh token of it was used twice); sign in again",
            ));
        }
        if used
            .consume(&format!("refresh:{jti}"), exp)
            .await
            .map_err(unavailable)?
        {
            return Ok(());
        }
        // RFC 9700 §4.14.2: a reused refresh token means one of its holders is not its owner;
        // which one cannot be told, so the family ends for both.
        used.consume(&revoked_family(family), exp)
            .await
            .map_err(unavailable)?;
        tracing::warn!(
            family,
            "a refresh token was used twice: its family is revoked"
        );
        Err(OAuthError::grant(
            "refresh_token refused: it was used already, so every token of its session is revoked; sign in again",
        ))
    }

    /// The provider's `token`, sealed for the session token, when upstream exchanges are
    /// configured and it is short enough to carry (at most 2 KiB).
    fn seal_idp(&self, token: &str) -> Option<String> {
        self.upstream.as_ref()?;
        if token.len() > 2048 {
            tracing::warn!(
                "the provider's token is longer than 2 KiB: upstream exchanges are off for this session"
            );
            return None;
        }
        Some(self.sealer.seal(seal::Kind::Idp, &token))
    }

    /// A token of `audience` in the name of the caller whose session token carried `claims`
    /// (`sub` is the verified user): the provider's token it started from, exchanged at the
    /// provider (RFC 8693).
    pub async fn upstream_token(
        &self,
        user: &str,
        claims: &Map<String, Value>,
        audience: &str,
    ) -> Result<UpstreamToken, String> {
        let upstream = self
            .upstream
            .as_ref()
            .ok_or("this deployment exchanges no upstream tokens (token_service.upstream)")?;
        if let Some(family) = claims.get("fam").and_then(Value::as_str) {
            let used = self.used().map_err(|e| e.to_string())?;
            if used.seen(&revoked_family(family)).await? {
                return Err(
                    "the session was revoked (a refresh token of it was used twice); sign in again"
                        .into(),
                );
            }
        }
        let sealed = claims
            .get("idp")
            .and_then(Value::as_str)
            .ok_or("the session token carries no provider token; sign in again")?;
        let subject: String = self
            .sealer
            .open(seal::Kind::Idp, sealed)
            .ok_or("the session token's provider token was sealed by another key")?;
        upstream.token(user, &subject, audience).await
    }

    /// The configured claims of the provider's token that are short strings.
    fn copy_claims(&self, subject: &Claims) -> Map<String, Value> {
        let mut out = Map::new();
        for name in &self.claims {
            // An address the provider says it did not verify names nobody.
            if name == "email" && subject.other.get("email_verified") == Some(&Value::Bool(false)) {
                tracing::warn!("claim `email` not copied: the provider marks it unverified");
                continue;
            }
            match subject.other.get(name) {
                Some(Value::String(s)) if s.len() <= MAX_COPIED_CLAIM => {
                    out.insert(name.clone(), Value::String(s.clone()));
                }
                Some(_) => {
                    tracing::warn!(claim = %name, "claim not copied: not a string of at most 512 bytes")
                }
                None => {}
            }
        }
        out
    }
}

/// The record that a refresh-token family is revoked.
fn revoked_family(family: &str) -> String {
    format!("refresh-family-revoked:{family}")
}

/// Refresh tokens name an audience no verifier of the deployment accepts.
fn refresh_audience(audience: &str) -> String {
    format!("{audience}#refresh")
}

fn token_type(value: &str, param: &str) -> Result<(), OAuthError> {
    if SUBJECT_TYPES.contains(&value) {
        Ok(())
    } else {
        Err(OAuthError::request(format!(
            "`{param}` must be one of {}",
            SUBJECT_TYPES.join(", ")
        )))
    }
}

/// The requested scopes when every one was granted to the subject; the subject's otherwise.
fn granted_scope(asked: Option<&str>, subject: &Claims) -> Result<Option<String>, OAuthError> {
    match asked {
        None if subject.scopes.is_empty() => Ok(None),
        None => Ok(Some(subject.scopes.join(" "))),
        Some(asked) => {
            if let Some(extra) = asked
                .split_whitespace()
                .find(|s| !subject.scopes.iter().any(|g| g == s))
            {
                return Err(OAuthError::new(
                    "invalid_scope",
                    format!("scope `{extra}` is not granted by the subject token"),
                ));
            }
            Ok(Some(asked.split_whitespace().collect::<Vec<_>>().join(" ")))
        }
    }
}

/// 128 random bits, base64url: `s` + 22 characters (a valid session id).
fn fresh_session() -> String {
    format!("s{}", random_id())
}

fn random_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
