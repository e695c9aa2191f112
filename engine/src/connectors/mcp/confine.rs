//! Where an upstream launched over stdio runs: a bubblewrap jail of its own (the sandbox's
//! [`jail`](crate::connectors::sandbox::jail), with its system-call filter).
//!
//! # The invariant (enforced here)
//!
//! An upstream process never sees this server's files: not its state store (the ratchet), audit
//! log, configuration or secrets, nor other sessions' workspaces. Its jail holds the read-only
//! system, its own install folder (the nearest enclosing virtualenv or `node_modules` of its
//! program, read-only), the folders its spec names (`read_only`, `read_write`), and, for an
//! upstream of one session (`session_workspace: true`), that session's folder of this
//! instance's layer at `/workspace`, bound by descriptor, so no host path reaches the model;
//! it has no `/proc` (whose mount table would name those host paths) unless its spec says
//! `proc: true`.
//! Its network is a namespace of its own with only loopback, on every mode: an upstream whose
//! connector declares `egress:` reaches those hosts through its gate ([`egress`]) and nothing
//! else (and only on `full` and `proxied`); its environment is what its spec gives it.
//! Nothing it writes is root's on the host: under a root server its `read_write` folders are
//! bound through idmapped views (`nosuid,nodev`) in which `workspace.host_uid` is root, as its
//! `/workspace` is ([`crate::workspace::HostOwner`]), and a folder not that user's is refused;
//! setuid and setgid modes are refused by the jail's filter anyway.
//! Without bubblewrap, or on a host where a jail does not start, an upstream does not start.
//! Where this process can write cgroups (as for the sandbox), an upstream and everything it
//! starts get one of their own: `processes` and `memory_mb` bound them (a fork or memory bomb
//! kills the upstream, and the call in flight gets a retryable error).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::jail::{self, cgroup::RunCgroup, egress};
use crate::policy::NetworkMode;
use crate::workspace::{HostOwner, SessionWorkspace};
use std::sync::Arc;

/// How long one trial jail may take to start when probing the host.
const PROBE_WAIT: Duration = Duration::from_secs(10);

/// The jail of one `mcp` connector's upstreams.
pub(crate) struct Confine {
    /// The connector's name (for its logs).
    connector: &'static str,
    /// Host folders bound at the same path (the spec's, and the program's install folder).
    binds: Vec<jail::Bind>,
    /// Processes and bytes of memory one upstream (with everything it starts) may use.
    limits: (u64, u64),
    /// Whether its jail has a `/proc` (`proc: true`; the host may still refuse one).
    proc: bool,
    /// Under a root server, the user its writable binds are written as (through idmapped
    /// views of them, [`HostOwner`]).
    host_owner: Option<Arc<HostOwner>>,
    /// The jails of its upstreams.
    jailer: jail::Jailer,
}

/// A launch command, the descriptors it needs kept open until it has started, and its cgroup
/// (kept as long as the upstream runs).
pub(crate) struct Launch {
    pub command: tokio::process::Command,
    pub _keep: Vec<OwnedFd>,
    pub cgroup: Option<RunCgroup>,
    /// The upstream's way out (kept as long as it runs).
    pub gate: Option<egress::Gate>,
}

impl Confine {
    /// The jail for `command`, with the folders, bounds and `/proc` its settings name.
    pub fn new(
        connector: &'static str,
        command: &[String],
        settings: &super::Settings,
        egress: egress::Egress,
        helper: Option<PathBuf>,
    ) -> Result<Confine, String> {
        let mut binds = Vec::new();
        for (paths, writable) in [(&settings.read_only, false), (&settings.read_write, true)] {
            for p in paths {
                binds.push(jail::Bind {
                    path: folder(p)?,
                    writable,
                });
            }
        }
        let roots = resolve(&command[0])
            .as_deref()
            .map(install_roots)
            .unwrap_or_default();
        for root in roots {
            if root.is_dir() && too_broad(&root) {
                return Err(format!(
                    "the program's install folder `{}` is a system or home folder: install the upstream in a folder of its own (a virtualenv or node_modules)",
                    root.display()
                ));
            }
            if !binds.iter().any(|b| root.starts_with(&b.path)) {
                binds.push(jail::Bind {
                    path: root,
                    writable: false,
                });
            }
        }
        // Parents before children: bubblewrap mounts in order, and a later parent would hide an
        // earlier child (a read-only folder inside a writable one, or an install folder inside
        // a writable one, stays read-only).
        binds.sort_by_key(|b| b.path.components().count());
        let jailer = jail::Jailer::new(connector, egress, helper);
        if jailer.limits_described() == "rlimits only" {
            tracing::warn!(
                connector,
                "no cgroup can be made here: upstreams run without `processes` and `memory_mb` limits"
            );
        } else {
            tracing::info!(
                connector,
                limits = jailer.limits_described(),
                "upstream jail ready"
            );
        }
        Ok(Confine {
            connector,
            binds,
            limits: settings.limits(),
            proc: settings.proc(),
            host_owner: None,
            jailer,
        })
    }

