//! The code sandbox (`run_python` of the template server, connector kind `sandbox`) against a
//! real bubblewrap: what a script can and cannot reach, each limit named when hit, and the
//! ratchet stopping a running jail before an escalating call returns its data.
//!
//! Every attack here is a script a model could send; each fails (or is bounded) because of the
//! jail, not because of the script.

use bulkhead::audit::{AuditLog, AuditOptions};
use bulkhead::call::{CallOutcome, Runtime};
use bulkhead::identity::Identity;
use bulkhead::policy::NetworkMode;
use bulkhead::state::{StateStore, StoreOptions};
use bulkhead::workspace::WorkspaceRoot;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One deployment's files in a temporary folder: a state store, per-mode workspace layers.
pub struct Env {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub store: Arc<StateStore>,
}

pub fn env() -> Env {
    assert!(
        Path::new("/usr/bin/bwrap").exists() || std::env::var_os("BULKHEAD_BWRAP").is_some(),
        "bubblewrap is needed (scripts/test installs Debian's `bubblewrap`)"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let store = Arc::new(
        StateStore::create_sqlite(
            &root.join("state/compliance.db"),
            StoreOptions::new("template"),
        )
        .unwrap(),
    );
    Env {
        _dir: dir,
        root,
        store,
    }
}

fn layer(env: &Env, mode: NetworkMode) -> PathBuf {
    env.root.join(format!("workspaces/{}", mode.as_str()))
}

/// Small limits, so that every bound is reached quickly.
const LIMITS: &[(&str, &str)] = &[
    ("PYTHON_CPU_SECONDS", "2"),
    ("PYTHON_WALL_SECONDS", "20"),
    ("PYTHON_MEMORY_MB", "256"),
    ("PYTHON_PROCESSES", "32"),
    ("PYTHON_OUTPUT_BYTES", "65536"),
    ("PYTHON_FILE_BYTES", "1048576"),
    ("PYTHON_MAX_RUNS", "4"),
];

/// The template server on an instance of `mode` with [`LIMITS`].
pub fn runtime(env: &Env, mode: NetworkMode) -> Runtime {
    runtime_with(env, mode, &[], None)
}

/// The template server on an instance of `mode`, with the layers of less isolated instances
/// below its own (as `bulkhead serve` sets them up), [`LIMITS`] overridden by `set`, and the
/// workspace's disk limits when given.
pub fn runtime_with(
    env: &Env,
    mode: NetworkMode,
    set: &[(&str, &str)],
    disk: Option<bulkhead::workspace::DiskLimits>,
) -> Runtime {
    let mut lower: Vec<PathBuf> = NetworkMode::needed_for(bulkhead::policy::Sensitivity::Secret)
        .filter(|m| m.index() < mode.index())
        .map(|m| layer(env, m))
        .collect();
    lower.reverse();
    // As `bulkhead serve` does: under root, through the idmapped view of the host user.
    let owner =
        bulkhead::workspace::HostOwner::for_this_process(bulkhead::workspace::DEFAULT_HOST_UID)
            .unwrap()
            .map(std::sync::Arc::new);
    let mut workspaces = WorkspaceRoot::new(layer(env, mode))
        .unwrap()
        .with_lower(lower)
        .with_host_owner(owner)
        .unwrap();
    if let Some(d) = disk {
        workspaces = workspaces.with_limits(d);
    }
    let audit = AuditLog::open_file(
        &env.root
            .join(format!("state/audit-{}.jsonl", mode.as_str())),
        AuditOptions::default(),
    )
    .unwrap();
    Runtime::new(
        bulkhead_example::servers::server("template").unwrap(),
        mode,
        bulkhead::context::Presets::builtin(),
        workspaces,
        env.store.clone(),
        audit,
    )
    .unwrap()
    .with_connector_env(&|k: &str| {
        set.iter()
            .chain(LIMITS)
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap()
}

pub fn id(user: &str, session: &str) -> Identity {
    Identity::new(user, session).unwrap()
}

pub async fn py(rt: &Runtime, who: &Identity, code: &str) -> CallOutcome {
    rt.call(
        who,
        "run_python",
        json!({ "code": code }).as_object().cloned(),
    )
    .await
}

/// The script's result (`exit_code`, `stdout`, `stderr`, `limit`), the call must have succeeded.
fn result(out: &CallOutcome) -> Value {
    assert!(!out.is_error, "{}", out.text);
    out.structured
        .clone()
        .unwrap_or_else(|| serde_json::from_str(&out.text).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_runs_over_the_session_workspace() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let ana = id("ana", "s1");
    let w = rt
        .call(
            &ana,
            "write_file",
            json!({"path": "/workspace/in.csv", "content": "a,b\n1,2\n"})
                .as_object()
                .cloned(),
        )
        .await;
    assert!(!w.is_error, "{}", w.text);
    let out = py(
        &rt,
        &ana,
        "import csv, os\nrows = list(csv.reader(open('in.csv')))\nopen('out.txt', 'w').write(str(len(rows)))\nprint(os.getcwd(), rows[1])",
    )
    .await;
    let r = result(&out);
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(r["stdout"], "/workspace ['1', '2']\n", "{r}");
    let back = rt
        .call(
            &ana,
            "read_file",
            json!({"path": "/workspace/out.txt"}).as_object().cloned(),
        )
        .await;
    assert_eq!(back.text, "2");
    // Another session's script sees none of it.
    let other = py(
        &rt,
        &id("ana", "s2"),
        "import os; print(sorted(os.listdir('.')))",
    )
    .await;
    assert_eq!(result(&other)["stdout"], "[]\n");
}

/// What a script sees of the host: nothing of other sessions, the state store, the audit log,
/// the host's secrets or processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jail_shows_nothing_of_the_host_or_other_sessions() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let other = id("ben", "b1");
    let w = rt
        .call(
            &other,
            "write_file",
            json!({"path": "/workspace/secret.txt", "content": "ben's"})
                .as_object()
                .cloned(),
        )
        .await;
    assert!(!w.is_error, "{}", w.text);
    let full = layer(&env, NetworkMode::Full);
    let targets = [
        full.join("ben/b1/secret.txt"),
        full.join("ben"),
        env.root.join("state/compliance.db"),
        env.root.join("state/audit-full.jsonl"),
        PathBuf::from("/etc/shadow"),
        PathBuf::from("/etc/passwd"),
        PathBuf::from("/root"),
        PathBuf::from(format!("/proc/{}/environ", std::process::id())),
        PathBuf::from("/sys/fs/cgroup"),
    ];
    let list: Vec<String> = targets.iter().map(|p| p.display().to_string()).collect();
    let code = format!(
        "import json, os\nseen = {{p: os.path.exists(p) for p in {list:?}}}\nprocs = [p for p in os.listdir('/proc') if p.isdigit()] if os.path.isdir('/proc') else []\nprint(json.dumps({{'seen': seen, 'procs': len(procs), 'up': sorted(os.listdir('/workspace/..')), 'uid': os.getuid()}}))"
    );
    let r = result(&py(&rt, &id("ana", "a1"), &code).await);
    assert_eq!(r["exit_code"], 0, "{r}");
    let v: Value = serde_json::from_str(r["stdout"].as_str().unwrap()).unwrap();
    for (path, seen) in v["seen"].as_object().unwrap() {
        assert_eq!(seen, false, "the jail sees {path}");
    }
    assert!(v["procs"].as_u64().unwrap() <= 3, "{v}");
    assert_ne!(v["uid"], 0);
    assert!(!v["up"].to_string().contains("ben"), "{v}");
}

/// Links planted by a script lead nowhere: a symlink to the host or another session and a hard
/// link are refused by the server's own file tools, and the jail cannot link to a host file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_out_of_the_workspace_lead_nowhere() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let ben = id("ben", "b1");
    let w = rt
        .call(
            &ben,
            "write_file",
            json!({"path": "/workspace/secret.txt", "content": "ben's secret"})
                .as_object()
                .cloned(),
        )
        .await;
    assert!(!w.is_error);
    let theirs = layer(&env, NetworkMode::Full).join("ben/b1/secret.txt");
    let ana = id("ana", "a1");
    let code = format!(
        "import os\nopen('mine.txt', 'w').write('mine')\nos.symlink('/etc/shadow', 'shadow')\nos.symlink({theirs:?}, 'theirs')\nos.symlink('../../ben/b1/secret.txt', 'up')\nos.link('mine.txt', 'twin')\ntry:\n    os.link('/usr/bin/python3', 'py')\n    print('linked')\nexcept OSError as e:\n    print('refused', e.errno)\nos.mkfifo('fifo')\nprint(open('theirs').read() if os.path.exists('theirs') else 'absent')",
        theirs = theirs.display().to_string()
    );
    let r = result(&py(&rt, &ana, &code).await);
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(r["stdout"].as_str().unwrap().starts_with("refused"), "{r}");
    assert!(r["stdout"].as_str().unwrap().ends_with("absent\n"), "{r}");
    for path in ["shadow", "theirs", "up", "twin", "fifo"] {
        let out = rt
            .call(
                &ana,
                "read_file",
                json!({"path": format!("/workspace/{path}")})
                    .as_object()
                    .cloned(),
            )
            .await;
        assert!(out.is_error, "{path} was read: {}", out.text);
        assert!(
            !out.text.contains("ben's secret") && !out.text.contains("root:"),
            "{}",
            out.text
        );
    }
}

/// A TCP listener on the host's loopback: counts the connections it accepted.
pub struct Listener {
    pub port: u16,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
}

/// A listening abstract Unix socket of the host's network namespace, counting connections.
pub struct AbstractListener {
    pub name: String,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
}

impl AbstractListener {
    pub fn start() -> AbstractListener {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!(
            "bulkhead-test-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        );
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(s);
            }
        });
        AbstractListener { name, accepted }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Listener {
    pub async fn start() -> Listener {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(s);
            }
        });
        Listener { port, accepted }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// On every instance the jail has a network of its own with only loopback, even though these
/// test instances run unisolated on the host's network: `run_python` (a `write` tool with no
/// `egress`) reaches nothing of the host, not its 127.0.0.1 or ::1 listeners, not its abstract
/// Unix sockets, and no other address; and no process it can see holds the server's environment
/// (bubblewrap, the jail's PID 1, starts with none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_network_and_no_server_environment_in_the_jail_on_any_instance() {
    let env = env();
    let listener = Listener::start().await;
    let abstract_socket = AbstractListener::start();
    let code = format!(
        "import socket\nfor addr in [('127.0.0.1', {port}), ('10.255.255.1', 80), ('::1', {port}), '\\0{name}']:\n    fam = socket.AF_UNIX if isinstance(addr, str) else socket.AF_INET6 if ':' in addr[0] else socket.AF_INET\n    s = socket.socket(fam)\n    s.settimeout(2)\n    try:\n        s.connect(addr)\n        print('connected', addr)\n    except OSError as e:\n        print('refused', e.errno)\nimport os\nif not os.path.isdir('/proc'):\n    print('no proc')\nfor pid in [p for p in os.listdir('/proc') if p.isdigit()] if os.path.isdir('/proc') else []:\n    try:\n        print('environ', pid, open('/proc/%s/environ' % pid, 'rb').read())\n    except OSError as e:\n        print('environ', pid, 'refused', e.errno)\n",
        port = listener.port,
        name = abstract_socket.name,
    );
    let ana = id("ana", "n1");
    for mode in [NetworkMode::Full, NetworkMode::Proxied, NetworkMode::None] {
        let rt = runtime(&env, mode);
        let r = result(&py(&rt, &ana, &code).await);
        let out = r["stdout"].as_str().unwrap();
        assert!(!out.contains("connected"), "{mode:?}: {out}");
        assert_eq!(out.matches("refused").count(), 4, "{mode:?}: {r}");
        // A run has no `/proc`; where one is, the jail's processes are bubblewrap (PID 1) and
        // the script, at least.
        assert!(
            out.contains("no proc") || out.matches("environ").count() >= 2,
            "{mode:?}: {out}"
        );
        for (key, value) in std::env::vars() {
            if ["PATH", "LANG", "HOME", "TMPDIR"].contains(&key.as_str()) || value.len() < 6 {
                continue;
            }
            assert!(
                !out.contains(&value),
                "{mode:?}: the jail reads the server's {key}: {out}"
            );
        }
    }
    assert_eq!(listener.accepted(), 0, "a jail reached the host's loopback");
    assert_eq!(
        abstract_socket.accepted(),
        0,
        "a jail reached a host abstract socket"
    );
}

