//! OpenTelemetry export from a real `bulkhead serve` process to an in-test OTLP/HTTP receiver
//! that decodes the protobuf with the OpenTelemetry types: one `tools/call` span per call with
//! tool, outcome and levels, and the same call id as the audit record; no argument values.

use crate::procs::{Deployment, Store, call, client};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::mpsc;

async fn receiver() -> (String, mpsc::UnboundedReceiver<ExportTraceServiceRequest>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: bytes::Bytes| {
            let tx = tx.clone();
            async move {
                let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                let _ = tx.send(req);
                (
                    [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, rx)
}

fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes
        .iter()
        .filter_map(|kv| {
            let v = match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(s) => s.clone(),
                other => format!("{other:?}"),
            };
            Some((kv.key.clone(), v))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_is_one_span_sharing_the_audit_call_id() {
    let (endpoint, mut rx) = receiver().await;
    let dep = Deployment::new(Store::Sqlite, "otel").await;
    let mut text = std::fs::read_to_string(&dep.config).unwrap();
    text.push_str(&format!(
        "telemetry:\n  otlp_endpoint: {endpoint}\n  batch_delay_ms: 100\n"
    ));
    std::fs::write(&dep.config, text).unwrap();
    let proc = dep.start("full", None);
    let c = client(&proc.url, "otel-user", "s1").await;
    let w = call(
        &c,
        "write_file",
        json!({"path": "/workspace/a.txt", "content": "SECRET-ARG-VALUE"}),
    )
    .await
    .unwrap();
    assert!(!w.is_error, "{}", w.text);
    let r = call(
        &c,
        "search_records",
        json!({"query": "SECRET-ARG-VALUE", "limit": 1}),
    )
    .await
    .unwrap();
    assert!(r.is_error, "confidential on the full instance is refused");

    let mut spans: Vec<Span> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while spans.iter().filter(|s| s.name == "tools/call").count() < 2 {
        let req = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("spans exported within 20 s")
            .unwrap();
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                spans.extend(ss.spans);
            }
        }
    }
    let by_tool: HashMap<String, HashMap<String, String>> = spans
        .iter()
        .filter(|s| s.name == "tools/call")
        .map(|s| {
            let a = attributes(s);
            (a["mcp.tool.name"].clone(), a)
        })
        .collect();
    let write = &by_tool["write_file"];
    let mut shown: Vec<_> = write.iter().collect();
    shown.sort();
    eprintln!("span tools/call: {shown:?}");
    assert_eq!(write["bulkhead.outcome"], "escalated");
    assert_eq!(
        (
            write["bulkhead.level_before"].as_str(),
            write["bulkhead.level_after"].as_str()
        ),
        ("public", "internal")
    );
    assert_eq!(write["bulkhead.permission"], "write");
    assert_eq!(by_tool["search_records"]["bulkhead.outcome"], "blocked");
    for s in &spans {
        let dump = format!("{s:?}");
        assert!(
            !dump.contains("SECRET-ARG-VALUE") && !dump.contains("otel-user"),
            "{dump}"
        );
        assert_eq!(s.trace_id.len(), 16);
    }
    let audit = dep.audit().await;
    let record = audit
        .iter()
        .find(|r| r["tool"] == "write_file" && r["phase"] == "outcome")
        .expect("audit outcome");
    assert_eq!(
        record["call"],
        write["bulkhead.call_id"].as_str(),
        "one correlation id"
    );
}
