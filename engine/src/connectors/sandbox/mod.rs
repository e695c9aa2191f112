//! The `sandbox` connector: a declared program (e.g. `python3 -I -c {code}`) run in a jail of
//! the caller's session over its workspace (see [`crate::jail`] for what the jail is).
//!
//! # Lifecycle (decided here)
//!
//! One jail per call: it starts with the call and everything in it ends with the call (the
//! jail's PID namespace dies with its first process), so no process of a session outlives the
//! call that started it, and nothing needs reaping between calls. A run holds the session's
//! shared pass for its whole life, like every handler, so the session's level cannot change
//! under it.
//!
//! # Follows the ratchet (the invariant, enforced here)
//!
//! A run is stopped, and every process of its jail is dead, before any call of its session
//! anywhere escalates: an escalation waits for the session's lock exclusively (no call of the
//! session may run meanwhile) and says so ([`EscalationWatch`]); a run checks every 50 ms and,
//! when it sees one, kills its jail and waits until the whole PID namespace is gone before it
//! gives its pass back. The escalating call therefore commits, runs and returns its data only
//! after the jail is dead. The next run happens wherever the session's new level sends it, with
//! the workspace copied up (see `workspace::copyup`).

use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use bulkhead_vocab::connector::SandboxSettings;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use super::{ConnectorError, settings};
use crate::errors::ToolError;
use crate::jail::{self, Limits, cgroup, egress};
use crate::policy::NetworkMode;
use crate::server::{BoxFuture, JsonObject, ToolOutput, ToolResult};
use crate::signals::CallSignals;
use crate::tooldef::ConnectorDef;
use crate::workspace::SessionWorkspace;

/// How often a run looks for an escalation, a cancelled call and the workspace quota.
const WATCH_EVERY: Duration = Duration::from_millis(50);
/// Longest wait for the jail to report its first process, and for a killed jail to be gone.
const JAIL_WAIT: Duration = Duration::from_secs(10);
/// Bytes of output kept in a refusal that stopped a run.
const TAIL_BYTES: usize = 2048;

/// Whether a call waits to escalate the session of the running call.
pub trait EscalationWatch: Sync {
    /// True when an escalation of the session waits (or the answer cannot be had: fail closed).
    fn waiting(&self) -> BoxFuture<'_, bool>;
}

/// What a run needs from the call around it.
pub struct JailContext<'a> {
    /// This instance's network mode: the jail's network.
    pub mode: NetworkMode,
    /// Sees an escalation of the session.
    pub watch: &'a dyn EscalationWatch,
}

impl JailContext<'static> {
    /// Outside a call: no network, and no escalation to watch (the caller holds no pass).
    pub fn strictest() -> JailContext<'static> {
        JailContext {
            mode: NetworkMode::None,
            watch: &NoPass,
        }
    }

    /// Outside a call, on an instance in `mode` (a tool of a test or a CLI command).
    pub fn outside_a_call(mode: NetworkMode) -> JailContext<'static> {
        JailContext {
            mode,
            watch: &NoPass,
        }
    }
}

struct NoPass;

impl EscalationWatch for NoPass {
    fn waiting(&self) -> BoxFuture<'_, bool> {
        Box::pin(async { false })
    }
}

/// A built `sandbox` connector.
pub struct Sandbox {
    name: &'static str,
    limits: Limits,
    max_runs: u64,
    runs: Arc<tokio::sync::Semaphore>,
    /// The jails of its runs.
    jailer: jail::Jailer,
}

