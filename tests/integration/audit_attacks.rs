//! The attacker of the audit evidence who can write the log and the store but has no signing key
//! (docs/guarantees.md, "The audit chain"), on real `bulkhead serve` processes with a signing
//! key, on files and on PostgreSQL: a rollback to a writer's first checkpoint (its seq -1 blank
//! check) with its records rewritten, a consistent rollback of log and store to earlier
//! checkpoints (only an anchor sees it, and sees each), a whole writer removed, a forged
//! unchained record prepended, a fake rotation, a trimmed oldest file after a real rotation.
//! And the honest case: several writers through rotations that drop a past writer's every
//! file verify clean.

use super::procs::{Deployment, Store, call, client};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

const LOG: &str = "state/audit-template.jsonl";
const SHARED: &str = "state/shared-sessions-default.db";

async fn calls(url: &str, user: &str, n: usize) {
    let c = client(url, user, user).await;
    for i in 0..n {
        let _ = call(
            &c,
            "write_file",
            json!({"path": format!("/workspace/{user}{i}.txt"), "content": "x"}),
        )
        .await;
    }
    let _ = c.cancel().await;
}

/// A deployment whose checkpoints are signed by a fresh key.
async fn signed(store: Store, tag: &str, audit: &str) -> Deployment {
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    let dep = Deployment::new(store, tag).await;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).unwrap();
    let pem = ed25519_dalek::SigningKey::from_bytes(&seed)
        .to_pkcs8_pem(Default::default())
        .unwrap();
    std::fs::write(dep.path().join("audit.key"), pem.as_bytes()).unwrap();
    dep.edit_config(
        "audit:\n",
        &format!("audit:\n  signing_key: audit.key\n  lease_secs: 3\n{audit}"),
    );
    dep
}

/// A copy of a SQLite deployment's state, configuration and key, to tamper with.
fn copy(dep: &Deployment) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    std::fs::copy(dep.path().join("audit.key"), to.path().join("audit.key")).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(dep.path().join("state"))
        .arg(to.path().join("state"))
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::copy(&dep.config, to.path().join("config.yaml")).unwrap();
    to
}

