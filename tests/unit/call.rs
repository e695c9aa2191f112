//! The one call wrapper against real SQLite, real workspaces and the generated template server:
//! modes, connect blocking, escalation ordering, argument errors, panics, truncation, audit.

use bulkhead::audit::{AuditLog, AuditOptions};
use bulkhead::call::Runtime;
use bulkhead::codegen::*;
use bulkhead::context::Presets;
use bulkhead::identity::Identity;
use bulkhead::policy::NetworkMode;
use bulkhead::state::{StateStore, StoreOptions};
use bulkhead::workspace::WorkspaceRoot;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) struct Env {
    _dir: tempfile::TempDir,
    pub(crate) root: std::path::PathBuf,
    store: Arc<StateStore>,
}

pub(crate) fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let store = Arc::new(
        StateStore::create_sqlite(&root.join("state/compliance.db"), StoreOptions::new("t"))
            .unwrap(),
    );
    Env {
        _dir: dir,
        root,
        store,
    }
}

fn runtime(env: &Env, server: Server, mode: NetworkMode) -> Runtime {
    let workspaces = WorkspaceRoot::new(env.root.join("workspaces")).unwrap();
    let audit =
        AuditLog::open_file(&env.root.join("state/audit.jsonl"), AuditOptions::default()).unwrap();
    Runtime::new(
        server,
        mode,
        Presets::builtin(),
        workspaces,
        env.store.clone(),
        audit,
    )
    .unwrap()
}

pub(crate) fn template(env: &Env, mode: NetworkMode) -> Runtime {
    runtime(
        env,
        bulkhead_example::servers::server("template").unwrap(),
        mode,
    )
}

pub(crate) fn id(user: &str, session: &str) -> Identity {
    Identity::new(user, session).unwrap()
}

pub(crate) fn args(v: Value) -> Option<JsonObject> {
    v.as_object().cloned()
}

#[tokio::test]
async fn workspace_tools_round_trip_and_stay_per_session() {
    let env = env();
    let rt = template(&env, NetworkMode::Full);
    let alice = id("alice", "s1");
    let out = rt
        .call(
            &alice,
            "write_file",
            args(json!({"path": "/workspace/notes/a.txt", "content": "hello"})),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    let out = rt
        .call(
            &alice,
            "read_file",
            args(json!({"path": "/workspace/notes/a.txt"})),
        )
        .await;
    assert_eq!((out.is_error, out.text.as_str()), (false, "hello"));
    assert_eq!(
        out.level,
        Sensitivity::Internal,
        "read_file raises the session to internal"
    );
    for other in [id("bob", "s1"), id("alice", "s2")] {
        let out = rt
            .call(
                &other,
                "read_file",
                args(json!({"path": "/workspace/notes/a.txt"})),
            )
            .await;
        assert!(
            out.is_error && !out.text.starts_with("[FATAL]"),
            "{other}: {}",
            out.text
        );
    }
    let out = rt
        .call(
            &alice,
            "read_file",
            args(json!({"path": "/workspace/../../alice/s1/notes/a.txt"})),
        )
        .await;
    assert!(
        out.is_error,
        "traversal through the tool must fail: {}",
        out.text
    );
}

#[tokio::test]
async fn argument_errors_are_retryable_and_name_the_field() {
    let env = env();
    let rt = template(&env, NetworkMode::None);
    let u = id("alice", "s1");
    for (tool, a, field) in [
        ("read_file", json!({}), "`path` is required"),
        (
            "load_sensitive_dataset",
            json!({"dataset_name": "../etc"}),
            "`dataset_name` must match",
        ),
        (
            "write_file",
            json!({"path": "/workspace/x", "content": "y", "mode": 7}),
            "unknown argument `mode`",
        ),
        (
            "search_records",
            json!({"query": "   "}),
            "`query` must match",
        ),
    ] {
        let out = rt.call(&u, tool, args(a)).await;
        assert!(out.is_error, "{tool}");
        assert!(
            !out.text.starts_with("[FATAL]"),
            "{tool}: argument errors are retryable: {}",
            out.text
        );
        assert!(out.text.contains(field), "{tool}: {}", out.text);
    }
    assert_eq!(
        rt.level(&u).await,
        Sensitivity::Public,
        "refused calls raise nothing"
    );
}

#[tokio::test]
async fn full_instance_refuses_private_work_and_private_sessions() {
    let env = env();
    let full = template(&env, NetworkMode::Full);
    let proxied = template(&env, NetworkMode::Proxied);
    let u = id("alice", "s1");
    let load = args(json!({"dataset_name": "customers_2026"}));
    let out = full.call(&u, "load_sensitive_dataset", load.clone()).await;
    assert!(
        out.text.starts_with("[FATAL] ") && out.text.contains("`proxied` instance"),
        "{}",
        out.text
    );
    assert_eq!(
        full.level(&u).await,
        Sensitivity::Public,
        "the refused load raised nothing"
    );

    let out = proxied.call(&u, "load_sensitive_dataset", load).await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.level, Sensitivity::Confidential);
    let rec = env.store.record(&u).await.unwrap();
    assert_eq!(
        rec.datasets
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        ["dataset:customers_2026"]
    );

    // The session is private now: the full instance refuses it even for harmless tools.
    let out = full
        .call(&u, "read_file", args(json!({"path": "/workspace/x"})))
        .await;
    assert!(
        out.text.starts_with("[FATAL] ") && out.text.contains("url_proxied"),
        "{}",
        out.text
    );
    // And `connect` is refused everywhere, with a fatal (non-retryable) error.
    let out = proxied
        .call(
            &u,
            "notify_team",
            args(json!({"channel": "ops", "message": "hi"})),
        )
        .await;
    assert!(
        out.text.starts_with("[FATAL] ") && out.text.contains("connect tools stay blocked"),
        "{}",
        out.text
    );
    // Another session of the same user is untouched.
    assert_eq!(full.level(&id("alice", "s2")).await, Sensitivity::Public);
}

