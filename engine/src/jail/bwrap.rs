//! bubblewrap's arguments for a [`Layout`], the set-up of its process before exec
//! ([`PreExec`]), and what the host lets a jail do ([`HostProbe`]).

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::libc;

use super::Limits;
use super::cgroup::RunCgroup;

/// Descriptor number the session's folder has in bubblewrap (`--bind-fd`).
const WORKSPACE_FD: i32 = 3;
/// Descriptor number bubblewrap writes the jail's PID to (`--info-fd`).
const INFO_FD: i32 = 4;
/// Descriptor numbers bubblewrap reads the system-call filters from (`--add-seccomp-fd`).
const SECCOMP_FD: i32 = 5;
/// Most filters a jail takes.
pub const MAX_FILTERS: usize = 3;
/// Size of the jail's private `/tmp`.
const TMP_BYTES: u64 = 64 << 20;

/// A host folder visible in a jail at the same path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bind {
    /// The folder (absolute).
    pub path: std::path::PathBuf,
    /// Whether the jail may write it.
    pub writable: bool,
}

/// util-linux's `prlimit`, seen in every jail through the read-only `/usr`: it sets a run's
/// process limit from inside the jail's user namespace, then runs the program in its place.
pub const PRLIMIT: &str = "/usr/bin/prlimit";

/// Where a jail's forwarder is inside it.
pub const HELPER_IN_JAIL: &str = "/run/bulkhead-net";

/// A jail's way out: its gate's socket folder and the forwarder program (see [`super::egress`]).
#[derive(Clone, Copy)]
pub struct Way<'a> {
    /// The folder holding the gate's socket.
    pub socket_dir: &'a Path,
    /// The `bulkhead` executable (its `jail-net` command is the forwarder).
    pub helper: &'a Path,
}

/// The variables that send a jail's HTTP clients to its forwarder.
pub fn proxy_env() -> [(&'static str, String); 4] {
    let url = format!("http://127.0.0.1:{}", super::forward::PROXY_PORT);
    [
        ("HTTP_PROXY", url.clone()),
        ("HTTPS_PROXY", url.clone()),
        ("http_proxy", url.clone()),
        ("https_proxy", url),
    ]
}

/// What a jail binds and shares.
pub struct Layout<'a> {
    /// The jail's way out, when its connector declares `egress:` (else: loopback only).
    pub way_out: Option<Way<'a>>,
    /// What the host allows (probed once).
    pub host: HostAllows,
    /// The session's folder, when the run has one.
    pub workspace: Option<BorrowedFd<'a>>,
    /// Whether bubblewrap reports the jail's first process on descriptor 4.
    pub info: bool,
    /// Whether the jail gets a `/proc` (where the host allows one). Only an upstream whose
    /// spec says `proc: true` does: its mount table names the host paths its folders come from.
    pub proc: bool,
    /// How many system-call filters come on descriptors 5 and up.
    pub filters: usize,
    /// Host folders bound at the same path.
    pub binds: &'a [Bind],
    /// The most processes (threads included) the jail may have at once, set by `prlimit` inside
    /// the jail's own user namespace ([`PRLIMIT`]): the kernel then counts only the jail's
    /// processes against it, not every process of this user on the host (other containers of the
    /// same uid included, which this process cannot see); with it, where there is no cgroup,
    /// each process's address space ([`super::bounds`]). `None`: no such limit here.
    pub processes: Option<(u64, Option<u64>)>,
    /// Whether the jail's first program gets bubblewrap's environment (set by the caller, who
    /// then decides every variable) instead of a fresh minimal one. Values never go on
    /// bubblewrap's command line, which other processes of the host can read.
    pub inherit_env: bool,
}

/// What a host lets a jail do, found by starting one (`Sandbox::probe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostAllows {
    /// A fresh `/proc` (container engines mask theirs, and the kernel then refuses a new one).
    pub proc: bool,
    /// Switching further user namespaces off (bubblewrap writes `/proc/sys/user`, read-only in a
    /// container); where it cannot, the system-call filter refuses them.
    pub disable_userns: bool,
}

impl HostAllows {
    /// The combinations tried, strictest first.
    pub const TRIED: [HostAllows; 4] = [
        HostAllows {
            proc: true,
            disable_userns: true,
        },
        HostAllows {
            proc: false,
            disable_userns: true,
        },
        HostAllows {
            proc: true,
            disable_userns: false,
        },
        HostAllows {
            proc: false,
            disable_userns: false,
        },
    ];
}

