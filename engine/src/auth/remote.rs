//! Keys of an identity provider fetched over HTTP: from `auth.jwks_url`, or from the `jwks_uri`
//! that OIDC discovery (`{issuer}/.well-known/openid-configuration`) names. The set is cached and
//! replaced on a schedule (`jwks_refresh_secs`) and when a token names an unknown `kid` (at most
//! once per `jwks_min_refetch_secs`, one fetch at a time), so a rotated key is accepted and a
//! removed one refused without a restart. Each fetch is bounded in time and size.
//!
//! Fail closed: until a set was fetched, every token that needs a remote key is refused; a failed
//! refresh keeps the last good set (an IdP outage does not lock everyone out, and never widens
//! what is accepted). Shared-secret (`oct`) keys from a URL are never used: a public key set must
//! not be able to introduce an HMAC key (algorithm confusion). Keys Bulkhead cannot use (other
//! algorithms, encryption keys) are skipped; a set with no usable key counts as a failed fetch.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::Validation;
use jsonwebtoken::jwk::{JwkSet, PublicKeyUse};

use super::config::{AuthConfig, KeyAlg, key_label};
use super::jwks::load_jwk;
use super::keys::VerifyKey;

/// Largest JWKS or discovery document read, in bytes.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// Where the key set comes from.
#[derive(Clone, Debug)]
enum Source {
    /// A JWKS URL.
    Url(String),
    /// The `jwks_uri` of the issuer's OIDC discovery document.
    Discovery(String),
}

/// The remote key set of one `auth:` configuration.
pub(crate) struct RemoteKeys {
    source: Source,
    issuer: String,
    client: reqwest::Client,
    keys: RwLock<Arc<Vec<(VerifyKey, Validation)>>>,
    /// When the last fetch started (one at a time; the lock is the single flight).
    last: tokio::sync::Mutex<Option<Instant>>,
    min_refetch: Duration,
    refresh: Duration,
    validation: Box<dyn Fn(KeyAlg) -> Validation + Send + Sync>,
}

impl std::fmt::Debug for RemoteKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteKeys")
            .field("source", &self.source)
            .field("keys", &self.snapshot().len())
            .finish_non_exhaustive()
    }
}

