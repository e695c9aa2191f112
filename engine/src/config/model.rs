//! The shape of `config.yaml`: auth, HTTP, state locations, presets, stdio identity and the
//! `mcp_servers` client entries. Loaded with `${VAR}` expansion; unknown keys are errors.

use super::{ConfigError, expand};
use crate::auth::AuthConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The engine's development defaults (`engine/src/config/default.yaml`), used when neither a file
/// nor the project's own `config.yaml` is given.
pub const EMBEDDED: &str = include_str!("default.yaml");

/// Whether this is a development or production configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    /// Development: `bulkhead token` may mint tokens from the configured key.
    #[default]
    Development,
    /// Production: no dev tokens.
    Production,
}

/// The whole `config.yaml`.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Development or production.
    #[serde(default)]
    #[schemars(extend("x-review" = "environment"))]
    pub environment: Environment,
    /// Token verification.
    pub auth: AuthConfig,
    /// The deployment's token service: identity provider tokens exchanged for session tokens
    /// (`POST /token`, RFC 8693). Absent: tokens must carry the session claim themselves.
    #[serde(default)]
    pub token_service: Option<crate::sessions::TokenServiceConfig>,
    /// Streamable HTTP settings.
    #[serde(default)]
    pub http: HttpConfig,
    /// Where state lives.
    #[serde(default)]
    pub state: StateConfig,
    /// Context preset overrides.
    #[serde(default)]
    pub context: ContextConfig,
    /// The identity of a stdio session (there is no token on stdio).
    #[serde(default)]
    pub stdio: StdioConfig,
    /// Client entries: how agents reach each server.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerEntry>,
    /// The write-ahead audit log.
    #[serde(default)]
    pub audit: AuditConfig,
    /// Calls over time, shared by every instance and replica of the trust domain (`rate_limits:`;
    /// none by default).
    #[serde(default)]
    pub rate_limits: RateLimitsConfig,
    /// How a person is asked to approve the calls of tools that declare `approval:`.
    #[serde(default)]
    pub approvals: ApprovalsConfig,
    /// Limits on tool calls.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Limits on each session's workspace.
    #[serde(default)]
    pub workspace: WorkspaceConfig,
    /// Traces over OpenTelemetry (off unless an endpoint is set).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// The variables the credentials of this file are read from (`auth.keys[].secret`,
    /// `state.store`), as written before expansion.
    #[serde(skip)]
    #[schemars(skip)]
    pub secret_vars: Vec<String>,
}

/// Approvals (`approvals:`): how long a question stands, and the key that seals the
/// `requestState` of 2026-07-28 clients.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// A file of at least 32 random bytes sealing the question's state (every instance and
    /// replica of the trust domain reads the same file). Unset: in development the first HS256
    /// key of `auth.keys` (with neither, 2026-07-28 clients are refused approval with the
    /// reason); under `environment: production` no key stands in for it, and a server with a
    /// tool that asks for approval refuses to start.
    #[schemars(extend("x-review" = "changed"))]
    pub key_file: Option<PathBuf>,
    /// Seconds a question stands: a later answer is refused (and on 2025-11-25, the wait ends).
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub expiry_secs: u64,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        ApprovalsConfig {
            key_file: None,
            expiry_secs: 300,
        }
    }
}

impl ApprovalsConfig {
    /// The sealing secret: the key file's bytes (at least 32); else, in development, the first
    /// HS256 secret. Under production without the file: refused when `needed` (a tool asks for
    /// approval), none otherwise.
    pub fn secret(
        &self,
        auth: &crate::auth::AuthConfig,
        environment: Environment,
        needed: bool,
    ) -> Result<Option<Vec<u8>>, String> {
        if let Some(path) = &self.key_file {
            let bytes = std::fs::read(path)
                .map_err(|e| format!("approvals.key_file {}: {e}", path.display()))?;
            if bytes.len() < 32 {
                return Err(format!(
                    "approvals.key_file {} holds {} bytes; it needs at least 32 random bytes",
                    path.display(),
                    bytes.len()
                ));
            }
            return Ok(Some(bytes));
        }
        if environment == Environment::Production {
            return match needed {
                true => Err("approvals.key_file is not set: under `environment: production` no other key seals approval questions (the HS256 secret of auth.keys is for development); set approvals.key_file to a file of at least 32 random bytes".into()),
                false => Ok(None),
            };
        }
        Ok(auth
            .keys
            .iter()
            .find_map(|k| k.secret.as_ref())
            .map(|s| s.as_bytes().to_vec()))
    }
}