/// bubblewrap's arguments for `layout`, then `--`, then `command`.
pub fn args(layout: &Layout<'_>, command: &[String]) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
    push(&[
        "--unshare-user",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--hostname",
        "sandbox",
    ]);
    if layout.host.disable_userns {
        push(&["--disable-userns"]);
    }
    push(&["--unshare-net"]);
    push(&["--ro-bind", "/usr", "/usr"]);
    for top in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = Path::new("/").join(top);
        match std::fs::read_link(&host) {
            Ok(target) => {
                let target = target.to_string_lossy().into_owned();
                let dest = format!("/{top}");
                push(&["--symlink", &target, &dest]);
            }
            Err(_) if host.is_dir() => {
                let p = host.to_string_lossy().into_owned();
                push(&["--ro-bind", &p, &p]);
            }
            Err(_) => {}
        }
    }
    for etc in [
        "/etc/ld.so.cache",
        "/etc/localtime",
        "/etc/ssl/certs",
        "/etc/alternatives",
    ] {
        push(&["--ro-bind-try", etc, etc]);
    }
    if let Some(way) = &layout.way_out {
        let dir = way.socket_dir.to_string_lossy().into_owned();
        let helper = way.helper.to_string_lossy().into_owned();
        push(&["--ro-bind", &dir, super::forward::SOCKET_DIR]);
        push(&["--ro-bind", &helper, HELPER_IN_JAIL]);
    }
    push(&["--dev", "/dev"]);
    if layout.host.proc && layout.proc {
        push(&["--proc", "/proc"]);
    }
    let tmp = TMP_BYTES.to_string();
    push(&["--perms", "1777", "--size", &tmp, "--tmpfs", "/tmp"]);
    for b in layout.binds {
        let p = b.path.to_string_lossy().into_owned();
        push(&[if b.writable { "--bind" } else { "--ro-bind" }, &p, &p]);
    }
    if layout.workspace.is_some() {
        let fd = WORKSPACE_FD.to_string();
        push(&["--bind-fd", &fd, "/workspace", "--chdir", "/workspace"]);
    } else {
        push(&["--chdir", "/tmp"]);
    }
    let info = INFO_FD.to_string();
    if layout.info {
        push(&["--info-fd", &info]);
    }
    for k in 0..layout.filters.min(MAX_FILTERS) {
        let fd = (SECCOMP_FD + k as i32).to_string();
        push(&["--add-seccomp-fd", &fd]);
    }
    let mut command: Vec<String> = command.to_vec();
    if let Some((n, address_space)) = layout.processes {
        let mut first = vec![PRLIMIT.to_string(), format!("--nproc={n}:{n}")];
        if let Some(a) = address_space {
            first.push(format!("--as={a}:{a}"));
        }
        first.push("--".to_string());
        first.append(&mut command);
        command = first;
    }
    if layout.way_out.is_some() {
        let mut first = vec![
            HELPER_IN_JAIL.to_string(),
            super::forward::ARG.to_string(),
            "--".to_string(),
        ];
        first.append(&mut command);
        command = first;
    }
    if layout.inherit_env {
        push(&["--"]);
        a.extend(command.iter().map(OsString::from));
        return a;
    }
    push(&[
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/local/bin:/usr/bin:/bin",
        "--setenv",
        "HOME",
        "/workspace",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "TMPDIR",
        "/tmp",
        "--setenv",
        "PYTHONDONTWRITEBYTECODE",
        "1",
    ]);
    if layout.way_out.is_some() {
        for (k, v) in proxy_env() {
            push(&["--setenv", k, &v]);
        }
    }
    push(&["--"]);
    a.extend(command.iter().map(OsString::from));
    a
}

/// The forwarder to run in networked jails: `BULKHEAD_JAIL_HELPER` as `lookup` finds it, else
/// this executable when it is `bulkhead` (a test harness is not), else `None`.
pub fn helper_path(lookup: &dyn Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    if let Some(p) = lookup("BULKHEAD_JAIL_HELPER").filter(|p| !p.is_empty()) {
        return Some(std::path::PathBuf::from(p)).filter(|p| p.is_file());
    }
    std::env::current_exe().ok().filter(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "bulkhead")
    })
}

/// Everything the child sets up between fork and exec, prepared beforehand (only
/// async-signal-safe calls happen in the child).
pub struct PreExec {
    /// Descriptors to put at fixed numbers: (ours, theirs).
    fds: Vec<(i32, i32)>,
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t)>,
    cgroup_procs: Vec<CString>,
    /// Where the workspace descriptor (a detached mount) is attached first, in a mount
    /// namespace of bubblewrap's own ([`WorkspaceBind::Staged`](super::WorkspaceBind)).
    stage: Option<CString>,
    /// Detached mounts attached over host folders in that namespace, in order, before the
    /// workspace ([`Launch::attach`](super::Launch)): bubblewrap then binds those paths.
    attach: Vec<(i32, CString)>,
}

