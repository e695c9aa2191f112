//! One running upstream: launched over stdio (or reached over Streamable HTTP), its handshake,
//! its bounded tool list, and the handler that answers what it asks of us.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    CallToolResult, ClientConfig, ClientRequest, ElicitRequestParams, ElicitResult,
    ListToolsRequest, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ServerNotification, ServerResult, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use rmcp::{ClientLifecycleMode, ClientServiceExt as _};
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use super::confine::Launch;
use super::{Bounds, Settings, capped::Capped, pin};
use crate::signals::{CallSignals, Unit};

/// Aborts a task when dropped (the subscription reader dies with its upstream).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Both protocol eras: the stateless 2026-07-28 when the upstream answers `server/discover`,
/// else (it says it does not know the method, or says nothing within rmcp's 10 s) the
/// `initialize` handshake of 2025-11-25 and before, whose sessions the upstream keeps.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Pages of `tools/list` read at most (a paging loop is bounded like the count).
const MAX_PAGES: usize = 100;
/// Upstream stderr lines logged per process (the rest are counted).
const STDERR_LINES: u64 = 200;
/// Longest stderr line logged, in bytes.
const STDERR_LINE_BYTES: usize = 2048;
/// Last stderr lines kept to explain a failed start.
const STDERR_TAIL: usize = 8;

/// Longest wait for a failed upstream's stderr to end before its start is explained.
const TAIL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The last lines an upstream wrote to stderr (bounded), to explain a failed start, and whether
/// its stderr has ended.
#[derive(Default)]
struct StderrTail {
    lines: std::sync::Mutex<std::collections::VecDeque<String>>,
    closed: AtomicBool,
    ended: tokio::sync::Notify,
}

type Tail = Arc<StderrTail>;

impl StderrTail {
    fn push(&self, line: String) {
        if let Ok(mut t) = self.lines.lock() {
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(line);
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ended.notify_waiters();
    }

    /// Waits until the upstream's stderr has ended, at most `within` (a failed upstream's last
    /// words arrive after the failure is seen).
    async fn wait_closed(&self, within: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let ended = self.ended.notified();
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return;
            }
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Why a start failed, with what the upstream said and what to do: a program the jail cannot
/// find, or one that downloads at start (`npx`, `uvx`, `pipx`), which a jail (no network) never
/// finishes.
fn explain(failure: String, program: &str, tail: &Tail) -> anyhow::Error {
    let said = tail.lines();
    let mut text = failure;
    if !said.is_empty() {
        text.push_str(&format!("; the upstream said: {}", said.join(" | ")));
    }
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    if said
        .iter()
        .any(|l| l.contains("execvp") && l.contains("No such file"))
    {
        text.push_str(&format!(
            ". `{program}` is not found in the upstream's jail: install the package (the image does from the lock's `package`) and put its program on PATH, or name it by path (the jail sees its install folder)"
        ));
    } else if ["npx", "uvx", "pipx"].contains(&name) {
        text.push_str(&format!(
            ". `{name}` downloads the package at start, and an upstream's jail has no network: install the package at an exact version first (`npm install --prefix <dir> <package>@<version>`, or `pip install` into a virtualenv) and import its program"
        ));
    }
    anyhow::anyhow!(text)
}

/// What we answer an upstream: nothing it asks for is granted. Elicitation is refused, and so
/// are sampling (rmcp's default: method not found) and roots (rmcp's default: none, so host
/// paths never reach an upstream); a tool-list change is noted so the list is read again before
/// the next call.
#[derive(Clone)]
pub struct Watch {
    connector: &'static str,
    changed: Arc<AtomicBool>,
    progress: Progress,
}

/// Where each call in flight takes the upstream's progress notifications: its request's
/// progress token to the call's signals. An entry lives as long as its [`Route`]. A report can
/// come before its route exists (the request is out before its token is known here): the last
/// [`EARLY`] such reports wait for it.
#[derive(Clone, Default)]
pub struct Progress(Arc<std::sync::Mutex<Routes>>);

/// Reports kept for routes not made yet.
const EARLY: usize = 64;

#[derive(Default)]
struct Routes {
    calls: HashMap<ProgressToken, CallSignals>,
    early: std::collections::VecDeque<(ProgressToken, Option<u64>, u64)>,
}

impl Progress {
    /// Sends the progress of the request with `token` to `signals` until the route is dropped.
    pub fn route(&self, token: ProgressToken, signals: &CallSignals) -> Route {
        let mut routes = self.0.lock().expect("progress routes");
        routes.early.retain(|(t, total, done)| {
            if *t == token {
                report(signals, *total, *done);
                false
            } else {
                true
            }
        });
        routes.calls.insert(token.clone(), signals.clone());
        Route {
            routes: self.clone(),
            token,
        }
    }

    fn report(&self, token: ProgressToken, total: Option<u64>, done: u64) {
        let mut routes = self.0.lock().expect("progress routes");
        if let Some(signals) = routes.calls.get(&token) {
            report(signals, total, done);
        } else {
            if routes.early.len() == EARLY {
                routes.early.pop_front();
            }
            routes.early.push_back((token, total, done));
        }
    }
}

fn report(signals: &CallSignals, total: Option<u64>, done: u64) {
    if total.is_some() {
        signals.set_total(Unit::Steps, total);
    }
    // Notifications are handled concurrently: a late one never moves progress back.
    signals.raise_done(Unit::Steps, done);
}

/// One call's progress route; dropped with the call.
pub struct Route {
    routes: Progress,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes
            .0
            .lock()
            .expect("progress routes")
            .calls
            .remove(&self.token);
    }
}

impl ClientHandler for Watch {
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        tracing::warn!(
            connector = self.connector,
            "the upstream asked for elicitation; refused"
        );
        Err(ErrorData::invalid_request(
            "elicitation is not allowed to this server by the Bulkhead policy",
            None,
        ))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.store(true, Ordering::SeqCst);
    }

