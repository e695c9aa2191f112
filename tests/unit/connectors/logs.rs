//! `logs` over real files: grep-style context, time windows with inherited timestamps, files in
//! name order, symlinks leaving the directory skipped, error tiers.

use super::*;
use serde_json::json;

static LOGS: ConnectorDef = ConnectorDef {
    secrets: &[],
    name: "app_logs",
    kind: bulkhead_vocab::connector::ConnectorKind::Logs,
    sensitivity: Sensitivity::Internal,
    settings: r#"{"dir":"${LOG_DIR}"}"#,
    operations: &[OperationDef {
        name: "search",
        params_schema: "{}",
        body: r#"{"logs":{"action":"search"}}"#,
    }],
};

const A: &str = "\
2026-11-22T14:00:00Z INFO start
2026-11-22T14:00:01Z INFO one
2026-11-22T14:00:02Z ERROR first failure
    at frame 1
2026-11-22T14:00:03Z INFO two
2026-11-22T14:00:04Z INFO three
2026-11-22T14:00:05Z INFO four
2026-11-22T14:30:00Z ERROR second failure
2026-11-22T14:30:01Z INFO five
";

const B: &str = "\
2026-11-22 15:00:00 WARN disk
2026-11-22 15:10:00 ERROR third failure
";

fn logs(t: &Tmp) -> Connectors {
    let dir = t.dir.path().join("logs");
    std::fs::create_dir(&dir).unwrap();
    // Written out of order: results come in name order.
    std::fs::write(dir.join("b.log"), B).unwrap();
    std::fs::write(dir.join("a.log"), A).unwrap();
    let outside = t.dir.path().join("outside.log");
    std::fs::write(&outside, "2026-11-22T14:00:00Z ERROR CANARY outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("c.log")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/d.log"), "2026-11-22T14:00:00Z ERROR nested\n").unwrap();
    build(&LOGS, &[("LOG_DIR", dir.display().to_string())])
}

#[tokio::test]
async fn matches_come_with_context_and_separators_in_name_order() {
    let t = tmp();
    let c = logs(&t);
    let lines = run(
        &c,
        &t,
        "app_logs",
        "search",
        json!({"pattern": "ERROR", "context_lines": 1}),
    )
    .await
    .unwrap()
    .lines();
    assert_eq!(
        lines,
        vec![
            "a.log-2- 2026-11-22T14:00:01Z INFO one",
            "a.log:3: 2026-11-22T14:00:02Z ERROR first failure",
            "a.log-4-     at frame 1",
            "--",
            "a.log-7- 2026-11-22T14:00:05Z INFO four",
            "a.log:8: 2026-11-22T14:30:00Z ERROR second failure",
            "a.log-9- 2026-11-22T14:30:01Z INFO five",
            "--",
            "b.log-1- 2026-11-22 15:00:00 WARN disk",
            "b.log:2: 2026-11-22 15:10:00 ERROR third failure",
        ]
    );
}

#[tokio::test]
async fn time_window_uses_leading_timestamps_and_inherits_them() {
    let t = tmp();
    let c = logs(&t);
    let lines = run(
        &c,
        &t,
        "app_logs",
        "search",
        json!({"pattern": "ERROR|frame", "since": "2026-11-22T14:00:02Z", "until": "2026-11-22T15:00:00+00:00"}),
    )
    .await
    .unwrap()
    .lines();
    assert_eq!(
        lines,
        vec![
            "a.log:3: 2026-11-22T14:00:02Z ERROR first failure",
            "a.log:4:     at frame 1",
            "a.log:8: 2026-11-22T14:30:00Z ERROR second failure",
        ]
    );
    // An offset in `since` is honoured: 16:05+01:00 is 15:05Z.
    let lines = run(
        &c,
        &t,
        "app_logs",
        "search",
        json!({"pattern": "ERROR", "since": "2026-11-22T16:05:00+01:00"}),
    )
    .await
    .unwrap()
    .lines();
    assert_eq!(
        lines,
        vec!["b.log:2: 2026-11-22 15:10:00 ERROR third failure"]
    );
}

