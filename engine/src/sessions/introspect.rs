//! Opaque subject tokens verified by token introspection (RFC 7662) at the identity provider:
//! what an exchange accepts when the provider's access token is not a JWT.
//!
//! Invariants enforced here:
//! - Only an answer `active: true` from the provider's endpoint, to Bulkhead's authenticated
//!   request, names a user; anything else (an error, a timeout, an answer that is not JSON or
//!   too large) refuses the token. Its audience rules are [`crate::auth::introspected`]'s.
//! - An active answer is reused for at most `cache_secs` and never past the token's `exp`, so a
//!   token the provider revokes is refused within `cache_secs`. Entries are keyed by the token's
//!   SHA-256 (the token itself is not kept) and bounded by `cache_entries`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use sha2::Digest as _;

use super::TokenServiceError;
use super::config::IntrospectionConfig;
use crate::auth::{AuthConfig, Claims};

/// Largest introspection answer read, in bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Introspects at the provider, as Bulkhead's client.
pub(crate) struct Introspection {
    client_id: String,
    secret: String,
    issuer: String,
    audience: String,
    leeway: u64,
    clients: Vec<String>,
    http: reqwest::Client,
    endpoint: tokio::sync::OnceCell<String>,
    cache_secs: u64,
    cache: Mutex<HashMap<[u8; 32], (Claims, u64)>>,
    cache_max: usize,
}

impl Introspection {
    /// The introspection of `config` for tokens of `provider`.
    pub(crate) fn new(
        config: &IntrospectionConfig,
        provider: &AuthConfig,
    ) -> Result<Introspection, TokenServiceError> {
        let secret = std::fs::read_to_string(&config.client_secret_file)
            .map_err(|e| {
                TokenServiceError::Login(format!(
                    "introspection.client_secret_file {}: {e}",
                    config.client_secret_file.display()
                ))
            })?
            .trim()
            .to_owned();
        let endpoint = tokio::sync::OnceCell::new();
        if let Some(url) = &config.endpoint {
            let _ = endpoint.set(url.clone());
        }
        Ok(Introspection {
            client_id: config.client_id.clone(),
            secret,
            issuer: provider.issuer.trim_end_matches('/').to_owned(),
            audience: provider.audience.clone(),
            leeway: provider.leeway_secs,
            clients: config.clients.clone(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_millis(provider.jwks_timeout_ms.max(1)))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| TokenServiceError::Login(format!("HTTP client: {e}")))?,
            endpoint,
            cache_secs: config.cache_secs,
            cache: Mutex::new(HashMap::new()),
            cache_max: config.cache_entries,
        })
    }

    /// The claims of `token`, from the provider's answer (or one given at most `cache_secs`
    /// ago).
    pub(crate) async fn claims(&self, token: &str) -> Result<Claims, String> {
        let key: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let now = jsonwebtoken::get_current_timestamp();
        if let Some((claims, until)) = self.cache().get(&key)
            && *until > now
        {
            return Ok(claims.clone());
        }
        let answer = self.ask(token).await?;
        if answer.get("active") != Some(&Value::Bool(true)) {
            return Err(
                "the provider says the token is not active (expired, revoked or unknown)".into(),
            );
        }
        let claims = crate::auth::introspected(
            answer,
            &self.issuer,
            &self.audience,
            &self.clients,
            self.leeway,
        )
        .map_err(|e| e.to_string())?;
        let until = now.saturating_add(self.cache_secs).min(claims.exp);
        if self.cache_max > 0 && until > now {
            let mut cache = self.cache();
            if cache.len() >= self.cache_max {
                cache.retain(|_, (_, u)| *u > now);
                if cache.len() >= self.cache_max {
                    cache.clear();
                }
            }
            cache.insert(key, (claims.clone(), until));
        }
        Ok(claims)
    }

    async fn ask(&self, token: &str) -> Result<serde_json::Map<String, Value>, String> {
        let endpoint = self.endpoint().await?;
        let resp = self
            .http
            .post(endpoint)
            .basic_auth(&self.client_id, Some(&self.secret))
            .header("accept", "application/json")
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await
            .map_err(|e| format!("introspection: {}", e.without_url()))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("introspection: {}", e.without_url()))?;
        if !status.is_success() {
            return Err(format!("introspection: the provider answered {status}"));
        }
        if bytes.len() > MAX_ANSWER_BYTES {
            return Err("introspection: the answer is larger than 64 KiB".into());
        }
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(answer)) => Ok(answer),
            _ => Err("introspection: the answer is not a JSON object".into()),
        }
    }

    async fn endpoint(&self) -> Result<&str, String> {
        self.endpoint
            .get_or_try_init(|| async {
                let url = format!("{}/.well-known/openid-configuration", self.issuer);
                let doc: Value = self
                    .http
                    .get(&url)
                    .send()
                    .await
                    .map_err(|e| format!("identity provider: {}", e.without_url()))?
                    .json()
                    .await
                    .map_err(|e| format!("{url}: {e}"))?;
                if doc["issuer"].as_str().map(|s| s.trim_end_matches('/'))
                    != Some(self.issuer.as_str())
                {
                    return Err(format!("{url} names another issuer"));
                }
                doc["introspection_endpoint"]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        format!("{url} names no introspection endpoint (set token_service.introspection.endpoint)")
                    })
            })
            .await
            .map(String::as_str)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (Claims, u64)>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}
