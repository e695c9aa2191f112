//! Rate limits on real `bulkhead serve` processes: a per-user-per-tool limit holds within 10 %
//! on one instance (SQLite store) and across two replicas on PostgreSQL (their sum, not twice),
//! another user is unaffected, refusals say when to retry (the Python SDK sees a retryable
//! error), `/metrics` counts them, and a store that does not answer in time refuses (fail closed).

use super::procs::{Deployment, Store, call, client};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const LIMIT: &str = "rate_limits:\n  per_user_tool: { calls: 20, per_seconds: 1 }\n";

fn missing() -> serde_json::Value {
    json!({"path": "/workspace/none.txt"})
}

/// Hammers `read_file` as `user` from 6 sessions spread over `urls` for `secs` seconds (at most
/// 3000 calls each); returns (calls counted, refused by the limit, seconds from the first call
/// to the last answer, a refusal). The sessions connect before the clock starts, so a slow
/// machine's set-up is not counted as time the limit refilled in.
async fn hammer(urls: &[String], user: &str, secs: f64) -> (usize, usize, f64, String) {
    let allowed = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let sample = Arc::new(std::sync::Mutex::new(String::new()));
    let sessions: Vec<String> = (0..6).map(|i| format!("hammer-{i}")).collect();
    let clients = futures::future::join_all(
        sessions
            .iter()
            .enumerate()
            .map(|(i, s)| client(&urls[i % urls.len()], user, s)),
    )
    .await;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in clients {
        let (allowed, refused, sample) = (allowed.clone(), refused.clone(), sample.clone());
        tasks.push(tokio::spawn(async move {
            let mut last = start;
            for _ in 0..3000 {
                if start.elapsed().as_secs_f64() >= secs {
                    break;
                }
                let r = call(&c, "read_file", missing()).await.unwrap();
                assert!(r.is_error, "{r:?}");
                if r.text.contains("rate limit reached") {
                    refused.fetch_add(1, Ordering::Relaxed);
                    *sample.lock().unwrap() = r.text;
                } else {
                    assert!(r.text.contains("none.txt"), "{r:?}");
                    allowed.fetch_add(1, Ordering::Relaxed);
                }
                last = Instant::now();
            }
            let _ = c.cancel().await;
            last
        }));
    }
    let mut end = start;
    for t in tasks {
        end = end.max(t.await.unwrap());
    }
    let took = (end - start).as_secs_f64();
    let s = sample.lock().unwrap().clone();
    (
        allowed.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        took,
        s,
    )
}

/// 20 calls per second with a burst of 20: over `secs` seconds, 20 + 20·secs calls.
fn assert_within_ten_percent(allowed: usize, refused: usize, secs: f64, what: &str) {
    let expected = 20.0 + 20.0 * secs;
    assert!(
        refused > allowed,
        "{what}: the load did not exceed the limit ({allowed} allowed, {refused} refused)"
    );
    assert!(
        (allowed as f64 - expected).abs() <= 0.1 * expected,
        "{what}: {allowed} calls ran in {secs:.2} s; the limit allows {expected:.0} (±10 %)"
    );
}

