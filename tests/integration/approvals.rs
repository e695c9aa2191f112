//! A person approves risky calls (`approval:`), asked the way the client's protocol era expects:
//! `elicitation/create` on a 2025-11-25 session, `input_required` rounds with a sealed,
//! single-use `requestState` on 2026-07-28. Driven by the official MCP Python SDK against real
//! server processes; every case is a refusal that disappears when its check is removed.

use super::procs::{Deployment, Store, token};
use std::path::PathBuf;

/// Runs `tests/interop/approval_client.py URL TOKEN THIRD SCENARIO`; returns its `ok` lines.
async fn approval_client(url: &str, token: &str, third: &str, scenario: &str) -> Vec<String> {
    let python = tokio::task::spawn_blocking(super::python_sdk::venv_python)
        .await
        .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/approval_client.py");
    let run = tokio::process::Command::new(python)
        .arg(script)
        .args([url, token, third, scenario])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(180), run)
        .await
        .expect("the approval client finished within 180 s")
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "approval client ({scenario}) failed:\n{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said.lines()
        .filter(|l| l.starts_with("ok "))
        .map(str::to_owned)
        .collect()
}

/// Both eras through the SDK: accept runs once, decline and no callback refuse; an edited,
/// moved (other arguments, other session) or replayed `requestState` is refused. The audit holds
/// each approval before the call it approves, and `/metrics` counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_eras_ask_a_person_and_refuse_every_forged_answer() {
    let dep = Deployment::new(Store::Sqlite, "approve").await;
    let inst = dep.start("full", None);
    let oks = approval_client(
        &inst.url,
        &token("ada", "approve-1"),
        &token("ada", "approve-2"),
        "all",
    )
    .await;
    assert_eq!(oks.len(), 12, "{oks:#?}");

    // The audit: each approval is recorded (durably) before the call it approves. Outcomes are
    // synced within `audit.sync_interval_ms`: wait (bounded) for them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let records = loop {
        let records = dep.audit().await;
        let approved: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| r["phase"] == "approval")
            .collect();
        let settled = approved.iter().all(|a| {
            records
                .iter()
                .any(|r| r["call"] == a["call"] && r["phase"] == "outcome")
        });
        if (approved.len() >= 3 && settled) || std::time::Instant::now() > deadline {
            break records;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let approvals: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["phase"] == "approval")
        .collect();
    assert_eq!(approvals.len(), 3, "three approvals given:\n{records:#?}");
    for a in &approvals {
        assert_eq!(a["tool"], "delete_file");
        let detail = a["detail"].as_str().unwrap_or("");
        assert!(detail.starts_with("approved ("), "{detail}");
        let call = &a["call"];
        let outcome = records
            .iter()
            .position(|r| &r["call"] == call && r["phase"] == "outcome")
            .expect("an outcome follows");
        let approval = records
            .iter()
            .position(|r| &r["call"] == call && r["phase"] == "approval")
            .unwrap();
        assert!(approval < outcome);
        assert_eq!(records[outcome]["outcome"], "allowed");
    }
    assert!(
        records.iter().any(|r| r["outcome"] == "awaiting_approval"),
        "a 2026 question is recorded as awaiting approval"
    );
    let metrics = reqwest::get(format!("{}/metrics", inst.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for result in ["asked", "given", "declined", "refused"] {
        assert!(
            metrics.contains(&format!("bulkhead_approvals_total{{result=\"{result}\"}}")),
            "{result}:\n{metrics}"
        );
    }
}

/// An answer that arrives after the question expired is refused, and the file stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_after_expiry_is_refused() {
    let dep = Deployment::new(Store::Sqlite, "approve-exp").await;
    dep.append_config("approvals:\n  expiry_secs: 1\n");
    let inst = dep.start("full", None);
    let oks = approval_client(&inst.url, &token("bo", "exp-1"), "-", "expiry").await;
    assert_eq!(oks.len(), 1, "{oks:#?}");
}

/// Two replicas on the PostgreSQL store handed one answer at once (four requests): the call runs
/// once, the other three are told the answer was already used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgres_cannot_both_consume_one_approval() {
    let dep = Deployment::new(Store::Postgres, "approve-pg").await;
    let a = dep.start("full", None);
    let b = dep.start("full", None);
    let oks = approval_client(&a.url, &token("cy", "race-1"), &b.url, "race").await;
    assert_eq!(oks.len(), 1, "{oks:#?}");
}