impl PreExec {
    /// The set-up for one run of `limits`, joining `cgroup` when there is one; `nproc_in_jail`:
    /// the jail sets its own process limit ([`Layout::processes`]).
    pub fn new(
        limits: &Limits,
        workspace: Option<BorrowedFd<'_>>,
        info_writer: &OwnedFd,
        filters: &[OwnedFd],
        cgroup: Option<&RunCgroup>,
        nproc_in_jail: bool,
    ) -> PreExec {
        let mut rlimits = vec![
            (
                libc::RLIMIT_CPU,
                limits.cpu_seconds,
                limits.cpu_seconds.saturating_add(1),
            ),
            (libc::RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
            (libc::RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
            (libc::RLIMIT_NOFILE, 256, 256),
            (libc::RLIMIT_CORE, 0, 0),
        ];
        // Set here only where the jail cannot set it itself (no `prlimit`): RLIMIT_NPROC set
        // outside counts every process of the user on the host, and the kernel ignores it for
        // root, where the cgroup bounds processes instead.
        if !nproc_in_jail && let Some(n) = nproc_limit(limits.processes) {
            rlimits.push((libc::RLIMIT_NPROC, n, n));
        }
        let mut fds = vec![(info_writer.as_raw_fd(), INFO_FD)];
        fds.extend(Self::numbered(workspace, filters));
        PreExec {
            fds,
            rlimits,
            cgroup_procs: cgroup.map(RunCgroup::procs_files).unwrap_or_default(),
            stage: None,
            attach: Vec::new(),
        }
    }

    /// Attaches each detached mount of `attach` over its folder, then the workspace
    /// descriptor at `stage` when given, before bubblewrap starts (the descriptors must stay
    /// open until it has).
    pub fn staged_at(mut self, attach: &[super::Attach], stage: Option<CString>) -> PreExec {
        self.attach = attach
            .iter()
            .map(|a| (a.tree.as_raw_fd(), a.at.clone()))
            .collect();
        self.stage = stage;
        self
    }

    /// The set-up of a long-lived jail (an upstream MCP server): its descriptors, no core
    /// dumps, at most 1024 open files, and its cgroup (processes, memory) when there is one.
    pub fn descriptors(
        workspace: Option<BorrowedFd<'_>>,
        filters: &[OwnedFd],
        cgroup: Option<&RunCgroup>,
    ) -> PreExec {
        PreExec {
            fds: Self::numbered(workspace, filters),
            rlimits: vec![(libc::RLIMIT_CORE, 0, 0), (libc::RLIMIT_NOFILE, 1024, 1024)],
            cgroup_procs: cgroup.map(RunCgroup::procs_files).unwrap_or_default(),
            stage: None,
            attach: Vec::new(),
        }
    }

    fn numbered(workspace: Option<BorrowedFd<'_>>, filters: &[OwnedFd]) -> Vec<(i32, i32)> {
        let mut fds: Vec<(i32, i32)> = workspace
            .map(|fd| (fd.as_raw_fd(), WORKSPACE_FD))
            .into_iter()
            .collect();
        fds.extend(
            filters
                .iter()
                .take(MAX_FILTERS)
                .enumerate()
                .map(|(k, fd)| (fd.as_raw_fd(), SECCOMP_FD + k as i32)),
        );
        fds
    }

    /// Runs in the child after fork, before exec.
    pub fn apply(&self) -> std::io::Result<()> {
        let check = |r: libc::c_int| {
            if r < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(r)
            }
        };
        // SAFETY: plain system calls on descriptors and values prepared before the fork; no
        // allocation, no lock.
        unsafe {
            for procs in &self.cgroup_procs {
                let fd = check(libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC))?;
                let r = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if r != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // Detached mounts are attached over their folders in a mount namespace of this
            // process's own (the host's is untouched): the idmapped views of writable binds,
            // then the workspace's over the stage folder, which is opened there.
            let workspace_tree = self.stage.as_ref().and_then(|at| {
                self.fds
                    .iter()
                    .find(|(_, t)| *t == WORKSPACE_FD)
                    .map(|&(tree, _)| (tree, at))
            });
            if !self.attach.is_empty() || workspace_tree.is_some() {
                check(libc::unshare(libc::CLONE_NEWNS))?;
                check(libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ))?;
            }
            let attach = |tree: i32, at: &CString| {
                check(libc::syscall(
                    libc::SYS_move_mount,
                    tree,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    at.as_ptr(),
                    libc::MOVE_MOUNT_F_EMPTY_PATH,
                ) as libc::c_int)
            };
            for (tree, at) in &self.attach {
                attach(*tree, at)?;
            }
            let mut staged = -1;
            if let Some((tree, at)) = workspace_tree {
                attach(tree, at)?;
                staged = check(libc::open(
                    at.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                ))?;
            }
            // Out of the way of 3 and up first, then into place (dup2 clears close-on-exec).
            let mut moved = [(-1, -1); 3 + MAX_FILTERS];
            let n = self.fds.len().min(moved.len());
            for (i, &(ours, theirs)) in self.fds.iter().take(n).enumerate() {
                let ours = if theirs == WORKSPACE_FD && staged >= 0 {
                    staged
                } else {
                    ours
                };
                moved[i] = (check(libc::fcntl(ours, libc::F_DUPFD_CLOEXEC, 10))?, theirs);
            }
            for &(ours, theirs) in moved.iter().take(n) {
                check(libc::dup2(ours, theirs))?;
            }
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
            for &(res, soft, hard) in &self.rlimits {
                let lim = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                check(libc::setrlimit(res, &lim))?;
            }
        }
        Ok(())
    }
}

