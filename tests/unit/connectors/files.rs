//! `files` search inside a real session workspace: recursion in name order, context, binary
//! files skipped, traversal refused.

use super::*;
use serde_json::json;

const SEARCH: &str = r#"{"type":"object","properties":{}}"#;

static WS: ConnectorDef = ConnectorDef {
    secrets: &[],
    name: "workspace",
    kind: bulkhead_vocab::connector::ConnectorKind::Files,
    sensitivity: Sensitivity::Internal,
    settings: "{}",
    operations: &[OperationDef {
        name: "search",
        params_schema: SEARCH,
        body: r#"{"files":{"action":"search"}}"#,
    }],
};

fn setup() -> (Tmp, Connectors) {
    let t = tmp();
    t.ws.write("/workspace/notes/b.txt", "alpha\nneedle two\nbeta\n")
        .unwrap();
    t.ws.write("/workspace/notes/a.txt", "x\ny\nneedle one\nz\n")
        .unwrap();
    t.ws.write("/workspace/top.txt", "needle top\n").unwrap();
    t.ws.write("/workspace/blob.bin", b"needle\0binary")
        .unwrap();
    (t, build(&WS, &[]))
}

#[tokio::test]
async fn search_recurses_in_name_order_with_context() {
    let (t, c) = setup();
    let lines = run(
        &c,
        &t,
        "workspace",
        "search",
        json!({"pattern": "needle", "context_lines": 1}),
    )
    .await
    .unwrap()
    .lines();
    assert_eq!(
        lines,
        vec![
            "/workspace/top.txt:1: needle top",
            "--",
            "/workspace/notes/a.txt-2- y",
            "/workspace/notes/a.txt:3: needle one",
            "/workspace/notes/a.txt-4- z",
            "--",
            "/workspace/notes/b.txt-1- alpha",
            "/workspace/notes/b.txt:2: needle two",
            "/workspace/notes/b.txt-3- beta",
        ]
    );
    let lines = run(
        &c,
        &t,
        "workspace",
        "search",
        json!({"pattern": "^needle (one|two)$", "path": "/workspace/notes"}),
    )
    .await
    .unwrap()
    .lines();
    assert_eq!(
        lines,
        vec![
            "/workspace/notes/a.txt:3: needle one",
            "/workspace/notes/b.txt:2: needle two"
        ]
    );
}

#[tokio::test]
async fn search_stays_in_the_workspace() {
    let (t, c) = setup();
    std::fs::write(t.dir.path().join("outside.txt"), "needle CANARY\n").unwrap();
    std::os::unix::fs::symlink(
        t.dir.path().join("outside.txt"),
        t.ws.host_path().join("link.txt"),
    )
    .unwrap();
    let lines = run(&c, &t, "workspace", "search", json!({"pattern": "CANARY"}))
        .await
        .unwrap()
        .lines();
    assert_eq!(lines, Vec::<String>::new());
    let m = retryable(
        run(
            &c,
            &t,
            "workspace",
            "search",
            json!({"pattern": "x", "path": "/workspace/../.."}),
        )
        .await,
    );
    assert!(!m.contains(&t.dir.path().display().to_string()), "{m}");
}