    /// The upstream's progress on a call in flight goes to that call's signals, as steps (its
    /// message is the upstream's own text, which is never forwarded).
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let whole = |v: f64| {
            if v.is_finite() && v > 0.0 {
                v.min(u64::MAX as f64) as u64
            } else {
                0
            }
        };
        self.progress.report(
            params.progress_token,
            params.total.map(whole),
            whole(params.progress),
        );
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

/// A started upstream and what it lists.
pub struct Live {
    client: RunningService<RoleClient, Watch>,
    protocol: String,
    progress: Progress,
    changed: Arc<AtomicBool>,
    /// Each listed tool's definition and its pin (computed once per list, not per call).
    tools: HashMap<String, (Value, String)>,
    /// When the request of the list in `tools` was sent, if a call's read set it.
    listed_at: Option<std::time::Instant>,
    server: String,
    /// Whether a `tools/list_changed` can reach us: always under the `initialize` era (the
    /// session carries notifications), and under 2026-07-28 only while a `subscriptions/listen`
    /// for it is open. When not, every call reads the list again beside it.
    watched: Arc<AtomicBool>,
    _listen: Option<AbortOnDrop>,
    _child: Option<tokio::process::Child>,
    /// Removed after the process is gone (fields drop in order).
    _cgroup: Option<crate::jail::cgroup::RunCgroup>,
    /// The jail's way out, open while one of the upstream's calls is in flight.
    gate: Option<crate::jail::egress::Gate>,
}

impl Live {
    /// Opens the upstream's way out for one call, until the guard is dropped (`None`: it has
    /// none).
    pub fn during_call(&self) -> Option<crate::jail::egress::CallOpen> {
        self.gate
            .as_ref()
            .map(crate::jail::egress::Gate::during_call)
    }

    /// Launches (or connects to) the upstream, shakes hands and lists its tools, all within
    /// the start bound.
    /// A stdio upstream starts with `launch` (its jail's command).
    pub async fn start(
        connector: &'static str,
        s: &Settings,
        launch: Option<Launch>,
    ) -> anyhow::Result<Live> {
        let bounds = s.bounds();
        let tail = Tail::default();
        let program = s.program();
        let started = tokio::time::timeout(
            bounds.start,
            Live::start_unbounded(connector, s, launch, bounds, tail.clone()),
        )
        .await;
        match started {
            Ok(Ok(live)) => Ok(live),
            Ok(Err(e)) => {
                tail.wait_closed(TAIL_WAIT).await;
                Err(explain(format!("{e:#}"), &program, &tail))
            }
            Err(_) => {
                // The dropped start killed the upstream: its stderr ends now.
                tail.wait_closed(TAIL_WAIT).await;
                Err(explain(
                    format!(
                        "limit `{connector}.start_timeout_ms` ({} ms) reached",
                        bounds.start.as_millis()
                    ),
                    &program,
                    &tail,
                ))
            }
        }
    }