fn verify(dir: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["audit", "verify", "--wait-ms", "0"];
    args.extend_from_slice(extra);
    super::procs::cli_at(
        &dir.join("config.yaml"),
        &[("BULKHEAD_LOG".into(), "warn".into())],
        &args,
    )
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn link(line: &str) -> (String, i64) {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    (v["w"].as_str().unwrap().into(), v["seq"].as_i64().unwrap())
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Rewrites `writer`'s records (their tool renamed) with every hash recomputed from its genesis:
/// what an attacker without the key can always do to a chain.
fn reforge(lines: &mut [String], writer: &str) {
    let mut prev = sha256_hex(format!("bulkhead-audit-genesis\n{writer}").as_bytes());
    for l in lines.iter_mut() {
        let (w, seq) = link(l);
        if w != writer {
            continue;
        }
        let body = &l[..l.rfind(",\"w\":\"").unwrap()];
        let body = body.replacen("\"tool\":\"", "\"tool\":\"forged-", 1);
        *l = format!("{body},\"w\":\"{w}\",\"seq\":{seq},\"prev\":\"{prev}\"}}");
        prev = sha256_hex(l.as_bytes());
    }
}

/// The kept checkpoints of a SQLite copy: n → (writer → seq).
fn checkpoints(dir: &Path) -> BTreeMap<i64, BTreeMap<String, i64>> {
    let conn = rusqlite::Connection::open(dir.join(SHARED)).unwrap();
    let mut stmt = conn
        .prepare("SELECT n, body FROM audit_checkpoints ORDER BY n")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            let (n, body) = r.unwrap();
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let heads = v["writers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(w, h)| (w.clone(), h["seq"].as_i64().unwrap()))
                .collect();
            (n, heads)
        })
        .collect()
}

/// Deletes the checkpoints after `n` (the triggers that stop mistakes dropped first).
fn roll_store_back(dir: &Path, n: i64) {
    let conn = rusqlite::Connection::open(dir.join(SHARED)).unwrap();
    conn.execute_batch("DROP TRIGGER audit_checkpoints_newest_kept")
        .unwrap();
    conn.execute("DELETE FROM audit_checkpoints WHERE n > ?1", [n])
        .unwrap();
}

/// Two writers of one file, each stopped; returns the writers in the order they started.
async fn two_writers(dep: &Deployment) -> (String, String) {
    let mut a = dep.start("full", None);
    calls(&a.url, "ana", 14).await;
    let mut b = dep.start("full", None);
    calls(&b.url, "ben", 12).await;
    calls(&a.url, "ana", 6).await;
    a.stop();
    b.stop();
    let l = lines(&dep.path().join(LOG));
    let first = link(&l[0]).0;
    let second = l.iter().map(|x| link(x).0).find(|w| *w != first).unwrap();
    (first, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_attacker_without_the_key_cannot_roll_back_remove_or_prepend_in_files() {
    let dep = signed(Store::Sqlite, "audit-attack", "").await;
    let (a, b) = two_writers(&dep).await;
    let (code, out) = verify(dep.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("all signed"), "{out}");
    assert!(out.contains("no --anchor: this cannot rule out"), "{out}");
    let anchor = dep.path().join("anchor.json");
    let (code, out) = dep.cli(&["audit", "anchor", "--out", anchor.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = verify(dep.path(), &["--anchor", anchor.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("consistent with anchor"), "{out}");
    let all = checkpoints(dep.path());
    let log = lines(&dep.path().join(LOG));

    // Rollback to a blank check: the store cut back to the checkpoint where writer `a` first
    // appears at seq -1, `a`'s records rewritten with recomputed hashes.
    let blank = *all
        .iter()
        .find(|(_, heads)| heads.get(&a) == Some(&-1))
        .expect("a checkpoint with writer a at seq -1")
        .0;
    let c = copy(&dep);
    roll_store_back(c.path(), blank);
    let mut l = log.clone();
    reforge(&mut l, &a);
    write(&c.path().join(LOG), &l);
    let (code, out) = verify(c.path(), &[]);
    assert_eq!(code, 1, "{out}");
    // Its head is a few seconds old: a writer alive could still cover them, but not for long.
    assert!(
        out.contains(&format!("writer {a} (template): "))
            && (out.contains("after seq -1 are in no checkpoint")
                || out.contains("after its newest checkpoint (seq -1) are not covered yet")),
        "{out}"
    );

    // A consistent rollback to each of several earlier checkpoints, log cut to match: nothing
    // inside the store tells, and verify says it cannot rule it out; the anchor does.
    let ns: Vec<i64> = all.keys().copied().collect();
    let picks = [
        ns[0],
        ns[ns.len() / 3],
        ns[2 * ns.len() / 3],
        ns[ns.len() - 2],
    ];
    for k in picks {
        let heads = &all[&k];
        let c = copy(&dep);
        roll_store_back(c.path(), k);
        let cut: Vec<String> = log
            .iter()
            .filter(|x| {
                let (w, seq) = link(x);
                heads.get(&w).is_some_and(|&h| seq <= h)
            })
            .cloned()
            .collect();
        write(&c.path().join(LOG), &cut);
        let (code, out) = verify(c.path(), &[]);
        assert_eq!(code, 0, "rollback to #{k}: {out}");
        assert!(out.contains("no --anchor: this cannot rule out"), "{out}");
        let (code, out) = verify(c.path(), &["--anchor", anchor.to_str().unwrap()]);
        assert_eq!(code, 1, "rollback to #{k}: {out}");
        assert!(
            out.contains(&format!(
                "the store's newest checkpoint is #{k}, older than the anchor's"
            )),
            "{out}"
        );
    }

    // A whole writer removed: its records deleted. The checkpoints still name it, and rewriting
    // them to forget it breaks their signature.
    let c = copy(&dep);
    let l: Vec<String> = log.iter().filter(|x| link(x).0 != b).cloned().collect();
    write(&c.path().join(LOG), &l);
    let (code, out) = verify(c.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("writer {b} (template): its records 0..=")),
        "{out}"
    );
    let conn = rusqlite::Connection::open(c.path().join(SHARED)).unwrap();
    conn.execute_batch("DROP TRIGGER audit_checkpoints_fixed")
        .unwrap();
    let rows: Vec<(i64, String)> = conn
        .prepare("SELECT n, body FROM audit_checkpoints")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (n, body) in rows {
        let mut v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["writers"].as_object_mut().unwrap().remove(&b);
        conn.execute(
            "UPDATE audit_checkpoints SET body = ?1 WHERE n = ?2",
            rusqlite::params![serde_json::to_string(&v).unwrap(), n],
        )
        .unwrap();
    }
    drop(conn);
    let (code, out) = verify(c.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is not signed by the audit key"), "{out}");

    // An unchained forged record prepended.
    let c = copy(&dep);
    let mut l = log.clone();
    let mut forged: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
    for k in ["w", "seq", "prev"] {
        forged.as_object_mut().unwrap().remove(k);
    }
    forged["tool"] = json!("delete_everything");
    l.insert(0, serde_json::to_string(&forged).unwrap());
    write(&c.path().join(LOG), &l);
    let (code, out) = verify(c.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("audit-template.jsonl:1: a line in no writer's chain"),
        "{out}"
    );

    // A fake rotation: the first 7 records deleted, the rest renamed as an older rotated file.
    let c = copy(&dep);
    std::fs::remove_file(c.path().join(LOG)).unwrap();
    write(&c.path().join(format!("{LOG}.1")), &log[7..]);
    let (code, out) = verify(c.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "audit-template.jsonl.1:1: writer {a} starts at seq 7: its records 0..=6 are missing, and no checkpoint says rotation dropped them"
        )),
        "{out}"
    );

    // The untouched copy verifies (the copies are faithful).
    let (code, out) = verify(copy(&dep).path(), &["--anchor", anchor.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
}

/// Several writers through rotations with `keep: 2`: a writer whose every file was dropped by
/// rotation verifies clean (it leaves the checkpoints, retired); trimming the oldest kept file,
/// or deleting it, fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotation_drops_files_as_evidence_and_a_trimmed_oldest_file_fails() {
    let dep = signed(
        Store::Sqlite,
        "audit-rotation",
        "  rotate_bytes: 4096\n  keep: 2\n",
    )
    .await;
    let mut early = dep.start("full", None);
    let mut late = dep.start("full", None);
    calls(&early.url, "ana", 8).await;
    let gone = link(&lines(&dep.path().join(LOG))[0]).0;
    calls(&late.url, "ben", 4).await;
    early.stop();
    calls(&late.url, "ben", 60).await;
    late.stop();
    let dir = dep.path();
    assert!(dir.join(format!("{LOG}.2")).exists());
    let kept: Vec<String> = [format!("{LOG}.2"), format!("{LOG}.1"), LOG.to_string()]
        .iter()
        .flat_map(|f| lines(&dir.join(f)))
        .collect();
    assert!(
        kept.iter().all(|l| link(l).0 != gone),
        "the early writer's files were all dropped"
    );
    let (code, out) = verify(dir, &[]);
    assert_eq!(code, 0, "{out}");
    let newest = checkpoints(dir).into_values().last().unwrap();
    assert!(!newest.contains_key(&gone), "{newest:?}");

    // The first 3 records of the oldest kept file deleted (a file-only edit).
    let c = copy(&dep);
    let oldest = c.path().join(format!("{LOG}.2"));
    let l = lines(&oldest);
    write(&oldest, &l[3..]);
    let (code, out) = verify(c.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("are missing (rotation dropped only up to seq"),
        "{out}"
    );

    // The oldest kept file deleted.
    let c = copy(&dep);
    std::fs::remove_file(c.path().join(format!("{LOG}.2"))).unwrap();
    let (code, out) = verify(c.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("rotation dropped only up to seq"), "{out}");
}

/// A crash between committing the floors of a file rotation is about to drop and dropping it
/// (the failpoint `audit.before_drop`): the file is still there, its records below the floor, and
/// the log verifies once the next instance has closed the killed writer and rotated on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_inside_rotation_leaves_evidence_that_verifies() {
    let dep = signed(
        Store::Sqlite,
        "audit-rotate-crash",
        "  rotate_bytes: 4096\n  keep: 2\n",
    )
    .await;
    let mut doomed = dep.start("full", Some("audit.before_drop"));
    let c = client(&doomed.url, "ana", "ana").await;
    for i in 0..200 {
        if call(
            &c,
            "write_file",
            json!({"path": format!("/workspace/a{i}.txt"), "content": "x"}),
        )
        .await
        .is_err()
            && !doomed.alive()
        {
            break;
        }
    }
    assert!(
        doomed
            .wait_exit(std::time::Duration::from_secs(30))
            .is_some(),
        "the failpoint never fired: {}",
        doomed.stderr()
    );
    let mut next = dep.start("full", None);
    calls(&next.url, "ben", 10).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let out = loop {
        let (code, out) = verify(dep.path(), &[]);
        if code == 0 {
            break out;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    // The killed writer's head was committed with the floors, before the drop: it may verify at
    // once, and is closed by `next` once its lease ran out.
    assert!(out.contains("audit log intact"), "{out}");
    calls(&next.url, "ben", 30).await;
    next.stop();
    let (code, out) = verify(dep.path(), &[]);
    assert_eq!(code, 0, "{out}");
}

/// A replica killed (SIGKILL) between writing its rows and committing them to a checkpoint is
/// closed by the other once its lease ran out, from the rows the table holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replica_is_closed_by_another_on_postgres() {
    let dep = signed(Store::Postgres, "audit_killed_pg", "").await;
    dep.set_stateless();
    let mut alive = dep.start("full", None);
    let mut killed = dep.start("full", Some("audit.before_anchor"));
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        calls(&killed.url, "ben", 5),
    )
    .await;
    assert!(
        killed
            .wait_exit(std::time::Duration::from_secs(30))
            .is_some(),
        "{}",
        killed.stderr()
    );
    calls(&alive.url, "ana", 5).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let out = loop {
        let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0"]);
        if code == 0 {
            break out;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert!(
        out.contains("stopped without closing after seq -1"),
        "{out}"
    );
    assert!(out.contains("were not signed by their own writer"), "{out}");
    alive.stop();
    let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0"]);
    assert_eq!(code, 0, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_attacker_without_the_key_cannot_roll_back_remove_or_prepend_in_postgres() {
    let dep = signed(Store::Postgres, "audit_attack_pg", "").await;
    dep.set_stateless();
    let (a, b) = {
        let mut x = dep.start("full", None);
        calls(&x.url, "ana", 14).await;
        let mut y = dep.start("full", None);
        calls(&y.url, "ben", 12).await;
        calls(&x.url, "ana", 6).await;
        x.stop();
        y.stop();
        let pg = dep.pg_client().await;
        let rows = pg
            .query("SELECT line FROM bulkhead_audit ORDER BY id", &[])
            .await
            .unwrap();
        let first = link(rows[0].get(0)).0;
        let second = rows
            .iter()
            .map(|r| link(r.get(0)).0)
            .find(|w| *w != first)
            .unwrap();
        (first, second)
    };
    let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("all signed"), "{out}");
    let anchor = dep.path().join("anchor.json");
    let (code, out) = dep.cli(&["audit", "anchor", "--out", anchor.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let anchor = anchor.to_str().unwrap();
    let pg = dep.pg_client().await;
    pg.batch_execute(
        "ALTER TABLE bulkhead_audit DISABLE TRIGGER USER;
         ALTER TABLE bulkhead_audit_checkpoints DISABLE TRIGGER USER;
         CREATE TABLE saved_audit AS SELECT * FROM bulkhead_audit;
         CREATE TABLE saved_checkpoints AS SELECT * FROM bulkhead_audit_checkpoints;",
    )
    .await
    .unwrap();
    let restore =
        "DELETE FROM bulkhead_audit; INSERT INTO bulkhead_audit SELECT * FROM saved_audit;
         DELETE FROM bulkhead_audit_checkpoints;
         INSERT INTO bulkhead_audit_checkpoints SELECT * FROM saved_checkpoints;";

    // Rollback to a blank check, `a`'s rows rewritten with recomputed hashes.
    let rows: Vec<(i64, String)> = pg
        .query(
            "SELECT n, body FROM bulkhead_audit_checkpoints ORDER BY n",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let blank = rows
        .iter()
        .find(|(_, body)| {
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            v["writers"][&a]["seq"] == json!(-1)
        })
        .unwrap()
        .0;
    let ids: Vec<(i64, String)> = pg
        .query("SELECT id, line FROM bulkhead_audit ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let mut l: Vec<String> = ids.iter().map(|(_, x)| x.clone()).collect();
    reforge(&mut l, &a);
    pg.execute(
        "DELETE FROM bulkhead_audit_checkpoints WHERE n > $1",
        &[&blank],
    )
    .await
    .unwrap();
    for ((id, _), line) in ids.iter().zip(&l) {
        pg.execute(
            "UPDATE bulkhead_audit SET line = $1 WHERE id = $2",
            &[line, id],
        )
        .await
        .unwrap();
    }
    let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("after seq -1 are in no checkpoint")
            || out.contains("after its newest checkpoint (seq -1) are not covered yet"),
        "{out}"
    );
    pg.batch_execute(restore).await.unwrap();

    // A consistent rollback to an earlier checkpoint: the anchor sees it.
    let k = rows[rows.len() / 2].0;
    let heads: serde_json::Value =
        serde_json::from_str(&rows.iter().find(|(n, _)| *n == k).unwrap().1).unwrap();
    pg.execute("DELETE FROM bulkhead_audit_checkpoints WHERE n > $1", &[&k])
        .await
        .unwrap();
    for (id, line) in &ids {
        let (w, seq) = link(line);
        if heads["writers"][&w]["seq"].as_i64().is_none_or(|h| seq > h) {
            pg.execute("DELETE FROM bulkhead_audit WHERE id = $1", &[id])
                .await
                .unwrap();
        }
    }
    let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0", "--anchor", anchor]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("older than the anchor's"), "{out}");
    pg.batch_execute(restore).await.unwrap();

    // A whole writer removed.
    let needle = format!("%\"w\":\"{b}\"%");
    pg.execute("DELETE FROM bulkhead_audit WHERE line LIKE $1", &[&needle])
        .await
        .unwrap();
    let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("writer {b} (template): its records 0..=")),
        "{out}"
    );
    pg.batch_execute(restore).await.unwrap();

    // An unchained forged row before every other.
    pg.execute(
        "INSERT INTO bulkhead_audit (id, server, line) VALUES (0, 'template', '{\"tool\":\"delete_everything\"}')",
        &[],
    )
    .await
    .unwrap();
    let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("bulkhead_audit id 0: a line in no writer's chain"),
        "{out}"
    );
    pg.batch_execute(restore).await.unwrap();

    let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0", "--anchor", anchor]);
    assert_eq!(code, 0, "{out}");
}
