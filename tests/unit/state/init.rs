//! A store never silently starts over: created only for a fresh deployment or explicitly,
//! recorded in the workspace root, and refused when missing or replaced afterwards.

use super::*;
use bulkhead::state::init::{MARKER, force_init, open_store};
use bulkhead::state::{InitPolicy, StateErrorKind, StoreLocation};

struct Deployment {
    _dir: tempfile::TempDir,
    db: PathBuf,
    ws: PathBuf,
}

fn deployment() -> Deployment {
    let dir = tempfile::tempdir().unwrap();
    Deployment {
        db: dir.path().join("state/compliance-t.db"),
        ws: dir.path().join("workspaces/t"),
        _dir: dir,
    }
}

fn start(d: &Deployment, policy: InitPolicy) -> Result<StateStore, StateError> {
    let loc = StoreLocation::Sqlite { db: d.db.clone() };
    rt().block_on(open_store(&loc, options(), &d.ws, &[], policy))
}

fn session_files(d: &Deployment, who: &Identity) {
    let p = d.ws.join(who.user()).join(who.session()).join("results");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("confidential.csv"), "id,title\n1,Acme renewal").unwrap();
}

#[test]
fn a_fresh_deployment_creates_its_store_and_records_it() {
    let d = deployment();
    let store = start(&d, InitPolicy::FirstStart).unwrap();
    let marker = std::fs::read_to_string(d.ws.join(MARKER)).unwrap();
    assert!(
        marker.contains(&format!("store {}", store.store_id())),
        "{marker}"
    );
    // A second instance of the same deployment opens the same store.
    let again = start(&d, InitPolicy::FirstStart).unwrap();
    assert_eq!(again.store_id(), store.store_id());
}

#[test]
fn a_deleted_store_is_never_recreated_empty() {
    let d = deployment();
    let who = id("alice", "s1");
    {
        let store = start(&d, InitPolicy::FirstStart).unwrap();
        raise(&store, &who, "dataset:customers", Sensitivity::Confidential);
        session_files(&d, &who);
    }
    std::fs::remove_file(&d.db).unwrap();
    let e = start(&d, InitPolicy::FirstStart).map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Missing, "{e}");
    assert!(e.detail().contains("bulkhead state init"), "{e}");
    assert!(!d.db.exists(), "recreated");
    // Marker deleted too: the session files alone stop a silent start-over.
    std::fs::remove_file(d.ws.join(MARKER)).unwrap();
    let e = start(&d, InitPolicy::FirstStart).map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Missing, "{e}");
    assert!(!d.db.exists(), "recreated");
}

#[test]
fn a_replaced_store_is_refused() {
    let d = deployment();
    drop(start(&d, InitPolicy::FirstStart).unwrap());
    // Another, fresh store in its place (a different id).
    std::fs::remove_file(&d.db).unwrap();
    std::fs::remove_file(bulkhead::state::sqlite::lock_path(&d.db)).unwrap();
    drop(StateStore::create_sqlite(&d.db, options()).unwrap());
    let e = start(&d, InitPolicy::FirstStart).map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Tampered, "{e}");
}

#[test]
fn recovery_starts_every_session_with_files_at_secret() {
    let d = deployment();
    let (a, b) = (id("alice", "s1"), id("bob", "s9"));
    {
        let store = start(&d, InitPolicy::FirstStart).unwrap();
        raise(&store, &a, "dataset:customers", Sensitivity::Confidential);
        session_files(&d, &a);
        session_files(&d, &b);
    }
    std::fs::remove_file(&d.db).unwrap();
    std::fs::remove_file(bulkhead::state::sqlite::lock_path(&d.db)).unwrap();
    let loc = StoreLocation::Sqlite { db: d.db.clone() };
    let recovered = rt()
        .block_on(force_init(&loc, options(), std::slice::from_ref(&d.ws)))
        .unwrap();
    assert_eq!(recovered, vec![a.clone(), b.clone()]);
    let store = start(&d, InitPolicy::MustExist).unwrap();
    for who in [&a, &b] {
        assert_eq!(level(&store, who).unwrap(), Sensitivity::Secret, "{who}");
    }
}

/// The layer of `d`'s instance in `mode` (`t.proxied`, `t.none` beside `t`).
fn layer(d: &Deployment, mode: &str) -> PathBuf {
    d.ws.with_file_name(format!("t.{mode}"))
}

fn start_as(d: &Deployment, own: &Path, lower: &[PathBuf]) -> Result<StateStore, StateError> {
    let loc = StoreLocation::Sqlite { db: d.db.clone() };
    rt().block_on(open_store(
        &loc,
        options(),
        own,
        lower,
        InitPolicy::FirstStart,
    ))
}

