//! Tokens for other services in the user's name: the identity provider's token a session started
//! from (sealed in the session token) exchanged at the provider (RFC 8693) for a token of the
//! service's audience, cached per user and audience until it expires.
//!
//! Invariant: an upstream token is only ever obtained from the provider's own token for the same
//! user, never minted here, and goes only into the parameter bound to it (never the model's
//! context, never a log or audit line: those name its audience and `jti`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use super::TokenServiceError;
use super::config::UpstreamConfig;

/// An upstream token and what the audit may say of it.
#[derive(Clone, Debug)]
pub struct UpstreamToken {
    /// The bearer token.
    pub token: String,
    /// Seconds since the epoch when it expires.
    pub exp: u64,
    /// Its `jti`, when it has one.
    pub jti: Option<String>,
}

/// Exchanges at the provider, as Bulkhead's upstream client.
pub(crate) struct Upstream {
    client_id: String,
    secret: String,
    issuer: String,
    http: reqwest::Client,
    token_endpoint: tokio::sync::OnceCell<String>,
    cache: Mutex<HashMap<(String, String), UpstreamToken>>,
    cache_max: usize,
}

impl Upstream {
    pub(crate) fn new(
        config: &UpstreamConfig,
        provider_issuer: &str,
    ) -> Result<Upstream, TokenServiceError> {
        let secret = std::fs::read_to_string(&config.client_secret_file)
            .map_err(|e| {
                TokenServiceError::Login(format!(
                    "upstream.client_secret_file {}: {e}",
                    config.client_secret_file.display()
                ))
            })?
            .trim()
            .to_owned();
        Ok(Upstream {
            client_id: config.client_id.clone(),
            secret,
            issuer: provider_issuer.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| TokenServiceError::Login(format!("HTTP client: {e}")))?,
            token_endpoint: tokio::sync::OnceCell::new(),
            cache: Mutex::new(HashMap::new()),
            cache_max: config.cache_entries,
        })
    }

    async fn endpoint(&self) -> Result<&str, String> {
        self.token_endpoint
            .get_or_try_init(|| async {
                let url = format!("{}/.well-known/openid-configuration", self.issuer);
                let doc: Value = self
                    .http
                    .get(&url)
                    .send()
                    .await
                    .map_err(|e| format!("identity provider: {e}"))?
                    .json()
                    .await
                    .map_err(|e| format!("{url}: {e}"))?;
                doc["token_endpoint"]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{url} names no token endpoint"))
            })
            .await
            .map(String::as_str)
    }

    /// A token of `audience` for `user`, from the provider's `subject` token.
    pub(crate) async fn token(
        &self,
        user: &str,
        subject: &str,
        audience: &str,
    ) -> Result<UpstreamToken, String> {
        let now = jsonwebtoken::get_current_timestamp();
        // Keyed by the provider's token too: a session that started from another (narrower,
        // expired, revoked) token never borrows this one's upstream token.
        let subject_digest = {
            use sha2::Digest as _;
            let d = sha2::Sha256::digest(subject.as_bytes());
            d.iter()
                .take(16)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let key = (format!("{user}\0{subject_digest}"), audience.to_owned());
        if let Some(hit) = self.cache().get(&key)
            && hit.exp > now + 10
        {
            return Ok(hit.clone());
        }
        let endpoint = self.endpoint().await?;
        let resp = self
            .http
            .post(endpoint)
            .basic_auth(&self.client_id, Some(&self.secret))
            .form(&[
                (
                    "grant_type",
                    "urn:ietf:params:oauth:grant-type:token-exchange",
                ),
                ("subject_token", subject),
                (
                    "subject_token_type",
                    "urn:ietf:params:oauth:token-type:access_token",
                ),
                ("audience", audience),
            ])
            .send()
            .await
            .map_err(|e| format!("identity provider: {e}"))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|_| format!("identity provider: {status}, not JSON"))?;
        let Some(token) = body["access_token"].as_str() else {
            return Err(format!(
                "the identity provider refused the exchange: {} {}",
                body["error"].as_str().unwrap_or(""),
                body["error_description"].as_str().unwrap_or("")
            ));
        };
        let claims = unverified_claims(token);
        let exp = claims["exp"]
            .as_u64()
            .or_else(|| body["expires_in"].as_u64().map(|s| now + s))
            .unwrap_or(now + 60);
        let got = UpstreamToken {
            token: token.to_owned(),
            exp,
            jti: claims["jti"].as_str().map(str::to_owned),
        };
        let mut cache = self.cache();
        if cache.len() >= self.cache_max {
            cache.retain(|_, t| t.exp > now);
            if cache.len() >= self.cache_max {
                cache.clear();
            }
        }
        if self.cache_max > 0 {
            cache.insert(key, got.clone());
        }
        Ok(got)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), UpstreamToken>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A JWT's payload, read without verification (for the audit's `jti` and the cache's `exp`:
/// the token is the provider's answer over its own TLS connection, and the service it is for
/// verifies it).
pub fn unverified_claims(token: &str) -> Value {
    use base64::Engine as _;
    token
        .split('.')
        .nth(1)
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .ok()
        })
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}