/// The `RLIMIT_NPROC` that leaves a run `processes` beyond what this user runs now, or `None`
/// for root (the kernel does not apply it).
fn nproc_limit(processes: u64) -> Option<u64> {
    if nix::unistd::geteuid().is_root() {
        return None;
    }
    let uid = nix::unistd::getuid().as_raw();
    let mut running: u64 = 0;
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let path = e.path().join("status");
            let Ok(status) = std::fs::read_to_string(path) else {
                continue;
            };
            let mine = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u32>().ok())
                == Some(uid);
            if mine {
                running += status
                    .lines()
                    .find_map(|l| l.strip_prefix("Threads:"))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(1);
            }
        }
    }
    Some(running + processes)
}

/// The bubblewrap to run: `BULKHEAD_BWRAP` when set (a path naming no file means bubblewrap is
/// missing), else `bwrap` on `PATH`.
pub fn bwrap_path() -> Option<std::path::PathBuf> {
    std::env::var_os("BULKHEAD_BWRAP")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join("bwrap"))
                .find(|p| p.is_file())
        })
        .filter(|p| p.is_file())
}

/// What this host lets a jail do, probed once per connector (the sandbox, each upstream) and
/// kept: a host whose allowances are narrower than the strictest layout is logged once, a host
/// where no jail starts once, and every later caller gets the kept answer.
#[derive(Debug, Default)]
pub struct HostProbe(tokio::sync::OnceCell<Result<HostAllows, String>>);

impl HostProbe {
    /// The allowances of this host (the first call probes with `bwrap`, each try bounded by
    /// `wait`); `Err` with the reason when no jail starts. `connector` names the logs.
    pub async fn get(
        &self,
        bwrap: &Path,
        wait: std::time::Duration,
        connector: &str,
    ) -> Result<HostAllows, String> {
        self.0
            .get_or_init(|| async {
                match probe(bwrap, wait).await {
                    Ok((host, first)) => {
                        if let Some(first_refusal) = first {
                            tracing::warn!(connector, ?host, %first_refusal, "this host does not allow everything a jail uses; jails run with what it allows");
                        }
                        Ok(host)
                    }
                    Err(e) => {
                        tracing::error!(connector, error = %e, "a jail does not start on this host");
                        Err(e)
                    }
                }
            })
            .await
            .clone()
    }
}

/// What this host lets a jail do, found by starting jails strictest first; the first
/// refusal when none starts. Each try is bounded by `wait`.
pub async fn probe(
    bwrap: &Path,
    wait: std::time::Duration,
) -> Result<(HostAllows, Option<String>), String> {
    let mut first: Option<String> = None;
    for host in HostAllows::TRIED {
        let layout = Layout {
            way_out: None,
            processes: None,
            host,
            workspace: None,
            info: false,
            proc: true,
            filters: 0,
            binds: &[],
            inherit_env: false,
        };
        let out = tokio::process::Command::new(bwrap)
            .args(args(&layout, &["true".to_string()]))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .output();
        let refusal = match tokio::time::timeout(wait, out).await {
            Ok(Ok(o)) if o.status.success() => return Ok((host, first)),
            Ok(Ok(o)) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".into(),
        };
        first.get_or_insert(refusal);
    }
    Err(first.unwrap_or_default())
}

/// A pipe holding one compiled system-call filter, for `--add-seccomp-fd`.
pub fn filter_pipe(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    use std::io::Write as _;
    let (reader, mut writer) = std::io::pipe()?;
    // A filter is a few hundred bytes; a pipe holds 64 KiB, so this never blocks.
    writer.write_all(bytes)?;
    drop(writer);
    Ok(OwnedFd::from(reader))
}