#[test]
fn instances_start_in_any_order_and_write_only_their_own_layer() {
    // Compose starts a fresh deployment's instances in any order, and the lower layers are
    // read-only in the more isolated ones: the isolated instance first, then proxied, then full.
    let d = deployment();
    let (proxied, none) = (layer(&d, "proxied"), layer(&d, "none"));
    let first = start_as(&d, &none, &[proxied.clone(), d.ws.clone()]).unwrap();
    assert!(none.join(MARKER).exists());
    assert!(
        !proxied.join(MARKER).exists() && !d.ws.join(MARKER).exists(),
        "wrote a lower layer"
    );
    let second = start_as(&d, &proxied, std::slice::from_ref(&d.ws)).unwrap();
    let third = start_as(&d, &d.ws, &[]).unwrap();
    assert_eq!(first.store_id(), second.store_id());
    assert_eq!(first.store_id(), third.store_id());
    // Session files in a lower layer count: a deleted store is not recreated from above.
    let who = id("alice", "s1");
    session_files(&d, &who);
    drop((first, second, third));
    std::fs::remove_file(&d.db).unwrap();
    std::fs::remove_file(none.join(MARKER)).unwrap();
    let e = start_as(&d, &none, &[proxied, d.ws.clone()])
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Missing, "{e}");
}

#[test]
fn a_lower_layer_naming_another_store_is_refused() {
    let d = deployment();
    let proxied = layer(&d, "proxied");
    drop(start_as(&d, &d.ws, &[]).unwrap());
    std::fs::create_dir_all(&proxied).unwrap();
    // The full layer names store A; the proxied layer was made for store B.
    bulkhead::state::StoreMarker::at(&proxied)
        .write("someotherstore", "elsewhere")
        .unwrap();
    let e = start_as(&d, &proxied, std::slice::from_ref(&d.ws))
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Tampered, "{e}");
    assert!(e.detail().contains("t.proxied"), "{e}");
}

#[test]
fn recovery_covers_every_layer() {
    let d = deployment();
    let proxied = layer(&d, "proxied");
    let (a, b) = (id("alice", "s1"), id("bob", "s2"));
    drop(start_as(&d, &proxied, std::slice::from_ref(&d.ws)).unwrap());
    session_files(&d, &a);
    let p = proxied.join(b.user()).join(b.session());
    std::fs::create_dir_all(&p).unwrap();
    std::fs::remove_file(&d.db).unwrap();
    std::fs::remove_file(bulkhead::state::sqlite::lock_path(&d.db)).unwrap();
    let loc = StoreLocation::Sqlite { db: d.db.clone() };
    let layers = [d.ws.clone(), proxied.clone(), layer(&d, "none")];
    let recovered = rt().block_on(force_init(&loc, options(), &layers)).unwrap();
    assert_eq!(recovered, vec![a.clone(), b.clone()]);
    // Both existing layers name the new store; the missing one was not made.
    let store = start_as(&d, &proxied, std::slice::from_ref(&d.ws)).unwrap();
    assert!(!layer(&d, "none").exists());
    for who in [&a, &b] {
        assert_eq!(level(&store, who).unwrap(), Sensitivity::Secret, "{who}");
    }
}

#[test]
fn must_exist_never_creates() {
    let d = deployment();
    let e = start(&d, InitPolicy::MustExist).map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Missing, "{e}");
    assert!(!d.db.exists());
}

#[test]
fn a_state_dir_inside_the_workspaces_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    for (state, ws) in [("ws/state", "ws"), ("s", "s/ws"), ("x", "x")] {
        let text = format!(
            "auth: {{ issuer: i, audience: a, keys: [{{ kid: k, alg: HS256, secret: 0123456789abcdef0123456789abcdef }}] }}\nstate: {{ dir: {state}, workspaces: {ws} }}\n"
        );
        let e = bulkhead::config::Config::parse_at(&text, "t", &|_| None, base).unwrap_err();
        assert!(e.to_string().contains("must not contain each other"), "{e}");
    }
    let text = "auth: { issuer: i, audience: a, keys: [{ kid: k, alg: HS256, secret: 0123456789abcdef0123456789abcdef }] }\nstate: { dir: rel/state, workspaces: rel/ws }\n";
    let c = bulkhead::config::Config::parse_at(text, "t", &|_| None, base).unwrap();
    assert_eq!(
        c.state.dir,
        base.join("rel/state"),
        "relative paths are resolved once"
    );
    assert!(c.state.dir.is_absolute() && c.state.workspaces.is_absolute());
}
