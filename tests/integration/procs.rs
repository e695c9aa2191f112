//! Real `bulkhead serve` processes of one deployment sharing one state store (SQLite files or a
//! real PostgreSQL), a real webhook receiver counting deliveries, real rmcp clients. Processes can
//! be started with a failpoint that kills them with SIGKILL at an exact step.

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[path = "../support/pg.rs"]
pub mod pg;

pub use super::harness::{SECRET, token};

/// Which state store the deployment uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    Sqlite,
    Postgres,
}

/// A deployment's files: config, state, workspaces, sample data.
pub struct Deployment {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub pg_url: Option<String>,
    pub webhook: Arc<Webhook>,
    env: Vec<(String, String)>,
}

/// A running instance.
pub struct Proc {
    pub child: Child,
    pub url: String,
    pub base: String,
    pub log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits (bounded) for the process to end; returns how.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Stops the process with SIGTERM (a graceful stop: the audit writer closes its chain) and
    /// waits for it, bounded.
    pub fn stop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::SIGTERM,
        );
        assert!(
            self.wait_exit(Duration::from_secs(20)).is_some(),
            "the instance did not stop within 20 s"
        );
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// One delivery the webhook received.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub message: String,
    pub at: Instant,
}

/// A stand-in for the team's webhook: records every POST, optionally answering slowly.
pub struct Webhook {
    pub url: String,
    pub deliveries: Mutex<Vec<Delivery>>,
    pub delay: Mutex<Duration>,
    stop: CancellationToken,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Webhook {
    pub async fn start() -> Arc<Webhook> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hook = Arc::new(Webhook {
            url: format!("http://{addr}"),
            deliveries: Mutex::new(Vec::new()),
            delay: Mutex::new(Duration::ZERO),
            stop: CancellationToken::new(),
        });
        let h = hook.clone();
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let h = h.clone();
            async move {
                let delay = *h.delay.lock().unwrap();
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                h.deliveries.lock().unwrap().push(Delivery {
                    message: v["message"].as_str().unwrap_or_default().to_owned(),
                    at: Instant::now(),
                });
                axum::Json(json!({"delivered": true}))
            }
        });
        let stop = hook.stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        });
        hook
    }

    pub fn delivered(&self, needle: &str) -> Vec<Delivery> {
        self.deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|d| d.message.contains(needle))
            .cloned()
            .collect()
    }
}

