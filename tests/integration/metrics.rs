//! `/metrics` on a real instance, read by a Prometheus text-format parser: calls by tool and
//! outcome, latency histograms, refusals by reason, open sessions; no identity or argument value.

use crate::harness::{call, client, start, token};
use bulkhead::policy::NetworkMode;
use prometheus_parse::{Scrape, Value};
use serde_json::json;
use std::sync::Arc;

fn sample(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == name
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
        .and_then(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(*v),
            Value::Histogram(buckets) => buckets.last().map(|b| b.count),
            _ => None,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_calls_refusals_and_sessions() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let c = client(&inst.url, &token("metrics-user", "s1")).await;
    for i in 0..3 {
        let (err, _, _) = call(
            &c,
            "write_file",
            json!({"path": format!("/workspace/m{i}.txt"), "content": "x"}),
        )
        .await;
        assert!(!err);
    }
    let (err, _, _) = call(&c, "read_file", json!({"path": "/workspace/../etc/passwd"})).await;
    assert!(err, "a traversal is an error");
    let (err, _, _) = call(
        &c,
        "search_records",
        json!({"query": "SECRET-ARG-VALUE", "limit": 1}),
    )
    .await;
    assert!(err, "confidential on the full instance is refused");

    let resp = reqwest::get(format!("{}/metrics", inst.base))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    let body = resp.text().await.unwrap();
    assert!(
        !body.contains("metrics-user")
            && !body.contains("SECRET-ARG-VALUE")
            && !body.contains("/workspace"),
        "{body}"
    );
    let scrape = Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text");

    let calls = |tool: &str, outcome: &str| {
        sample(
            &scrape,
            "bulkhead_tool_calls_total",
            &[("tool", tool), ("outcome", outcome)],
        )
    };
    // The first write raises the fresh session to `internal` (write_file's sensitivity).
    assert_eq!(calls("write_file", "escalated"), Some(1.0), "{body}");
    assert_eq!(calls("write_file", "allowed"), Some(2.0), "{body}");
    assert_eq!(
        sample(
            &scrape,
            "bulkhead_escalations_total",
            &[("level", "internal")]
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(calls("read_file", "error"), Some(1.0), "{body}");
    assert_eq!(calls("search_records", "blocked"), Some(1.0), "{body}");
    assert_eq!(
        sample(&scrape, "bulkhead_refusals_total", &[("reason", "mode")]),
        Some(1.0),
        "{body}"
    );
    let latency = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "bulkhead_tool_call_duration_seconds"
                && s.labels.get("tool") == Some("write_file")
        })
        .unwrap_or_else(|| panic!("a latency histogram: {body}"));
    let Value::Histogram(buckets) = &latency.value else {
        panic!("histogram: {body}")
    };
    assert_eq!(
        buckets.last().unwrap().count,
        3.0,
        "every call observed once"
    );
    assert_eq!(
        sample(&scrape, "bulkhead_open_sessions", &[]),
        Some(1.0),
        "{body}"
    );
    c.cancel().await.unwrap();
}

/// `/readyz` on a real process: ready while the store, the audit log and the connectors answer;
/// 503 naming the connector (not its path) when its database is gone; ready again once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_connectors_and_names_no_paths() {
    use crate::procs::{Deployment, Store};
    let dep = Deployment::new(Store::Sqlite, "readyz").await;
    let proc = dep.start("full", None);
    let get = || async {
        let r = reqwest::get(format!("{}/readyz", proc.base)).await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let (status, body) = get().await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.starts_with("ready\n") && body.contains("ok    connector records"),
        "{body}"
    );
    let db = dep.path().join("records.db");
    let moved = dep.path().join("records.db.away");
    std::fs::rename(&db, &moved).unwrap();
    let (status, body) = get().await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("fail  connector records"), "{body}");
    assert!(
        !body.contains(&dep.path().display().to_string()),
        "no host path: {body}"
    );
    std::fs::rename(&moved, &db).unwrap();
    assert_eq!(get().await.0, 200);
    let health = reqwest::get(format!("{}/healthz", proc.base))
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "alive throughout");
}

/// An instance started with `--mode none --unisolated` (development on one host network) is
/// never ready and says why; `/healthz` says it is alive but unchecked. (Without `--unisolated`
/// it would not start here: see `isolation::an_instance_on_a_network_with_a_route_out_refuses_to_serve`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unisolated_none_instance_is_never_ready() {
    use crate::procs::{Deployment, Store};
    let dep = Deployment::new(Store::Sqlite, "readyz-none").await;
    let proc = dep.start("none", None);
    let r = reqwest::get(format!("{}/readyz", proc.base)).await.unwrap();
    let status = r.status().as_u16();
    let body = r.text().await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("fail  mode none: started with --unisolated: its network is not checked"),
        "{body}"
    );
    let health = reqwest::get(format!("{}/healthz", proc.base))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok none (unisolated)\n");
    assert!(proc.stderr().contains("--unisolated"), "{}", proc.stderr());
}
