//! The jail: one mechanism for every process we run but did not write (a `sandbox` run, a
//! launched upstream MCP server), and one launch sequence ([`Jailer::prepare`]).
//!
//! What the jail is (and the one place it is decided):
//! - new user, mount, PID, IPC, UTS and cgroup namespaces; no capabilities; no new privileges
//!   (bubblewrap always sets `PR_SET_NO_NEW_PRIVS`, so a setuid binary gains nothing); no further
//!   user namespaces inside;
//! - a read-only system (`/usr` and the links into it, the dynamic loader's cache, the public CA
//!   certificates and the time zone), a fresh `/dev`, a private size-bounded `/tmp`, and a fresh
//!   `/proc` of its own PID namespace when the host allows one: nothing of the host's processes,
//!   state store, audit log, secrets or other sessions is in view;
//! - the session's folder of this instance's layer at `/workspace`, bound by descriptor, the
//!   only writable place that outlives the run;
//! - a network namespace of its own with only loopback, on every mode and even on an instance
//!   started `--unisolated`: no host address (not the host's 127.0.0.1), no host abstract Unix
//!   socket, no name resolution files. A jail whose connector declares `egress:` also gets its
//!   gate's socket folder at `/run/bulkhead` and the forwarder ([`super::forward`]) as its first
//!   program, so its only way out is the gate ([`super::egress`]);
//! - an environment of exactly what its caller sets: bubblewrap itself is started with an
//!   empty one (the jail's PID 1 is bubblewrap, and `/proc/1/environ` is readable in the jail),
//!   so nothing of the server's environment (signing keys, connector secrets, the state
//!   store's URL) is in view of any process of the jail;
//! - read-only (or, when a spec says so, writable) binds of named host folders at the same path,
//!   for a program installed outside `/usr` (an upstream MCP server's virtualenv or
//!   `node_modules`);
//! - limits set on the bubblewrap process before it starts, inherited by everything in the jail
//!   (rlimits: CPU seconds, address space, file size, open files, no core dumps); a run's process
//!   limit set by `prlimit` inside the jail's own user namespace ([`bwrap::PRLIMIT`]), so the
//!   kernel counts only the jail's processes against it (set from outside only where `prlimit` is
//!   missing); and, where the host lets this process write cgroups, a cgroup of its own
//!   (processes, memory).

pub mod bounds;
pub mod bwrap;
pub mod cgroup;
pub mod egress;
pub mod forward;
pub mod seccomp;

pub use bwrap::{
    Bind, HELPER_IN_JAIL, HostAllows, HostProbe, Layout, MAX_FILTERS, PreExec, Way, args,
    bwrap_path, filter_pipe, helper_path, probe, proxy_env,
};

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::policy::NetworkMode;

/// The limits of one run.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// CPU seconds.
    pub cpu_seconds: u64,
    /// Wall time.
    pub wall: Duration,
    /// Address space (rlimit, per process) and memory (cgroup, whole run), bytes.
    pub memory_bytes: u64,
    /// Processes and threads at once.
    pub processes: u64,
    /// Output bytes, stdout and stderr together.
    pub output_bytes: u64,
    /// Largest file written.
    pub file_bytes: u64,
}

/// What one jail runs, and with what.
pub struct Launch<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// The network mode of the instance it runs on (its way out follows it).
    pub mode: NetworkMode,
    /// The session's folder, mounted at `/workspace`, when the jail has one.
    pub workspace: Option<WorkspaceBind<'a>>,
    /// Host folders bound at the same path.
    pub binds: &'a [Bind],
    /// Detached mounts attached over some of those folders first (under a root server, the
    /// idmapped views of the writable ones), parents first.
    pub attach: Vec<Attach>,
    /// A run's limits (rlimits) and the pipe bubblewrap reports the jail's first process on; a
    /// long-lived jail (an upstream) has neither and is bounded by its cgroup.
    pub run: Option<(&'a Limits, &'a OwnedFd)>,
    /// Whether the jail gets a `/proc` (where the host allows one): its mount table names the
    /// host paths its folders come from, so only a jail whose program needs one has it.
    pub proc: bool,
    /// Processes and bytes of memory of the whole jail (its cgroup, where one can be made).
    pub cgroup: (u64, u64),
    /// The program's whole environment, when the caller decides it; else a fresh minimal one.
    pub env: Option<&'a [(String, String)]>,
}

