//! The ratchet across real processes (issue 10's six breaks, each reproduced): instances of one
//! server sharing one store, killed at every step of an escalation, racing each other, with the
//! state directory tampered with. A real webhook counts what actually left.
//!
//! Expected everywhere: no connect call delivered after a load was acknowledged, no handler run
//! below the session's level, no crash of a process that was not killed on purpose.

use super::procs::*;
use std::time::{Duration, Instant};

/// The steps of an escalation a proxied instance is killed at.
const SQLITE_STEPS: &[&str] = &[
    "call.escalate.before_intent",
    "call.escalate.after_intent",
    "state.escalate.after_bump",
    "state.escalate.after_commit",
    "state.escalate.before_downgrade",
    "call.after_handler",
];
const POSTGRES_STEPS: &[&str] = &[
    "call.escalate.before_intent",
    "call.escalate.after_intent",
    "state.escalate.after_commit",
    "state.escalate.before_downgrade",
    "call.after_handler",
];

/// Break 1 (and every other step): a proxied instance killed while it escalates never leaves the
/// full instance serving the session below the committed level.
async fn killed_at_every_step(store: Store) {
    let steps = if store == Store::Sqlite {
        SQLITE_STEPS
    } else {
        POSTGRES_STEPS
    };
    for (n, step) in steps.iter().enumerate() {
        let dep = Deployment::new(store, &format!("kill{n}")).await;
        let mut full = dep.start("full", None);
        let mut proxied = dep.start("proxied", Some(step));
        let s = format!("k{n}");
        // The full instance has seen the session public (and may cache that).
        let r = one_call(
            &full.url,
            "ana",
            &s,
            "notify_team",
            notify(&format!("{s} before")),
        )
        .await
        .unwrap();
        assert!(!r.is_error, "{step}: {}", r.text);
        // The proxied instance dies at `step` during the load.
        let killed = one_call_within(
            &proxied.url,
            "ana",
            &s,
            "load_sensitive_dataset",
            load("customers"),
            Duration::from_secs(3),
        )
        .await;
        let status = proxied.wait_exit(Duration::from_secs(10));
        assert!(
            status.is_some(),
            "{step}: the failpoint did not fire ({killed:?})"
        );
        assert!(
            killed.is_err() || killed.as_ref().is_ok_and(|r| r.is_error),
            "{step}: {killed:?}"
        );
        let committed = dep.committed("ana", &s).await;
        // Whatever was committed, the full instance now answers from it.
        let r = one_call(
            &full.url,
            "ana",
            &s,
            "notify_team",
            notify(&format!("{s} after crash")),
        )
        .await
        .unwrap();
        if committed.is_private() {
            assert!(
                r.is_error && r.text.starts_with("[FATAL]"),
                "{step}: full served a {committed} session: {}",
                r.text
            );
            assert!(
                dep.webhook
                    .delivered(&format!("{s} after crash"))
                    .is_empty(),
                "{step}: delivered"
            );
        } else {
            assert!(
                !r.is_error,
                "{step}: nothing was committed, yet: {}",
                r.text
            );
        }
        // Restarted, the load is acknowledged; from then on nothing leaves for this session.
        let proxied2 = dep.start("proxied", None);
        let r = one_call(
            &proxied2.url,
            "ana",
            &s,
            "load_sensitive_dataset",
            load("customers"),
        )
        .await
        .unwrap();
        assert!(!r.is_error && r.level == "confidential", "{step}: {r:?}");
        let r = one_call(
            &full.url,
            "ana",
            &s,
            "notify_team",
            notify(&format!("{s} after ack")),
        )
        .await
        .unwrap();
        assert!(
            r.is_error && r.text.contains("url_proxied"),
            "{step}: {}",
            r.text
        );
        let r = one_call(
            &full.url,
            "ana",
            &s,
            "read_file",
            serde_json::json!({"path": "/workspace/x"}),
        )
        .await
        .unwrap();
        assert!(
            r.is_error && r.text.starts_with("[FATAL]"),
            "{step}: {}",
            r.text
        );
        assert!(
            dep.webhook.delivered(&format!("{s} after ack")).is_empty(),
            "{step}: delivered after ack"
        );
        // A write-ahead intent is on record for every kill after it was written.
        let audit = dep.audit().await;
        let intents = audit
            .iter()
            .filter(|r| r["phase"] == "intent" && r["tool"] == "load_sensitive_dataset")
            .count();
        // The killed call's intent (unless killed before writing it), and the restarted load's
        // (unless the killed one had committed, so the restarted one raised nothing).
        let want = usize::from(*step != "call.escalate.before_intent")
            + usize::from(!committed.is_private());
        assert_eq!(intents, want, "{step}: intents {audit:#?}");
        assert!(full.alive(), "{step}: the full instance crashed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_process_killed_at_any_step_of_an_escalation_never_lowers_a_level() {
    killed_at_every_step(Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_process_killed_at_any_step_of_an_escalation_never_lowers_a_level() {
    killed_at_every_step(Store::Postgres).await;
}

/// Break 2: the lock file (which holds the change counters) deleted or replaced while instances
/// run, then the proxied instance restarted: the full instance refuses instead of answering
/// from what it cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_or_replaced_lock_file_never_lets_the_full_instance_serve_low() {
    for replace in [false, true] {
        let dep = Deployment::new(Store::Sqlite, "lockfile").await;
        let mut full = dep.start("full", None);
        let proxied = dep.start("proxied", None);
        let s = if replace { "replaced" } else { "deleted" };
        let r = one_call(
            &full.url,
            "ana",
            s,
            "notify_team",
            notify(&format!("{s} before")),
        )
        .await
        .unwrap();
        assert!(!r.is_error, "{}", r.text);
        let lock = dep.path().join("state/sessions-default.lock");
        if replace {
            let copy = dep.path().join("state/copy");
            std::fs::copy(&lock, &copy).unwrap();
            std::fs::rename(&copy, &lock).unwrap();
        } else {
            std::fs::remove_file(&lock).unwrap();
        }
        drop(proxied);
        let proxied = dep.start("proxied", None);
        let r = one_call(
            &proxied.url,
            "ana",
            s,
            "load_sensitive_dataset",
            load("customers"),
        )
        .await
        .unwrap();
        assert!(!r.is_error, "{}", r.text);
        let r = one_call(
            &full.url,
            "ana",
            s,
            "notify_team",
            notify(&format!("{s} after")),
        )
        .await
        .unwrap();
        assert!(
            r.is_error && r.text.starts_with("[FATAL]"),
            "{s}: {}",
            r.text
        );
        assert!(
            !r.text.contains(dep.path().to_str().unwrap()),
            "host path in a tool error: {}",
            r.text
        );
        let r = one_call(
            &full.url,
            "ana",
            s,
            "read_file",
            serde_json::json!({"path": "/workspace/x"}),
        )
        .await
        .unwrap();
        assert!(
            r.is_error && r.text.starts_with("[FATAL]"),
            "{s}: {}",
            r.text
        );
        assert!(
            dep.webhook.delivered(&format!("{s} after")).is_empty(),
            "{s}: delivered"
        );
        assert!(full.alive());
    }
}

/// Break 3 and the connect race: the full instance's `write_file` or `notify_team` racing the
/// proxied instance's `load_sensitive_dataset`, each round on a fresh session.
async fn races(store: Store, rounds: usize) {
    let dep = Deployment::new(store, "races").await;
    // A webhook that takes a moment widens the window a connect call would overlap a load in.
    *dep.webhook.delay.lock().unwrap() = Duration::from_millis(10);
    let mut full = dep.start("full", None);
    let mut proxied = dep.start("proxied", None);
    let (full_url, proxied_url) = (full.url.clone(), proxied.url.clone());
    let mut acks = Vec::new(); // (session, when the load's answer arrived)
    let mut writes_ok = 0;
    let mut connects_ok = 0;
    let batch = 8;
    for start in (0..rounds).step_by(batch) {
        let mut tasks = Vec::new();
        for round in start..(start + batch).min(rounds) {
            let (f, p) = (full_url.clone(), proxied_url.clone());
            tasks.push(tokio::spawn(async move {
                let s = format!("r{round}");
                // A user per round: `notify_team` allows each user 30 calls a minute.
                let user = format!("ana{round}");
                let (fc, pc) = tokio::join!(client(&f, &user, &s), client(&p, &user, &s));
                let first = if round % 2 == 0 {
                    call(
                        &fc,
                        "write_file",
                        serde_json::json!({"path": "/workspace/w.txt", "content": "x"}),
                    )
                } else {
                    call(&fc, "notify_team", notify(&format!("{s} race")))
                };
                let loading = async {
                    let r = call(&pc, "load_sensitive_dataset", load("customers")).await;
                    (r, Instant::now())
                };
                let (first, (loaded, acked)) = tokio::join!(first, loading);
                let _ = fc.cancel().await;
                let _ = pc.cancel().await;
                (round, s, first.unwrap(), loaded.unwrap(), acked)
            }));
        }
        for t in tasks {
            let (round, s, first, loaded, acked) = t.await.unwrap();
            assert!(
                !loaded.is_error && loaded.level == "confidential",
                "{s}: {loaded:?}"
            );
            acks.push((s.clone(), acked));
            if !first.is_error {
                // The full instance never runs anything for a confidential session.
                assert_ne!(
                    first.level, "confidential",
                    "{s}: a handler ran below the session's level: {first:?}"
                );
                if round % 2 == 0 {
                    writes_ok += 1;
                } else {
                    connects_ok += 1;
                }
            } else {
                assert!(first.text.starts_with("[FATAL]"), "{s}: {first:?}");
            }
        }
    }
    // No delivery after its session's load was acknowledged.
    for (s, acked) in &acks {
        for d in dep.webhook.delivered(&format!("{s} race")) {
            assert!(
                d.at < *acked,
                "{s}: delivered after the load was acknowledged"
            );
        }
    }
    // No successful write on the full instance ran after its session's load had escalated: its
    // outcome is recorded before the load's intent (which is written under the exclusive lock).
    let audit = dep.audit().await;
    for (s, _) in &acks {
        let rec = |tool: &str, phase: &str| {
            audit
                .iter()
                .find(|r| r["session"] == s.as_str() && r["tool"] == tool && r["phase"] == phase)
                .and_then(|r| r["ts"].as_str().map(str::to_owned))
        };
        if let (Some(done), Some(intent)) = (
            audit
                .iter()
                .find(|r| {
                    r["session"] == s.as_str()
                        && r["tool"] == "write_file"
                        && r["phase"] == "outcome"
                        && r["outcome"] == "escalated"
                })
                .and_then(|r| r["ts"].as_str()),
            rec("load_sensitive_dataset", "intent"),
        ) {
            assert!(
                done <= intent.as_str(),
                "{s}: write_file finished at {done}, after the load's intent at {intent}"
            );
        }
    }
    println!(
        "{store:?}: {rounds} rounds; full instance ran {writes_ok} writes and {connects_ok} connect calls before the load"
    );
    assert!(full.alive() && proxied.alive(), "an instance crashed");
    let both = dep.webhook.deliveries.lock().unwrap().len();
    assert_eq!(
        both, connects_ok,
        "deliveries and acknowledged connect calls differ"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_instances_racing_on_fresh_sessions_never_serve_below_the_level() {
    races(Store::Sqlite, 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_instances_racing_on_fresh_sessions_never_serve_below_the_level() {
    races(Store::Postgres, 1000).await;
}

/// Break 4: a deleted store is not recreated empty; the instance refuses to start and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_store_refuses_to_start_instead_of_starting_over() {
    let dep = Deployment::new(Store::Sqlite, "deleted").await;
    {
        let _full = dep.start("full", None);
        let proxied = dep.start("proxied", None);
        let r = one_call(
            &proxied.url,
            "ana",
            "s1",
            "search_records",
            serde_json::json!({"query": "Acme"}),
        )
        .await
        .unwrap();
        assert!(!r.is_error, "{}", r.text);
    }
    let db = dep.path().join("state/sessions-default.db");
    for f in [
        "sessions-default.db",
        "sessions-default.db-wal",
        "sessions-default.db-shm",
    ] {
        let _ = std::fs::remove_file(dep.path().join("state").join(f));
    }
    let e = dep.try_start("full", None).map(|_| ()).unwrap_err();
    assert!(
        e.contains("is missing") && e.contains("bulkhead state init"),
        "{e}"
    );
    assert!(!db.exists(), "the store was recreated");
}

/// Break 5: a truncated lock file (formerly a memory-mapped counter: SIGBUS) makes calls fail
/// closed while the server keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_lock_file_fails_closed_and_the_server_keeps_running() {
    let dep = Deployment::new(Store::Sqlite, "trunc").await;
    let mut full = dep.start("full", None);
    let r = one_call(&full.url, "ana", "s1", "notify_team", notify("warm"))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    let lock = dep.path().join("state/sessions-default.lock");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_len(4)
        .unwrap();
    let r = one_call(&full.url, "ana", "s1", "notify_team", notify("after"))
        .await
        .unwrap();
    assert!(r.is_error && r.text.starts_with("[FATAL]"), "{}", r.text);
    assert!(dep.webhook.delivered("after").is_empty());
    let health = reqwest::get(format!("{}/healthz", full.base))
        .await
        .unwrap();
    assert!(health.status().is_success());
    assert!(full.alive(), "the server died: {}", full.stderr());
}

/// Break 6: a connect call's intent is durable before the call runs, so a process killed during
/// a slow webhook (SIGKILL or SIGTERM) leaves its record.
async fn interrupted_connect_leaves_its_intent(store: Store) {
    for signal in [nix::sys::signal::SIGKILL, nix::sys::signal::SIGTERM] {
        let dep = Deployment::new(store, "interrupt").await;
        *dep.webhook.delay.lock().unwrap() = Duration::from_secs(3);
        let mut full = dep.start("full", None);
        let url = full.url.clone();
        let call = tokio::spawn(async move {
            one_call(&url, "ana", "slow", "notify_team", notify("slow one")).await
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(full.child.id() as i32), signal).unwrap();
        assert!(
            full.wait_exit(Duration::from_secs(15)).is_some(),
            "{signal}: still running"
        );
        call.abort();
        let audit = dep.audit().await;
        let intent = audit
            .iter()
            .find(|r| r["tool"] == "notify_team" && r["phase"] == "intent");
        assert!(
            intent.is_some(),
            "{store:?} {signal}: no intent on record: {audit:#?}"
        );
        let intent = intent.unwrap();
        assert_eq!(intent["session"], "slow");
        assert_eq!(
            intent["args"]["keys"],
            serde_json::json!(["channel", "message"])
        );
        assert!(
            intent.get("message").is_none() && !intent.to_string().contains("slow one"),
            "argument values in the audit"
        );
        // Let the slow webhook finish before the next round reuses nothing of this one.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_interrupted_connect_call_leaves_its_intent() {
    interrupted_connect_leaves_its_intent(Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_interrupted_connect_call_leaves_its_intent() {
    interrupted_connect_leaves_its_intent(Store::Postgres).await;
}