/// OpenTelemetry traces (`telemetry:`): one span per tool call, exported over OTLP/HTTP.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP traces endpoint, used as given (e.g. `http://collector:4318/v1/traces`);
    /// unset, nothing is exported.
    #[schemars(extend("x-review" = "changed"))]
    pub otlp_endpoint: Option<String>,
    /// Share of calls traced, 0.0–1.0.
    #[schemars(extend("x-review" = "neutral"))]
    pub sample_ratio: f64,
    /// Longest wait of one export, in milliseconds.
    #[schemars(extend("x-review" = "neutral"))]
    pub export_timeout_ms: u64,
    /// Time between two export batches, in milliseconds.
    #[schemars(extend("x-review" = "neutral"))]
    pub batch_delay_ms: u64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: None,
            sample_ratio: 1.0,
            export_timeout_ms: 5000,
            batch_delay_ms: 1000,
        }
    }
}

/// Calls over time (`rate_limits:`): tool calls, resource reads and prompt gets alike, counted
/// in the state store so every instance and replica of the trust domain shares one budget.
/// No limit is on by default.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    /// Each user's calls, over every tool of every server of the trust domain.
    #[schemars(extend("x-review" = "budget"))]
    pub per_user: Option<bulkhead_vocab::RateLimit>,
    /// Each user's calls of one tool (a tool's own `rate_limit:` replaces it for that tool).
    #[schemars(extend("x-review" = "budget"))]
    pub per_user_tool: Option<bulkhead_vocab::RateLimit>,
    /// All users' calls of one tool.
    #[schemars(extend("x-review" = "budget"))]
    pub per_tool: Option<bulkhead_vocab::RateLimit>,
    /// All users' calls of one server.
    #[schemars(extend("x-review" = "budget"))]
    pub per_server: Option<bulkhead_vocab::RateLimit>,
    /// Longest wait, in milliseconds, for the store to count a call; a store slower than this,
    /// or down, refuses the call (fail closed) with a retryable error.
    #[schemars(extend("x-review" = "changed"))]
    pub store_timeout_ms: u64,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        RateLimitsConfig {
            per_user: None,
            per_user_tool: None,
            per_tool: None,
            per_server: None,
            store_timeout_ms: 500,
        }
    }
}

impl RateLimitsConfig {
    /// Each configured limit with the name it has in `config.yaml` (`rate_limits.per_user`).
    pub fn declared(&self) -> impl Iterator<Item = (&'static str, bulkhead_vocab::RateLimit)> {
        [
            ("rate_limits.per_user", self.per_user),
            ("rate_limits.per_user_tool", self.per_user_tool),
            ("rate_limits.per_tool", self.per_tool),
            ("rate_limits.per_server", self.per_server),
        ]
        .into_iter()
        .filter_map(|(n, l)| l.map(|l| (n, l)))
    }

    /// What is wrong with a declared limit, naming it.
    pub fn problem(&self) -> Option<String> {
        self.declared()
            .find_map(|(name, l)| l.problem().map(|p| format!("{name}: {p}")))
    }
}

/// Limits on tool calls (`limits:`).
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Tool calls running at once in this instance; beyond it a call gets a retryable "busy".
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_concurrent_calls: usize,
    /// Bytes one call's streamed result may hold in memory between its producer (a database or
    /// log reader) and the context preset.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub call_memory_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_concurrent_calls: 64,
            call_memory_bytes: 8 << 20,
        }
    }
}

