//! The state store against real files and real processes: never lowers, concurrent writers from
//! several processes, writers killed mid-write, damaged and tampered files, never starting over.

pub(crate) mod backends;
mod damage;
mod init;
mod migrate;
mod model;
mod ratchet;
mod tamper;
mod tls;

use bulkhead::identity::Identity;
use bulkhead::policy::Sensitivity;
use bulkhead::state::{StateError, StateStore, StoreOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ROLE: &str = "BULKHEAD_STATE_CHILD";
pub const DB: &str = "BULKHEAD_STATE_DB";
pub const SEED: &str = "BULKHEAD_STATE_SEED";
pub const GO: &str = "BULKHEAD_STATE_GO";

pub fn id(u: &str, s: &str) -> Identity {
    Identity::new(u, s).unwrap()
}

/// One multi-threaded runtime for the synchronous tests: a PostgreSQL connection's task lives on
/// the runtime that opened it and must keep running between `block_on` calls.
pub fn rt() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

pub fn options() -> StoreOptions {
    let mut o = StoreOptions::new("t");
    o.lock_timeout = Duration::from_secs(20);
    o
}

/// Creates (explicitly) or opens the SQLite store at `path`.
pub fn open(path: &Path) -> StateStore {
    StateStore::create_sqlite(path, options()).unwrap()
}

/// Opens an existing store; never creates.
pub fn open_existing(path: &Path) -> Result<StateStore, StateError> {
    bulkhead::state::sqlite::SqliteStore::open(path, options()).map(StateStore::Sqlite)
}

pub fn raise(store: &StateStore, who: &Identity, dataset: &str, level: Sensitivity) -> Sensitivity {
    rt().block_on(store.raise(who, dataset, level)).unwrap()
}

pub fn level(store: &StateStore, who: &Identity) -> Result<Sensitivity, StateError> {
    rt().block_on(store.level(who))
}

/// The libtest name of a test in this module tree, for `--exact`.
pub fn test_name(module: &str, f: &str) -> String {
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    format!("{module}::{f}")
}

pub fn spawn_child(module: &str, name: &str, envs: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        &test_name(module, name),
        "--nocapture",
        "--include-ignored",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits for `child` until `deadline`, killing it and failing when it overruns.
pub fn wait_bounded(child: &mut Child, deadline: Instant) -> std::process::ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child {} overran its time bound", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A store with 200 secret sessions, closed, so its whole state is in the main file.
pub fn secret_store(dir: &Path) -> PathBuf {
    let path = dir.join("c.db");
    let store = open(&path);
    let rt = rt();
    for i in 0..200 {
        let who = id("alice", &format!("s{i}"));
        rt.block_on(store.raise(&who, "payroll", Sensitivity::Secret))
            .unwrap();
    }
    drop(store);
    assert!(!dir.join("c.db-wal").exists(), "closing must checkpoint");
    path
}