impl Sandbox {
    /// Reads the limits and finds bubblewrap (`BULKHEAD_BWRAP`, else `bwrap` on `PATH`) and,
    /// for a connector with `egress:`, the forwarder (`lookup` reads `BULKHEAD_JAIL_HELPER`).
    pub fn new(
        def: &'static ConnectorDef,
        s: SandboxSettings,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Sandbox, ConnectorError> {
        let invalid = settings::invalid(def);
        let egress = egress::Egress::new(def.name, &s.egress, lookup).map_err(|reason| {
            ConnectorError::Settings {
                connector: def.name,
                reason,
            }
        })?;
        let limits = Limits {
            cpu_seconds: s.cpu_seconds().map_err(&invalid)?,
            wall: Duration::from_secs(s.wall_seconds().map_err(&invalid)?),
            memory_bytes: s.memory_mb().map_err(&invalid)?.saturating_mul(1 << 20),
            processes: s.processes().map_err(&invalid)?,
            output_bytes: s.output_bytes().map_err(&invalid)?,
            file_bytes: s.file_bytes().map_err(&invalid)?,
        };
        let max_runs = s.max_runs().map_err(&invalid)?;
        let jailer = jail::Jailer::new(def.name, egress, jail::helper_path(lookup));
        tracing::info!(connector = def.name, limits = jailer.limits_described(), bwrap = ?jailer.bwrap(), "sandbox ready");
        Ok(Sandbox {
            name: def.name,
            limits,
            max_runs,
            runs: Arc::new(tokio::sync::Semaphore::new(max_runs as usize)),
            jailer,
        })
    }

    /// Whether a jail can start here (for readiness): bubblewrap is installed and starts.
    pub async fn probe(&self) -> Result<(), String> {
        match self.host_allows().await {
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// What this host lets a jail do, found once by starting jails, strictest first.
    async fn host_allows(&self) -> Result<jail::HostAllows, String> {
        self.jailer.host(JAIL_WAIT).await.map_err(|e| match e {
            jail::LaunchError::NoBubblewrap => e.to_string(),
            // The reason is in the server log; the model gets no host detail.
            _ => "a jail does not start on this host (see the server log)".to_string(),
        })
    }

    /// Runs `command` (with `{param}` elements filled from `args`) in a jail of the session.
    pub async fn run(
        &self,
        command: &[String],
        args: &JsonObject,
        ws: &Arc<SessionWorkspace>,
        cx: &JailContext<'_>,
        signals: &CallSignals,
    ) -> ToolResult {
        if self.jailer.bwrap().is_none() {
            return Err(ToolError::fatal(format!(
                "`{}` cannot run: bubblewrap (`bwrap`) is not installed on this server",
                self.name
            )));
        }
        let argv = fill(command, args)?;
        let _slot = self.runs.clone().try_acquire_owned().map_err(|_| {
            ToolError::retry(format!(
                "limit `{}.max_runs` ({}) reached: that many runs are in progress on this instance; try again shortly",
                self.name, self.max_runs
            ))
        })?;
        {
            let ws = ws.clone();
            tokio::task::spawn_blocking(move || ws.copy_up())
                .await
                .map_err(|e| ToolError::bug(format!("copy-up task: {e}")))?
                .map_err(|e| {
                    if e.is_retryable() {
                        ToolError::retry(e)
                    } else {
                        ToolError::fatal(e)
                    }
                })?;
        }
        // What the host allows is probed first, so its failure reads as the sandbox's (no host
        // detail for the model).
        self.host_allows()
            .await
            .map_err(|e| ToolError::fatal(format!("`{}` cannot run here: {e}", self.name)))?;
        let (info_reader, info_writer) =
            std::io::pipe().map_err(|e| ToolError::fatal(format!("`{}`: pipe: {e}", self.name)))?;
        let info_writer = OwnedFd::from(info_writer);
        let jail::Prepared {
            command: mut cmd,
            keep,
            cgroup,
            gate: _gate,
        } = self
            .jailer
            .prepare(
                jail::Launch {
                    argv: &argv,
                    mode: cx.mode,
                    workspace: Some(ws.jail_bind().map_err(|e| {
                        ToolError::fatal(format!("`{}`: the workspace: {e}", self.name))
                    })?),
                    binds: &[],
                    attach: Vec::new(),
                    run: Some((&self.limits, &info_writer)),
                    proc: false,
                    cgroup: (self.limits.processes, self.limits.memory_bytes),
                    env: None,
                },
                JAIL_WAIT,
            )
            .await
            .map_err(|e| ToolError::fatal(format!("`{}`: {e}", self.name)))?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let started = std::time::Instant::now();
        let mut child = cmd.spawn().map_err(|e| match e.raw_os_error() {
            Some(libc_e2big) if libc_e2big == nix::libc::E2BIG => ToolError::retry(format!(
                "the arguments of `{}` are too long for one program (at most 128 KiB each)",
                self.name
            )),
            _ => ToolError::fatal(format!("`{}`: cannot start the jail: {e}", self.name)),
        })?;
        drop(info_writer);
        drop(keep);
        let init = tokio::task::spawn_blocking(move || read_init_pid(info_reader));
        let init = match tokio::time::timeout(JAIL_WAIT, init).await {
            Ok(Ok(Some(pid))) => rustix::process::Pid::from_raw(pid).and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
            }),
            _ => None,
        };
        // Without its first process the jail cannot be waited for when killed: refuse to run
        // one we cannot follow (unless it is already over, which means every process is gone).
        if init.is_none() && !matches!(child.try_wait(), Ok(Some(_))) {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(JAIL_WAIT, child.wait()).await;
            return Err(ToolError::fatal(format!(
                "`{}`: the jail did not report its first process; the run was stopped",
                self.name
            )));
        }
        let mut guard = JailGuard(init);
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut out_open, mut err_open) = (true, true);
        let mut buf_o = vec![0u8; 16 * 1024];
        let mut buf_e = vec![0u8; 16 * 1024];
        let deadline = tokio::time::sleep(self.limits.wall);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks: u64 = 0;
        let mut exited = None;
        let stop = loop {
            if exited.is_some() && !out_open && !err_open {
                break None;
            }
            tokio::select! {
                r = stdout.read(&mut buf_o), if out_open => match r {
                    Ok(0) | Err(_) => out_open = false,
                    Ok(n) => out.extend_from_slice(&buf_o[..n]),
                },
                r = stderr.read(&mut buf_e), if err_open => match r {
                    Ok(0) | Err(_) => err_open = false,
                    Ok(n) => err.extend_from_slice(&buf_e[..n]),
                },
                status = child.wait(), if exited.is_none() => {
                    exited = Some(status);
                }
                () = &mut deadline => break Some(Stop::Limit("wall_seconds", self.limits.wall.as_secs().to_string())),
                _ = tick.tick() => {
                    ticks += 1;
                    if signals.is_stopped() {
                        break Some(Stop::Cancelled);
                    }
                    if exited.is_none() && cx.watch.waiting().await {
                        break Some(Stop::Escalation);
                    }
                    if ticks.is_multiple_of(4) && exited.is_none()
                        && let Some(over) = over_quota(ws).await
                    {
                        break Some(Stop::Quota(over));
                    }
                }
            }
            if (out.len() + err.len()) as u64 > self.limits.output_bytes {
                break Some(Stop::Limit(
                    "output_bytes",
                    self.limits.output_bytes.to_string(),
                ));
            }
        };
        if stop.is_some() || exited.is_none() {
            kill_jail(&mut child, guard.pidfd()).await;
        }
        guard.disarm();
        let elapsed = started.elapsed();
        let hit = cgroup
            .as_ref()
            .map(cgroup::RunCgroup::limits_hit)
            .unwrap_or_default();
        drop(cgroup);
        let tail = |v: &[u8]| {
            let s = String::from_utf8_lossy(&v[v.len().saturating_sub(TAIL_BYTES)..]).into_owned();
            if s.is_empty() {
                "(none)".to_string()
            } else {
                s
            }
        };
        let name = self.name;
        match stop {
            Some(Stop::Escalation) => {
                return Err(ToolError::retry(format!(
                    "`{name}` was stopped: another call of this session is taking up data of a higher sensitivity, and no run may go on below it. Run it again: it will run where the session's new level allows. Output so far: {}",
                    tail(&out)
                )));
            }
            Some(Stop::Cancelled) => {
                return Err(ToolError::retry(format!("`{name}` was cancelled")));
            }
            Some(Stop::Limit(limit, value)) => {
                let also: String = hit
                    .iter()
                    .map(|h| format!(" (the run also hit `{name}.{h}`)"))
                    .collect();
                return Err(ToolError::retry(format!(
                    "limit `{name}.{limit}` ({value}) reached: the run was stopped after {:.1} s{also}. Output so far: {}",
                    elapsed.as_secs_f64(),
                    tail(&out)
                )));
            }
            Some(Stop::Quota(over)) => {
                return Err(ToolError::retry(format!(
                    "{over}; the run was stopped. Remove files before running again"
                )));
            }
            None => {}
        }
        let status = match exited {
            Some(Ok(s)) => s,
            _ => {
                return Err(ToolError::fatal(format!(
                    "`{name}`: the jail's status was lost"
                )));
            }
        };
        let code = status.code().unwrap_or(-1);
        let mut limit: Option<String> = None;
        if let Some(h) = hit.first() {
            limit = Some(self.limit_text(h));
        } else if code == 128 + 24
            || code == 128 + 9 && elapsed.as_secs() >= self.limits.cpu_seconds
        {
            limit = Some(self.limit_text("cpu_seconds"));
        } else {
            // What a program says when an rlimit refuses it (Python ignores SIGXFSZ, so a file
            // past the limit is EFBIG; an address space past it is MemoryError or ENOMEM).
            let said = String::from_utf8_lossy(&err);
            if code == 128 + 25 || said.contains("File too large") {
                limit = Some(self.limit_text("file_bytes"));
            } else if said.contains("MemoryError") || said.contains("Cannot allocate memory") {
                limit = Some(self.limit_text("memory_mb"));
            } else if said.contains("Resource temporarily unavailable") && said.contains("fork") {
                limit = Some(self.limit_text("processes"));
            }
        }
        let mut result = json!({
            "exit_code": code,
            "stdout": String::from_utf8_lossy(&out),
            "stderr": String::from_utf8_lossy(&err),
        });
        if let Some(l) = limit {
            result["limit"] = Value::String(l);
        }
        Ok(ToolOutput::Json(result))
    }

