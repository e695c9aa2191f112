//! Sign-in for MCP clients that follow the specification's authorization flow: Bulkhead is their
//! authorization server and sends the user on to the identity provider.
//!
//! client --/authorize--> Bulkhead --302--> provider (user signs in) --/oauth/callback-->
//! Bulkhead (code + PKCE at the provider, its token verified as an exchange's subject is)
//! --302 code--> client --POST /token (code + PKCE)--> a session token for a fresh session.
//!
//! Invariants enforced here:
//! - Nothing of a sign-in is kept in memory between requests: the registered client, the
//!   sign-in under way and the code are sealed values ([`super::seal`]), so any replica of the
//!   deployment answers any step; a code is single-use across replicas (the state store's
//!   used-id table) and lives 60 s.
//! - A code reaches only a redirect URI registered for its client, and only the holder of the
//!   PKCE verifier (S256 only) exchanges it; the provider's answer is accepted only with its
//!   `iss` (RFC 9207) when the provider announces it, and only for the sign-in Bulkhead sealed.
//! - Who signed in is read from the provider's access token when it is a JWT for this
//!   deployment, and otherwise (opaque access tokens) from the ID token, verified as its relying
//!   party: Bulkhead's own client as audience and the `nonce` this sign-in sealed.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::Digest as _;

use super::config::LoginConfig;
use super::seal::{Kind, Sealer};
use super::{OAuthError, TokenServiceError};

/// Most redirect URIs of one registered client.
const MAX_REDIRECT_URIS: usize = 8;
/// Longest redirect URI or client name, in bytes.
const MAX_URI_BYTES: usize = 512;
/// Seconds an authorization code lives.
pub(crate) const CODE_SECS: u64 = 60;
/// Largest provider answer read, in bytes.
const MAX_PROVIDER_BYTES: usize = 1 << 20;

/// A client registered at `POST /register`: its `client_id` is this, sealed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Client {
    pub redirect_uris: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A sign-in sent to the provider: the `state` it hands back, sealed.
#[derive(Debug, Serialize, Deserialize)]
struct SignIn {
    client_id: String,
    redirect_uri: String,
    state: Option<String>,
    challenge: String,
    scope: Option<String>,
    /// The PKCE verifier of Bulkhead's own request to the provider.
    verifier: String,
    /// The cookie that ties the sign-in to the browser that started it, and the S256 digest of
    /// its value (the value itself is only in the browser).
    cookie: String,
    browser: String,
    /// The OpenID `nonce` sent to the provider, which its ID token must carry.
    #[serde(default)]
    nonce: String,
    exp: u64,
}

/// What the provider's token endpoint answered a sign-in.
pub(crate) struct ProviderTokens {
    /// Its access token (a JWT for this deployment, or opaque).
    pub access_token: String,
    /// Its ID token, when `openid` was in the scope.
    pub id_token: Option<String>,
    /// The scopes it granted (RFC 6749 §5.1), when it said.
    pub scope: Option<String>,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
    /// Bulkhead's client at the provider: the ID token's audience.
    pub client_id: String,
}

/// An authorization code: who signed in, for which client (the S256 digest of its id), sealed.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Code {
    pub id: String,
    pub sub: String,
    pub scope: Option<String>,
    pub copied: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp: Option<String>,
    pub client_id: String,
    pub redirect_uri: String,
    pub challenge: String,
    pub exp: u64,
    /// The deployment that issued it (its issuer and audience): no other redeems it, even one
    /// sharing the key.
    #[serde(default)]
    pub aud: String,
}

/// The deployment a code is issued by and redeemed at.
pub(crate) fn code_audience(issuer: &str, audience: &str) -> String {
    format!("{issuer} {audience}")
}

/// The provider's endpoints, from its discovery document.
#[derive(Clone, Debug, Deserialize)]
struct Endpoints {
    authorization_endpoint: String,
    token_endpoint: String,
    #[serde(default)]
    registration_endpoint: Option<String>,
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
}

/// Bulkhead's identity at the provider.
#[derive(Clone, Debug)]
struct ProviderClient {
    client_id: String,
    secret: Option<String>,
}