#[tokio::test]
async fn symlinks_leaving_the_dir_and_subdirs_are_not_searched() {
    let t = tmp();
    let c = logs(&t);
    let lines = run(
        &c,
        &t,
        "app_logs",
        "search",
        json!({"pattern": "CANARY|nested"}),
    )
    .await
    .unwrap()
    .lines();
    assert_eq!(lines, Vec::<String>::new());
}

#[tokio::test]
async fn bad_input_is_retryable_and_a_missing_dir_fatal() {
    let t = tmp();
    let c = logs(&t);
    let m = retryable(
        run(
            &c,
            &t,
            "app_logs",
            "search",
            json!({"pattern": "(unclosed"}),
        )
        .await,
    );
    assert!(m.starts_with("invalid regular expression"), "{m}");
    let m = retryable(
        run(
            &c,
            &t,
            "app_logs",
            "search",
            json!({"pattern": "x", "since": "yesterday"}),
        )
        .await,
    );
    assert!(m.contains("RFC 3339"), "{m}");
    let m = retryable(
        run(
            &c,
            &t,
            "app_logs",
            "search",
            json!({"pattern": "a{1000}{1000}"}),
        )
        .await,
    );
    assert!(m.contains("size limit"), "{m}");

    let gone = build(
        &LOGS,
        &[("LOG_DIR", t.dir.path().join("nope").display().to_string())],
    );
    let m = fatal(run(&gone, &t, "app_logs", "search", json!({"pattern": "x"})).await);
    assert!(!m.contains(&t.dir.path().display().to_string()), "{m}");
}

/// Progress counts every byte of every file against the sizes at the start; a skipped file is a
/// warning that names it by its name in the directory, never by a host path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_counts_bytes_and_a_skipped_link_is_a_warning() {
    let t = tmp();
    let c = logs(&t);
    let signals = CallSignals::new();
    let out = connectors::call(
        &c,
        "app_logs",
        "search",
        &t.ws,
        obj(json!({"pattern": "ERROR"})),
        &signals,
    )
    .await
    .unwrap();
    let ToolOutput::Stream(mut s) = out else {
        panic!("a stream")
    };
    while let Some(r) = s.next().await {
        r.unwrap();
    }
    let p = signals.progress().unwrap();
    let total = (A.len() + B.len()) as u64;
    assert_eq!((p.done, p.total), (total, Some(total)));
    let warnings = signals.take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("`c.log`"), "{warnings:?}");
    let host = t.dir.path().display().to_string();
    assert!(!warnings[0].contains(&host), "no host path: {warnings:?}");
}

/// A cancelled search of a large log stops within one tick of work: far less than the whole
/// file is read, and the call ends without waiting for the scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_search_stops_reading() {
    let t = tmp();
    let dir = t.dir.path().join("big");
    std::fs::create_dir(&dir).unwrap();
    let line = "2026-11-22T14:00:00Z INFO nothing to see here, just a long ordinary line of a busy service\n";
    let big = line.repeat((96 << 20) / line.len());
    std::fs::write(dir.join("big.log"), &big).unwrap();
    let c = build(&LOGS, &[("LOG_DIR", dir.display().to_string())]);
    let signals = CallSignals::new();
    let call = {
        let (ws, s) = (t.ws.clone(), signals.clone());
        tokio::spawn(async move {
            connectors::call(
                &c,
                "app_logs",
                "search",
                &ws,
                obj(json!({"pattern": "NEVER_THERE"})),
                &s,
            )
            .await
            .map(|_| ())
        })
    };
    // Wait until the scan is under way, then cancel.
    while signals.progress().is_none_or(|p| p.done == 0) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    signals.stop();
    tokio::time::timeout(std::time::Duration::from_secs(10), call)
        .await
        .expect("the search ends once cancelled")
        .unwrap()
        .ok();
    let p = signals.progress().unwrap();
    let done_at_stop = p.done;
    assert!(p.done < big.len() as u64, "stopped early: {p:?}");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        signals.progress().unwrap().done,
        done_at_stop,
        "nothing read after the stop"
    );
}