impl RemoteKeys {
    /// The remote source of `config`, if it has one (`jwks_url`, or `oidc_discovery`).
    pub(crate) fn from_config(
        config: &AuthConfig,
        validation: impl Fn(KeyAlg) -> Validation + Send + Sync + 'static,
    ) -> Result<Option<RemoteKeys>, String> {
        let source = match (&config.jwks_url, config.oidc_discovery) {
            (Some(_), true) => {
                return Err("give either `jwks_url` or `oidc_discovery: true`, not both".into());
            }
            (Some(url), false) => Source::Url(check_url("jwks_url", url)?),
            (None, true) => Source::Discovery(check_url("issuer", &config.issuer)?),
            (None, false) => return Ok(None),
        };
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.jwks_timeout_ms.max(1)))
            .redirect(redirects());
        if let Some(path) = &config.jwks_ca_file {
            let pem =
                std::fs::read(path).map_err(|e| format!("jwks_ca_file {}: {e}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                format!("jwks_ca_file {}: not PEM certificates: {e}", path.display())
            })?;
            if certs.is_empty() {
                return Err(format!(
                    "jwks_ca_file {}: no certificate in it",
                    path.display()
                ));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder.build().map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Some(RemoteKeys {
            source,
            issuer: config.issuer.clone(),
            client,
            keys: RwLock::new(Arc::new(Vec::new())),
            last: tokio::sync::Mutex::new(None),
            min_refetch: Duration::from_secs(config.jwks_min_refetch_secs),
            refresh: Duration::from_secs(config.jwks_refresh_secs.max(1)),
            validation: Box::new(validation),
        }))
    }

    /// The keys fetched last (empty until a fetch succeeded).
    pub(crate) fn snapshot(&self) -> Arc<Vec<(VerifyKey, Validation)>> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Fetches the set now unless a fetch started less than `jwks_min_refetch_secs` ago (`force`
    /// skips that check: the schedule and the first fetch). Returns whether the set was replaced.
    pub(crate) async fn refresh(&self, force: bool) -> bool {
        let mut last = self.last.lock().await;
        if !force && last.is_some_and(|t| t.elapsed() < self.min_refetch) {
            return false;
        }
        *last = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), source = ?self.source, "signing keys fetched");
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, source = ?self.source, "signing keys could not be fetched; keeping the last good set");
                false
            }
        }
    }

    /// Refreshes on the schedule until `stop` is cancelled.
    pub(crate) async fn run_schedule(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(self.refresh) => { self.refresh(true).await; }
            }
        }
    }

    async fn fetch(&self) -> Result<Vec<(VerifyKey, Validation)>, String> {
        let url = match &self.source {
            Source::Url(u) => u.clone(),
            Source::Discovery(issuer) => {
                let doc = format!(
                    "{}/.well-known/openid-configuration",
                    issuer.trim_end_matches('/')
                );
                let meta = self.get_json(&doc).await?;
                // OIDC Discovery §4.3: the document's issuer must be exactly the configured one.
                if meta["issuer"].as_str() != Some(self.issuer.as_str()) {
                    return Err(format!("{doc}: `issuer` is not the configured issuer"));
                }
                let jwks = meta["jwks_uri"]
                    .as_str()
                    .ok_or_else(|| format!("{doc}: no `jwks_uri`"))?;
                check_url("jwks_uri", jwks)?
            }
        };
        let value = self.get_json(&url).await?;
        let set: JwkSet =
            serde_json::from_value(value).map_err(|e| format!("{url}: not a JWK set: {e}"))?;
        let mut keys = Vec::new();
        for (index, jwk) in set.keys.iter().enumerate() {
            if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
                continue;
            }
            let label = key_label("jwks_url keys", index, jwk.common.key_id.as_deref());
            match load_jwk(label, jwk) {
                Ok(k) if k.alg == KeyAlg::HS256 => {
                    tracing::warn!(key = %k.label, "shared-secret key in a remote JWKS skipped");
                }
                Ok(k) if k.kid.is_none() && set.keys.len() > 1 => {
                    tracing::warn!(key = %k.label, "remote key without kid skipped (ambiguous in a set)");
                }
                Ok(k) => {
                    let v = (self.validation)(k.alg);
                    keys.push((k, v));
                }
                Err(e) => tracing::debug!(error = %e, "remote key skipped"),
            }
        }
        if keys.is_empty() {
            return Err(format!(
                "{url}: no usable signing key (RS256 or ES256 on P-256)"
            ));
        }
        Ok(keys)
    }

    async fn get_json(&self, url: &str) -> Result<serde_json::Value, String> {
        let mut resp = self
            .client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {}", without_url(&e)))?;
        if !resp.status().is_success() {
            return Err(format!("{url}: HTTP {}", resp.status().as_u16()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("{url}: {}", without_url(&e)))?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("{url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
    }
}

/// At most 3 redirects, each hop held to [`check_url`]'s rule: a provider (or whoever answers
/// for it) cannot send the fetch to plain http off this machine.
fn redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() >= 3 {
            return attempt.error("more than 3 redirects");
        }
        match check_url("a redirect", attempt.url().as_str()) {
            Ok(_) => attempt.follow(),
            Err(why) => attempt.error(why),
        }
    })
}

/// `https://…`, or `http://` to a loopback host (a local IdP or a test); anything else is refused.
fn check_url(field: &str, url: &str) -> Result<String, String> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| format!("{field} `{url}` is not a URL: {e}"))?;
    let loopback = matches!(parsed.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    match parsed.scheme() {
        "https" => Ok(url.to_owned()),
        "http" if loopback => Ok(url.to_owned()),
        _ => Err(format!(
            "{field} `{url}` must be https:// (http:// only to localhost)"
        )),
    }
}

fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    match std::error::Error::source(e) {
        Some(s) => format!("{kind} ({s})"),
        None => kind.to_owned(),
    }
}