/// What the callback leads to: a redirect to the client, or a page saying what is wrong when
/// there is no client to tell.
pub(crate) enum Step {
    /// 302 to this URL.
    Redirect(String),
    /// 302 to this URL, setting this cookie (`name=value; attributes`).
    RedirectSetting(String, String),
    /// 400 with this text.
    Refuse(String),
}

/// Signs users in at the provider for registered clients.
pub(crate) struct Login {
    config: LoginConfig,
    issuer: String,
    http: reqwest::Client,
    endpoints: tokio::sync::OnceCell<Endpoints>,
    client: tokio::sync::OnceCell<ProviderClient>,
}

impl Login {
    /// The sign-in of `config` at the provider whose issuer is `provider_issuer`.
    pub(crate) fn new(
        config: &LoginConfig,
        provider_issuer: &str,
    ) -> Result<Login, TokenServiceError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.request_timeout_ms.max(1)))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| TokenServiceError::Login(format!("HTTP client: {e}")))?;
        let client = tokio::sync::OnceCell::new();
        if let Some(id) = &config.client_id {
            let secret = match &config.client_secret_file {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .map_err(|e| {
                            TokenServiceError::Login(format!(
                                "client_secret_file {}: {e}",
                                path.display()
                            ))
                        })?
                        .trim()
                        .to_owned(),
                ),
                None => None,
            };
            let _ = client.set(ProviderClient {
                client_id: id.clone(),
                secret,
            });
        }
        Ok(Login {
            config: config.clone(),
            issuer: provider_issuer.trim_end_matches('/').to_owned(),
            http,
            endpoints: tokio::sync::OnceCell::new(),
            client,
        })
    }

    /// The `https` origins clients may register redirect URIs under.
    pub(crate) fn redirect_origins(&self) -> &[String] {
        &self.config.redirect_origins
    }

    async fn endpoints(&self) -> Result<&Endpoints, String> {
        self.endpoints
            .get_or_try_init(|| async {
                let url = format!("{}/.well-known/openid-configuration", self.issuer);
                let doc: Value = self.get_json(self.http.get(&url)).await?;
                if doc["issuer"].as_str().map(|s| s.trim_end_matches('/'))
                    != Some(self.issuer.as_str())
                {
                    return Err(format!("{url} names another issuer"));
                }
                serde_json::from_value(doc).map_err(|e| format!("{url}: {e}"))
            })
            .await
    }

    /// Bulkhead's client at the provider: configured, or registered once per process.
    async fn provider_client(&self, callback: &str) -> Result<&ProviderClient, String> {
        self.client
            .get_or_try_init(|| async {
                let endpoints = self.endpoints().await?;
                let Some(register) = &endpoints.registration_endpoint else {
                    return Err(
                        "the provider offers no registration: set token_service.login.client_id"
                            .to_string(),
                    );
                };
                let body = serde_json::json!({
                    "client_name": "Bulkhead",
                    "redirect_uris": [callback],
                    "grant_types": ["authorization_code"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "client_secret_basic",
                });
                let got: Value = self.get_json(self.http.post(register).json(&body)).await?;
                let client_id = got["client_id"]
                    .as_str()
                    .ok_or("the provider's registration answer has no client_id")?
                    .to_owned();
                tracing::info!(%client_id, "registered at the identity provider");
                Ok(ProviderClient {
                    client_id,
                    secret: got["client_secret"].as_str().map(str::to_owned),
                })
            })
            .await
    }

    async fn get_json(&self, req: reqwest::RequestBuilder) -> Result<Value, String> {
        let resp = req
            .send()
            .await
            .map_err(|e| format!("identity provider: {e}"))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("identity provider: {e}"))?;
        if bytes.len() > MAX_PROVIDER_BYTES {
            return Err("identity provider: answer too large".into());
        }
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|_| format!("identity provider: {status}, not JSON"))?;
        if !status.is_success() {
            return Err(format!(
                "identity provider: {status} {}",
                body["error"].as_str().unwrap_or("")
            ));
        }
        Ok(body)
    }

    /// `GET /authorize`: checks the client, its redirect URI and PKCE, and sends the user to the
    /// provider with a sealed sign-in. Errors before the redirect URI is known are refused here;
    /// after, they go to the client (RFC 6749 §4.1.2.1).
    pub(crate) async fn authorize(
        &self,
        sealer: &Sealer,
        callback: &str,
        query: &BTreeMap<String, String>,
    ) -> Step {
        let get = |k: &str| query.get(k).map(String::as_str).filter(|v| !v.is_empty());
        let Some(client_id) = get("client_id") else {
            return Step::Refuse("`client_id` is missing".into());
        };
        let Some(client) = sealer.open::<Client>(Kind::Client, client_id) else {
            return Step::Refuse(
                "unknown `client_id`: register the client at /register first".into(),
            );
        };
        let redirect_uri = match (get("redirect_uri"), client.redirect_uris.as_slice()) {
            (Some(uri), uris) if uris.iter().any(|u| u == uri) => uri.to_owned(),
            (None, [only]) => only.clone(),
            (Some(_), _) => {
                return Step::Refuse("`redirect_uri` is not registered for this client".into());
            }
            (None, _) => return Step::Refuse("`redirect_uri` is missing".into()),
        };
        let state = get("state").map(str::to_owned);
        if state.as_ref().is_some_and(|s| s.len() > MAX_URI_BYTES) {
            return Step::Refuse("`state` is longer than 512 bytes".into());
        }
        let scope = get("scope");
        if scope.is_some_and(|s| s.len() > MAX_URI_BYTES) {
            return Step::Refuse("`scope` is longer than 512 bytes".into());
        }
        let back = |error: &str, description: &str| {
            Step::Redirect(with_query(
                &redirect_uri,
                &[
                    ("error", Some(error)),
                    ("error_description", Some(description)),
                    ("state", state.as_deref()),
                ],
            ))
        };
        if get("response_type") != Some("code") {
            return back("unsupported_response_type", "only `code` is supported");
        }
        let Some(challenge) = get("code_challenge") else {
            return back(
                "invalid_request",
                "PKCE is required: send `code_challenge` (S256)",
            );
        };
        if get("code_challenge_method") != Some("S256") || !pkce_shaped(challenge) {
            return back("invalid_request", "`code_challenge_method` must be S256");
        }
        let endpoints = match self.endpoints().await {
            Ok(e) => e.clone(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot reach the identity provider");
                return back(
                    "temporarily_unavailable",
                    "the identity provider cannot be reached",
                );
            }
        };
        let provider_client = match self.provider_client(callback).await {
            Ok(c) => c.clone(),
            Err(e) => {
                tracing::warn!(error = %e, "no client at the identity provider");
                return back(
                    "temporarily_unavailable",
                    "the identity provider refused Bulkhead",
                );
            }
        };
        let verifier = random(32);
        // The browser that starts a sign-in must be the one that finishes it: otherwise a
        // provider link made by someone else (their client, their redirect URI) would hand them
        // the code of whoever signs in through it.
        let nonce = random(32);
        let cookie = format!("bulkhead_signin_{}", &s256(&nonce)[..12]);
        let sign_in = SignIn {
            // The digest, not the id: a sealed client id can be kilobytes long, and the sealed
            // sign-in and code must stay within what `open` accepts.
            client_id: s256(client_id),
            redirect_uri: redirect_uri.clone(),
            state: state.clone(),
            challenge: challenge.to_owned(),
            scope: scope.map(str::to_owned),
            verifier: verifier.clone(),
            cookie: cookie.clone(),
            browser: s256(&nonce),
            nonce: random(16),
            exp: now().saturating_add(self.config.timeout_secs),
        };
        let sealed = sealer.seal(Kind::SignIn, &sign_in);
        let secure = if callback.starts_with("https://") {
            "; Secure"
        } else {
            ""
        };
        // Scoped to the callback's own path (a public URL may carry a prefix).
        let path = reqwest::Url::parse(callback)
            .map(|u| u.path().to_owned())
            .unwrap_or_else(|_| "/oauth/callback".into());
        let set_cookie = format!(
            "{cookie}={nonce}; Path={path}; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
            self.config.timeout_secs
        );
        Step::RedirectSetting(
            with_query(
                &endpoints.authorization_endpoint,
                &[
                    ("response_type", Some("code")),
                    ("client_id", Some(&provider_client.client_id)),
                    ("redirect_uri", Some(callback)),
                    ("scope", Some(&self.config.scope)),
                    ("state", Some(&sealed)),
                    ("code_challenge", Some(&s256(&verifier))),
                    ("code_challenge_method", Some("S256")),
                    ("nonce", Some(&sign_in.nonce)),
                    ("resource", self.config.resource.as_deref()),
                ],
            ),
            set_cookie,
        )
    }

    /// `GET /oauth/callback`: the provider's answer. Returns the provider's access token and the
    /// sign-in it belongs to, or the step that ends the sign-in.
    pub(crate) async fn callback(
        &self,
        sealer: &Sealer,
        callback: &str,
        query: &BTreeMap<String, String>,
        cookies: &str,
    ) -> Result<(ProviderTokens, SignInFor), Step> {
        let get = |k: &str| query.get(k).map(String::as_str).filter(|v| !v.is_empty());
        let sign_in = get("state")
            .and_then(|s| sealer.open::<SignIn>(Kind::SignIn, s))
            .ok_or_else(|| Step::Refuse("this sign-in is not one Bulkhead started".into()))?;
        let held = cookies
            .split(';')
            .filter_map(|c| c.trim().split_once('='))
            .find(|(name, _)| *name == sign_in.cookie)
            .map(|(_, value)| value);
        if held.map(s256).as_deref() != Some(sign_in.browser.as_str()) {
            return Err(Step::Refuse(
                "this sign-in was started in another browser; start it again from your client"
                    .into(),
            ));
        }
        let back = |error: &str, description: &str| {
            Step::Redirect(with_query(
                &sign_in.redirect_uri,
                &[
                    ("error", Some(error)),
                    ("error_description", Some(description)),
                    ("state", sign_in.state.as_deref()),
                ],
            ))
        };
        if now() > sign_in.exp {
            return Err(back(
                "access_denied",
                "the sign-in took too long; start again",
            ));
        }
        let endpoints = self.endpoints().await.map_err(|_| {
            back(
                "temporarily_unavailable",
                "the identity provider cannot be reached",
            )
        })?;
        // RFC 9207: the answer names its issuer; a mix-up (another provider's code) is refused.
        match get("iss") {
            Some(iss) if iss.trim_end_matches('/') != self.issuer => {
                return Err(Step::Refuse(
                    "the answer names another issuer (RFC 9207)".into(),
                ));
            }
            None if endpoints.authorization_response_iss_parameter_supported => {
                return Err(Step::Refuse("the answer lacks `iss` (RFC 9207)".into()));
            }
            _ => {}
        }
        if let Some(error) = get("error") {
            let description = format!("the identity provider said `{error}`");
            return Err(back("access_denied", &description));
        }
        let Some(code) = get("code") else {
            return Err(back("access_denied", "the identity provider sent no code"));
        };
        let client = self
            .provider_client(callback)
            .await
            .map_err(|_| {
                back(
                    "temporarily_unavailable",
                    "the identity provider refused Bulkhead",
                )
            })?
            .clone();
        let mut form = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code.to_owned()),
            ("redirect_uri", callback.to_owned()),
            ("code_verifier", sign_in.verifier.clone()),
        ];
        if let Some(resource) = &self.config.resource {
            form.push(("resource", resource.clone()));
        }
        let mut req = self.http.post(&endpoints.token_endpoint);
        match &client.secret {
            Some(secret) => req = req.basic_auth(&client.client_id, Some(secret)),
            None => form.push(("client_id", client.client_id.clone())),
        }
        let got = self.get_json(req.form(&form)).await.map_err(|e| {
            tracing::warn!(error = %e, "the identity provider refused the code");
            back("access_denied", "the identity provider refused the sign-in")
        })?;
        let access_token = got["access_token"]
            .as_str()
            .ok_or_else(|| {
                back(
                    "access_denied",
                    "the identity provider sent no access token",
                )
            })?
            .to_owned();
        let tokens = ProviderTokens {
            access_token,
            id_token: got["id_token"].as_str().map(str::to_owned),
            scope: got["scope"].as_str().map(str::to_owned),
            nonce: sign_in.nonce,
            client_id: client.client_id,
        };
        Ok((
            tokens,
            SignInFor {
                client_id: sign_in.client_id,
                redirect_uri: sign_in.redirect_uri,
                state: sign_in.state,
                challenge: sign_in.challenge,
                scope: sign_in.scope,
            },
        ))
    }
}