/// A jail opens sockets of the families it uses only: `AF_VSOCK` (which no network namespace
/// covers: on a VM its peer is the hypervisor), `AF_PACKET`, netlink other than `NETLINK_ROUTE`,
/// and the rest fail with `EAFNOSUPPORT`; `AF_UNIX`, `AF_INET`, `AF_INET6` and the C library's
/// `NETLINK_ROUTE` still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jail_opens_only_the_socket_families_it_uses() {
    let env = env();
    let code = r#"import socket, errno
tries = [('vsock', 40, socket.SOCK_STREAM, 0), ('packet', 17, socket.SOCK_RAW, 0),
         ('netlink_audit', 16, socket.SOCK_RAW, 9), ('netlink_uevent', 16, socket.SOCK_DGRAM, 15),
         ('bluetooth', 31, socket.SOCK_STREAM, 0), ('alg', 38, socket.SOCK_SEQPACKET, 0),
         ('unix', 1, socket.SOCK_STREAM, 0), ('inet', 2, socket.SOCK_STREAM, 0),
         ('inet6', 10, socket.SOCK_STREAM, 0), ('netlink_route', 16, socket.SOCK_RAW, 0)]
for name, fam, kind, proto in tries:
    try:
        socket.socket(fam, kind, proto).close()
        print(name, 'opened')
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
try:
    socket.socketpair(40)
    print('pair_vsock opened')
