//! The hash-chained audit log on real `bulkhead serve` processes: `bulkhead audit verify` passes
//! on the log two instances wrote at once — one killed with SIGKILL between writing records and
//! committing them to a checkpoint (the other closes it once its lease ran out), one stopped —
//! and fails, naming the record, after each kind of tampering: one byte changed, a record
//! deleted, two records swapped, the tail cut, a record appended by hand (with a correctly
//! computed hash). Rotation keeps the chain; signed checkpoints cannot be forged; the PostgreSQL
//! table is verified the same way. The attacks of an attacker who writes the store are in
//! `audit_attacks.rs`.

use super::procs::{Deployment, Store, call, client, load, notify};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Makes `n` calls as `user` (reads, writes, an escalation and a refused connect among them).
async fn calls(url: &str, user: &str, session: &str, n: usize) {
    let c = client(url, user, session).await;
    for i in 0..n {
        let _ = match i % 5 {
            0 => {
                call(
                    &c,
                    "write_file",
                    json!({"path": format!("/workspace/f{i}.txt"), "content": "x"}),
                )
                .await
            }
            1 => {
                call(
                    &c,
                    "read_file",
                    json!({"path": format!("/workspace/f{}.txt", i - 1)}),
                )
                .await
            }
            2 => call(&c, "notify_team", notify(&format!("n{i}"))).await,
            3 => call(&c, "search_logs", json!({"pattern": "INFO"})).await,
            _ => call(&c, "read_file", json!({})).await,
        };
    }
    if n > 10 {
        let _ = call(&c, "load_sensitive_dataset", load("customers")).await;
        let _ = call(&c, "notify_team", notify("refused")).await;
    }
    let _ = c.cancel().await;
}

/// A copy of the deployment's state (log and store), configuration and audit key, to tamper with.
fn copy_state(dep: &Deployment) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    if dep.path().join("audit.key").exists() {
        std::fs::copy(dep.path().join("audit.key"), to.path().join("audit.key")).unwrap();
    }
    let status = std::process::Command::new("cp")
        .args(["-a"])
        .arg(dep.path().join("state"))
        .arg(to.path().join("state"))
        .status()
        .unwrap();
    assert!(status.success());
    let config = std::fs::read_to_string(&dep.config).unwrap();
    std::fs::write(to.path().join("config.yaml"), config).unwrap();
    to
}

fn verify_at(dir: &Path) -> (i32, String) {
    super::procs::cli_at(
        &dir.join("config.yaml"),
        &[("BULKHEAD_LOG".into(), "warn".into())],
        &["audit", "verify", "--server", "template"],
    )
}

fn log_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("state/audit-template.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(dir: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(dir.join("state/audit-template.jsonl"), text).unwrap();
}

fn writer_of(line: &str) -> (String, u64) {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    (
        v["w"].as_str().unwrap().to_owned(),
        v["seq"].as_u64().unwrap(),
    )
}