#[tokio::test]
async fn large_results_are_saved_and_previewed() {
    let env = env();
    let rt = template(&env, NetworkMode::Full);
    let u = id("alice", "s1");
    let big: String = (0..5000)
        .map(|i| format!("line {i} of a long file\n"))
        .collect();
    let out = rt
        .call(
            &u,
            "write_file",
            args(json!({"path": "/workspace/big.txt", "content": big})),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    let out = rt
        .call(&u, "read_file", args(json!({"path": "/workspace/big.txt"})))
        .await;
    assert!(!out.is_error);
    let saved = out.saved_to.clone().expect("a large result is saved");
    assert!(
        saved.starts_with("/workspace/results/read_file-"),
        "{saved}"
    );
    assert!(
        out.text.starts_with(&format!("Results saved to {saved} (")),
        "{}",
        &out.text[..200]
    );
    assert!(
        out.text.len() < 2 * 5000 + 500,
        "preview bounded by the preset: {}",
        out.text.len()
    );
    let again = rt.call(&u, "read_file", args(json!({"path": saved}))).await;
    assert!(
        again.saved_to.is_some(),
        "the saved file holds the full result"
    );
}

// --- a hand-written server to probe ordering, panics and the fail-closed store --------------

static PROBE_TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "ping_internal",
        title: None,
        description: "a connect tool that itself raises the session to internal",
        permission: Permission::Connect,
        context: "default",
        sensitivity: Sensitivity::Internal,
        annotations: Annotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        },
        input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#,
        output_schema: None,
        dataset: "probe:ping_internal",
        rate_limit: None,
        approval: None,
        inspection: bulkhead::tooldef::Inspection::On,
        bound: &[],
        target: Target::Handler,
    },
    ToolDef {
        name: "ping_out",
        title: None,
        description: "a connect tool that takes a while",
        permission: Permission::Connect,
        context: "default",
        sensitivity: Sensitivity::Public,
        annotations: Annotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        },
        input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#,
        output_schema: None,
        dataset: "probe:ping",
        rate_limit: None,
        approval: None,
        inspection: bulkhead::tooldef::Inspection::On,
        bound: &[],
        target: Target::Handler,
    },
    ToolDef {
        name: "load_secret",
        title: None,
        description: "raises the session to confidential",
        permission: Permission::Read,
        context: "default",
        sensitivity: Sensitivity::Confidential,
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#,
        output_schema: None,
        dataset: "probe:secret",
        rate_limit: None,
        approval: None,
        inspection: bulkhead::tooldef::Inspection::On,
        bound: &[],
        target: Target::Handler,
    },
    ToolDef {
        name: "boom",
        title: None,
        description: "panics",
        permission: Permission::Read,
        context: "default",
        sensitivity: Sensitivity::Public,
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#,
        output_schema: None,
        dataset: "probe:boom",
        rate_limit: None,
        approval: None,
        inspection: bulkhead::tooldef::Inspection::On,
        bound: &[],
        target: Target::Handler,
    },
    ToolDef {
        name: "counted",
        title: None,
        description: "declares {count: integer}; returns what the caller asks for",
        permission: Permission::Read,
        context: "default",
        sensitivity: Sensitivity::Public,
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        input_schema: r#"{"type":"object","properties":{"honest":{"type":"boolean"}},"additionalProperties":false}"#,
        output_schema: Some(
            r#"{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}"#,
        ),
        dataset: "probe:counted",
        rate_limit: None,
        approval: None,
        inspection: bulkhead::tooldef::Inspection::On,
        bound: &[],
        target: Target::Handler,
    },
];