/// Limits on each session's workspace (`workspace:`).
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WorkspaceConfig {
    /// Bytes all files of one session may hold.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_bytes: u64,
    /// Files one session may hold.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_files: u64,
    /// Bytes of one saved result; a longer one is cut there (the preview says so).
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_result_bytes: u64,
    /// Bytes all saved results of one session may hold; the oldest are removed to make room.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub results_max_bytes: u64,
    /// Saved results one session keeps; the oldest are removed beyond it.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub results_max_files: u64,
    /// Free bytes the workspace file system must keep; writes that would go below are refused
    /// (so the state store and the audit log never run out of space because of an agent).
    #[schemars(extend("x-review" = "smaller-is-looser"))]
    pub min_free_bytes: u64,
    /// Largest file `read_file` returns, in bytes.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_read_bytes: u64,
    /// Session directories held open between calls (one descriptor each; the least recently used
    /// is closed first). A held directory is checked on every use and its path opened again
    /// after a second. 0: every call opens its session's path.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub open_dirs: usize,
    /// The host user (uid and gid) that owns workspace files when the server runs as root: the
    /// server and its jails write them through an idmapped view in which this user is root, so
    /// nothing a script writes is root's on the host. Ignored under any other server user (its
    /// own user owns them). Not 0.
    #[schemars(extend("x-review" = "changed"))]
    pub host_uid: u32,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        let d = crate::workspace::DiskLimits::default();
        WorkspaceConfig {
            max_bytes: d.max_bytes,
            max_files: d.max_files,
            max_result_bytes: d.max_result_bytes,
            results_max_bytes: d.results_max_bytes,
            results_max_files: d.results_max_files,
            min_free_bytes: d.min_free_bytes,
            max_read_bytes: crate::workspace::DEFAULT_MAX_READ_BYTES,
            open_dirs: crate::workspace::DEFAULT_OPEN_DIRS,
            host_uid: crate::workspace::DEFAULT_HOST_UID,
        }
    }
}

impl WorkspaceConfig {
    /// The limits the workspace layer enforces.
    pub fn disk_limits(&self) -> crate::workspace::DiskLimits {
        crate::workspace::DiskLimits {
            max_bytes: self.max_bytes,
            max_files: self.max_files.max(1),
            max_result_bytes: self.max_result_bytes.max(1),
            results_max_bytes: self.results_max_bytes,
            results_max_files: self.results_max_files.max(1),
            min_free_bytes: self.min_free_bytes,
        }
    }
}

/// Streamable HTTP settings and the limits on what clients can make grow.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// The URL clients use (for the protected-resource metadata); default from the listen address.
    #[schemars(extend("x-review" = "changed"))]
    pub public_url: Option<String>,
    /// `Host` values accepted (DNS-rebinding protection); compose service names go here.
    #[schemars(extend("x-review" = "allowlist"))]
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted (`scheme://host:port`, `*` for any port); a request carrying
    /// another `Origin` gets 403 (the MCP transport spec's DNS-rebinding defence). Requests
    /// without `Origin` (non-browser clients) are not affected. Defaults to the local origins; an
    /// empty list refuses every `Origin`.
    #[schemars(extend("x-review" = "allowlist"))]
    pub allowed_origins: Vec<String>,
    /// Keep transport sessions (protocol 2025-11-25); each is bound to the token's identity.
    #[schemars(extend("x-review" = "changed"))]
    pub stateful: bool,
    /// Stateless serving answers with one JSON body instead of an SSE stream unless the call
    /// sends progress first.
    #[schemars(extend("x-review" = "neutral"))]
    pub json_response: bool,
    /// Most open TCP connections; beyond it new ones wait in the kernel's backlog.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_connections: usize,
    /// Most connections that have not yet presented a valid token; the oldest is closed to admit
    /// a new one (slow or silent clients cannot crowd out real ones).
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_unauthenticated_connections: usize,
    /// Milliseconds a client has to send a request's headers; also the idle keep-alive timeout.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub header_read_timeout_ms: u64,
    /// Largest request head, in bytes.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_header_bytes: usize,
    /// Largest request body, in bytes (a bigger one gets 413).
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_body_bytes: usize,
    /// Transport sessions open at once on this instance (beyond: 503).
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_sessions: usize,
    /// Transport sessions open at once for one identity (beyond: 429).
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_sessions_per_identity: usize,
    /// Seconds a transport session may stay silent before it is dropped; must exceed the longest
    /// tool call.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub session_idle_timeout_s: u64,
    /// Milliseconds a transport session may have nothing in flight before it is parked: its rmcp
    /// worker ends and only its `initialize` parameters stay (about 1 KB instead of 55–120 KB);
    /// its next request restores it unseen by the client. 0: never park.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub park_after_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            public_url: None,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: default_origins(),
            stateful: true,
            json_response: true,
            max_connections: 1024,
            max_unauthenticated_connections: 256,
            header_read_timeout_ms: 10_000,
            max_header_bytes: 64 << 10,
            max_body_bytes: 4 << 20,
            max_sessions: 10_000,
            max_sessions_per_identity: 32,
            session_idle_timeout_s: 600,
            park_after_ms: 2_000,
        }
    }
}