/// Indexes (0-based) of `writer`'s lines.
fn lines_of(lines: &[String], writer: &str) -> Vec<usize> {
    (0..lines.len())
        .filter(|&i| writer_of(&lines[i]).0 == writer)
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verify_passes_after_two_writers_and_a_crash_and_names_each_tampering() {
    let dep = Deployment::new(Store::Sqlite, "audit-chain").await;
    dep.edit_config("audit:\n", "audit:\n  lease_secs: 3\n");
    let mut stopped = dep.start("full", None);
    let mut killed = dep.start("full", Some("audit.before_anchor"));
    // Both write the one file at once; the second dies the first time it is about to anchor
    // records it has synced (a crash between records and their anchor).
    let (u1, u2) = (stopped.url.clone(), killed.url.clone());
    let a = tokio::spawn(async move { calls(&u1, "ana", "a", 30).await });
    let b = tokio::spawn(async move { calls(&u2, "ben", "b", 30).await });
    a.await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(60), b).await;
    assert!(
        killed.wait_exit(Duration::from_secs(30)).is_some(),
        "the failpoint did not kill the second instance:\n{}",
        killed.stderr()
    );
    // The killed writer's last records are in no checkpoint until the instance alive, once the
    // killed one's lease has run out, closes it at the last record of it the log holds.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let out = loop {
        let (code, out) = dep.cli(&["audit", "verify", "--wait-ms", "0"]);
        if code == 0 {
            break out;
        }
        assert!(std::time::Instant::now() < deadline, "never closed: {out}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(out.contains("stopped without closing"), "{out}");
    calls(&stopped.url, "ana", "c", 12).await;
    stopped.stop();

    let (code, out) = dep.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("audit log intact"), "{out}");
    let lines = log_lines(dep.path());
    let writers: std::collections::BTreeSet<String> =
        lines.iter().map(|l| writer_of(l).0).collect();
    assert_eq!(writers.len(), 2, "two writers: {writers:?}");
    // The stopped instance's writer: its last line is `closed` in the store.
    let closed = writer_of(lines.last().unwrap()).0;
    let mine = lines_of(&lines, &closed);
    assert!(mine.len() > 20, "{}", mine.len());
    let at = |i: usize| format!("audit-template.jsonl:{}", i + 1);

    // One byte changed in the middle of a record.
    let copy = copy_state(&dep);
    let mut l = lines.clone();
    let victim = mine[5];
    l[victim] = l[victim].replacen("\"tool\":\"", "\"tool\":\"X", 1);
    write_lines(copy.path(), &l);
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "FAILED: {}: writer {closed} seq 5 was altered",
            at(victim)
        )),
        "{out}"
    );

    // A record deleted.
    let copy = copy_state(&dep);
    let mut l = lines.clone();
    l.remove(mine[7]);
    write_lines(copy.path(), &l);
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("seq 8 follows seq 6: 1 record(s) removed before it"),
        "{out}"
    );

    // Two records of one writer swapped.
    let copy = copy_state(&dep);
    let mut l = lines.clone();
    l.swap(mine[3], mine[4]);
    write_lines(copy.path(), &l);
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "FAILED: {}: writer {closed} seq 4 comes before seq 3",
            at(mine[3])
        )),
        "{out}"
    );

    // The tail cut.
    let copy = copy_state(&dep);
    let mut l = lines.clone();
    let last = *mine.last().unwrap();
    let keep_below = mine.len() as u64 - 3;
    l.retain(|x| writer_of(x).0 != closed || writer_of(x).1 < keep_below);
    write_lines(copy.path(), &l);
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the tail was cut (3 record(s))"), "{out}");

    // A record appended by hand, chained correctly to the last one.
    let copy = copy_state(&dep);
    let mut l = lines.clone();
    let last_line = l[last].clone();
    let (_, seq) = writer_of(&last_line);
    let body = &last_line[..last_line.rfind(",\"w\":\"").unwrap()];
    l.push(format!(
        "{},\"w\":\"{closed}\",\"seq\":{},\"prev\":\"{}\"}}",
        body.replacen("\"tool\":\"", "\"tool\":\"nothing-to-see-", 1),
        seq + 1,
        sha256_hex(last_line.as_bytes())
    ));
    write_lines(copy.path(), &l);
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "FAILED: writer {closed} seq {} follows seq {seq} where it closed: 1 record(s) appended by hand",
            seq + 1
        )),
        "{out}"
    );

    // A record appended by hand by a writer the store never saw.
    let copy = copy_state(&dep);
    let mut l = lines.clone();
    let (w0, seq0) = writer_of(&l[0]);
    assert_eq!(seq0, 0);
    let body = &l[0][..l[0].rfind(",\"w\":\"").unwrap()];
    let genesis = sha256_hex(b"bulkhead-audit-genesis\n0123456789abcdef");
    assert!(!w0.is_empty());
    l.push(format!(
        "{body},\"w\":\"0123456789abcdef\",\"seq\":0,\"prev\":\"{genesis}\"}}"
    ));
    write_lines(copy.path(), &l);
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("writer 0123456789abcdef is in no checkpoint"),
        "{out}"
    );

    // The untouched copy still verifies (the copies are faithful).
    let copy = copy_state(&dep);
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 0, "{out}");
}

/// Rotation keeps each writer's chain across files; a file rotation dropped is recorded first,
/// so the chain may start past seq 0 in the oldest file kept, and verifies clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_keeps_the_chain() {
    let dep = Deployment::new(Store::Sqlite, "audit-rotate").await;
    dep.edit_config("audit:\n", "audit:\n  rotate_bytes: 4096\n  keep: 50\n");
    let mut inst = dep.start("full", None);
    calls(&inst.url, "ana", "r", 60).await;
    inst.stop();
    assert!(dep.path().join("state/audit-template.jsonl.3").exists());
    let (code, out) = dep.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
    // Removing a middle file is a removal.
    let copy = copy_state(&dep);
    std::fs::remove_file(copy.path().join("state/audit-template.jsonl.2")).unwrap();
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("removed before it"), "{out}");
    // Removing the oldest files by hand is no rotation: nothing recorded them as dropped.
    let copy = copy_state(&dep);
    for n in 3..60 {
        let _ = std::fs::remove_file(copy.path().join(format!("state/audit-template.jsonl.{n}")));
    }
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no checkpoint says rotation dropped them"),
        "{out}"
    );
}

