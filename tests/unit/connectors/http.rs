//! `http` against a real axum server on 127.0.0.1: JSON and text bodies, status tiers, refused
//! redirects, size cap, host allowlist, connection refused and timeouts.

use super::*;
use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::json;
use std::sync::Arc as StdArc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A server on 127.0.0.1:0: its base URL and a count of the requests it received.
async fn serve() -> (String, StdArc<AtomicUsize>) {
    let hits = StdArc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app =
        Router::new()
            .route(
                "/api/items/{id}",
                get(|req: Request| async move {
                    axum::Json(json!({"raw_path": req.uri().path(), "query": req.uri().query()}))
                }),
            )
            .route("/api/text", get(|| async { "plain hello" }))
            .route(
                "/api/missing",
                get(|| async { (StatusCode::NOT_FOUND, "no such item, check the id") }),
            )
            .route(
                "/api/boom",
                get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "database down") }),
            )
            .route(
                "/api/redirect",
                get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/api/text")]) }),
            )
            .route("/api/big", get(|| async { "x".repeat(5000) }))
            .route(
                "/api/big-chunked",
                get(|| async {
                    let chunks = (0..10).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 600]));
                    Body::from_stream(futures::stream::iter(chunks)).into_response()
                }),
            )
            .route(
                "/api/slow",
                get(|| async {
                    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                    "late"
                }),
            )
            .route(
                "/api/echo/{id}",
                post(|req: Request| async move {
                    let headers: serde_json::Map<String, Value> = req
                        .headers()
                        .iter()
                        .filter(|(k, _)| k.as_str().starts_with("x-"))
                        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or(""))))
                        .collect();
                    let query = req.uri().query().map(str::to_owned);
                    let body = axum::body::to_bytes(req.into_body(), 4096).await.unwrap();
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    axum::Json(json!({"headers": headers, "query": query, "body": body}))
                }),
            )
            .route(
                "/api/notify/{channel}",
                post(|axum::Json(body): axum::Json<Value>| async move {
                    axum::Json(json!({"got": body}))
                }),
            )
            .layer(axum::middleware::from_fn(
                move |req: Request, next: axum::middleware::Next| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    next.run(req)
                },
            ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/api"), hits)
}

const NO_PARAMS: &str = r#"{"type":"object","properties":{}}"#;

macro_rules! get_op {
    ($name:literal, $path:literal) => {
        OperationDef {
            name: $name,
            params_schema: NO_PARAMS,
            body: concat!(
                r#"{"http":{"method":"GET","path":""#,
                $path,
                r#"","query":[],"body":[]}}"#
            ),
        }
    };
}

static OPS: &[OperationDef] = &[
    OperationDef {
        name: "item",
        params_schema: r#"{"type":"object","properties":{"id":{"type":"string"},"tag":{},"q":{}}}"#,
        body: r#"{"http": {"method": "GET", "path": "/items/{id}", "query": ["q", "tag"], "body": []}}"#,
    },
    OperationDef {
        name: "notify",
        params_schema: r#"{"type":"object","properties":{"channel":{"type":"string"},"message":{"type":"string"}}}"#,
        body: r#"{"http": {"method": "POST", "path": "/notify/{channel}", "query": [], "body": ["message"]}}"#,
    },
    OperationDef {
        name: "echo",
        params_schema: r#"{"type":"object","properties":{"id":{"type":"string"},"request_id":{"type":"string"},"page_size":{"type":"integer"},"photo_urls":{"type":"array"}}}"#,
        body: r#"{"http": {"method": "POST", "path": "/echo/{id}", "query": ["page_size"], "body": ["photo_urls"], "headers": ["request_id"], "renames": [["page_size", "page[size]"], ["photo_urls", "photoUrls"], ["request_id", "X-Request-ID"]]}}"#,
    },
    get_op!("text", "/text"),
    get_op!("missing", "/missing"),
    get_op!("boom", "/boom"),
    get_op!("redirect", "/redirect"),
    get_op!("big", "/big"),
    get_op!("big_chunked", "/big-chunked"),
    get_op!("slow", "/slow"),
];

static API: ConnectorDef = ConnectorDef {
    secrets: &[],
    name: "api",
    kind: bulkhead_vocab::connector::ConnectorKind::Http,
    sensitivity: Sensitivity::Public,
    // The stand-in service listens on loopback, which only `reach_private` opens.
    settings: r#"{"base_url":"${BASE}","timeout_ms":"${TIMEOUT:-300}","max_response_bytes":4096,"reach_private":["127.0.0.0/8"]}"#,
    operations: OPS,
};