/// State locations: compliance records and audit log (never inside a workspace), and workspaces.
/// Relative paths are resolved against the configuration file's folder (the working directory for
/// the embedded configuration) when it is loaded, so every process of a deployment agrees.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// Directory of the compliance database, its lock file and the audit log.
    #[schemars(extend("x-review" = "changed"))]
    pub dir: PathBuf,
    /// Root of all workspaces (`<root>/<server>/<user>/<session>`).
    #[schemars(extend("x-review" = "changed"))]
    pub workspaces: PathBuf,
    /// `sqlite` (the embedded default: one host) or a `postgres://…` URL (replicas on many hosts;
    /// `?sslmode=verify-full&sslrootcert=<PEM file>` encrypts and verifies the server, also
    /// through `store_socket`).
    #[schemars(extend("x-review" = "changed"))]
    pub store: String,
    /// A folder holding the PostgreSQL store's Unix socket (`.s.PGSQL.5432`, whatever the URL's
    /// port): the store named by `store` is reached there instead of at its host (an isolated pod, whose relay carries
    /// the socket over tunnels that arrive, `bulkhead relay --tunnel-accept`). Empty: the host.
    #[schemars(extend("x-review" = "changed"))]
    pub store_socket: Option<PathBuf>,
    /// Longest wait, in milliseconds, for a session's lock (held while another call of the session
    /// raises its level) before a call is refused as busy.
    #[schemars(extend("x-review" = "neutral"))]
    pub lock_timeout_ms: u64,
    /// PostgreSQL: most connections per process (each running call holds one).
    #[schemars(extend("x-review" = "neutral"))]
    pub postgres_pool_size: usize,
    /// PostgreSQL: longest wait, in milliseconds, to connect.
    #[schemars(extend("x-review" = "neutral"))]
    pub connect_timeout_ms: u64,
    /// A process keeps a session's shared lock after a call, so that its next calls take no
    /// lock and read nothing, until no call came for this many milliseconds (0: keep nothing).
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub keep_idle_ms: u64,
    /// How often, in milliseconds, a process looks for escalations waiting on the locks it
    /// keeps (and lets go of them): what keeping adds, at most, to an escalation's wait.
    #[schemars(extend("x-review" = "neutral"))]
    pub keep_check_ms: u64,
    /// A kept lock is let go after this many milliseconds however busy its session, so the
    /// store's checks on a read (a rolled-back database) run at least this often.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub keep_max_age_ms: u64,
    /// Most sessions whose lock one process keeps at once.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub max_kept: usize,
    /// The trust domain: every server whose configuration names the same domain (and shares the
    /// state directory or database) keeps one level per agent session, raised by any of them and
    /// read by all. Lowercase letters, digits, `_` and `-`.
    #[schemars(extend("x-review" = "changed"))]
    pub trust_domain: String,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            dir: ".bulkhead/state".into(),
            workspaces: ".bulkhead/workspaces".into(),
            store: "sqlite".into(),
            lock_timeout_ms: 30_000,
            postgres_pool_size: 16,
            connect_timeout_ms: 5_000,
            keep_idle_ms: 50,
            keep_check_ms: 5,
            keep_max_age_ms: 1_000,
            max_kept: 256,
            trust_domain: "default".into(),
            store_socket: None,
        }
    }
}

