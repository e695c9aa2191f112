//! What bounds a jail where no cgroup can be made (a container that cannot write its cgroups, a
//! host without a delegated folder): rlimits set inside the jail's own user namespace, chosen so
//! that every limit still holds, or a refusal naming what cannot be enforced. Never silently
//! unlimited.
//!
//! - Processes: `RLIMIT_NPROC`, set by `prlimit` inside the jail's user namespace, so the kernel
//!   counts only the jail's processes. The kernel does not apply it to a process whose user is the
//!   host's root (as bubblewrap maps it when this server runs as root), so there the jail is
//!   refused.
//! - Memory of a run: `RLIMIT_AS` is per process, so without a cgroup a run's `memory_mb` is split
//!   over its tasks: at most `memory_mb / 64 MiB` processes and threads in the whole jail
//!   (bubblewrap and the forwarder included, and no more than `processes`), each process with an
//!   equal share of the address space. Since processes are at most tasks, their sum never
//!   exceeds `memory_mb`.
//! - Memory of a long-lived jail (an upstream MCP server): `RLIMIT_AS` of its `memory_mb` for each
//!   of at most `processes` processes (a runtime such as Node.js needs its whole share in one
//!   process); the upstream's start logs that its bound is per process.

/// Address space each process of a run gets at least when a run's memory is split (Python
/// starts in 64 MiB).
pub const MIN_PROCESS_BYTES: u64 = 64 << 20;

/// The rlimits a jail gets inside its user namespace in place of a cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WithoutCgroup {
    /// `RLIMIT_NPROC`: processes and threads at once.
    pub processes: u64,
    /// `RLIMIT_AS` of each process, bytes.
    pub address_space: u64,
}

/// The bounds of a jail with `processes` and `memory_bytes` and no cgroup: `run` for a run (its
/// memory split), else a long-lived jail; `root`: this server runs as root. `Err` names the
/// limits that cannot be enforced and why.
pub fn without_cgroup(
    processes: u64,
    memory_bytes: u64,
    run: bool,
    root: bool,
) -> Result<WithoutCgroup, String> {
    if root {
        return Err(
            "`processes` and `memory_mb` cannot be enforced here: no cgroup can be made (give \
             this server cgroup v1's pids and memory hierarchies, or a delegated cgroup v2 folder \
             with both controllers in BULKHEAD_SANDBOX_CGROUP) and RLIMIT_NPROC does not bind a \
             jail started by root"
                .into(),
        );
    }
    if !run {
        return Ok(WithoutCgroup {
            processes: processes.max(1),
            address_space: memory_bytes,
        });
    }
    let fit = (memory_bytes / MIN_PROCESS_BYTES).max(1);
    let n = processes.clamp(1, fit);
    Ok(WithoutCgroup {
        processes: n,
        address_space: memory_bytes / n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_runs_memory_is_split_so_the_sum_holds() {
        for (processes, memory_mb) in [(64, 512), (32, 256), (1, 64), (4, 4096), (300, 1024)] {
            let b = without_cgroup(processes, memory_mb * MIB, true, false).unwrap();
            assert!(b.processes >= 1 && b.processes <= processes);
            assert!(
                b.processes * b.address_space <= memory_mb * MIB,
                "{processes} × {memory_mb} MiB: {b:?}"
            );
        }
        let b = without_cgroup(64, 512 * MIB, true, false).unwrap();
        assert_eq!(
            b,
            WithoutCgroup {
                processes: 8,
                address_space: 64 * MIB
            }
        );
    }

    #[test]
    fn root_without_a_cgroup_is_refused_by_name() {
        let e = without_cgroup(64, 512 * MIB, true, true).unwrap_err();
        assert!(
            e.contains("`processes`") && e.contains("`memory_mb`"),
            "{e}"
        );
    }
}
