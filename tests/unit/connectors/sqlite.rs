//! `sqlite`: named binding, streamed rows, read-only reads, writes, error tiers, early drop.

use super::*;
use futures::StreamExt as _;
use rusqlite::Connection;
use serde_json::json;

const SEARCH_SCHEMA: &str =
    r#"{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}}}"#;
const ADD_SCHEMA: &str = r#"{"type":"object","properties":{"id":{"type":"integer"},"title":{"type":"string"},"size":{}}}"#;

static OPS: &[OperationDef] = &[
    OperationDef {
        name: "search",
        params_schema: SEARCH_SCHEMA,
        body: r#"{"sql": {"sql": "SELECT id, title, size FROM records WHERE title LIKE '%' || :query || '%' ORDER BY id LIMIT :limit", "writes": false}}"#,
    },
    OperationDef {
        name: "all",
        params_schema: r#"{"type":"object","properties":{}}"#,
        body: r#"{"sql": {"sql": "SELECT id FROM records ORDER BY id", "writes": false}}"#,
    },
    OperationDef {
        name: "sneaky_delete",
        params_schema: r#"{"type":"object","properties":{}}"#,
        body: r#"{"sql": {"sql": "DELETE FROM records", "writes": false}}"#,
    },
    OperationDef {
        name: "add",
        params_schema: ADD_SCHEMA,
        body: r#"{"sql": {"sql": "INSERT INTO records (id, title, size) VALUES (:id, :title, :size)", "writes": true}}"#,
    },
    OperationDef {
        name: "endless",
        params_schema: r#"{"type":"object","properties":{}}"#,
        // Minutes of work that produces no row until the end.
        body: r#"{"sql": {"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000000000) SELECT count(*) FROM c", "writes": false}}"#,
    },
    OperationDef {
        name: "undeclared",
        params_schema: r#"{"type":"object","properties":{}}"#,
        body: r#"{"sql": {"sql": "SELECT id FROM records WHERE id = :secret_id", "writes": false}}"#,
    },
];

static DB: ConnectorDef = ConnectorDef {
    secrets: &[],
    name: "records",
    kind: bulkhead_vocab::connector::ConnectorKind::Sqlite,
    sensitivity: Sensitivity::Confidential,
    settings: r#"{"path":"${TEST_DB}","busy_timeout_ms":"${BUSY:-5000}"}"#,
    operations: OPS,
};