/// How a session's folder reaches a jail's `/workspace`
/// ([`SessionWorkspace::jail_bind`](crate::workspace::SessionWorkspace::jail_bind)).
pub enum WorkspaceBind<'a> {
    /// The open folder, bound by descriptor.
    Open(BorrowedFd<'a>),
    /// A detached (idmapped) mount of it, attached over the empty folder `at` in the jail's
    /// own mount namespace before bubblewrap starts, then bound from there.
    Staged {
        /// The detached mount.
        tree: OwnedFd,
        /// The host path of the empty folder it is attached over.
        at: std::ffi::CString,
    },
}

/// A detached mount (an idmapped view of a folder) and the host folder it is attached over in
/// the jail's own mount namespace before bubblewrap starts.
pub struct Attach {
    /// The detached mount.
    pub tree: OwnedFd,
    /// The host path of the folder it covers.
    pub at: std::ffi::CString,
}

/// A jail ready to start: its command, the descriptors it needs until it has started, its
/// cgroup and its way out (both kept as long as the jail runs).
pub struct Prepared {
    /// bubblewrap with its arguments, environment and pre-exec set-up (stdio is the caller's).
    pub command: tokio::process::Command,
    /// Descriptors the command reads at start.
    pub keep: Vec<OwnedFd>,
    /// The jail's cgroup.
    pub cgroup: Option<cgroup::RunCgroup>,
    /// The jail's egress gate.
    pub gate: Option<egress::Gate>,
}

/// Why a jail cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// bubblewrap is not installed.
    #[error("bubblewrap (`bwrap`) is not installed")]
    NoBubblewrap,
    /// No jail starts on this host.
    #[error("a jail does not start on this host: {0}")]
    Host(String),
    /// The session's folder cannot be handed over.
    #[error("the session's folder: {0}")]
    Workspace(std::io::Error),
    /// A system-call filter cannot be handed over.
    #[error("seccomp filter: {0}")]
    Filter(std::io::Error),
    /// The egress gate cannot be opened.
    #[error("cannot open the jail's egress gate: {0}")]
    Gate(std::io::Error),
    /// The jail may go out but its forwarder is missing.
    #[error("the forwarder of its `egress` (`bulkhead`, or BULKHEAD_JAIL_HELPER) is not found")]
    NoForwarder,
    /// The cgroup cannot be made.
    #[error("cannot make the jail's cgroup: {0}")]
    Cgroup(std::io::Error),
    /// A limit cannot be enforced on this host (see [`bounds`]).
    #[error("the jail does not start: {0}")]
    Unbounded(String),
}

/// What every jail of one connector shares: bubblewrap, what the host allows (probed once),
/// the compiled system-call filters, where cgroups are made, and the declared way out.
pub struct Jailer {
    connector: &'static str,
    bwrap: Option<PathBuf>,
    host: HostProbe,
    filters: Vec<Vec<u8>>,
    cgroups: cgroup::Parents,
    egress: egress::Egress,
    helper: Option<PathBuf>,
}

impl Jailer {
    /// The jails of `connector`, reaching `egress` through the forwarder `helper`.
    pub fn new(connector: &'static str, egress: egress::Egress, helper: Option<PathBuf>) -> Jailer {
        let filters = seccomp::programs().unwrap_or_else(|e| {
            tracing::warn!(connector, error = %e, "jails run without a system-call filter");
            Vec::new()
        });
        Jailer {
            connector,
            bwrap: bwrap_path(),
            host: HostProbe::default(),
            filters,
            cgroups: cgroup::Parents::detect(),
            egress,
            helper,
        }
    }

    /// bubblewrap, when installed.
    pub fn bwrap(&self) -> Option<&Path> {
        self.bwrap.as_deref()
    }