async fn other_user_unaffected(url: &str) {
    let c = client(url, "ben", "calm").await;
    for _ in 0..5 {
        let r = call(&c, "read_file", missing()).await.unwrap();
        assert!(!r.text.contains("rate limit"), "{r:?}");
    }
    let _ = c.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_per_user_tool_limit_holds_on_one_instance() {
    let dep = Deployment::new(Store::Sqlite, "rate-one").await;
    dep.append_config(LIMIT);
    let inst = dep.start("full", None);
    let (allowed, refused, secs, sample) =
        hammer(std::slice::from_ref(&inst.url), "ana", 3.0).await;
    assert_within_ten_percent(allowed, refused, secs, "one instance");
    assert!(
        sample.contains("rate_limits.per_user_tool allows 20 calls per 1 s; retry in 0.0"),
        "{sample}"
    );
    assert!(
        !sample.starts_with("[FATAL]"),
        "a rate refusal is retryable: {sample}"
    );
    other_user_unaffected(&inst.url).await;
    let metrics = reqwest::get(format!("{}/metrics", inst.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("bulkhead_rate_limited_total{limit=\"rate_limits.per_user_tool\"}"))
        .unwrap_or_else(|| panic!("no rate_limited counter:\n{metrics}"));
    let counted: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(counted as usize, refused, "{line}");
    // Every refusal is in the audit log, as blocked, with the limit named.
    let blocked = dep
        .audit()
        .await
        .into_iter()
        .filter(|r| {
            r["outcome"] == "blocked"
                && r["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("rate limit reached"))
        })
        .count();
    assert_eq!(blocked, refused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_on_postgres_share_one_budget() {
    let dep = Deployment::new(Store::Postgres, "rate_replicas").await;
    dep.set_stateless();
    dep.append_config(LIMIT);
    let a = dep.start("full", None);
    let b = dep.start("full", None);
    let urls = [a.url.clone(), b.url.clone()];
    let (allowed, refused, secs, _) = hammer(&urls, "ana", 3.0).await;
    assert_within_ten_percent(allowed, refused, secs, "two replicas");
    other_user_unaffected(&b.url).await;
}

/// A tool's own `rate_limit:` (template's `notify_team`: 30 a minute) replaces the configured
/// per-user-per-tool limit for that tool, with no `rate_limits:` in config.yaml at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_own_limit_applies_without_configuration() {
    let dep = Deployment::new(Store::Sqlite, "rate-own").await;
    let inst = dep.start("full", None);
    let c = client(&inst.url, "ana", "own").await;
    // The burst of 30 runs; the sustained rate adds one call per 2 s of however long the calls
    // took here (a busy machine is slower), and then one is refused.
    let started = Instant::now();
    let mut ran = 0;
    let r = loop {
        let r = call(&c, "notify_team", super::procs::notify(&format!("m{ran}")))
            .await
            .unwrap();
        if r.is_error || ran == 60 {
            break r;
        }
        ran += 1;
    };
    let refill = (started.elapsed().as_secs_f64() / 2.0).ceil() as usize;
    assert!((30..=30 + refill).contains(&ran), "{ran} ran before: {r:?}");
    assert!(
        r.is_error
            && r.text
                .contains("the tool's rate_limit allows 30 calls per 60 s; retry in "),
        "{r:?}"
    );
    // 30 at once use the burst; the next one waits for the sustained rate (one per 2 s).
    let wait: f64 = r
        .text
        .rsplit("retry in ")
        .next()
        .unwrap()
        .trim_end_matches(" s")
        .parse()
        .unwrap();
    assert!(wait > 0.0 && wait <= 2.0, "{r:?}");
    assert!(dep.webhook.delivered(&format!("m{ran}")).is_empty());
    let _ = c.cancel().await;
}

/// A store that does not count a call within `rate_limits.store_timeout_ms` refuses it (fail
/// closed), retryably and within a bounded time: SQLite held by another writer, PostgreSQL's
/// bucket table locked by another session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_does_not_answer_in_time_refuses_the_call() {
    for store in [Store::Sqlite, Store::Postgres] {
        let dep = Deployment::new(store, "rate_slow").await;
        dep.append_config(&format!("{LIMIT}  store_timeout_ms: 300\n"));
        let inst = dep.start("full", None);
        let c = client(&inst.url, "ana", "slow").await;
        let r = call(&c, "read_file", missing()).await.unwrap();
        assert!(r.text.contains("none.txt"), "{store:?}: {r:?}");
        // Hold the store.
        let hold: Box<dyn std::any::Any + Send> = match &dep.pg_url {
            None => {
                let db = dep.path().join("state/shared-sessions-default.db");
                let conn = rusqlite::Connection::open(&db).unwrap();
                conn.execute_batch("BEGIN IMMEDIATE").unwrap();
                Box::new(conn)
            }
            Some(_) => {
                let client = dep.pg_client().await;
                client
                    .batch_execute("BEGIN; LOCK TABLE bulkhead_rate IN ACCESS EXCLUSIVE MODE")
                    .await
                    .unwrap();
                Box::new(client)
            }
        };
        // Past the freshness of this process's reading (20 ms), the next call visits the store.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        let r = call(&c, "read_file", missing()).await.unwrap();
        let took = started.elapsed();
        assert!(
            r.is_error && r.text.contains("rate limits cannot be counted right now"),
            "{store:?}: {r:?}"
        );
        assert!(!r.text.starts_with("[FATAL]"), "{r:?}");
        assert!(
            took < Duration::from_secs(10),
            "{store:?}: refused after {took:?}"
        );
        drop(hold);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = call(&c, "read_file", missing()).await.unwrap();
            if r.text.contains("none.txt") {
                break;
            }
            assert!(Instant::now() < deadline, "{store:?}: still refused: {r:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = c.cancel().await;
    }
}

/// The official Python SDK sees a refused call as a tool error it may retry (not an exception,
/// not `[FATAL]`), saying which limit and when.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_sees_a_retryable_error() {
    let dep = Deployment::new(Store::Sqlite, "rate-py").await;
    dep.append_config("rate_limits:\n  per_user_tool: { calls: 3, per_seconds: 60 }\n");
    let inst = dep.start("full", None);
    let token = super::procs::token("pat", "py-rate");
    let out = super::python_sdk::run_client("rate_limited_client.py", &inst.url, &token).await;
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = seen.as_array().unwrap();
    assert_eq!(results.len(), 4);
    for r in &results[..3] {
        assert_eq!(r["is_error"], false, "{seen}");
    }
    let refused = results[3]["text"].as_str().unwrap();
    assert_eq!(results[3]["is_error"], true);
    assert!(
        refused.contains("rate_limits.per_user_tool allows 3 calls per 60 s; retry in "),
        "{refused}"
    );
    assert!(!refused.starts_with("[FATAL]"), "{refused}");
}

/// Resource reads and prompt gets count like tool calls (`resource:<name>`, `prompt:<name>`):
/// `per_user_tool` of 2 a minute allows two of each, the third is refused saying when to retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_are_counted_like_tools() {
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
    let dep = Deployment::new(Store::Sqlite, "rate-catalog").await;
    dep.append_config("rate_limits:\n  per_user_tool: { calls: 2, per_seconds: 60 }\n");
    let inst = dep.start("full", None);
    let c = client(&inst.url, "ana", "catalog").await;
    for _ in 0..2 {
        let r = c
            .read_resource(ReadResourceRequestParams::new("docs://template/guide"))
            .await;
        assert!(r.is_ok(), "{r:?}");
        let mut args = serde_json::Map::new();
        args.insert("customer".into(), json!("Acme"));
        let p = c
            .get_prompt(GetPromptRequestParams::new("find_customer").with_arguments(args))
            .await;
        assert!(p.is_ok(), "{p:?}");
    }
    let r = c
        .read_resource(ReadResourceRequestParams::new("docs://template/guide"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        r.contains("rate limit reached for `resource:guide`") && r.contains("retry in"),
        "{r}"
    );
    let mut args = serde_json::Map::new();
    args.insert("customer".into(), json!("Acme"));
    let p = c
        .get_prompt(GetPromptRequestParams::new("find_customer").with_arguments(args))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        p.contains("rate limit reached for `prompt:find_customer`") && p.contains("retry in"),
        "{p}"
    );
    let _ = c.cancel().await;
}