fn db(t: &Tmp, rows: i64) -> Connectors {
    let path = t.dir.path().join("records.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE records (id INTEGER PRIMARY KEY, title TEXT NOT NULL, size INTEGER) STRICT;",
    )
    .unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    for i in 1..=rows {
        tx.execute(
            "INSERT INTO records VALUES (?1, ?2, ?3)",
            rusqlite::params![
                i,
                format!("record {i}"),
                if i % 2 == 0 { Some(i * 10) } else { None }
            ],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    build(&DB, &[("TEST_DB", path.display().to_string())])
}

fn count(t: &Tmp) -> i64 {
    let conn = Connection::open(t.dir.path().join("records.db")).unwrap();
    conn.query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn read_binds_named_params_and_streams_header_then_rows() {
    let t = tmp();
    let c = db(&t, 30);
    let rows = run(
        &c,
        &t,
        "records",
        "search",
        json!({"query": "record 2", "limit": 3}),
    )
    .await
    .unwrap()
    .rows();
    assert_eq!(
        rows,
        vec![
            vec!["id", "title", "size"],
            vec!["2", "record 2", "20"],
            vec!["20", "record 20", "200"],
            vec!["21", "record 21", ""],
        ]
    );
    // An injection attempt is just text to LIKE.
    let rows = run(
        &c,
        &t,
        "records",
        "search",
        json!({"query": "' OR 1=1 --", "limit": 5}),
    )
    .await
    .unwrap()
    .rows();
    assert_eq!(rows, vec![vec!["id", "title", "size"]]);
}

#[tokio::test]
async fn read_operations_cannot_write() {
    let t = tmp();
    let c = db(&t, 5);
    let msg = fatal(run(&c, &t, "records", "sneaky_delete", json!({})).await);
    assert!(
        msg.contains("readonly") || msg.contains("read-only") || msg.contains("query_only"),
        "{msg}"
    );
    assert_eq!(count(&t), 5);
}

#[tokio::test]
async fn writes_report_changes_and_bad_input_is_retryable_without_paths() {
    let t = tmp();
    let c = db(&t, 2);
    let out = run(
        &c,
        &t,
        "records",
        "add",
        json!({"id": 7, "title": "new", "size": 1}),
    )
    .await
    .unwrap()
    .text();
    assert_eq!(out, "1 row changed");
    assert_eq!(count(&t), 3);
    let dup = retryable(run(&c, &t, "records", "add", json!({"id": 7, "title": "again"})).await);
    assert!(dup.contains("UNIQUE constraint failed"), "{dup}");
    let null = retryable(run(&c, &t, "records", "add", json!({"id": 8})).await);
    assert!(null.contains("NOT NULL"), "{null}");
    let typed = retryable(
        run(
            &c,
            &t,
            "records",
            "add",
            json!({"id": 9, "title": "x", "size": "big"}),
        )
        .await,
    );
    assert!(
        typed.contains("cannot store TEXT value in INTEGER column"),
        "{typed}"
    );
    let host = t.dir.path().display().to_string();
    for m in [&dup, &null, &typed] {
        assert!(!m.contains(&host), "{m}");
    }
    assert_eq!(count(&t), 3);
}

#[tokio::test]
async fn missing_or_corrupt_database_is_fatal_and_never_created() {
    let t = tmp();
    let path = t.dir.path().join("absent.db");
    let c = build(&DB, &[("TEST_DB", path.display().to_string())]);
    let m = fatal(run(&c, &t, "records", "all", json!({})).await);
    assert!(!m.contains(&t.dir.path().display().to_string()), "{m}");
    let m = fatal(run(&c, &t, "records", "add", json!({"id": 1, "title": "x"})).await);
    assert!(m.contains("cannot be opened"), "{m}");
    assert!(!path.exists(), "a write must not create the database");

    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let m = fatal(run(&c, &t, "records", "all", json!({})).await);
    assert!(m.contains("not a database"), "{m}");
}

#[tokio::test]
async fn undeclared_placeholder_is_a_misconfiguration() {
    let t = tmp();
    let c = db(&t, 1);
    let m = fatal(run(&c, &t, "records", "undeclared", json!({})).await);
    assert!(m.contains(":secret_id"), "{m}");
}

/// Dropping a half-read stream must stop the producer and release the read lock; otherwise the
/// write below waits out the busy timeout and fails as busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_stream_releases_the_database() {
    let t = tmp();
    db(&t, 100_000);
    let c = build(
        &DB,
        &[
            (
                "TEST_DB",
                t.dir.path().join("records.db").display().to_string(),
            ),
            ("BUSY", "3000".into()),
        ],
    );
    let out = connectors::call(
        &c,
        "records",
        "all",
        &t.ws,
        obj(json!({})),
        &CallSignals::new(),
    )
    .await
    .unwrap();
    let ToolOutput::Stream(mut s) = out else {
        panic!("expected a stream")
    };
    for _ in 0..10 {
        s.next().await.unwrap().unwrap();
    }
    drop(s);
    let out = run(
        &c,
        &t,
        "records",
        "add",
        json!({"id": 100_001, "title": "after"}),
    )
    .await
    .unwrap()
    .text();
    assert_eq!(out, "1 row changed");
}

/// A cancelled call interrupts SQLite's virtual machine even while the statement produces no row
/// (SQLite's progress handler asks the call's signals), and the rows counted so far are progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_query_is_interrupted_inside_sqlite() {
    let t = tmp();
    let c = db(&t, 1);
    let signals = CallSignals::new();
    let call = {
        let (c, ws, s) = (c, t.ws.clone(), signals.clone());
        tokio::spawn(async move {
            let out = connectors::call(&c, "records", "endless", &ws, obj(json!({})), &s).await;
            match out {
                Ok(ToolOutput::Stream(mut st)) => st.next().await.map(|r| r.map(|_| ())),
                Ok(_) => panic!("a stream"),
                Err(e) => Some(Err(e)),
            }
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!call.is_finished(), "the query should still be running");
    let stopped = std::time::Instant::now();
    signals.stop();
    // Generous bound: the check runs every 10,000 VM instructions (microseconds).
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), call)
        .await
        .expect("the query stops once cancelled")
        .unwrap();
    assert!(
        out.is_none(),
        "a cancelled query ends its stream without rows: {out:?}"
    );
    eprintln!("stopped {:?} after cancel", stopped.elapsed());
}

/// Rows streamed so far are the call's progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_are_counted_as_progress() {
    let t = tmp();
    let c = db(&t, 5_000);
    let signals = CallSignals::new();
    let out = connectors::call(&c, "records", "all", &t.ws, obj(json!({})), &signals)
        .await
        .unwrap();
    let ToolOutput::Stream(mut s) = out else {
        panic!("a stream")
    };
    let mut n = 0;
    while let Some(r) = s.next().await {
        r.unwrap();
        n += 1;
    }
    assert_eq!(n, 5_001, "header and rows");
    let p = signals.progress().unwrap();
    assert_eq!(
        (p.done, p.total, p.unit),
        (5_000, None, bulkhead::signals::Unit::Rows)
    );
}