    /// Under a root server, the owner the upstream writes its `read_write` folders as.
    pub fn set_host_owner(&mut self, owner: Option<Arc<HostOwner>>) {
        self.host_owner = owner;
    }

    /// Under a root server, an idmapped view of each writable bind, to attach over it: what
    /// the upstream writes there belongs to the owner's user on disk, never to root. A folder
    /// that is not that user's is refused (through the view the upstream could not write it).
    fn writable_views(&self) -> Result<Vec<jail::Attach>, String> {
        let Some(owner) = &self.host_owner else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for b in self.binds.iter().filter(|b| b.writable) {
            use std::os::fd::AsFd as _;
            use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
            let dir = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW)
                .open(&b.path)
                .map_err(|e| format!("`{}` (read_write): {e}", b.path.display()))?;
            let meta = dir
                .metadata()
                .map_err(|e| format!("`{}` (read_write): {e}", b.path.display()))?;
            if meta.uid() != owner.uid() {
                return Err(format!(
                    "`{path}` (read_write) belongs to uid {uid}: under a root server an upstream writes as `workspace.host_uid` ({host}), so nothing it writes is root's; give the folder to that user (`chown -R {host}:{host} {path}`)",
                    path = b.path.display(),
                    uid = meta.uid(),
                    host = owner.uid(),
                ));
            }
            let tree = owner
                .view(dir.as_fd())
                .map_err(|e| format!("`{}` (read_write): {e}", b.path.display()))?;
            let at = std::ffi::CString::new(b.path.as_os_str().as_encoded_bytes())
                .map_err(|_| format!("`{}` holds a NUL byte", b.path.display()))?;
            out.push(jail::Attach { tree, at });
        }
        Ok(out)
    }

    /// Whether a jail starts here (readiness).
    pub async fn host(&self) -> Result<jail::HostAllows, String> {
        self.jailer.host(PROBE_WAIT).await.map_err(|e| match e {
            jail::LaunchError::NoBubblewrap => {
                format!("{e}; an upstream runs only in a jail")
            }
            e => e.to_string(),
        })
    }

    /// The command that starts `argv` in its jail on an instance in `mode`, with `env` as its
    /// whole environment, and `workspace` at `/workspace` when given.
    pub async fn launch(
        &self,
        argv: &[String],
        mode: NetworkMode,
        workspace: Option<&SessionWorkspace>,
        env: &[(String, String)],
    ) -> Result<Launch, String> {
        let host = self.host().await?;
        if self.proc && !host.proc {
            tracing::warn!(
                connector = self.connector,
                "`proc: true`, but this host refuses a jail a /proc of its own (a container engine masks its own): the upstream starts without one"
            );
        }
        let mut argv = argv.to_vec();
        if let Some(abs) = resolve(&argv[0]) {
            argv[0] = abs.to_string_lossy().into_owned();
        }
        let prepared = self
            .jailer
            .prepare(
                jail::Launch {
                    argv: &argv,
                    mode,
                    workspace: workspace
                        .map(SessionWorkspace::jail_bind)
                        .transpose()
                        .map_err(|e| format!("the session's workspace: {e}"))?,
                    binds: &self.binds,
                    attach: self.writable_views()?,
                    run: None,
                    proc: self.proc,
                    cgroup: self.limits,
                    env: Some(env),
                },
                PROBE_WAIT,
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(Launch {
            command: prepared.command,
            _keep: prepared.keep,
            cgroup: prepared.cgroup,
            gate: prepared.gate,
        })
    }
}

/// An absolute, existing folder a spec names.
fn folder(p: &str) -> Result<PathBuf, String> {
    let path = Path::new(p);
    if !path.is_absolute() {
        return Err(format!("`{p}` is not an absolute path"));
    }
    let real = path.canonicalize().map_err(|e| format!("`{p}`: {e}"))?;
    if !real.is_dir() {
        return Err(format!("`{p}` is not a folder"));
    }
    if too_broad(&real) {
        return Err(format!(
            "`{p}` is `/`, a system folder or a home folder: an upstream may not see all of it"
        ));
    }
    Ok(real)
}

