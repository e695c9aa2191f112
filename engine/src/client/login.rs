//! `bulkhead connect`'s sign-in at the identity provider: in a browser (the authorization code
//! with PKCE, redirected to a loopback port, RFC 8252) or, with no browser at hand, the device
//! authorization grant (RFC 8628); then an exchange at the deployment's token endpoint
//! (RFC 8693) for a session token of a fresh session, refreshed there. Prompts go to stderr:
//! stdout carries MCP.

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

/// The provider's OpenID metadata: its discovery URL (named in errors) and the document.
async fn provider_metadata(
    http: &reqwest::Client,
    issuer: &str,
) -> Result<(String, Value), String> {
    let discovery = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let (_, meta) = json(
        http.get(&discovery)
            .send()
            .await
            .map_err(|e| e.to_string())?,
    )
    .await?;
    Ok((discovery, meta))
}

/// Signs the user in with the device grant; the provider's access token. Bounded by the
/// device code's lifetime (and at most 15 minutes).
pub async fn device_login(login: &DeviceLogin) -> Result<String, String> {
    let http = http();
    let (discovery, meta) = provider_metadata(&http, &login.issuer).await?;
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

/// The browser sign-in's settings.
#[derive(Clone, Debug)]
pub struct BrowserLogin {
    /// The provider's issuer.
    pub issuer: String,
    /// The provider's public native client (loopback redirect URIs allowed).
    pub client_id: String,
    /// Scopes asked.
    pub scope: String,
}

/// Longest request the loopback listener reads, in bytes.
const MAX_CALLBACK_BYTES: usize = 8192;

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn random(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    b64(&bytes)
}

/// Signs the user in with the authorization code and PKCE: prints the provider's URL (and asks
/// the desktop to open it unless `BULKHEAD_NO_BROWSER` is set), waits at most 10 minutes for the
/// redirect to a loopback port of this process, checks `state` and (RFC 9207) `iss`, and
/// redeems the code; the provider's access token.
pub async fn browser_login(login: &BrowserLogin) -> Result<String, String> {
    use sha2::Digest as _;
    let http = http();
    let issuer = login.issuer.trim_end_matches('/');
    let (discovery, meta) = provider_metadata(&http, issuer).await?;
    let (Some(authorize), Some(token)) = (
        meta["authorization_endpoint"].as_str(),
        meta["token_endpoint"].as_str(),
    ) else {
        return Err(format!(
            "{discovery} names no authorization or token endpoint"
        ));
    };
    let iss_required = meta["authorization_response_iss_parameter_supported"] == true;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on loopback: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let verifier = random(32);
    let challenge = b64(&sha2::Sha256::digest(verifier.as_bytes()));
    let state = random(16);
    let mut url = reqwest::Url::parse(authorize).map_err(|e| e.to_string())?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &login.client_id)
        .append_pair("redirect_uri", &redirect)
        .append_pair("scope", &login.scope)
        .append_pair("state", &state)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    eprintln!("bulkhead: to sign in, open {url}");
    if std::env::var_os("BULKHEAD_NO_BROWSER").is_none() {
        let _ = std::process::Command::new("xdg-open")
            .arg(url.as_str())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    // Each connection is read in its own task, at most 5 s and 8 KiB, at most 16 at once: a
    // local process that connects and stalls cannot hold the port while the browser's redirect
    // waits. Only a redirect carrying this sign-in's `state` counts; an `error` (which anyone who
    // read the `state` could send) is reported and the wait goes on, up to 10 minutes in all.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Callback>(16);
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(16));
    let expected = Expected {
        state: state.clone(),
        issuer: issuer.to_owned(),
        iss_required,
    };
    let acceptor = tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let (tx, expected) = (tx.clone(), expected.clone());
            tokio::spawn(async move {
                let _slot = slot;
                if let Ok(Some(cb)) =
                    tokio::time::timeout(Duration::from_secs(5), answer_callback(conn, &expected))
                        .await
                {
                    let _ = tx.send(cb).await;
                }
            });
        }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    let code = loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(Callback::Code(code))) => break code,
            Ok(Some(Callback::Refused(why))) => {
                eprintln!(
                    "bulkhead: the sign-in answer was refused ({why}); still waiting (Ctrl-C to stop)"
                );
            }
            Ok(None) | Err(_) => {
                acceptor.abort();
                return Err("the sign-in was not completed in time".into());
            }
        }
    };
    acceptor.abort();
    let (status, got) = json(
        http.post(token)
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", &redirect),
                ("client_id", &login.client_id),
                ("code_verifier", &verifier),
            ])
            .send()
            .await
            .map_err(|e| e.to_string())?,
    )
    .await?;
    match got["access_token"].as_str() {
        Some(access) => {
            eprintln!("bulkhead: signed in");
            Ok(access.to_owned())
        }
        None => Err(format!(
            "the provider refused the code ({status}): {}",
            got["error"].as_str().unwrap_or("")
        )),
    }
}

/// What the loopback listener expects of the redirect.
#[derive(Clone)]
struct Expected {
    state: String,
    issuer: String,
    iss_required: bool,
}

/// A redirect of this sign-in.
enum Callback {
    /// The code to redeem.
    Code(String),
    /// An answer that cannot be used, and why (printable, at most 100 characters).
    Refused(String),
}

/// Printable and short: text from the redirect reaches the terminal.
fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_alphanumeric() || " _.:-".contains(*c))
        .take(100)
        .collect()
}

/// Reads one request on the loopback port (at most 8 KiB), answers it, and says what it
/// carried when it is a redirect of this sign-in.
async fn answer_callback(mut conn: tokio::net::TcpStream, expected: &Expected) -> Option<Callback> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_CALLBACK_BYTES {
        match conn.read(&mut chunk).await {
            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let target = head
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("GET "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or("");
    let reply = |status: &str, text: &str| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        )
    };
    let (status, text, outcome) = match target.strip_prefix("/callback?") {
        None => ("404 Not Found", "not here\n", None),
        Some(query) => {
            let q: std::collections::HashMap<String, String> =
                reqwest::Url::parse(&format!("http://127.0.0.1/?{query}"))
                    .map(|u| u.query_pairs().into_owned().collect())
                    .unwrap_or_default();
            let iss_ok = match q.get("iss") {
                Some(iss) => iss.trim_end_matches('/') == expected.issuer,
                None => !expected.iss_required,
            };
            if q.get("state") != Some(&expected.state) {
                ("400 Bad Request", "not this sign-in\n", None)
            } else if !iss_ok {
                (
                    "400 Bad Request",
                    "the answer names another issuer\n",
                    Some(Callback::Refused(
                        "another issuer answered (RFC 9207)".into(),
                    )),
                )
            } else if let Some(error) = q.get("error") {
                (
                    "400 Bad Request",
                    "sign-in refused\n",
                    Some(Callback::Refused(format!(
                        "the provider said {}",
                        printable(error)
                    ))),
                )
            } else if let Some(code) = q.get("code") {
                (
                    "200 OK",
                    "Signed in to Bulkhead. You can close this tab.\n",
                    Some(Callback::Code(code.clone())),
                )
            } else {
                ("400 Bad Request", "no code\n", None)
            }
        }
    };
    let _ = conn.write_all(reply(status, text).as_bytes()).await;
    outcome
}