impl StateConfig {
    /// Where the state of the trust domain lives (every server of it shares the store).
    pub fn location(&self) -> crate::state::StoreLocation {
        if self.store.starts_with("postgres://") || self.store.starts_with("postgresql://") {
            crate::state::StoreLocation::Postgres(crate::state::postgres::PgOptions {
                url: self.store.clone(),
                socket_dir: self
                    .store_socket
                    .clone()
                    .filter(|p| !p.as_os_str().is_empty()),
                pool_size: self.postgres_pool_size,
                connect_timeout: std::time::Duration::from_millis(self.connect_timeout_ms),
            })
        } else {
            crate::state::StoreLocation::sqlite_domain(&self.dir, &self.trust_domain)
        }
    }

    /// The workspace root of `server`.
    pub fn workspace_root(&self, server: &str) -> PathBuf {
        self.workspaces.join(server)
    }

    /// The workspace root `server`'s instance in `mode` writes: `<workspaces>/<server>` for
    /// `full` (the same as [`workspace_root`](Self::workspace_root)), `<workspaces>/<server>.<mode>`
    /// otherwise, so each mode's data can live on its own volume (compose mounts them so).
    pub fn workspace_layer(&self, server: &str, mode: crate::policy::NetworkMode) -> PathBuf {
        self.workspaces
            .join(bulkhead_vocab::workspace_layer(server, mode))
    }

    /// The roots of the less isolated instances of `server`, nearest first: what the instance in
    /// `mode` reads (never writes) so a session that moved up keeps its earlier files.
    pub fn workspace_lower(&self, server: &str, mode: crate::policy::NetworkMode) -> Vec<PathBuf> {
        use crate::policy::NetworkMode;
        [NetworkMode::Proxied, NetworkMode::Full]
            .into_iter()
            .filter(|m| *m < mode)
            .map(|m| self.workspace_layer(server, m))
            .collect()
    }

    /// Makes both paths absolute (relative to `base`) and refuses a state directory inside the
    /// workspaces or the other way round: agents must never reach the compliance records.
    pub fn resolve(&mut self, base: &Path) -> Result<(), String> {
        let d = &self.trust_domain;
        if !bulkhead_lang::check::is_trust_domain(d) {
            return Err(format!(
                "state.trust_domain `{d}`: use 1 to 64 lowercase letters, digits, `_` and `-`"
            ));
        }
        self.dir = absolute(base, &self.dir);
        self.workspaces = absolute(base, &self.workspaces);
        if self.store != "sqlite"
            && !self.store.starts_with("postgres://")
            && !self.store.starts_with("postgresql://")
        {
            return Err(format!(
                "state.store is `{}`: expected `sqlite` or a postgres:// URL",
                crate::state::location::redact_password(&self.store)
            ));
        }
        let (d, w) = (real(&self.dir), real(&self.workspaces));
        if d.starts_with(&w) || w.starts_with(&d) {
            return Err(format!(
                "state.dir ({}) and state.workspaces ({}) must not contain each other: agents could reach the compliance records",
                self.dir.display(),
                self.workspaces.display()
            ));
        }
        Ok(())
    }
}

impl StateConfig {
    /// Refuses connector data (a database file, a log folder) that overlaps the workspaces or the
    /// state directory: a logs connector over the workspaces would read every user's files, and
    /// those of more isolated modes, from a networked instance; one over the state directory, the
    /// compliance records. `path` is made absolute against `base` and symlinks resolved.
    pub fn refuse_data_overlap(
        &self,
        connector: &str,
        setting: &str,
        path: &Path,
        base: &Path,
    ) -> Result<(), String> {
        let data = real(&absolute(base, path));
        for (what, root) in [
            ("state.workspaces", &self.workspaces),
            ("state.dir", &self.dir),
        ] {
            let root = real(root);
            if data.starts_with(&root) || root.starts_with(&data) {
                return Err(format!(
                    "connector `{connector}`'s {setting} ({}) overlaps {what} ({}): its tools would read what that folder keeps from other sessions, modes or the compliance records; point it elsewhere",
                    path.display(),
                    root.display()
                ));
            }
        }
        Ok(())
    }
}