except OSError as e:
    print('pair_vsock', errno.errorcode.get(e.errno, e.errno))
socket.socketpair(socket.AF_UNIX)
print('pair_unix opened')
"#;
    let rt = runtime(&env, NetworkMode::Full);
    let r = result(&py(&rt, &id("ana", "af1"), code).await);
    let out = r["stdout"].as_str().unwrap();
    for refused in [
        "vsock",
        "packet",
        "netlink_audit",
        "netlink_uevent",
        "bluetooth",
        "alg",
        "pair_vsock",
    ] {
        assert!(
            out.lines().any(|l| l == format!("{refused} EAFNOSUPPORT")),
            "{refused} must fail with EAFNOSUPPORT: {r}"
        );
    }
    for opened in ["unix", "inet", "inet6", "netlink_route", "pair_unix"] {
        assert!(
            out.lines().any(|l| l == format!("{opened} opened")),
            "{opened} must open: {r}"
        );
    }
}

/// After each bomb, another session's script still runs.
async fn still_serving(rt: &Runtime) {
    let r = result(&py(rt, &id("control", "c1"), "print(6 * 7)").await);
    assert_eq!(r["stdout"], "42\n", "{r}");
}

fn says_limit(out: &CallOutcome, limit: &str) {
    let text = if out.is_error {
        out.text.clone()
    } else {
        result(out).to_string()
    };
    assert!(
        text.contains(&format!("python.{limit}")),
        "expected limit `{limit}`: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_bounded() {
    let env = env();
    let rt = runtime_with(
        &env,
        NetworkMode::Full,
        &[("PYTHON_WALL_SECONDS", "6")],
        None,
    );
    let t = Instant::now();
    let out = py(
        &rt,
        &id("ana", "f1"),
        "import os\nwhile True:\n    os.fork()",
    )
    .await;
    assert!(t.elapsed() < Duration::from_secs(90), "{:?}", t.elapsed());
    says_limit(&out, "processes");
    still_serving(&rt).await;
}

/// A run's process limit is set inside its own user namespace (by `prlimit`, before the program
/// starts), so the kernel counts only the jail's processes against it: other processes of the
/// server's uid on the host (another container's upstream, say) can neither use it up nor is the
/// jail bounded only by the server's own view of them. The program cannot raise it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_limit_belongs_to_the_jail() {
    let env = env();
    let rt = runtime_with(&env, NetworkMode::Full, &[("PYTHON_PROCESSES", "12")], None);
    let out = py(
        &rt,
        &id("ana", "n1"),
        "import resource\nprint(resource.getrlimit(resource.RLIMIT_NPROC))\ntry:\n    resource.setrlimit(resource.RLIMIT_NPROC, (100, 100))\n    print('raised')\nexcept (ValueError, OSError):\n    print('kept')",
    )
    .await;
    let r = result(&out);
    assert_eq!(r["stdout"], "(12, 12)\nkept\n", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_is_bounded() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let out = py(
        &rt,
        &id("ana", "m1"),
        "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))",
    )
    .await;
    says_limit(&out, "memory_mb");
    still_serving(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_is_bounded_by_cpu_and_a_sleeper_by_wall_time() {
    let env = env();
    // The loop's wall time is far above its CPU time, so that the CPU limit is reached first
    // however busy the machine is (a loaded CI runner gives the loop a fraction of a core).
    let rt = runtime_with(
        &env,
        NetworkMode::Full,
        &[("PYTHON_WALL_SECONDS", "120")],
        None,
    );
    let out = py(&rt, &id("ana", "l1"), "while True:\n    pass").await;
    says_limit(&out, "cpu_seconds");
    let rt = runtime_with(
        &env,
        NetworkMode::Full,
        &[("PYTHON_WALL_SECONDS", "3")],
        None,
    );
    let t = Instant::now();
    let out = py(
        &rt,
        &id("ana", "l2"),
        "import time\nprint('started', flush=True)\ntime.sleep(3600)",
    )
    .await;
    assert!(out.is_error, "{}", out.text);
    says_limit(&out, "wall_seconds");
    assert!(
        out.text.contains("started"),
        "the output so far is kept: {}",
        out.text
    );
    assert!(t.elapsed() < Duration::from_secs(90), "{:?}", t.elapsed());
    still_serving(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filling_the_disk_is_bounded() {
    let env = env();
    let disk = bulkhead::workspace::DiskLimits {
        max_bytes: 4 << 20,
        ..Default::default()
    };
    // A short wall time bounds what a run can write if the quota check were slow.
    let rt = runtime_with(
        &env,
        NetworkMode::Full,
        &[("PYTHON_WALL_SECONDS", "15")],
        Some(disk),
    );
    // One file past the largest file a run may write.
    let out = py(
        &rt,
        &id("ana", "d1"),
        "open('big', 'wb').write(b'x' * (2 << 20))",
    )
    .await;
    says_limit(&out, "file_bytes");
    // Many files past the session's quota.
    let ana = id("ana", "d2");
    let out = py(&rt, &ana, "import itertools\nfor i in itertools.count():\n    open(f'f{i}', 'wb').write(b'x' * (256 << 10))").await;
    assert!(out.is_error, "{}", out.text);
    assert!(out.text.contains("workspace.max_bytes"), "{}", out.text);
    // The session's other writes are refused until it frees space; the server goes on.
    let w = rt
        .call(
            &ana,
            "write_file",
            json!({"path": "/workspace/more.txt", "content": "x"})
                .as_object()
                .cloned(),
        )
        .await;
    assert!(
        w.is_error && w.text.contains("workspace.max_bytes"),
        "{}",
        w.text
    );
    still_serving(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_output_is_bounded() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let out = py(
        &rt,
        &id("ana", "o1"),
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    )
    .await;
    assert!(out.is_error, "{}", out.text.len());
    says_limit(&out, "output_bytes");
    assert!(out.text.len() < 16 << 10, "{}", out.text.len());
    still_serving(&rt).await;
}

/// The server's process is out of reach: not in the jail's PID namespace (no ptrace, no kill),
/// and a setuid program gains nothing (no new privileges).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_process_is_out_of_reach_and_setuid_gains_nothing() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let me = std::process::id();
    let code = format!(
        "import ctypes, os, subprocess\nlibc = ctypes.CDLL(None, use_errno=True)\nr = libc.ptrace(16, {me}, 0, 0)\nprint('ptrace', r, ctypes.get_errno())\nr = libc.ptrace(0, 0, 0, 0)\nprint('traceme', r, ctypes.get_errno())\nr = libc.syscall(425, 8, 0)\nprint('io_uring', r, ctypes.get_errno())\nr = libc.unshare(0x10000000)\nprint('userns', r, ctypes.get_errno())\ntry:\n    os.kill({me}, 9)\n    print('killed')\nexcept ProcessLookupError:\n    print('no such process')\np = subprocess.run(['/usr/bin/su', '-c', 'id -u', 'root'], capture_output=True, stdin=subprocess.DEVNULL)\nprint('su', p.returncode)\nstatus = open('/proc/self/status').read() if os.path.exists('/proc/self/status') else 'NoNewPrivs:\\t1'\nprint([l for l in status.splitlines() if l.startswith('NoNewPrivs')][0].split()[1])\nprint('euid', os.geteuid())"
    );
    let r = result(&py(&rt, &id("ana", "p1"), &code).await);
    let out = r["stdout"].as_str().unwrap();
    // Not in the jail's PID namespace (ESRCH) — and tracing is refused outright by the
    // system-call filter (EPERM), as is io_uring.
    assert!(
        out.contains("ptrace -1 1\n") || out.contains("ptrace -1 3\n"),
        "{r}"
    );
    assert!(out.contains("traceme -1 1\n"), "{r}");
    assert!(out.contains("io_uring -1 1\n"), "{r}");
    assert!(
        out.contains("userns -1 1\n"),
        "a nested user namespace: {r}"
    );
    assert!(out.contains("no such process"), "{r}");
    assert!(!out.contains("su 0"), "{r}");
    assert!(out.contains("\n1\neuid 1000"), "{r}");
    still_serving(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_retryable_errors() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let out = py(&rt, &id("ana", "b1"), "print('a')\0").await;
    assert!(
        out.is_error && !out.text.starts_with("[FATAL]") && out.text.contains("NUL"),
        "{}",
        out.text
    );
    let long = "#".to_string() + &"é".repeat(70_000);
    let out = py(&rt, &id("ana", "b1"), &long).await;
    assert!(
        out.is_error && !out.text.starts_with("[FATAL]") && out.text.contains("too long"),
        "{}",
        out.text
    );
    let out = rt
        .call(
            &id("ana", "b1"),
            "run_python",
            json!({}).as_object().cloned(),
        )
        .await;
    assert!(out.is_error && out.text.contains("code"), "{}", out.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_at_once_are_bounded() {
    let env = env();
    let rt = Arc::new(runtime_with(
        &env,
        NetworkMode::Full,
        &[("PYTHON_MAX_RUNS", "1")],
        None,
    ));
    let first = {
        let rt = rt.clone();
        tokio::spawn(async move {
            py(&rt, &id("ana", "r1"), "import os, time\nopen('started', 'w').close()\nwhile not os.path.exists('go'):\n    time.sleep(0.01)").await
        })
    };
    // Wait (bounded) until the first run holds the slot.
    let started = layer(&env, NetworkMode::Full).join("ana/r1/started");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !started.exists() {
        assert!(!first.is_finished(), "the first run ended early");
        assert!(Instant::now() < deadline, "the first run never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let out = py(&rt, &id("ben", "r2"), "print(1)").await;
    assert!(
        out.is_error && out.text.contains("python.max_runs"),
        "{}",
        out.text
    );
    let w = rt
        .call(
            &id("ana", "r1"),
            "write_file",
            json!({"path": "/workspace/go", "content": ""})
                .as_object()
                .cloned(),
        )
        .await;
    assert!(!w.is_error, "{}", w.text);
    let first = first.await.unwrap();
    assert_eq!(result(&first)["exit_code"], 0);
    still_serving(&rt).await;
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock Python's `time.monotonic_ns()` reads in the jail
/// (PID and mount namespaces do not change it), so ticks sent from a jail compare with the test's
/// own instants.
fn monotonic_ns() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

/// Where a jail's senders reach [`Ticks`]: a Unix socket in the session's folder (the jail has no
/// network; a socket file of its `/workspace` is the one way to be heard outside while it runs).
const TICKS_IN_JAIL: &str = "/workspace/.ticks.sock";

/// A listener on a Unix socket in a session's folder (`session_dir`, the host side of the jail's
/// `/workspace`) that records, per connection, the newest tick (`<ns>\n`) and whether the sender
/// has gone (EOF).
struct Ticks {
    conns: Arc<std::sync::Mutex<Vec<(u128, bool)>>>,
}

impl Ticks {
    fn start(session_dir: &Path) -> Ticks {
        use std::io::BufRead as _;
        std::fs::create_dir_all(session_dir).unwrap();
        let l = std::os::unix::net::UnixListener::bind(session_dir.join(".ticks.sock")).unwrap();
        // Made here as the server would have made them: the workspace user's under root.
        if nix::unistd::geteuid().is_root() {
            let user = Some(bulkhead::workspace::DEFAULT_HOST_UID);
            for p in [
                session_dir.parent().unwrap(),
                session_dir,
                &session_dir.join(".ticks.sock"),
            ] {
                std::os::unix::fs::lchown(p, user, user).unwrap();
            }
        }
        let conns: Arc<std::sync::Mutex<Vec<(u128, bool)>>> = Arc::default();
        let all = conns.clone();
        std::thread::spawn(move || {
            for s in l.incoming().take(16) {
                let Ok(s) = s else { return };
                let all = all.clone();
                let at = {
                    let mut v = all.lock().unwrap();
                    v.push((0, false));
                    v.len() - 1
                };
                std::thread::spawn(move || {
                    let mut r = std::io::BufReader::new(s);
                    let mut line = String::new();
                    loop {
                        line.clear();
                        match r.read_line(&mut line) {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {
                                if let Ok(ns) = line.trim().parse::<u128>() {
                                    let mut v = all.lock().unwrap();
                                    v[at].0 = v[at].0.max(ns);
                                }
                            }
                        }
                    }
                    all.lock().unwrap()[at].1 = true;
                });
            }
        });
        Ticks { conns }
    }

    fn snapshot(&self) -> Vec<(u128, bool)> {
        self.conns.lock().unwrap().clone()
    }

    /// Waits (bounded) until `n` senders have ticked.
    fn wait_senders(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.snapshot().iter().filter(|c| c.0 > 0).count() < n {
            assert!(
                Instant::now() < deadline,
                "senders never ticked: {:?}",
                self.snapshot()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits (bounded) until every sender has gone.
    fn wait_all_gone(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.snapshot().iter().all(|c| c.1) {
            assert!(
                Instant::now() < deadline,
                "a sender is still connected: {:?}",
                self.snapshot()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A script that writes `before.txt`, starts a detached background sender (its own session,
/// as a daemon would) and, unless `then_exit`, keeps sending itself for ever.
fn senders(then_exit: bool) -> String {
    senders_every(then_exit, 0.005)
}

/// [`senders`] with the pause between ticks (0: as fast as the socket takes them).
fn senders_every(then_exit: bool, pause: f64) -> String {
    let sender = format!(
        "import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.connect('{TICKS_IN_JAIL}')\ns.sendall(b'%d\\n' % time.monotonic_ns())\nopen('/tmp/sender-up', 'w').close()\nwhile True:\n    s.sendall(b'%d\\n' % time.monotonic_ns())\n    time.sleep({pause})"
    );
    // The script ends once its sender has sent (bounded: 20 s), whatever the machine's speed.
    let tail = if then_exit {
        "import os\nfor _ in range(400):\n    if os.path.exists('/tmp/sender-up'):\n        break\n    time.sleep(0.05)".to_string()
    } else {
        format!("exec({sender:?})")
    };
    format!(
        "import subprocess, sys, time\nopen('before.txt', 'w').write('written while public')\nsubprocess.Popen([sys.executable, '-I', '-c', {sender:?}], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n{tail}"
    )
}

/// Issue 24's test: a background process started by a public session's script, and the script
/// itself still running, are dead before a confidential result (from another instance, in another
/// process) reaches the caller; the next run happens on the instance of the new level, with the
/// workspace intact.
async fn an_escalation_elsewhere_ends_the_sessions_jails_first(store: super::procs::Store) {
    use super::procs::{Deployment, call, client, load};
    let dep = Deployment::new(store, "sbxesc").await;
    let full = dep.start("full", None);
    let proxied = dep.start("proxied", None);
    let ticks = Ticks::start(&dep.path().join("workspaces/template/ana/esc1"));
    let on_full = client(&full.url, "ana", "esc1").await;
    let code = senders(false);
    let running = tokio::spawn(async move {
        let r = call(&on_full, "run_python", json!({ "code": code })).await;
        (on_full, r)
    });
    ticks.wait_senders(2);
    let on_proxied = client(&proxied.url, "ana", "esc1").await;
    let loaded = call(&on_proxied, "load_sensitive_dataset", load("customers"))
        .await
        .unwrap();
    let returned = monotonic_ns();
    assert!(!loaded.is_error, "{}", loaded.text);
    assert_eq!(loaded.level, "confidential");
    let newest = ticks.snapshot().iter().map(|c| c.0).max().unwrap();
    assert!(
        newest < returned,
        "{store:?}: a sender of the public session ticked {} µs after the confidential result returned",
        (newest - returned) / 1000
    );
    ticks.wait_all_gone();
    let newest_after = ticks.snapshot().iter().map(|c| c.0).max().unwrap();
    assert!(
        newest_after < returned,
        "{store:?}: a sender outlived the escalation"
    );
    let (on_full, stopped) = running.await.unwrap();
    let stopped = stopped.unwrap();
    assert!(
        stopped.is_error && stopped.text.contains("was stopped"),
        "{}",
        stopped.text
    );
    // The full instance refuses the session now; the proxied one runs it, workspace intact.
    let refused = call(&on_full, "run_python", json!({"code": "print(1)"}))
        .await
        .unwrap();
    assert!(refused.is_error, "{}", refused.text);
    let again = call(
        &on_proxied,
        "run_python",
        json!({"code": "print(open('before.txt').read())"}),
    )
    .await
    .unwrap();
    assert!(
        !again.is_error && again.text.contains("written while public"),
        "{}",
        again.text
    );
    for c in [on_full, on_proxied] {
        let _ = c.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_escalation_elsewhere_ends_the_sessions_jails_first() {
    an_escalation_elsewhere_ends_the_sessions_jails_first(super::procs::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_escalation_elsewhere_ends_the_sessions_jails_first() {
    an_escalation_elsewhere_ends_the_sessions_jails_first(super::procs::Store::Postgres).await;
}

/// A background process outlives nothing: it is dead when the call that started it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_process_dies_with_its_call() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let ticks = Ticks::start(&layer(&env, NetworkMode::Full).join("ana/bg1"));
    let out = py(&rt, &id("ana", "bg1"), &senders(true)).await;
    let returned = monotonic_ns();
    assert_eq!(result(&out)["exit_code"], 0, "{}", out.text);
    ticks.wait_all_gone();
    let seen = ticks.snapshot();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].0 > 0 && seen[0].0 < returned, "{seen:?}");
}

/// A call dropped mid-run (the client cancelled, the request went away) leaves nothing running:
/// by the time the dropped future is gone, the jail and its background sender are dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_leaves_nothing_running() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let ticks = Ticks::start(&layer(&env, NetworkMode::Full).join("ana/cx1"));
    let code = senders_every(false, 0.0);
    let who = id("ana", "cx1");
    let mut run = Box::pin(py(&rt, &who, &code));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        tokio::select! {
            out = &mut run => panic!("the run ended by itself: {}", out.text),
            () = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
        if ticks.snapshot().iter().filter(|c| c.0 > 0).count() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "senders never ticked");
    }
    drop(run);
    let dropped = monotonic_ns();
    ticks.wait_all_gone();
    let newest = ticks.snapshot().iter().map(|c| c.0).max().unwrap();
    assert!(
        newest < dropped,
        "a sender ticked after the call was dropped"
    );
    // And the session is free: an escalation goes through at once.
    let out = rt
        .call(
            &who,
            "load_sensitive_dataset",
            json!({"dataset_name": "after_cancel"}).as_object().cloned(),
        )
        .await;
    assert!(
        out.is_error,
        "the full instance cannot serve confidential: {}",
        out.text
    );
}

/// Where no cgroup can be made (`BULKHEAD_SANDBOX_CGROUP` names a folder without controllers):
/// as root the jail does not start, naming the limits it cannot enforce; as another user the
/// rlimits inside the jail's user namespace hold both limits, the memory split over the jail's
/// tasks (300 forks and 8 × 100 MiB against `processes: 32`, `memory_mb: 256`). Each case runs in
/// a child of this test binary (the cgroup choice is the process's).
#[test]
fn limits_hold_where_no_cgroup_can_be_made() {
    const NAME: &str = "sandbox::limits_hold_where_no_cgroup_can_be_made";
    if let Some(case) = std::env::var_os("BH_NO_CGROUP_CASE") {
        return tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(no_cgroup_case(case.to_string_lossy().into_owned()));
    }
    let empty = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(empty.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for (case, uid) in [("root", None), ("user", Some(65534))] {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env("BH_NO_CGROUP_CASE", case)
            .env("BULKHEAD_SANDBOX_CGROUP", empty.path())
            .env("TMPDIR", "/tmp");
        if let Some(u) = uid {
            use std::os::unix::process::CommandExt as _;
            cmd.uid(u).gid(u).current_dir("/tmp").env("HOME", "/tmp");
        }
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{case}: {text}"
        );
    }
}

const FORKS: &str = "import os, time\nmade = 0\nfor i in range(300):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(5)\n        os._exit(0)\n    made += 1\nprint('forked', made)\n";
const HOLD: &str = "import os, time\nheld = 0\nkids = []\nfor i in range(8):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        try:\n            b = bytearray(100 << 20)\n            os._exit(0)\n        except MemoryError:\n            os._exit(3)\n    kids.append(pid)\nfor pid in kids:\n    _, status = os.waitpid(pid, 0)\n    held += os.waitstatus_to_exitcode(status) == 0\nprint('held', held)\n";

async fn no_cgroup_case(case: String) {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let ana = id("ana", "ncg");
    for code in [FORKS, HOLD] {
        let out = py(&rt, &ana, code).await;
        if case == "root" {
            eprintln!("{case}: {}", out.text);
            assert!(
                out.is_error
                    && out
                        .text
                        .contains("`processes` and `memory_mb` cannot be enforced here"),
                "root without a cgroup must refuse: {}",
                out.text
            );
            continue;
        }
        let r = result(&out);
        eprintln!("{case}: {r}");
        let said = r["stdout"].as_str().unwrap_or_default().to_string();
        if code == FORKS {
            // 256 MiB over tasks of at least 64 MiB: 4 tasks in all (bubblewrap and the script
            // among them), so at most 2 more processes.
            let made: u64 = said
                .trim()
                .strip_prefix("forked ")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{r}"));
            assert!(
                made <= 2,
                "{made} forks with processes bounded at 4 tasks: {r}"
            );
        } else {
            assert_eq!(
                said.trim(),
                "held 0",
                "300 MiB held with 64 MiB per process: {r}"
            );
        }
    }
}

/// Nothing a script writes can raise privileges on the host: under a server running as root
/// (the jail's user maps to it), a setuid file, a setuid and setgid copy of an ELF program, a
/// file created with a setuid mode, a setgid folder and a file capability are all refused, and
/// no file of the session's folder on the host carries a setuid or setgid bit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_cannot_plant_a_setuid_file_on_the_host() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let code = r#"import os, shutil
def attempt(name, f):
    try:
        f()
        print(name, 'done')
    except OSError as e:
        print(name, 'refused', e.errno)
open('suid', 'w').write('#!/bin/sh\nid\n')
attempt('chmod', lambda: os.chmod('suid', 0o4755))
shutil.copyfile('/usr/bin/true', 'elf')
attempt('chmod_elf', lambda: os.chmod('elf', 0o6755))
attempt('fchmod', lambda: os.fchmod(os.open('elf', os.O_RDONLY), 0o2755))
attempt('create', lambda: os.close(os.open('created', os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt('mkdir', lambda: os.mkdir('sgid-dir', 0o2775))
attempt('capability', lambda: os.setxattr('elf', 'security.capability', b'\x01\x00\x00\x02\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'))
attempt('plain_chmod', lambda: os.chmod('elf', 0o755))
try:
    print('mountinfo', open('/proc/self/mountinfo').read().replace('\n', ' | '))
except OSError as e:
    print('mountinfo unreadable', e.errno)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print('statmount', libc.syscall(457, 0, 0, 0, 0), ctypes.get_errno())
print('listmount', libc.syscall(458, 0, 0, 0, 0), ctypes.get_errno())
"#;
    let r = result(&py(&rt, &id("ana", "suid1"), code).await);
    let out = r["stdout"].as_str().unwrap();
    for refused in [
        "chmod",
        "chmod_elf",
        "fchmod",
        "create",
        "mkdir",
        "capability",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("{refused} refused"))),
            "{refused} must be refused: {r}"
        );
    }
    assert!(out.contains("plain_chmod done"), "{r}");
    // Neither the mount table nor the mount system calls name a host path.
    let host = env.root.to_string_lossy().into_owned();
    let mounts = out.lines().find(|l| l.starts_with("mountinfo")).unwrap();
    assert!(
        !mounts.contains(&host) && !mounts.contains("/workspaces/"),
        "the jail's mount table names a host path: {mounts}"
    );
    for call in ["statmount", "listmount"] {
        let line = out.lines().find(|l| l.starts_with(call)).unwrap();
        assert!(
            line.ends_with(" -1 1") || line.ends_with(" -1 38"),
            "{call} must be refused: {line}"
        );
    }
    let folder = layer(&env, NetworkMode::Full).join("ana/suid1");
    let root = nix::unistd::geteuid().is_root();
    let mut seen = 0;
    for e in std::fs::read_dir(&folder).unwrap().flatten() {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let meta = e.metadata().unwrap();
        let mode = meta.permissions().mode();
        seen += 1;
        assert_eq!(
            mode & 0o6000,
            0,
            "{} is setuid or setgid on the host ({mode:o})",
            e.path().display()
        );
        if root {
            assert_eq!(
                (meta.uid(), meta.gid()),
                (
                    bulkhead::workspace::DEFAULT_HOST_UID,
                    bulkhead::workspace::DEFAULT_HOST_UID
                ),
                "{} is not the workspace user's on the host",
                e.path().display()
            );
        }
    }
    assert!(
        seen >= 2,
        "the script's files are not in {}",
        folder.display()
    );
}