    fn limit_text(&self, limit: &str) -> String {
        let value = match limit {
            "cpu_seconds" => format!("{} s", self.limits.cpu_seconds),
            "memory_mb" => format!("{} MiB", self.limits.memory_bytes >> 20),
            "processes" => self.limits.processes.to_string(),
            "file_bytes" => format!("{} bytes", self.limits.file_bytes),
            _ => String::new(),
        };
        format!("limit `{}.{limit}` ({value}) reached", self.name)
    }
}

enum Stop {
    Escalation,
    Cancelled,
    Limit(&'static str, String),
    Quota(String),
}

/// Which disk limit the session's files are past, if any (measured off the async workers).
async fn over_quota(ws: &Arc<SessionWorkspace>) -> Option<String> {
    let limits = ws.limits();
    let ws = ws.clone();
    let (usage, free) = tokio::task::spawn_blocking(move || (ws.usage(), ws.free_bytes()))
        .await
        .ok()?;
    if let Some(free) = free
        && free < limits.min_free_bytes
    {
        return Some(format!(
            "limit `workspace.min_free_bytes` ({}) reached: the server's disk is nearly full",
            limits.min_free_bytes
        ));
    }
    let u = usage.ok()?;
    if u.bytes > limits.max_bytes {
        return Some(format!(
            "limit `workspace.max_bytes` ({}) reached: the run's files took this session to {} bytes",
            limits.max_bytes, u.bytes
        ));
    }
    if u.files > limits.max_files {
        return Some(format!(
            "limit `workspace.max_files` ({}) reached: the run's files took this session to {} files",
            limits.max_files, u.files
        ));
    }
    None
}

/// The jail's first process, killed (and waited for, briefly blocking) if the run is dropped
/// before it was reaped: a cancelled call gives its pass back only after its jail is dead, as
/// the pass is dropped after the run's future.
struct JailGuard(Option<OwnedFd>);

impl JailGuard {
    fn pidfd(&self) -> Option<&OwnedFd> {
        self.0.as_ref()
    }

