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

/// A desktop client's side of `bulkhead connect`: answers every question with `approve`, and
/// counts them.
#[derive(Clone)]
struct Desktop {
    approve: bool,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Desktop {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut elicitation = rmcp::model::ElicitationCapability::new();
        elicitation.form = Some(rmcp::model::FormElicitationCapability::new());
        let mut config = rmcp::model::ClientConfig::default();
        config.capabilities.elicitation = Some(elicitation);
        config
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let message = serde_json::to_value(&request).unwrap()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.asked.lock().unwrap().push(message);
        let mut result: rmcp::model::ElicitResult = serde_json::from_value(serde_json::json!({
            "action": "accept",
            "content": {"approve": self.approve},
        }))
        .unwrap();
        if !self.approve {
            result.action = rmcp::model::ElicitationAction::Decline;
            result.content = None;
        }
        Ok(result)
    }
}

/// `bulkhead connect` (the isolating client over a full and a proxied instance) bridges the
/// instance's question to the stdio client that made the call: approved, the file goes; declined,
/// it stays; either way the session stays on the instance that asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulkhead_connect_bridges_the_question_to_the_desktop_client() {
    use rmcp::ServiceExt as _;
    use serde_json::json;
    let dep = Deployment::new(Store::Sqlite, "approve-connect").await;
    let full = dep.start("full", None);
    let proxied = dep.start("proxied", None);
    for approve in [true, false] {
        let session = format!("desk-{approve}");
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bulkhead"))
            .arg("--config")
            .arg(&dep.config)
            .args([
                "connect",
                "template",
                "--url",
                &full.url,
                "--url-proxied",
                &proxied.url,
            ])
            .env("BULKHEAD_TOKEN", token("dee", &session))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let desktop = Desktop {
            approve,
            asked: Default::default(),
        };
        let c = desktop.clone().serve(io).await.expect("bulkhead connect");
        let call = |name: &'static str, args: serde_json::Value| {
            let c = &c;
            async move {
                let mut p = rmcp::model::CallToolRequestParams::new(name);
                p.arguments = args.as_object().cloned();
                let r = tokio::time::timeout(std::time::Duration::from_secs(60), c.call_tool(p))
                    .await
                    .expect("an answer within 60 s")
                    .unwrap();
                let text = r
                    .content
                    .first()
                    .and_then(|b| b.as_text())
                    .map(|t| t.text.clone())
                    .unwrap_or_default();
                (r.is_error == Some(true), text)
            }
        };
        let (err, text) = call(
            "write_file",
            json!({"path": "/workspace/d.txt", "content": "x"}),
        )
        .await;
        assert!(!err, "{text}");
        let (err, text) = call("delete_file", json!({"path": "/workspace/d.txt"})).await;
        assert_eq!(err, !approve, "{text}");
        let asked = desktop.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(
            asked[0].contains("delete_file") && asked[0].contains("/workspace/d.txt"),
            "{asked:?}"
        );
        let (err, text) = call("read_file", json!({"path": "/workspace/d.txt"})).await;
        assert_eq!(err, approve, "after {approve}: {text}");
        if !approve {
            assert!(text.contains("x"), "{text}");
        }
        c.cancel().await.ok();
    }
}

/// `bulkhead connect` answers each protocol mode of the official Python SDK over stdio:
/// `resultType` on 2026-07-28 (which that SDK requires of every result), the instance's approval
/// question as an `input_required` round there and as `elicitation/create` on 2025 sessions;
/// accept runs the call, decline and a client without elicitation leave the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulkhead_connect_answers_every_protocol_mode_of_the_python_sdk() {
    let dep = Deployment::new(Store::Sqlite, "connect-eras").await;
    let full = dep.start("full", None);
    let proxied = dep.start("proxied", None);
    let python = tokio::task::spawn_blocking(super::python_sdk::venv_python)
        .await
        .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/connect_client.py");
    for mode in ["legacy", "2026-07-28", "auto"] {
        let run = tokio::process::Command::new(&python)
            .arg(&script)
            .arg(mode)
            .arg(env!("CARGO_BIN_EXE_bulkhead"))
            .arg("--config")
            .arg(&dep.config)
            .args([
                "connect",
                "template",
                "--url",
                &full.url,
                "--url-proxied",
                &proxied.url,
            ])
            .env("BULKHEAD_TOKEN", token("eve", &format!("eras-{mode}")))
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(std::time::Duration::from_secs(180), run)
            .await
            .expect("the connect client finished within 180 s")
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "connect client ({mode}) failed:\n{said}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let oks = said.lines().filter(|l| l.starts_with("ok ")).count();
        assert_eq!(oks, 4, "{mode}: {said}");
    }
}

/// Under `environment: production` no other key stands in for `approvals.key_file`: a server
/// with a tool that asks for approval refuses to start, naming the key; with the file, it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_without_an_approval_key_refuses_to_start() {
    let dep = super::procs::Deployment::new(super::procs::Store::Sqlite, "approval-prod").await;
    dep.append_config("environment: production\n");
    let refused = dep
        .try_start("full", None)
        .err()
        .expect("it refuses to start");
    assert!(
        refused.contains("approvals.key_file is not set: under `environment: production`"),
        "{refused}"
    );
    let key = dep.path().join("approval.key");
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).unwrap();
    std::fs::write(&key, bytes).unwrap();
    dep.append_config(&format!("approvals:\n  key_file: {}\n", key.display()));
    let mut started = dep.start("full", None);
    started.stop();
}