impl Deployment {
    pub async fn new(store: Store, tag: &str) -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let webhook = Webhook::start().await;
        let pg_url = (store == Store::Postgres).then(|| pg::database(tag));
        let store_line = pg_url.as_deref().unwrap_or("sqlite");
        let config = d.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "auth:\n  issuer: test-issuer\n  audience: bulkhead-test\n  keys:\n    - {{ kid: dev, alg: HS256, secret: {SECRET} }}\nhttp:\n  allowed_hosts: [localhost, 127.0.0.1]\n  stateful: true\nstate:\n  dir: state\n  workspaces: workspaces\n  store: \"{store_line}\"\n  lock_timeout_ms: 20000\naudit:\n  sync_interval_ms: 50\n"
            ),
        )
        .unwrap();
        let records = d.join("records.db");
        let conn = rusqlite::Connection::open(&records).unwrap();
        conn.execute_batch(
            "CREATE TABLE records (id INTEGER PRIMARY KEY, title TEXT NOT NULL, owner TEXT NOT NULL);
             INSERT INTO records (title, owner) VALUES ('Acme renewal #100', 'ana'), ('Globex audit #101', 'ben');",
        )
        .unwrap();
        std::fs::create_dir_all(d.join("logs")).unwrap();
        std::fs::write(d.join("logs/app.log"), "2026-11-22T08:00:00Z INFO up\n").unwrap();
        std::fs::create_dir_all(d.join("security-logs")).unwrap();
        std::fs::write(
            d.join("security-logs/auth.log"),
            "2026-11-22T09:00:00Z WARN login failed for ana\n",
        )
        .unwrap();
        let env = vec![
            ("RECORDS_DB".into(), records.display().to_string()),
            ("APP_LOG_DIR".into(), d.join("logs").display().to_string()),
            (
                "SECURITY_LOG_DIR".into(),
                d.join("security-logs").display().to_string(),
            ),
            ("WEBHOOK_URL".into(), webhook.url.clone()),
            // The stand-in services listen on loopback, which the http connectors refuse
            // unless their `reach_private` opens it.
            ("WEBHOOK_REACH_PRIVATE".into(), "127.0.0.0/8".into()),
            ("CRM_API_REACH_PRIVATE".into(), "127.0.0.0/8".into()),
            ("BULKHEAD_LOG".into(), "warn".into()),
        ];
        Deployment {
            dir,
            config,
            pg_url,
            webhook,
            env,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Serves statelessly from now on (`http.stateful: false`): what replicas behind a load
    /// balancer run, every request on its own.
    pub fn set_stateless(&self) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        std::fs::write(
            &self.config,
            text.replace("stateful: true", "stateful: false"),
        )
        .unwrap();
    }

    /// Adds `yaml` (top-level sections) to the configuration of the instances started from now on.
    pub fn append_config(&self, yaml: &str) {
        let mut text = std::fs::read_to_string(&self.config).unwrap();
        text.push_str(yaml);
        std::fs::write(&self.config, text).unwrap();
    }

    /// Replaces `from` with `to` in the configuration.
    pub fn edit_config(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        assert!(text.contains(from), "{from:?} not in {text}");
        std::fs::write(&self.config, text.replace(from, to)).unwrap();
    }

    /// Runs `bulkhead <args>` with this deployment's configuration; returns (exit code, stdout
    /// and stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String) {
        cli_at(&self.config, &self.env, args)
    }

    /// Leaves a variable out of the instances started from now on (they get this process's).
    pub fn unset_env(&mut self, key: &str) {
        self.env.retain(|(k, _)| k != key);
    }

    /// Sets (or replaces) a variable of the instances started from now on.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
    }

    /// `bulkhead serve template --mode <mode>` on a free port; `kill_at` names a failpoint where
    /// the process kills itself with SIGKILL.
    pub fn start(&self, mode: &str, kill_at: Option<&str>) -> Proc {
        self.try_start(mode, kill_at)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_start(&self, mode: &str, kill_at: Option<&str>) -> Result<Proc, String> {
        self.try_start_server("template", mode, kill_at)
    }

    /// `bulkhead serve <server> --mode <mode>` on a free port.
    pub fn try_start_server(
        &self,
        server: &str,
        mode: &str,
        kill_at: Option<&str>,
    ) -> Result<Proc, String> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = self.path().join(format!("{mode}-{n}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bulkhead"));
        cmd.args([
            "--config",
            self.config.to_str().unwrap(),
            "serve",
            server,
            "--mode",
            mode,
        ])
        .args(["--listen", "127.0.0.1:0", "--unisolated"])
        .current_dir(self.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(fp) = kill_at {
            cmd.env("BULKHEAD_KILL_AT", fp);
        }
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| l.contains("/mcp  (health")) {
                let url = line
                    .split(" at ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .unwrap()
                    .to_owned();
                let base = url.trim_end_matches("/mcp").to_owned();
                return Ok(Proc {
                    child,
                    url,
                    base,
                    log,
                });
            }
            if let Some(status) = child.try_wait().unwrap() {
                return Err(format!(
                    "`serve --mode {mode}` exited with {status}: {text}"
                ));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!("`serve --mode {mode}` did not start: {text}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The session's committed level, read from the store by this (test) process.
    pub async fn committed(&self, user: &str, session: &str) -> bulkhead::policy::Sensitivity {
        let who = bulkhead::identity::Identity::new(user, session).unwrap();
        let store = self.open_store().await;
        store.level(&who).await.unwrap()
    }

    pub async fn open_store(&self) -> bulkhead::state::StateStore {
        let config = bulkhead::config::Config::load(Some(&self.config)).unwrap();
        bulkhead::serve::open_state(
            &config,
            "template",
            bulkhead::policy::NetworkMode::Full,
            bulkhead::state::InitPolicy::MustExist,
        )
        .await
        .unwrap()
    }

    /// A connection to the deployment's PostgreSQL store (a PostgreSQL deployment only).
    pub async fn pg_client(&self) -> tokio_postgres::Client {
        let url = self.pg_url.as_deref().expect("a PostgreSQL deployment");
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
    }

    /// Every audit record of the deployment (file or table), in write order.
    pub async fn audit(&self) -> Vec<Value> {
        match &self.pg_url {
            None => std::fs::read_to_string(self.path().join("state/audit-template.jsonl"))
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            Some(_) => {
                let client = self.pg_client().await;
                client
                    .query(
                        "SELECT record::text FROM bulkhead_audit_records ORDER BY id",
                        &[],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| serde_json::from_str(r.get::<_, &str>(0)).unwrap())
                    .collect()
            }
        }
    }
}

/// Runs `bulkhead --config <config> <args>` in the config's folder with `env`; returns (exit
/// code, stdout and stderr).
pub fn cli_at(config: &Path, env: &[(String, String)], args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .arg("--config")
        .arg(config)
        .args(args)
        .current_dir(config.parent().expect("a config file in a folder"))
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

pub type Client = RunningService<rmcp::RoleClient, ()>;

pub async fn client(url: &str, user: &str, session: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token(user, session)),
    );
    ().serve(transport).await.expect("client connects")
}

/// The result of one call: `Err` when the transport failed (the server died).
#[derive(Debug)]
pub struct Reply {
    pub is_error: bool,
    pub text: String,
    pub level: String,
}

/// One call, bounded in time: a client whose server died may otherwise wait to resume its stream.
pub async fn call(c: &Client, tool: &str, args: Value) -> Result<Reply, String> {
    call_within(c, tool, args, Duration::from_secs(20)).await
}

/// One call that gives up after `within`.
pub async fn call_within(
    c: &Client,
    tool: &str,
    args: Value,
    within: Duration,
) -> Result<Reply, String> {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let Value::Object(m) = args {
        params = params.with_arguments(m);
    }
    let r = tokio::time::timeout(within, c.call_tool(params))
        .await
        .map_err(|_| format!("no answer within {within:?}"))?
        .map_err(|e| e.to_string())?;
    Ok(Reply {
        is_error: r.is_error.unwrap_or(false),
        text: r
            .content
            .iter()
            .filter_map(|b| b.as_text().map(|t| t.text.clone()))
            .collect(),
        level: r
            .meta
            .as_ref()
            .and_then(|m| m.0.get("bulkhead/sensitivity"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    })
}

/// Opens a client, makes one call, closes it.
pub async fn one_call(
    url: &str,
    user: &str,
    session: &str,
    tool: &str,
    args: Value,
) -> Result<Reply, String> {
    one_call_within(url, user, session, tool, args, Duration::from_secs(20)).await
}

/// [`one_call`] that gives up on the call after `within` (for calls to a server being killed).
pub async fn one_call_within(
    url: &str,
    user: &str,
    session: &str,
    tool: &str,
    args: Value,
    within: Duration,
) -> Result<Reply, String> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token(user, session)),
    );
    let c = tokio::time::timeout(Duration::from_secs(20), ().serve(transport))
        .await
        .map_err(|_| "no initialize answer within 20 s".to_string())?
        .map_err(|e| e.to_string())?;
    let r = call_within(&c, tool, args, within).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), c.cancel()).await;
    r
}

pub fn notify(msg: &str) -> Value {
    json!({"channel": "ops", "message": msg})
}

pub fn load(name: &str) -> Value {
    json!({"dataset_name": name})
}
