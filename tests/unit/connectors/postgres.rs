//! `postgres` against a real PostgreSQL server (Debian's binaries, a throwaway cluster): named
//! binding typed by the statement, streamed rows, read-only transactions for reads, writes,
//! error tiers, casts, an unreachable server.

use super::*;
use crate::state::backends::pg;
use serde_json::json;

const SEARCH_SCHEMA: &str =
    r#"{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}}}"#;
const ADD_SCHEMA: &str = r#"{"type":"object","properties":{"id":{"type":"integer"},"title":{"type":"string"},"size":{}}}"#;
const NONE: &str = r#"{"type":"object","properties":{}}"#;

static OPS: &[OperationDef] = &[
    OperationDef {
        name: "search",
        params_schema: SEARCH_SCHEMA,
        body: r#"{"sql": {"sql": "SELECT id, title, size, active, score FROM records WHERE title LIKE '%' || :query || '%' ORDER BY id LIMIT :limit", "writes": false}}"#,
    },
    OperationDef {
        name: "sneaky_delete",
        params_schema: NONE,
        body: r#"{"sql": {"sql": "DELETE FROM records", "writes": false}}"#,
    },
    OperationDef {
        name: "add",
        params_schema: ADD_SCHEMA,
        body: r#"{"sql": {"sql": "INSERT INTO records (id, title, size) VALUES (:id, :title, :size)", "writes": true}}"#,
    },
    OperationDef {
        name: "stamped",
        params_schema: NONE,
        body: r#"{"sql": {"sql": "SELECT id, created FROM records ORDER BY id LIMIT 1", "writes": false}}"#,
    },
    OperationDef {
        name: "stamped_text",
        params_schema: NONE,
        body: r#"{"sql": {"sql": "SELECT id, created::text AS created FROM records ORDER BY id LIMIT 1", "writes": false}}"#,
    },
    OperationDef {
        name: "slow",
        params_schema: NONE,
        body: r#"{"sql": {"sql": "SELECT pg_sleep(120)::text", "writes": false}}"#,
    },
];

static DB: ConnectorDef = ConnectorDef {
    secrets: &[],
    name: "crm",
    kind: bulkhead_vocab::connector::ConnectorKind::Postgres,
    sensitivity: Sensitivity::Confidential,
    settings: r#"{"url":"${CRM_URL}","statement_timeout_ms":"${TIMEOUT:-1000}"}"#,
    operations: OPS,
};

async fn db(rows: i64) -> (Connectors, String) {
    let url = pg::database("connector");
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(
            "CREATE TABLE records (id int4 PRIMARY KEY, title text NOT NULL, size int8, \
             active bool NOT NULL DEFAULT true, score float8, created timestamptz NOT NULL DEFAULT now())",
        )
        .await
        .unwrap();
    for i in 1..=rows {
        let size = (i % 2 == 0).then_some(i * 10);
        client
            .execute(
                "INSERT INTO records (id, title, size, score) VALUES ($1, $2, $3, $4)",
                &[
                    &(i as i32),
                    &format!("record {i}"),
                    &size,
                    &(i as f64 / 2.0),
                ],
            )
            .await
            .unwrap();
    }
    (build(&DB, &[("CRM_URL", url.clone())]), url)
}

async fn count(url: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .query_one("SELECT count(*) FROM records", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_bind_by_name_and_stream_typed_cells() {
    let t = tmp();
    let (c, _) = db(30).await;
    let rows = run(
        &c,
        &t,
        "crm",
        "search",
        json!({"query": "record 2", "limit": 3}),
    )
    .await
    .unwrap()
    .rows();
    assert_eq!(
        rows,
        vec![
            vec!["id", "title", "size", "active", "score"],
            vec!["2", "record 2", "20", "true", "1"],
            vec!["20", "record 20", "200", "true", "10"],
            vec!["21", "record 21", "", "true", "10.5"],
        ]
    );
    // An injection attempt is just text to LIKE; no rows: the header alone.
    let rows = run(
        &c,
        &t,
        "crm",
        "search",
        json!({"query": "' OR 1=1 --", "limit": 5}),
    )
    .await
    .unwrap()
    .rows();
    assert_eq!(rows, vec![vec!["id", "title", "size", "active", "score"]]);
    // A number where text is expected is bound as its text; text where a number is expected
    // is refused, retryably, naming the argument.
    let m = retryable(
        run(
            &c,
            &t,
            "crm",
            "search",
            json!({"query": "x", "limit": "ten"}),
        )
        .await,
    );
    assert_eq!(m, "`limit` must be a whole number in range");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_run_in_a_read_only_transaction() {
    let t = tmp();
    let (c, url) = db(5).await;
    let m = fatal(run(&c, &t, "crm", "sneaky_delete", json!({})).await);
    assert!(m.contains("read-only transaction"), "{m}");
    assert_eq!(count(&url).await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_report_changes_and_bad_input_is_retryable() {
    let t = tmp();
    let (c, url) = db(2).await;
    let out = run(
        &c,
        &t,
        "crm",
        "add",
        json!({"id": 7, "title": "new", "size": 1}),
    )
    .await
    .unwrap()
    .text();
    assert_eq!(out, "1 row changed");
    assert_eq!(count(&url).await, 3);
    let dup = retryable(run(&c, &t, "crm", "add", json!({"id": 7, "title": "again"})).await);
    assert!(dup.contains("duplicate key"), "{dup}");
    let null = retryable(run(&c, &t, "crm", "add", json!({"id": 8})).await);
    assert!(null.contains("null value"), "{null}");
    assert!(!dup.contains(&url) && !null.contains(&url));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_types_need_a_cast_and_slow_statements_are_stopped() {
    let t = tmp();
    let (c, _) = db(1).await;
    let m = fatal(run(&c, &t, "crm", "stamped", json!({})).await);
    assert!(
        m.contains("column `created` has type `timestamptz`") && m.contains("created::text"),
        "{m}"
    );
    let rows = run(&c, &t, "crm", "stamped_text", json!({}))
        .await
        .unwrap()
        .rows();
    assert_eq!(rows[0], vec!["id", "created"]);
    assert!(rows[1][1].starts_with("20"), "{rows:?}");
    let started = std::time::Instant::now();
    let m = retryable(run(&c, &t, "crm", "slow", json!({})).await);
    assert!(m.contains("statement timeout"), "{m}");
    // The slow statement sleeps far longer than this bound: it was stopped, not finished.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[tokio::test]
async fn an_unreachable_server_is_fatal_and_names_no_url() {
    let t = tmp();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://bulkhead:pw@127.0.0.1:{port}/x");
    let c = build(&DB, &[("CRM_URL", url.clone())]);
    let m = fatal(run(&c, &t, "crm", "search", json!({"query": "a", "limit": 1})).await);
    assert!(m.contains("unreachable"), "{m}");
    assert!(!m.contains("pw"), "{m}");
}