    async fn start_unbounded(
        connector: &'static str,
        s: &Settings,
        launch: Option<Launch>,
        bounds: Bounds,
        tail: Tail,
    ) -> anyhow::Result<Live> {
        let changed = Arc::new(AtomicBool::new(false));
        let progress = Progress::default();
        let watch = Watch {
            connector,
            changed: changed.clone(),
            progress: progress.clone(),
        };
        let mut jail_cgroup = None;
        let mut jail_gate = None;
        let (client, child) = if let Some(Launch {
            mut command,
            _keep,
            cgroup,
            gate,
        }) = launch
        {
            let program = s.program();
            let cmd = &mut command;
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .process_group(0);
            let mut child = cmd
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot launch `{program}`: {e}"))?;
            drop(_keep);
            jail_cgroup = cgroup;
            jail_gate = gate;
            let stdout = child.stdout.take().expect("piped");
            let stdin = child.stdin.take().expect("piped");
            if let Some(stderr) = child.stderr.take() {
                tokio::spawn(log_stderr(connector, stderr, tail));
            }
            let client = watch
                .serve_with_lifecycle(
                    (Capped::new(stdout, bounds.message_bytes), stdin),
                    lifecycle(),
                )
                .await
                .map_err(|e| anyhow::anyhow!("no MCP handshake: {e}"))?;
            (client, Some(child))
        } else {
            let url = s.url.clone().unwrap_or_default();
            let mut config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url);
            if let Some(auth) = s
                .headers
                .as_ref()
                .and_then(|h| h.get("Authorization").or_else(|| h.get("authorization")))
            {
                config = config.auth_header(auth.trim_start_matches("Bearer ").to_string());
            }
            let client = super::super::public_only::client_for(
                s.url.as_deref().unwrap_or_default(),
                &s.reach_private()?,
            )?;
            let transport =
                rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
            let client = watch
                .serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| anyhow::anyhow!("no MCP handshake: {e}"))?;
            (client, None)
        };
        let server = client
            .peer_info()
            .and_then(|i| {
                i.server_info
                    .as_ref()
                    .map(|s| format!("{}@{}", s.name, s.version))
            })
            .unwrap_or_else(|| "unknown@unknown".into());
        let protocol = client
            .peer_info()
            .map(|i| i.protocol_version.as_str().to_string())
            .unwrap_or_default();
        let mut live = Live {
            client,
            protocol,
            progress,
            changed,
            tools: HashMap::new(),
            listed_at: None,
            server,
            watched: Arc::new(AtomicBool::new(true)),
            _listen: None,
            _child: child,
            _cgroup: jail_cgroup,
            gate: jail_gate,
        };
        live.relist(bounds).await?;
        if live.protocol == ProtocolVersion::V_2026_07_28.as_str() {
            live.listen(connector).await;
        }
        Ok(live)
    }

    /// Under 2026-07-28, asks the upstream to tell of tool-list changes on a subscription; an
    /// upstream that does not take it (or that ends it) is listed again before every call.
    async fn listen(&mut self, connector: &'static str) {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        match self.client.peer().listen(filter).await {
            Ok(mut sub) if sub.acknowledged().tools_list_changed.unwrap_or(false) => {
                let (changed, watched) = (self.changed.clone(), self.watched.clone());
                let task = tokio::spawn(async move {
                    while let Ok(Some(n)) = sub.next().await {
                        if matches!(n, ServerNotification::ToolListChangedNotification(_)) {
                            changed.store(true, Ordering::SeqCst);
                        }
                    }
                    watched.store(false, Ordering::SeqCst);
                });
                self._listen = Some(AbortOnDrop(task));
            }
            Ok(_) => {
                tracing::warn!(
                    connector,
                    "the upstream does not tell of tool-list changes; its list is read again beside calls (at least every pin_max_age_ms; an answer is withheld when that list no longer matches the pin)"
                );
                self.watched.store(false, Ordering::SeqCst);
            }
            Err(e) => {
                tracing::warn!(connector, error = %e, "no subscription for tool-list changes; the upstream's list is read again beside calls (at least every pin_max_age_ms; an answer is withheld when that list no longer matches the pin)");
                self.watched.store(false, Ordering::SeqCst);
            }
        }
    }

    /// Reads the tool list again, bounded in pages and tools.
    pub async fn relist(&mut self, bounds: Bounds) -> anyhow::Result<()> {
        let tools = list_tools(self.client.peer(), bounds).await?;
        self.set_tools(tools);
        Ok(())
    }

    /// Takes `tools` as the upstream's current list.
    pub fn set_tools(&mut self, tools: Vec<rmcp::model::Tool>) {
        self.tools = tools
            .into_iter()
            .map(|t| {
                let definition = pin::definition(&t);
                let pin = pin::pin_of(&definition);
                (t.name.to_string(), (definition, pin))
            })
            .collect();
        self.listed_at = None;
    }

    /// Takes `tools`, listed by a request sent at `sent`, as the upstream's current list.
    pub fn set_tools_listed(&mut self, tools: Vec<rmcp::model::Tool>, sent: std::time::Instant) {
        self.set_tools(tools);
        self.listed_at = Some(sent);
    }

    /// Whether the current list was requested at most `max_age` ago (never, for zero).
    pub fn listed_within(&self, max_age: std::time::Duration) -> bool {
        !max_age.is_zero() && self.listed_at.is_some_and(|t| t.elapsed() <= max_age)
    }

    /// Whether the upstream can tell of a changed list (else every call reads it again).
    pub fn watched(&self) -> bool {
        self.watched.load(Ordering::SeqCst)
    }

    /// The live definition of `tool` and its pin, if listed.
    pub fn definition(&self, tool: &str) -> Option<(&Value, &str)> {
        self.tools.get(tool).map(|(d, p)| (d, p.as_str()))
    }

    /// `name@version` from the handshake.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The protocol version the handshake settled on.
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// A handle to call through (cheap to clone; the state lock is not held during calls).
    pub fn peer(&self) -> rmcp::service::Peer<RoleClient> {
        self.client.peer().clone()
    }

    /// Where calls route the upstream's progress.
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }

    /// Whether the connection (or the process) is gone.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed() || self.client.peer().is_transport_closed()
    }

    /// Whether the upstream said its tools changed since the last look (and forget it).
    pub fn take_changed(&self) -> bool {
        self.changed.swap(false, Ordering::SeqCst)
    }
}