/// With `audit.signing_key`, every checkpoint is signed: one rewritten in the store (to cover an
/// altered last record) is caught by its signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_heads_cannot_be_forged() {
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    let dep = Deployment::new(Store::Sqlite, "audit-signed").await;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).unwrap();
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let pem = key.to_pkcs8_pem(Default::default()).unwrap();
    std::fs::write(dep.path().join("audit.key"), pem.as_bytes()).unwrap();
    dep.edit_config("audit:\n", "audit:\n  signing_key: audit.key\n");
    let mut inst = dep.start("full", None);
    calls(&inst.url, "ana", "s", 12).await;
    inst.stop();
    let (code, out) = dep.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("all signed"), "{out}");

    // Alter the last record and rewrite the newest checkpoint to match (its hash recomputed):
    // the signature no longer matches.
    let copy = copy_state(&dep);
    let mut l = log_lines(copy.path());
    let last = l.len() - 1;
    let old_hash = sha256_hex(l[last].as_bytes());
    l[last] = l[last].replacen("\"tool\":\"", "\"tool\":\"X", 1);
    write_lines(copy.path(), &l);
    let conn =
        rusqlite::Connection::open(copy.path().join("state/shared-sessions-default.db")).unwrap();
    conn.execute_batch("DROP TRIGGER audit_checkpoints_fixed")
        .unwrap();
    let n: i64 = conn
        .query_row("SELECT max(n) FROM audit_checkpoints", [], |r| r.get(0))
        .unwrap();
    conn.execute(
        "UPDATE audit_checkpoints SET body = replace(body, ?1, ?2) WHERE n = ?3",
        rusqlite::params![old_hash, sha256_hex(l[last].as_bytes()), n],
    )
    .unwrap();
    drop(conn);
    let (code, out) = verify_at(copy.path());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("checkpoint #{n} (1 of ")), "{out}");
    assert!(out.contains("is not signed by the audit key"), "{out}");
}

/// Two replicas write the PostgreSQL table at once; `audit verify` reads the table: intact, then
/// a row rewritten by someone who disabled the append-only triggers is named by its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_postgres_table_is_verified_across_replicas() {
    let dep = Deployment::new(Store::Postgres, "audit_pg").await;
    dep.set_stateless();
    let mut a = dep.start("full", None);
    let mut b = dep.start("full", None);
    let (ua, ub) = (a.url.clone(), b.url.clone());
    let ta = tokio::spawn(async move { calls(&ua, "ana", "pa", 25).await });
    let tb = tokio::spawn(async move { calls(&ub, "ben", "pb", 25).await });
    ta.await.unwrap();
    tb.await.unwrap();
    a.stop();
    b.stop();
    let (code, out) = dep.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("by 2 writers in table bulkhead_audit"),
        "{out}"
    );

    let client = dep.pg_client().await;
    let id: i64 = client
        .query_one(
            "SELECT id FROM bulkhead_audit ORDER BY id OFFSET 10 LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    client
        .batch_execute(&format!(
            "ALTER TABLE bulkhead_audit DISABLE TRIGGER USER;
             UPDATE bulkhead_audit SET line = replace(line, '\"tool\":\"', '\"tool\":\"X') WHERE id = {id};"
        ))
        .await
        .unwrap();
    let (code, out) = dep.cli(&["audit", "verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("FAILED: bulkhead_audit id {id}: writer ")),
        "{out}"
    );
    assert!(out.contains("was altered"), "{out}");
}

/// Every instance of a deployment starts at once (a compose `up`) on one state directory: all of
/// them open the shared file (chain heads, rate buckets) and serve; none exits with "database is
/// locked" while another sets the file up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_starting_together_all_open_the_shared_file() {
    for round in 0..3 {
        let dep = Deployment::new(Store::Sqlite, &format!("audit-start-{round}")).await;
        // A store exists first (as `bulkhead up` and the images make it); the shared file not.
        let mut first = dep.start("full", None);
        first.stop();
        let shared = dep.path().join("state/shared-sessions-default.db");
        for f in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{f}", shared.display()));
        }
        let started: Vec<Result<super::procs::Proc, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|i| {
                    let dep = &dep;
                    s.spawn(move || {
                        dep.try_start(if i % 2 == 0 { "full" } else { "proxied" }, None)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in &started {
            assert!(r.is_ok(), "round {round}: {:?}", r.as_ref().err());
        }
    }
}