static PROBE: ServerDef = ServerDef {
    name: "probe",
    instructions: "",
    presets: &[],
    tools: PROBE_TOOLS,
    resources: &[],
    prompts: &[],
};

#[derive(Default)]
struct Probe {
    connects: Mutex<Vec<(String, Instant, Instant)>>,
    loads: Mutex<Vec<(String, Instant)>>,
}

struct ProbeHandlers(Arc<Probe>);

impl HandlerSet for ProbeHandlers {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        cx: ToolContext,
        args: JsonObject,
    ) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            match tool {
                "ping_out" | "ping_internal" => {
                    let start = Instant::now();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    self.0.connects.lock().unwrap().push((
                        cx.session_id().to_string(),
                        start,
                        Instant::now(),
                    ));
                    Ok(ToolOutput::Text("sent".into()))
                }
                "load_secret" => {
                    self.0
                        .loads
                        .lock()
                        .unwrap()
                        .push((cx.session_id().to_string(), Instant::now()));
                    Ok(ToolOutput::Text("loaded".into()))
                }
                "counted" => match args.get("honest") {
                    Some(Value::Bool(true)) => Ok(ToolOutput::Json(json!({"count": 3}))),
                    Some(Value::Bool(false)) => Ok(ToolOutput::Json(json!({"count": "three"}))),
                    _ => Ok(ToolOutput::Text("3".into())),
                },
                _ => panic!("tool code bug"),
            }
        })
    }
}