/// Every tool `live` lists, bounded.
pub async fn list_tools_of(live: &Live, bounds: Bounds) -> anyhow::Result<Vec<rmcp::model::Tool>> {
    list_tools(live.client.peer(), bounds).await
}

/// Every tool the upstream lists, bounded (tools and pages).
pub async fn list_tools(
    peer: &rmcp::service::Peer<RoleClient>,
    bounds: Bounds,
) -> anyhow::Result<Vec<rmcp::model::Tool>> {
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        // Straight to the upstream: rmcp's `list_tools` answers from a response cache (and
        // from a stale one when the upstream fails), which would hide a changed definition.
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(
            PaginatedRequestParams::default().with_cursor(cursor),
        ));
        let page = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| anyhow::anyhow!("tools/list failed: {e}"))?
            .await_response()
            .await
            .map_err(|e| anyhow::anyhow!("tools/list failed: {e}"))?
        {
            ServerResult::ListToolsResult(page) => page,
            _ => anyhow::bail!("tools/list answered something other than a tool list"),
        };
        out.extend(page.tools);
        if out.len() > bounds.tools {
            anyhow::bail!(
                "the upstream lists more than {} tools (`max_tools`)",
                bounds.tools
            );
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(out),
        }
    }
    anyhow::bail!("the upstream's tool list did not end within {MAX_PAGES} pages")
}

/// Logs the upstream's stderr, a bounded number of bounded lines, keeping the last few in `tail`.
async fn log_stderr(connector: &'static str, stderr: tokio::process::ChildStderr, tail: Tail) {
    let mut lines = tokio::io::BufReader::new(stderr);
    let mut buf = Vec::new();
    let mut seen: u64 = 0;
    loop {
        buf.clear();
        // A line is read whole but kept only up to its bound: the reader's buffer is 8 KiB.
        match read_capped_line(&mut lines, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        seen += 1;
        let text = String::from_utf8_lossy(&buf);
        tail.push(text.trim_end().chars().take(400).collect());
        if seen <= STDERR_LINES {
            tracing::info!(connector, line = %text.trim_end(), "upstream stderr");
        }
    }
    if seen > STDERR_LINES {
        tracing::info!(
            connector,
            suppressed = seen - STDERR_LINES,
            "upstream stderr lines not logged"
        );
    }
    tail.close();
}

/// Reads one line, keeping at most `STDERR_LINE_BYTES` of it; returns the bytes consumed.
async fn read_capped_line(
    r: &mut tokio::io::BufReader<tokio::process::ChildStderr>,
    keep: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let room = STDERR_LINE_BYTES.saturating_sub(keep.len());
        keep.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let n = chunk.len();
        r.consume(n);
        total += n;
        if done {
            return Ok(total);
        }
    }
}

/// The text a model sees of an upstream result: its text blocks, other blocks named.
pub fn text_of(result: &CallToolResult) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        match block.as_text() {
            Some(t) => parts.push(t.text.clone()),
            None => parts.push("[a non-text block of the upstream's result, not passed on]".into()),
        }
    }
    if parts.is_empty()
        && let Some(s) = &result.structured_content
    {
        parts.push(s.to_string());
    }
    parts.join("\n")
}