    /// The jail was reaped: nothing to do on drop.
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for JailGuard {
    fn drop(&mut self) {
        if let Some(pidfd) = self.0.take() {
            let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
            let mut fds = [rustix::event::PollFd::new(
                &pidfd,
                rustix::event::PollFlags::IN,
            )];
            let timeout = rustix::event::Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            };
            let _ = rustix::event::poll(&mut fds, Some(&timeout));
        }
    }
}

/// Kills every process of the jail and waits until they are gone: SIGKILL to the jail's first
/// process ends its PID namespace (the kernel kills the rest and reaps them before that process
/// is gone), then bubblewrap exits and is reaped.
async fn kill_jail(child: &mut tokio::process::Child, init: Option<&OwnedFd>) {
    if let Some(pidfd) = init {
        let _ = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL);
    }
    let _ = child.start_kill();
    let _ = tokio::time::timeout(JAIL_WAIT, child.wait()).await;
    if let Some(pidfd) = init {
        // Readable once the first process has exited, which is after the namespace is empty.
        let _ = tokio::time::timeout(JAIL_WAIT, wait_readable(pidfd)).await;
    }
}

async fn wait_readable(fd: &OwnedFd) {
    let Ok(fd) = fd.try_clone() else { return };
    let _ = tokio::task::spawn_blocking(move || {
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: JAIL_WAIT.as_secs() as _,
            tv_nsec: 0,
        };
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
    })
    .await;
}

/// The host PID of the jail's first process, from bubblewrap's `--info-fd` JSON.
fn read_init_pid(mut reader: std::io::PipeReader) -> Option<i32> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    while buf.len() < 4096 {
        let n = reader.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.contains(&b'}') {
            break;
        }
    }
    let v: Value = serde_json::from_slice(&buf).ok()?;
    v.get("child-pid")?
        .as_i64()
        .and_then(|p| i32::try_from(p).ok())
}

/// The command with every `{param}` element replaced by its argument's value.
fn fill(command: &[String], args: &JsonObject) -> Result<Vec<String>, ToolError> {
    command
        .iter()
        .map(|part| {
            let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) else {
                return Ok(part.clone());
            };
            let value = match args.get(name) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => {
                    return Err(ToolError::retry(format!("`{name}` is required")));
                }
                Some(v) => v.to_string(),
            };
            if value.contains('\0') {
                return Err(ToolError::retry(format!(
                    "`{name}` contains a NUL character, which no program argument can hold"
                )));
            }
            Ok(value)
        })
        .collect()
}
