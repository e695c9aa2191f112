//! The jail's system-call filter, compiled with `seccompiler` (rust-vmm, Firecracker's) and
//! handed to bubblewrap (`--seccomp`), which installs it just before the program starts.
//!
//! It refuses (EPERM) what no script needs and what widens the kernel surface or reaches other
//! processes: tracing and cross-process memory, keyrings, BPF, perf, userfaultfd, io_uring,
//! module, kexec, mount and namespace calls, swap, reboot, accounting. The namespaces and the
//! missing capabilities already deny most of them; the filter makes that hold even where a
//! kernel bug would let one through.
//!
//! Mounts: `statmount` and `listmount` are refused too, as the mount table they read names
//! the host paths a jail's folders come from.
//!
//! Files: nothing a jail writes can raise privileges on the host. A mode with the setuid or
//! setgid bit is refused (EPERM) wherever a call sets one (`chmod` and its `f`/`at`/`at2`
//! forms, `open`/`openat`/`creat`/`mkdir`/`mknod` with such a mode), `openat2` (whose mode is
//! behind a pointer a filter cannot read) answers ENOSYS so the C library falls back to `openat`,
//! and extended attributes cannot be set (a `security.capability` attribute is a file
//! capability, as good as setuid). The jail's user maps to the server's, so without this a file a
//! script marks 04755 stays setuid on the host.
//!
//! Sockets: a jail opens only the address families it uses, `AF_UNIX`, `AF_INET` and `AF_INET6`
//! (its own loopback, its forwarder, the gate) and `AF_NETLINK` with `NETLINK_ROUTE` (the C
//! library reads its own interfaces that way); every other family (`AF_VSOCK`, whose peer on a
//! VM is the hypervisor, `AF_PACKET`, the other netlink protocols, Bluetooth, CAN, …) fails
//! with `EAFNOSUPPORT`, as on a kernel without it. A network namespace does not cover vsock.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The refused system calls.
const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_syslog,
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
    SYS_STATMOUNT,
    SYS_LISTMOUNT,
];

/// `statmount` and `listmount` (Linux 6.8; not yet in `libc`): they name each mount's host
/// source path, as `/proc/self/mountinfo` would.
const SYS_STATMOUNT: i64 = 457;
const SYS_LISTMOUNT: i64 = 458;

/// The setuid and setgid bits of a mode.
const PRIVILEGE_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];

/// System calls that take a mode, and the argument it is in.
fn mode_calls() -> Vec<(i64, u8)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mkdirat, 2),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_open, 2),
        (libc::SYS_creat, 1),
        (libc::SYS_mkdir, 1),
        (libc::SYS_mknod, 1),
    ]);
    calls
}

/// Setting extended attributes (file capabilities among them).
const XATTR_SETS: &[i64] = &[libc::SYS_setxattr, libc::SYS_lsetxattr, libc::SYS_fsetxattr];

/// Each call of [`mode_calls`] refused when its mode holds a bit of [`PRIVILEGE_BITS`].
fn privilege_rules(rules: &mut BTreeMap<i64, Vec<SeccompRule>>) -> Result<(), String> {
    for (nr, arg) in mode_calls() {
        let mut any = Vec::new();
        for bit in PRIVILEGE_BITS {
            let cond = SeccompCondition::new(
                arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(bit),
                bit,
            )
            .map_err(|e| e.to_string())?;
            any.push(SeccompRule::new(vec![cond]).map_err(|e| e.to_string())?);
        }
        rules.insert(nr, any);
    }
    for nr in XATTR_SETS {
        rules.insert(*nr, Vec::new());
    }
    Ok(())
}

/// The address families a jail may open a socket of (see the module's comment).
const FAMILIES: &[i32] = &[
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// `socket(domain, …)` refused: any family not in [`FAMILIES`], and netlink but for
/// `NETLINK_ROUTE`. `socketpair` makes only `AF_UNIX` pairs.
fn socket_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let arg = |n: u8, op: SeccompCmpOp, v: i32| {
        SeccompCondition::new(n, SeccompCmpArgLen::Dword, op, v as u64).map_err(|e| e.to_string())
    };
    let other_family = FAMILIES
        .iter()
        .map(|&f| arg(0, SeccompCmpOp::Ne, f))
        .collect::<Result<Vec<_>, _>>()?;
    let other_netlink = vec![
        arg(0, SeccompCmpOp::Eq, libc::AF_NETLINK)?,
        arg(2, SeccompCmpOp::Ne, libc::NETLINK_ROUTE)?,
    ];
    let rule = |c| SeccompRule::new(c).map_err(|e| e.to_string());
    Ok([
        (
            libc::SYS_socket,
            vec![rule(other_family)?, rule(other_netlink)?],
        ),
        (
            libc::SYS_socketpair,
            vec![rule(vec![arg(0, SeccompCmpOp::Ne, libc::AF_UNIX)?])?],
        ),
    ]
    .into_iter()
    .collect())
}

/// The compiled filters as bubblewrap reads them (`struct sock_filter`s in native byte order):
/// the refused calls (EPERM), including `clone` with `CLONE_NEWUSER` (a nested user namespace,
/// where bubblewrap cannot switch them off itself) and modes with setuid or setgid bits,
/// `clone3` and `openat2` answered ENOSYS (their flags are behind a pointer a filter cannot read;
/// the C library then falls back to `clone` and `openat`), and the
/// sockets of families a jail does not use (EAFNOSUPPORT). Or why this architecture has none.
pub fn programs() -> Result<Vec<Vec<u8>>, String> {
    let arch: seccompiler::TargetArch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("no seccomp filter for {}: {e}", std::env::consts::ARCH))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    let newuser = libc::CLONE_NEWUSER as u64;
    let cond = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(newuser),
        newuser,
    )
    .map_err(|e| e.to_string())?;
    rules.insert(
        libc::SYS_clone,
        vec![SeccompRule::new(vec![cond]).map_err(|e| e.to_string())?],
    );
    privilege_rules(&mut rules)?;
    let deny = compile(rules, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let clone3 = compile(
        [
            (libc::SYS_clone3, Vec::new()),
            (libc::SYS_openat2, Vec::new()),
        ]
        .into_iter()
        .collect(),
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    let sockets = compile(
        socket_rules()?,
        SeccompAction::Errno(libc::EAFNOSUPPORT as u32),
        arch,
    )?;
    Ok(vec![deny, clone3, sockets])
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
    arch: seccompiler::TargetArch,
) -> Result<Vec<u8>, String> {
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, action, arch).map_err(|e| e.to_string())?;
    let prog: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let mut bytes = Vec::with_capacity(prog.len() * 8);
    for ins in prog {
        bytes.extend_from_slice(&ins.code.to_ne_bytes());
        bytes.push(ins.jt);
        bytes.push(ins.jf);
        bytes.extend_from_slice(&ins.k.to_ne_bytes());
    }
    Ok(bytes)
}