/// `p` made absolute against `base`, with `.` and `..` removed lexically.
fn absolute(base: &Path, p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The path with its longest existing prefix resolved through symlinks.
fn real(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
    let mut out = std::fs::canonicalize(&existing).unwrap_or(existing);
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    out
}

/// The audit log's limits (`audit:`).
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Largest record, in bytes; the detail is cut to fit (arguments are only summarised).
    #[schemars(extend("x-review" = "changed"))]
    pub max_record_bytes: usize,
    /// Size at which the log is rotated, in bytes.
    #[schemars(extend("x-review" = "changed"))]
    pub rotate_bytes: u64,
    /// Rotated files kept (`audit-<server>.jsonl.1` … `.N`).
    #[schemars(extend("x-review" = "smaller-is-looser"))]
    pub keep: usize,
    /// Longest time, in milliseconds, an outcome record waits before it is synced to disk.
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub sync_interval_ms: u64,
    /// Most bytes waiting to be written before every call is refused.
    #[schemars(extend("x-review" = "changed"))]
    pub max_backlog_bytes: usize,
    /// Whether each record carries the hash of the one its writer wrote before it (`bulkhead
    /// audit verify` checks the chain and the heads anchored in the state store).
    #[schemars(extend("x-review" = "on-is-safer"))]
    pub chain: bool,
    /// An Ed25519 private key (PKCS#8 PEM file) that signs every checkpoint; `audit verify`
    /// then needs the signature to match.
    #[schemars(extend("x-review" = "changed"))]
    pub signing_key: Option<PathBuf>,
    /// Seconds a writer's head may go unrefreshed before another writer of its server closes it
    /// as stopped (at its last record in the log); idle writers refresh every third of it.
    #[schemars(extend("x-review" = "changed"))]
    pub lease_secs: u64,
    /// Checkpoints kept in the state store (`verify --anchor` checks an anchor among these, or
    /// a full exported one against the newest).
    #[schemars(extend("x-review" = "smaller-is-looser"))]
    pub checkpoints_kept: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        let d = crate::audit::AuditOptions::default();
        AuditConfig {
            max_record_bytes: d.max_record_bytes,
            rotate_bytes: d.rotate_bytes,
            keep: d.keep,
            sync_interval_ms: d.sync_interval.as_millis() as u64,
            max_backlog_bytes: d.max_backlog_bytes,
            chain: true,
            signing_key: None,
            lease_secs: d.lease.as_secs(),
            checkpoints_kept: d.checkpoints_kept,
        }
    }
}

impl AuditConfig {
    /// The options of the audit writer.
    pub fn options(&self) -> crate::audit::AuditOptions {
        crate::audit::AuditOptions {
            max_record_bytes: self.max_record_bytes.max(512),
            rotate_bytes: self.rotate_bytes.max(4096),
            keep: self.keep.max(1),
            sync_interval: std::time::Duration::from_millis(self.sync_interval_ms.max(1)),
            max_backlog_bytes: self.max_backlog_bytes,
            chain: self.chain,
            signing_key: self.signing_key.clone(),
            lease: std::time::Duration::from_secs(self.lease_secs.max(3)),
            checkpoints_kept: self.checkpoints_kept.max(1),
        }
    }
}

/// Context settings.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// Preset overrides by name (fields of a preset); new names define presets.
    #[serde(default)]
    #[schemars(extend("x-review" = "larger-is-looser"))]
    pub presets: Option<serde_json::Value>,
}

/// The identity used for stdio sessions.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StdioConfig {
    /// User id.
    #[schemars(extend("x-review" = "changed"))]
    pub user: String,
    /// Session id.
    #[schemars(extend("x-review" = "changed"))]
    pub session: String,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            user: "local".into(),
            session: "stdio".into(),
        }
    }
}

/// One `mcp_servers` entry: the URLs of a server's instances.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    /// Always `client`.
    #[serde(rename = "type", default = "client")]
    #[schemars(extend("x-review" = "changed"))]
    pub kind: String,
    /// The full-network instance.
    #[schemars(extend("x-review" = "changed"))]
    pub url: String,
    /// The proxied instance (confidential sessions).
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub url_proxied: Option<String>,
    /// The isolated instance (secret sessions).
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub url_isolated: Option<String>,
    /// Seconds to wait for a result.
    #[serde(default = "sixty")]
    #[schemars(extend("x-review" = "neutral"))]
    pub read_timeout: u64,
    /// Whether `[FATAL] ` results from this server may abort a run.
    #[serde(default)]
    #[schemars(extend("x-review" = "changed"))]
    pub trusted: bool,
}

