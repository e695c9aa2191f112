//! `bulkhead connect`'s sign-in: the device authorization grant (RFC 8628) at the identity
//! provider, then an exchange at the deployment's token endpoint (RFC 8693) for a session token
//! of a fresh session, refreshed there. Prompts go to stderr: stdout carries MCP.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sessions::Issued;

/// Where and as whom to sign in.
#[derive(Clone, Debug)]
pub struct DeviceLogin {
    /// The provider's issuer (its discovery document names the endpoints).
    pub issuer: String,
    /// The provider's public client for the device grant.
    pub client_id: String,
    /// Scopes asked.
    pub scope: String,
}

/// No redirects: a token request must not be re-sent (307/308) wherever an answer points.
fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client builds")
}

/// The token endpoint only where the provider's token may go: the instance's own origin, or
/// `https` (an authorization server the instance names, reached with TLS). Anything else could
/// be an answer made up to collect the user's provider token.
fn trusted_endpoint(instance: &reqwest::Url, endpoint: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(endpoint).map_err(|e| format!("`{endpoint}`: {e}"))?;
    if url.origin() == instance.origin() || url.scheme() == "https" {
        Ok(endpoint.to_owned())
    } else {
        Err(format!(
            "the token endpoint `{endpoint}` is neither on the instance's origin nor https; refusing to send it your sign-in"
        ))
    }
}

async fn json(resp: reqwest::Response) -> Result<(u16, Value), String> {
    let status = resp.status().as_u16();
    let body = resp
        .json::<Value>()
        .await
        .map_err(|e| format!("answer is not JSON: {e}"))?;
    Ok((status, body))
}

/// Signs the user in with the device grant; the provider's access token. Bounded by the
/// device code's lifetime (and at most 15 minutes).
pub async fn device_login(login: &DeviceLogin) -> Result<String, String> {
    let http = http();
    let discovery = format!(
        "{}/.well-known/openid-configuration",
        login.issuer.trim_end_matches('/')
    );
    let (_, meta) = json(
        http.get(&discovery)
            .send()
            .await
            .map_err(|e| e.to_string())?,
    )
    .await?;
    let (Some(device), Some(token)) = (
        meta["device_authorization_endpoint"].as_str(),
        meta["token_endpoint"].as_str(),
    ) else {
        return Err(format!("{discovery} offers no device authorization"));
    };
    let (status, start) = json(
        http.post(device)
            .form(&[("client_id", &login.client_id), ("scope", &login.scope)])
            .send()
            .await
            .map_err(|e| e.to_string())?,
    )
    .await?;
    let (Some(device_code), Some(user_code), Some(uri)) = (
        start["device_code"].as_str(),
        start["user_code"].as_str(),
        start["verification_uri"].as_str(),
    ) else {
        return Err(format!("device authorization refused ({status}): {start}"));
    };
    eprintln!("bulkhead: to sign in, open {uri} and enter the code {user_code}");
    if let Some(complete) = start["verification_uri_complete"].as_str() {
        eprintln!("bulkhead: or open {complete}");
    }
    let lifetime = start["expires_in"].as_u64().unwrap_or(600).min(900);
    let deadline = Instant::now() + Duration::from_secs(lifetime);
    let mut interval = start["interval"].as_u64().unwrap_or(5).max(1);
    loop {
        if Instant::now() >= deadline {
            return Err("the sign-in was not completed in time".into());
        }
        tokio::time::sleep(Duration::from_secs(interval)).await;
        let (_, got) = json(
            http.post(token)
                .form(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                    ("device_code", device_code),
                    ("client_id", &login.client_id),
                ])
                .send()
                .await
                .map_err(|e| e.to_string())?,
        )
        .await?;
        if let Some(access) = got["access_token"].as_str() {
            eprintln!("bulkhead: signed in");
            return Ok(access.to_owned());
        }
        match got["error"].as_str() {
            Some("authorization_pending") => {}
            Some("slow_down") => interval += 5,
            Some(other) => return Err(format!("sign-in refused: {other}")),
            None => return Err(format!("unexpected answer: {got}")),
        }
    }
}

/// The deployment's token endpoint for the instance at `instance_url`: the authorization server
/// its protected-resource metadata names (RFC 9728, RFC 8414), else `{origin}/token`.
pub async fn token_endpoint(instance_url: &str) -> Result<String, String> {
    let http = http();
    let url = reqwest::Url::parse(instance_url).map_err(|e| e.to_string())?;
    let origin = url.origin().ascii_serialization();
    let prm = format!("{origin}/.well-known/oauth-protected-resource");
    let server = match http.get(&prm).send().await {
        Ok(r) => json(r)
            .await
            .ok()
            .and_then(|(_, m)| m["authorization_servers"][0].as_str().map(str::to_owned)),
        Err(_) => None,
    };
    let base = server.unwrap_or(origin);
    let meta_url = format!(
        "{}/.well-known/oauth-authorization-server",
        base.trim_end_matches('/')
    );
    if let Ok(r) = http.get(&meta_url).send().await
        && let Ok((200, meta)) = json(r).await
        && let Some(endpoint) = meta["token_endpoint"].as_str()
    {
        return trusted_endpoint(&url, endpoint);
    }
    trusted_endpoint(&url, &format!("{}/token", base.trim_end_matches('/')))
}

/// Exchanges the provider's `subject` token for a session token of a fresh session.
pub async fn exchange(token_endpoint: &str, subject: &str) -> Result<Issued, String> {
    let resp = http()
        .post(token_endpoint)
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
        ])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    issued(resp).await
}

/// A refresh at the token endpoint.
pub async fn refresh(
    http: &reqwest::Client,
    token_endpoint: &str,
    refresh_token: &str,
) -> Result<Issued, String> {
    let resp = http
        .post(token_endpoint)
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    issued(resp).await
}

async fn issued(resp: reqwest::Response) -> Result<Issued, String> {
    let (status, body) = json(resp).await?;
    if status != 200 {
        return Err(format!(
            "token endpoint: {status} {} {}",
            body["error"].as_str().unwrap_or(""),
            body["error_description"].as_str().unwrap_or("")
        ));
    }
    serde_json::from_value(body).map_err(|e| format!("token endpoint: {e}"))
}
