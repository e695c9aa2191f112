//! Argument values never reach the audit log or the instance's log: a refused, failed or
//! badly-argued call whose arguments carry a secret leaves no trace of it (both stores' audits).

use crate::procs::{Deployment, Store, client};
use serde_json::json;

const SECRET: &str = "PASSWORD=hunter2-9f3k";

async fn leaves_no_value(store: Store) {
    let mut dep = Deployment::new(store, "auditvals").await;
    // The webhook's host refuses: the connector's error carries the URL it built from `channel`.
    dep.set_env("WEBHOOK_URL", "http://127.0.0.1:9");
    let full = dep.start("full", None);
    let c = client(&full.url, "ana", "vals").await;
    let calls = [
        // Bad input: the validation message quotes the value.
        ("notify_team", json!({"channel": SECRET, "message": "x"})),
        ("search_logs", json!({"pattern": format!("({SECRET}")})),
        (
            "read_file",
            json!({"path": format!("/workspace/{SECRET}/../../..")}),
        ),
        // A connector failure: the URL with the path parameter in it.
        (
            "notify_team",
            json!({"channel": "hunter2-9f3k", "message": SECRET}),
        ),
        // Not found.
        (
            "read_file",
            json!({"path": format!("/workspace/{SECRET}.txt")}),
        ),
    ];
    for (tool, args) in calls {
        let r = crate::procs::call(&c, tool, args).await.unwrap();
        assert!(r.is_error, "{tool}: {}", r.text);
    }
    c.cancel().await.ok();
    // Outcomes of plain calls are batched: wait (bounded) until all five are written.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let audit = loop {
        let audit = dep.audit().await;
        // The connect call carrying `PASSWORD=…` in its message is refused by inspection
        // (`blocked`) before the connector runs; the others fail.
        let errors = audit
            .iter()
            .filter(|r| r["outcome"] == "error" || r["outcome"] == "blocked")
            .count();
        if errors >= 5 {
            break audit;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{store:?}: {audit:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let text = serde_json::to_string(&audit).unwrap();
    assert!(
        !text.contains("hunter2"),
        "{store:?}: argument values in the audit: {text}"
    );
    assert!(
        !full.stderr().contains("hunter2"),
        "{store:?}: argument values in the log: {}",
        full.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_argument_values_never_reach_the_audit_or_the_log() {
    leaves_no_value(Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_argument_values_never_reach_the_audit_or_the_log() {
    leaves_no_value(Store::Postgres).await;
}