/// Runs `rounds` sessions one after another; in each, `calls` concurrent calls of `connect_tool`
/// with one `load_secret` in the middle. Returns what the probe saw: (connects, loads).
async fn race_rounds(
    prefix: &str,
    rounds: usize,
    calls: usize,
    connect_tool: &'static str,
) -> (Vec<(String, Instant, Instant)>, Vec<(String, Instant)>) {
    let env = env();
    let probe = Arc::new(Probe::default());
    let rt = Arc::new(runtime(
        &env,
        Server::new(&PROBE, &[], ProbeHandlers(probe.clone())),
        NetworkMode::Proxied,
    ));
    for round in 0..rounds {
        let u = id("alice", &format!("{prefix}{round}"));
        let mut tasks = Vec::new();
        for i in 0..calls {
            let (rt, u) = (rt.clone(), u.clone());
            let tool = if i == calls / 2 {
                "load_secret"
            } else {
                connect_tool
            };
            tasks.push(tokio::spawn(async move { rt.call(&u, tool, None).await }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    let connects = probe.connects.lock().unwrap().clone();
    let loads = probe.loads.lock().unwrap().clone();
    (connects, loads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_connect_call_overlaps_an_escalation() {
    let (connects, loads) = race_rounds("s", 20, 16, "ping_out").await;
    assert_eq!(loads.len(), 20);
    assert!(
        !connects.is_empty(),
        "some connect calls ran before the escalation"
    );
    // Every load started after its escalation committed; an allowed connect call of the same
    // session must not have been running at that moment.
    for (session, start, end) in &connects {
        for (load_session, load) in &loads {
            assert!(
                session != load_session || !(start < load && end > load),
                "a connect call was still running while its session escalated"
            );
        }
    }
}

#[tokio::test]
async fn a_panicking_tool_is_a_bug_not_fatal_and_the_server_keeps_serving() {
    let env = env();
    let probe = Arc::new(Probe::default());
    let rt = runtime(
        &env,
        Server::new(&PROBE, &[], ProbeHandlers(probe)),
        NetworkMode::Full,
    );
    let u = id("alice", "s1");
    let out = rt.call(&u, "boom", None).await;
    assert!(
        out.is_error && !out.text.starts_with("[FATAL]"),
        "{}",
        out.text
    );
    assert!(
        !out.text.contains("tool code bug"),
        "panic text is logged, not sent: {}",
        out.text
    );
    let out = rt.call(&u, "ping_out", None).await;
    assert!(!out.is_error, "{}", out.text);
}

#[tokio::test]
async fn an_unreadable_compliance_record_fails_closed() {
    let env = env();
    let probe = Arc::new(Probe::default());
    let rt = runtime(
        &env,
        Server::new(&PROBE, &[], ProbeHandlers(probe.clone())),
        NetworkMode::None,
    );
    let u = id("alice", "s1");
    assert!(!rt.call(&u, "ping_out", None).await.is_error);
    // Damage the state behind the runtime's back: its lock file disappears.
    std::fs::remove_file(env.root.join("state/compliance.lock")).unwrap();
    let out = rt.call(&u, "ping_out", None).await;
    assert!(
        out.text.starts_with("[FATAL] ") && out.text.contains("treated as secret"),
        "{}",
        out.text
    );
    assert!(
        !out.text.contains(env.root.to_str().unwrap()),
        "no host path: {}",
        out.text
    );
    assert_eq!(out.level, Sensitivity::Secret);
    assert_eq!(
        probe.connects.lock().unwrap().len(),
        1,
        "the refused call did not run"
    );
}

#[tokio::test]
async fn every_decision_is_audited() {
    let env = env();
    let rt = template(&env, NetworkMode::Proxied);
    let u = id("alice", "s1");
    rt.call(&u, "read_file", args(json!({}))).await;
    rt.call(
        &u,
        "load_sensitive_dataset",
        args(json!({"dataset_name": "d1"})),
    )
    .await;
    rt.call(
        &u,
        "notify_team",
        args(json!({"channel": "ops", "message": "x"})),
    )
    .await;
    drop(rt); // the last handle: everything queued is written
    let log = std::fs::read_to_string(env.root.join("state/audit.jsonl")).unwrap();
    let all: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let intents: Vec<&str> = all
        .iter()
        .filter(|l| l["phase"] == "intent")
        .map(|l| l["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        intents,
        ["load_sensitive_dataset"],
        "only the escalating call writes ahead"
    );
    let lines: Vec<&Value> = all.iter().filter(|l| l["phase"] == "outcome").collect();
    let outcomes: Vec<(&str, &str, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["tool"].as_str().unwrap(),
                l["outcome"].as_str().unwrap(),
                l["level_before"].as_str().unwrap(),
                l["level_after"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("read_file", "error", "public", "public"),
            (
                "load_sensitive_dataset",
                "escalated",
                "public",
                "confidential"
            ),
            ("notify_team", "blocked", "confidential", "confidential"),
        ]
    );
    assert!(
        lines
            .iter()
            .all(|l| l["user"] == "alice" && l["session"] == "s1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_escalating_connect_call_never_runs_after_a_concurrent_private_load() {
    let (connects, loads) = race_rounds("e", 30, 8, "ping_internal").await;
    assert_eq!(loads.len(), 30);
    // Within a session, no allowed connect call may overlap the load, and none may start after it:
    // one that waited for the lock while the load escalated must be refused.
    for (session, start, end) in &connects {
        for (load_session, load) in &loads {
            if session == load_session {
                assert!(
                    end <= load,
                    "session {session}: a connect call ran during or after the escalation to confidential"
                );
                assert!(start < load);
            }
        }
    }
}

/// Break 6's second half: when the audit log cannot be written (a full disk: /dev/full answers
/// every write with ENOSPC), a connect call is refused before it runs, and so is every later call.
#[tokio::test]
async fn a_connect_call_is_refused_when_its_intent_cannot_be_written() {
    let env = env();
    let probe = Arc::new(Probe::default());
    let workspaces = WorkspaceRoot::new(env.root.join("workspaces")).unwrap();
    let audit =
        AuditLog::open_file(std::path::Path::new("/dev/full"), AuditOptions::default()).unwrap();
    let rt = Runtime::new(
        Server::new(&PROBE, &[], ProbeHandlers(probe.clone())),
        NetworkMode::Full,
        Presets::builtin(),
        workspaces,
        env.store.clone(),
        audit,
    )
    .unwrap();
    let u = id("alice", "s1");
    let out = rt.call(&u, "ping_out", None).await;
    assert!(
        out.text.starts_with("[FATAL] ") && out.text.contains("audit log"),
        "{}",
        out.text
    );
    assert!(
        probe.connects.lock().unwrap().is_empty(),
        "the connect call ran unaudited"
    );
    let out = rt.call(&u, "boom", None).await;
    assert!(
        out.text.starts_with("[FATAL] ") && out.text.contains("audit log"),
        "{}",
        out.text
    );
}

/// Calls beyond `limits.max_concurrent_calls` are refused at once with a retryable "busy" that
/// names the limit; the running ones finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_beyond_the_concurrency_limit_are_refused_as_busy() {
    let env = env();
    let probe = Arc::new(Probe::default());
    let rt = Arc::new(
        runtime(
            &env,
            Server::new(&PROBE, &[], ProbeHandlers(probe)),
            NetworkMode::Full,
        )
        .with_limits(bulkhead::call::CallLimits {
            max_concurrent_calls: 2,
            ..Default::default()
        }),
    );
    let mut tasks = Vec::new();
    for i in 0..6 {
        let rt = rt.clone();
        tasks.push(tokio::spawn(async move {
            rt.call(&id("alice", &format!("c{i}")), "ping_out", None)
                .await
        }));
    }
    let mut busy = 0;
    for t in tasks {
        let out = t.await.unwrap();
        if out.is_error {
            assert!(
                !out.text.starts_with("[FATAL]")
                    && out.text.contains("limits.max_concurrent_calls"),
                "{}",
                out.text
            );
            busy += 1;
        }
    }
    assert!(
        busy >= 1,
        "no call was refused with a limit of 2 and 6 at once"
    );
    assert!(
        !rt.call(&id("alice", "after"), "ping_out", None)
            .await
            .is_error
    );
}

#[tokio::test]
async fn a_result_that_breaks_its_declared_output_is_never_sent() {
    let env = env();
    let rt = runtime(
        &env,
        Server::new(&PROBE, &[], ProbeHandlers(Arc::default())),
        NetworkMode::None,
    );
    let u = id("alice", "s1");
    let out = rt.call(&u, "counted", args(json!({"honest": true}))).await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.structured, Some(json!({"count": 3})));
    for (case, a) in [
        ("wrong type", json!({"honest": false})),
        ("text instead of structure", json!({})),
    ] {
        let out = rt.call(&u, "counted", args(a)).await;
        assert!(out.is_error, "{case}: {}", out.text);
        assert!(
            out.text.starts_with("[FATAL]") && out.text.contains("declared output schema"),
            "{case}: {}",
            out.text
        );
        assert!(
            out.structured.is_none() && !out.text.contains("three"),
            "{case}: nothing of the bad result leaves: {:?}",
            out
        );
    }
}

/// A made-up tool name never becomes a metrics label (labels stay bounded by the spec).
#[tokio::test]
async fn unknown_tool_names_are_not_metric_labels() {
    let env = env();
    let rt = template(&env, NetworkMode::Full);
    let u = id("alice", "s1");
    for i in 0..20 {
        let out = rt.call(&u, &format!("made-up-{i}"), None).await;
        assert!(out.is_error);
    }
    let text = rt.metrics().render();
    assert!(!text.contains("made-up"), "{text}");
    assert!(
        text.contains(r#"bulkhead_tool_calls_total{tool="(unknown)",outcome="error"} 20"#),
        "{text}"
    );
}