fn client() -> String {
    "client".into()
}

fn sixty() -> u64 {
    60
}

impl Config {
    /// Parses and expands a configuration text; `origin` names it in errors.
    /// Relative state paths are resolved against the working directory.
    pub fn parse(
        text: &str,
        origin: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Config::parse_at(text, origin, lookup, &cwd)
    }

    /// Like [`parse`](Self::parse); relative state paths are resolved against `base`.
    pub fn parse_at(
        text: &str,
        origin: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
        base: &Path,
    ) -> Result<Config, ConfigError> {
        let (mut value, positions) = super::load_yaml_with_positions(text, origin)?;
        let mut secret_vars = Vec::new();
        let keys: Vec<serde_json::Value> = [
            &value["auth"]["keys"],
            &value["token_service"]["provider"]["keys"],
        ]
        .into_iter()
        .filter_map(serde_json::Value::as_array)
        .flatten()
        .cloned()
        .collect();
        for written in keys
            .iter()
            .map(|k| &k["secret"])
            .chain([&value["state"]["store"]])
            .filter_map(serde_json::Value::as_str)
        {
            secret_vars.extend(super::env::references(written));
        }
        expand(&mut value, lookup)?;
        let mut config: Config = serde_path_to_error::deserialize(value)
            .map_err(|e| super::diagnose::invalid(text, origin, &positions, &e))?;
        config.secret_vars = secret_vars;
        if let Some(problem) = config.rate_limits.problem() {
            return Err(ConfigError::Syntax {
                path: origin.to_string(),
                message: problem,
            });
        }
        if let Some(key) = config.audit.signing_key.as_mut()
            && key.is_relative()
        {
            *key = base.join(&*key);
        }
        if let Some(key) = config.approvals.key_file.as_mut()
            && key.is_relative()
        {
            *key = base.join(&*key);
        }
        if let Some(key) = config
            .token_service
            .as_mut()
            .and_then(|t| t.signing_key_file.as_mut())
            && key.is_relative()
            && !key.as_os_str().is_empty()
        {
            *key = base.join(&*key);
        }
        config
            .state
            .resolve(base)
            .map_err(|message| ConfigError::Syntax {
                path: origin.to_string(),
                message,
            })?;
        Ok(config)
    }

    /// Loads `path` with the process environment, or the embedded configuration when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        Config::load_with(path, &super::env_lookup)
    }

    /// [`load`](Config::load) with variables from `env`.
    pub fn load_with(
        path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.to_path_buf(),
                    source,
                })?;
                let base = std::path::absolute(p)
                    .ok()
                    .and_then(|a| a.parent().map(Path::to_path_buf))
                    .unwrap_or_else(|| PathBuf::from("."));
                Config::parse_at(&text, &p.display().to_string(), env, &base)
            }
            None => Config::parse(EMBEDDED, "config.yaml (embedded)", env),
        }
    }
}

/// The origins a browser on this machine uses: `http://localhost:*`, `http://127.0.0.1:*`,
/// `http://[::1]:*`.
pub fn default_origins() -> Vec<String> {
    ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .map(String::from)
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_config_loads_with_defaults() {
        let c = Config::parse(EMBEDDED, "embedded", &|_| None).unwrap();
        assert_eq!(c.environment, Environment::Development);
        assert!(
            c.mcp_servers.is_empty(),
            "the engine names no project's servers"
        );
        assert!(!c.auth.keys.is_empty());
    }

    #[test]
    fn production_from_env_and_unknown_keys_refused() {
        let c = Config::parse(EMBEDDED, "embedded", &|k| {
            (k == "BULKHEAD_ENV").then(|| "production".to_string())
        })
        .unwrap();
        assert_eq!(c.environment, Environment::Production);
        let bad = format!("{EMBEDDED}\nsurprise: 1\n");
        assert!(Config::parse(&bad, "x", &|_| None).is_err());
    }
}