/// The client's side of a finished sign-in.
pub(crate) struct SignInFor {
    pub client_id: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub challenge: String,
    pub scope: Option<String>,
}

/// `POST /register` (RFC 7591): a public client with its redirect URIs, as a sealed id. Only
/// `https` URIs and `http` on loopback are accepted (native apps, RFC 8252).
pub(crate) fn register(
    sealer: &Sealer,
    body: &Value,
    origins: &[String],
) -> Result<Value, OAuthError> {
    let bad = |d: String| OAuthError::new("invalid_client_metadata", d);
    let uris = body["redirect_uris"]
        .as_array()
        .ok_or_else(|| OAuthError::new("invalid_redirect_uri", "`redirect_uris` is required"))?;
    if uris.is_empty() || uris.len() > MAX_REDIRECT_URIS {
        return Err(OAuthError::new(
            "invalid_redirect_uri",
            format!("give 1 to {MAX_REDIRECT_URIS} redirect URIs"),
        ));
    }
    let mut redirect_uris = Vec::new();
    for uri in uris {
        let uri = uri.as_str().unwrap_or_default();
        redirect_check(uri, origins).map_err(|d| OAuthError::new("invalid_redirect_uri", d))?;
        redirect_uris.push(uri.to_owned());
    }
    match body["token_endpoint_auth_method"].as_str() {
        None | Some("none") => {}
        Some(other) => {
            return Err(bad(format!(
                "`token_endpoint_auth_method` `{other}`: only public clients (`none`, with PKCE) are registered"
            )));
        }
    }
    let name = match &body["client_name"] {
        Value::String(s) if s.len() <= MAX_URI_BYTES => Some(s.clone()),
        Value::Null => None,
        _ => {
            return Err(bad(
                "`client_name` must be a string of at most 512 bytes".into()
            ));
        }
    };
    let client = Client {
        redirect_uris,
        name,
    };
    let client_id = sealer.seal(Kind::Client, &client);
    let mut out = serde_json::json!({
        "client_id": client_id,
        "client_id_issued_at": now(),
        "redirect_uris": client.redirect_uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    });
    if let Some(name) = client.name {
        out["client_name"] = Value::String(name);
    }
    Ok(out)
}