    /// What bounds a jail here (cgroups, or rlimits only).
    pub fn limits_described(&self) -> &'static str {
        self.cgroups.describe()
    }

    /// What this host lets a jail do (probed once, each try bounded by `wait`).
    pub async fn host(&self, wait: Duration) -> Result<HostAllows, LaunchError> {
        let bwrap = self.bwrap.as_ref().ok_or(LaunchError::NoBubblewrap)?;
        self.host
            .get(bwrap, wait, self.connector)
            .await
            .map_err(LaunchError::Host)
    }

    /// The one launch sequence: host allowances, filters, the way out, the cgroup, the layout,
    /// the pre-exec set-up and bubblewrap's command, started with an empty environment
    /// (bubblewrap is the jail's PID 1 and its environment is readable in the jail).
    pub async fn prepare(
        &self,
        launch: Launch<'_>,
        wait: Duration,
    ) -> Result<Prepared, LaunchError> {
        let host = self.host(wait).await?;
        let bwrap = self.bwrap.as_ref().ok_or(LaunchError::NoBubblewrap)?;
        let mut keep: Vec<OwnedFd> = Vec::new();
        let (workspace, stage) = match launch.workspace {
            Some(WorkspaceBind::Open(fd)) => (
                Some(fd.try_clone_to_owned().map_err(LaunchError::Workspace)?),
                None,
            ),
            Some(WorkspaceBind::Staged { tree, at }) => (Some(tree), Some(at)),
            None => (None, None),
        };
        let filters = self
            .filters
            .iter()
            .map(|bytes| filter_pipe(bytes))
            .collect::<Result<Vec<_>, _>>()
            .map_err(LaunchError::Filter)?;
        // A run is a call; a long-lived jail reaches out only while one of its calls runs.
        let gate = if launch.run.is_some() {
            self.egress.gate(launch.mode)
        } else {
            self.egress.gate_while_calls(launch.mode)
        }
        .map_err(LaunchError::Gate)?;
        let helper = match (&gate, &self.helper) {
            (None, _) => None,
            (Some(_), Some(h)) => Some(h.as_path()),
            (Some(_), None) => return Err(LaunchError::NoForwarder),
        };
        let cgroup = self
            .cgroups
            .create(launch.cgroup.0, launch.cgroup.1)
            .map_err(LaunchError::Cgroup)?;
        // Without a cgroup, rlimits inside the jail's user namespace bound it, or it does not
        // start ([`bounds`]).
        let has_prlimit = Path::new(bwrap::PRLIMIT).is_file();
        let rlimits = match &cgroup {
            Some(_) => None,
            None => {
                let b = bounds::without_cgroup(
                    launch.cgroup.0,
                    launch.cgroup.1,
                    launch.run.is_some(),
                    nix::unistd::geteuid().is_root(),
                )
                .map_err(LaunchError::Unbounded)?;
                if !has_prlimit && launch.run.is_none() {
                    return Err(LaunchError::Unbounded(format!(
                        "`processes` cannot be enforced here: no cgroup can be made and `{}` (util-linux) is missing",
                        bwrap::PRLIMIT
                    )));
                }
                if launch.run.is_none() {
                    tracing::warn!(
                        connector = self.connector,
                        processes = b.processes,
                        address_space = b.address_space,
                        "no cgroup here: the jail's memory is bounded per process (RLIMIT_AS), not in total"
                    );
                }
                Some(b)
            }
        };
        // A run's limits with its memory split where there is no cgroup.
        let run_limits = launch.run.map(|(limits, info)| {
            let mut l = *limits;
            if let Some(b) = rlimits {
                l.processes = b.processes;
                l.memory_bytes = b.address_space;
            }
            (l, info)
        });
        // A run's process limit is set inside its user namespace when `prlimit` is there.
        let nproc_in_jail = launch.run.is_some() && has_prlimit;
        let layout = Layout {
            processes: match (&run_limits, rlimits) {
                (Some((limits, _)), _) if nproc_in_jail => Some((limits.processes, None)),
                (None, Some(b)) => Some((b.processes, Some(b.address_space))),
                _ => None,
            },
            way_out: gate.as_ref().zip(helper).map(|(g, helper)| Way {
                socket_dir: g.dir(),
                helper,
            }),
            host,
            workspace: workspace.as_ref().map(|f| {
                use std::os::fd::AsFd as _;
                f.as_fd()
            }),
            info: launch.run.is_some(),
            proc: launch.proc,
            filters: filters.len(),
            binds: launch.binds,
            inherit_env: launch.env.is_some(),
        };
        let pre = match &run_limits {
            Some((limits, info)) => PreExec::new(
                limits,
                layout.workspace,
                info,
                &filters,
                cgroup.as_ref(),
                nproc_in_jail,
            ),
            None => PreExec::descriptors(layout.workspace, &filters, cgroup.as_ref()),
        }
        .staged_at(&launch.attach, stage);
        let mut command = tokio::process::Command::new(bwrap);
        command.args(args(&layout, launch.argv)).env_clear();
        if let Some(env) = launch.env {
            for (k, v) in env {
                command.env(k, v);
            }
            if layout.way_out.is_some() {
                for (k, v) in proxy_env() {
                    command.env(k, v);
                }
            }
        }
        // SAFETY: `apply` makes only async-signal-safe system calls on values prepared above.
        unsafe {
            command.pre_exec(move || pre.apply());
        }
        keep.extend(workspace);
        keep.extend(filters);
        keep.extend(launch.attach.into_iter().map(|a| a.tree));
        Ok(Prepared {
            command,
            keep,
            cgroup,
            gate,
        })
    }
}