/// Folders no jail binds whole: the root and every top-level folder, the kernel's views and
/// devices, a user's home folder (where a server's state, secrets and checkouts live) and
/// anything above the server's own home.
fn too_broad(path: &Path) -> bool {
    let depth = path.components().count(); // `/` is 1, `/etc` 2, `/home/ana` 3
    let home = std::env::var_os("HOME").map(PathBuf::from);
    depth <= 2
        || ["/proc", "/sys", "/dev", "/run"]
            .iter()
            .any(|p| path.starts_with(p))
        || (path.starts_with("/home") && depth <= 3)
        || home.as_deref().is_some_and(|h| h.starts_with(path))
}

/// `program` as an absolute path: itself when it has a slash, else found on `PATH`.
fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program)
            .canonicalize()
            .ok()
            .map(|_| std::path::absolute(program).unwrap_or_else(|_| PathBuf::from(program)));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The folders a program is installed in, when outside `/usr`: the nearest enclosing
/// virtualenv (holding `pyvenv.cfg`; with the interpreter it was made from, its `home`) or
/// `node_modules` of its real file, else its folder.
fn install_roots(program: &Path) -> Vec<PathBuf> {
    let Ok(real) = program.canonicalize() else {
        return Vec::new();
    };
    if real.starts_with("/usr") {
        return Vec::new();
    }
    // The link itself may sit in the install folder (a virtualenv's bin/ or node_modules/.bin/).
    for p in [program, real.as_path()] {
        for dir in p.ancestors().skip(1) {
            if dir.file_name() == Some("node_modules".as_ref()) {
                return dir.canonicalize().into_iter().collect();
            }
            let cfg = dir.join("pyvenv.cfg");
            if cfg.is_file() {
                let mut roots: Vec<PathBuf> = dir.canonicalize().into_iter().collect();
                let home = std::fs::read_to_string(&cfg).ok().and_then(|t| {
                    t.lines().find_map(|l| {
                        let (k, v) = l.split_once('=')?;
                        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
                    })
                });
                // `home` is the interpreter's bin/: its prefix holds the standard library.
                if let Some(prefix) = home
                    .and_then(|h| h.canonicalize().ok())
                    .and_then(|h| h.parent().map(Path::to_path_buf))
                    && !prefix.starts_with("/usr")
                    && prefix != Path::new("/")
                {
                    roots.push(prefix);
                }
                return roots;
            }
        }
    }
    // A program installed on its own: the file alone (never its folder, which may be a
    // checkout or a home folder).
    vec![real]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_root_is_the_enclosing_venv_or_node_modules() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "").unwrap();
        std::fs::write(venv.join("bin/tool"), "").unwrap();
        assert_eq!(
            install_roots(&venv.join("bin/tool")),
            [venv.canonicalize().unwrap()]
        );
        let nm = dir.path().join("node_modules");
        std::fs::create_dir_all(nm.join("pkg/dist")).unwrap();
        std::fs::create_dir_all(nm.join(".bin")).unwrap();
        std::fs::write(nm.join("pkg/dist/index.js"), "").unwrap();
        std::os::unix::fs::symlink("../pkg/dist/index.js", nm.join(".bin/tool")).unwrap();
        assert_eq!(
            install_roots(&nm.join(".bin/tool")),
            [nm.canonicalize().unwrap()]
        );
        assert!(install_roots(Path::new("/usr/bin/env")).is_empty());
        // A program on its own: the file, never its folder.
        std::fs::write(dir.path().join("server"), "").unwrap();
        assert_eq!(
            install_roots(&dir.path().join("server")),
            [dir.path().join("server").canonicalize().unwrap()]
        );
        for broad in [
            "relative",
            "/",
            "/etc",
            "/var",
            "/root",
            "/home",
            "/proc/self",
            "/sys/fs",
            "/opt",
        ] {
            assert!(folder(broad).is_err(), "{broad}");
        }
        assert!(folder(dir.path().to_str().unwrap()).is_ok());
    }

    #[test]
    fn binds_go_parents_first_so_a_read_only_child_stays_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join("ref")).unwrap();
        let settings = super::super::Settings::read(bulkhead_vocab::connector::McpSettings {
            read_only: vec![data.join("ref").display().to_string()],
            read_write: vec![data.display().to_string()],
            ..Default::default()
        })
        .unwrap();
        let c = Confine::new(
            "t",
            &["/usr/bin/env".to_string()],
            &settings,
            egress::Egress::none("t"),
            None,
        )
        .unwrap();
        let order: Vec<(PathBuf, bool)> = c
            .binds
            .iter()
            .map(|b| (b.path.clone(), b.writable))
            .collect();
        let data = data.canonicalize().unwrap();
        assert_eq!(order, [(data.clone(), true), (data.join("ref"), false)]);
    }
}