/// A redirect URI a client may register: `http` on loopback (any port, RFC 8252), or `https`
/// under one of the configured `origins`.
///
/// Invariant: a code goes only to a redirect URI of its client, and a client registers only
/// these. Nothing asks the user to consent to each client, so an open `https` registration would
/// let anyone who gets a user to follow a sign-in link receive that user's code (a confused
/// deputy); loopback URIs reach only the user's own machine.
fn redirect_check(uri: &str, origins: &[String]) -> Result<(), String> {
    if uri.len() > MAX_URI_BYTES {
        return Err("a redirect URI is longer than 512 bytes".into());
    }
    let url = reqwest::Url::parse(uri).map_err(|e| format!("`{uri}` is not a URL: {e}"))?;
    if url.fragment().is_some() {
        return Err(format!("`{uri}` has a fragment"));
    }
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let origin = url.origin().ascii_serialization();
    match url.scheme() {
        "http" if loopback => Ok(()),
        "https" if origins.iter().any(|o| o.trim_end_matches('/') == origin) => Ok(()),
        _ => Err(format!(
            "`{uri}`: redirect URIs must be http on loopback, or https under an origin listed in token_service.login.redirect_origins"
        )),
    }
}

/// Whether a PKCE verifier/challenge has RFC 7636's shape: 43 to 128 unreserved characters.
pub(crate) fn pkce_shaped(s: &str) -> bool {
    (43..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// The S256 challenge of `verifier`.
pub(crate) fn s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// `n` random bytes, base64url.
pub(crate) fn random(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub(crate) fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// `base` with `pairs` (the present ones) added to its query.
pub(crate) fn with_query(base: &str, pairs: &[(&str, Option<&str>)]) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut url) => {
            {
                let mut q = url.query_pairs_mut();
                for (k, v) in pairs {
                    if let Some(v) = v {
                        q.append_pair(k, v);
                    }
                }
            }
            url.to_string()
        }
        Err(_) => base.to_owned(),
    }
}