static ELSEWHERE: ConnectorDef = ConnectorDef {
    secrets: &[],
    name: "api",
    kind: bulkhead_vocab::connector::ConnectorKind::Http,
    sensitivity: Sensitivity::Public,
    settings: r#"{"base_url":"${BASE}","allowed_hosts":["example.com","127.0.0.1:1"],"reach_private":["127.0.0.0/8"]}"#,
    operations: OPS,
};

async fn api() -> (Tmp, Connectors, StdArc<AtomicUsize>) {
    let (base, hits) = serve().await;
    (tmp(), build(&API, &[("BASE", base)]), hits)
}

#[tokio::test]
async fn json_bodies_come_back_as_json_with_encoded_path_and_query() {
    let (t, c, _) = api().await;
    let out = run(
        &c,
        &t,
        "api",
        "item",
        json!({"id": "a b/../c", "q": "x&y=z", "tag": ["t1", "t2"]}),
    )
    .await
    .unwrap();
    assert_eq!(
        out,
        Collected::Json(json!({
            "raw_path": "/api/items/a%20b%2F..%2Fc",
            "query": "q=x%26y%3Dz&tag=t1&tag=t2"
        }))
    );
    let out = run(
        &c,
        &t,
        "api",
        "notify",
        json!({"channel": "ops", "message": "hi"}),
    )
    .await
    .unwrap();
    assert_eq!(out, Collected::Json(json!({"got": {"message": "hi"}})));
    let m = retryable(run(&c, &t, "api", "item", json!({"id": ".."})).await);
    assert!(m.contains("`..`"), "{m}");
}

#[tokio::test]
async fn text_bodies_come_back_as_text() {
    let (t, c, _) = api().await;
    let out = run(&c, &t, "api", "text", json!({})).await.unwrap();
    assert_eq!(out, Collected::Text("plain hello".into()));
}

#[tokio::test]
async fn client_errors_are_retryable_server_errors_fatal() {
    let (t, c, _) = api().await;
    let m = retryable(run(&c, &t, "api", "missing", json!({})).await);
    assert_eq!(m, "HTTP 404 Not Found: no such item, check the id");
    let m = fatal(run(&c, &t, "api", "boom", json!({})).await);
    assert_eq!(m, "HTTP 500 Internal Server Error: database down");
}

#[tokio::test]
async fn redirects_are_refused_not_followed() {
    let (t, c, hits) = api().await;
    let m = fatal(run(&c, &t, "api", "redirect", json!({})).await);
    assert!(m.contains("redirect (HTTP 302)"), "{m}");
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the Location was fetched");
}

#[tokio::test]
async fn oversized_bodies_are_refused_with_or_without_length() {
    let (t, c, _) = api().await;
    for op in ["big", "big_chunked"] {
        let m = retryable(run(&c, &t, "api", op, json!({})).await);
        assert_eq!(
            m, "response larger than 4096 bytes; narrow the request",
            "{op}"
        );
    }
}

#[tokio::test]
async fn hosts_outside_the_allowlist_are_never_contacted() {
    let (base, hits) = serve().await;
    let t = tmp();
    let c = build(&ELSEWHERE, &[("BASE", base.clone())]);
    let m = fatal(run(&c, &t, "api", "text", json!({})).await);
    let host = base.trim_start_matches("http://").trim_end_matches("/api");
    assert!(m.contains(&format!("may not reach {host}")), "{m}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn refused_connections_and_timeouts_are_retryable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let t = tmp();
    let c = build(&API, &[("BASE", format!("http://{addr}/api"))]);
    let m = retryable(run(&c, &t, "api", "text", json!({})).await);
    assert!(
        m.starts_with(&format!("cannot reach {addr} (")) && m.contains("refused"),
        "{m}"
    );

    let (t, c, _) = api().await;
    let m = retryable(run(&c, &t, "api", "slow", json!({})).await);
    assert!(
        m.contains("did not answer within 300 ms; retry later"),
        "{m}"
    );
}

/// Header parameters go out as headers, under the service's names (`upstream`), as do renamed
/// query keys and body fields; a value that cannot be a header is refused, retryable.
#[tokio::test]
async fn header_parameters_and_the_services_own_names_are_sent() {
    let (t, c, _) = api().await;
    let out = run(
        &c,
        &t,
        "api",
        "echo",
        json!({"id": "7", "request_id": "r-42", "page_size": 5, "photo_urls": ["a", "b"]}),
    )
    .await
    .unwrap();
    assert_eq!(
        out,
        Collected::Json(json!({
            "headers": {"x-request-id": "r-42"},
            "query": "page%5Bsize%5D=5",
            "body": {"photoUrls": ["a", "b"]}
        }))
    );
    let m = retryable(
        run(
            &c,
            &t,
            "api",
            "echo",
            json!({"id": "7", "request_id": "a\r\nX-Evil: 1"}),
        )
        .await,
    );
    assert!(m.contains("cannot be sent as a header"), "{m}");
}
