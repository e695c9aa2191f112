//! A cgroup per run, where the host lets this process make one: cgroup v2 under a delegated
//! folder named by `BULKHEAD_SANDBOX_CGROUP` (its `cgroup.subtree_control` must enable `pids`
//! and `memory`), or cgroup v1's `pids` and `memory` hierarchies when this process may write
//! them (root on a v1 host). Otherwise there is none and the rlimits alone bound a run (see
//! `jail`). The cgroup bounds what rlimits cannot: processes for root, and memory across all
//! processes of a run rather than per process.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where per-run cgroups are made, and which limit files each hierarchy takes.
#[derive(Clone, Debug, Default)]
pub struct Parents {
    dirs: Vec<(PathBuf, Kind)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    V2,
    V1Pids,
    V1Memory,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Whether the process that made the run cgroup `name` (`run-<pid>-<n>`) no longer exists
/// (false for any other name, and for this process).
fn owner_is_gone(name: &str) -> bool {
    let Some(pid) = name
        .strip_prefix("run-")
        .and_then(|r| r.split('-').next())
        .and_then(|p| p.parse::<i32>().ok())
    else {
        return false;
    };
    pid as u32 != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists()
}

impl Parents {
    /// Finds (and creates, for v1) the parent folders this process may use.
    pub fn detect() -> Parents {
        if let Some(dir) = std::env::var_os("BULKHEAD_SANDBOX_CGROUP") {
            let dir = PathBuf::from(dir);
            let controls =
                std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
            if controls.contains("pids") && controls.contains("memory") {
                return Parents {
                    dirs: vec![(dir, Kind::V2)],
                };
            }
            tracing::warn!(dir = %dir.display(), "BULKHEAD_SANDBOX_CGROUP does not enable pids and memory; sandbox runs are bounded by rlimits only");
            return Parents::default();
        }
        let mut dirs = Vec::new();
        for (hierarchy, kind) in [("pids", Kind::V1Pids), ("memory", Kind::V1Memory)] {
            let root = Path::new("/sys/fs/cgroup").join(hierarchy);
            if !root.join("cgroup.procs").exists() {
                continue;
            }
            let parent = root.join("bulkhead-sandbox");
            if std::fs::create_dir_all(&parent).is_ok() {
                // Runs of servers that died (`run-<pid>-<n>` of a pid that is gone): empty now,
                // so removable. A live process's run is never touched, not even an empty one:
                // it may be between its creation and its first process joining it.
                if let Ok(old) = std::fs::read_dir(&parent) {
                    for e in old.flatten() {
                        if owner_is_gone(&e.file_name().to_string_lossy()) {
                            let _ = std::fs::remove_dir(e.path());
                        }
                    }
                }
                dirs.push((parent, kind));
            }
        }
        if dirs.len() != 2 {
            dirs.clear();
        }
        Parents { dirs }
    }

    /// Which kind of cgroup runs get, for reports.
    pub fn describe(&self) -> &'static str {
        match self.dirs.first().map(|d| d.1) {
            Some(Kind::V2) => "cgroup v2",
            Some(_) => "cgroup v1",
            None => "rlimits only",
        }
    }

    /// A cgroup for one run with these limits, or `None` when there are no parents.
    pub fn create(&self, processes: u64, memory_bytes: u64) -> std::io::Result<Option<RunCgroup>> {
        if self.dirs.is_empty() {
            return Ok(None);
        }
        let name = format!(
            "run-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut made = RunCgroup { dirs: Vec::new() };
        for (parent, kind) in &self.dirs {
            let dir = parent.join(&name);
            std::fs::create_dir(&dir)?;
            made.dirs.push((dir.clone(), *kind));
            let files: &[(&str, u64)] = match kind {
                Kind::V2 => &[
                    ("pids.max", processes),
                    ("memory.max", memory_bytes),
                    ("memory.swap.max", 0),
                ],
                Kind::V1Pids => &[("pids.max", processes)],
                Kind::V1Memory => &[("memory.limit_in_bytes", memory_bytes)],
            };
            for (file, value) in files {
                let path = dir.join(file);
                if let Err(e) = std::fs::write(&path, value.to_string())
                    && *file != "memory.swap.max"
                {
                    return Err(e);
                }
            }
        }
        Ok(Some(made))
    }
}

/// One run's cgroup; removed on drop (once its processes are gone).
#[derive(Debug)]
pub struct RunCgroup {
    dirs: Vec<(PathBuf, Kind)>,
}

impl RunCgroup {
    /// The `cgroup.procs` files the child writes itself into.
    pub fn procs_files(&self) -> Vec<CString> {
        self.dirs
            .iter()
            .filter_map(|(d, _)| CString::new(d.join("cgroup.procs").as_os_str().as_bytes()).ok())
            .collect()
    }

    /// Which of its limits the run hit, by name (`processes`, `memory_mb`).
    pub fn limits_hit(&self) -> Vec<&'static str> {
        let mut hit = Vec::new();
        for (dir, kind) in &self.dirs {
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            let count = |text: &str, key: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            match kind {
                Kind::V2 => {
                    if count(&read("pids.events"), "max ") > 0 {
                        hit.push("processes");
                    }
                    let ev = read("memory.events");
                    if count(&ev, "max ") > 0 || count(&ev, "oom_kill ") > 0 {
                        hit.push("memory_mb");
                    }
                }
                Kind::V1Pids => {
                    if count(&read("pids.events"), "max ") > 0 {
                        hit.push("processes");
                    }
                }
                Kind::V1Memory => {
                    if read("memory.failcnt").trim().parse::<u64>().unwrap_or(0) > 0 {
                        hit.push("memory_mb");
                    }
                }
            }
        }
        hit
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        for (dir, _) in &self.dirs {
            // Empty once the run's processes are reaped; a few tries cover the kernel's
            // asynchronous release.
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}
