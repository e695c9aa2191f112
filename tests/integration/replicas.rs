//! Replicas of one instance sharing one PostgreSQL store, as Kubernetes would run them behind a
//! Service: three `serve --mode proxied` processes, stateless HTTP, each call of a session sent to
//! the next replica in turn (no affinity). The ratchet and connect blocking hold across them at
//! once, and a replica killed with SIGKILL in the middle of a load of escalations loses none of
//! the escalations it acknowledged.

use super::procs::{Client, Deployment, Store, call, client, load, notify, token};
use bulkhead::policy::Sensitivity;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_on_postgres_share_the_ratchet_and_lose_nothing_when_one_is_killed() {
    let dep = Deployment::new(Store::Postgres, "replicas").await;
    dep.set_stateless();
    let mut replicas: Vec<_> = (0..3).map(|_| dep.start("proxied", None)).collect();
    let urls: Vec<String> = replicas.iter().map(|r| r.url.clone()).collect();

    // One session, its calls spread over the replicas.
    let cs = [
        client(&urls[0], "ana", "spread").await,
        client(&urls[1], "ana", "spread").await,
        client(&urls[2], "ana", "spread").await,
    ];
    let r = call(&cs[1], "notify_team", notify("before")).await.unwrap();
    assert!(!r.is_error, "a public session may connect: {}", r.text);
    let r = call(&cs[0], "load_sensitive_dataset", load("customers"))
        .await
        .unwrap();
    assert!(!r.is_error && r.level == "confidential", "{r:?}");
    // At once on the others: no delivery, the level comes back with the refusal.
    for c in &cs[1..] {
        let r = call(c, "notify_team", notify("after")).await.unwrap();
        assert!(r.is_error && r.text.starts_with("[FATAL] "), "{r:?}");
        assert_eq!(r.level, "confidential");
    }
    assert_eq!(dep.webhook.delivered("before").len(), 1);
    assert!(dep.webhook.delivered("after").is_empty());
    for c in cs {
        let _ = c.cancel().await;
    }

    // A load of escalations over all three; replica 2 is killed with SIGKILL once it has
    // acknowledged a few, while calls to it are still in flight.
    let sessions = 90usize;
    let on_two = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..sessions {
        let url = urls[i % 3].clone();
        let on_two = on_two.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(15 * i as u64)).await;
            let s = format!("load-{i}");
            let Ok(c) = try_client(&url, "ben", &s).await else {
                return (s, Err("the replica is gone".to_string()));
            };
            let r = call(&c, "load_sensitive_dataset", load("customers")).await;
            if i % 3 == 2 && r.as_ref().is_ok_and(|r| !r.is_error) {
                on_two.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            let _ = c.cancel().await;
            (s, r)
        }));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while on_two.load(std::sync::atomic::Ordering::SeqCst) < 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "replica 2 acknowledged too few"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    replicas[2].child.kill().unwrap();
    let _ = replicas[2].child.wait();
    let acked_by_two_before_kill = on_two.load(std::sync::atomic::Ordering::SeqCst);
    let mut acked = Vec::new();
    let mut lost_calls = 0;
    for t in tasks {
        let (s, r) = t.await.unwrap();
        match r {
            Ok(r) if !r.is_error => {
                assert_eq!(r.level, "confidential", "{s}: {r:?}");
                acked.push(s);
            }
            _ => lost_calls += 1, // the killed replica's calls: the client saw a failure
        }
    }
    // Every acknowledged escalation is committed, read back by a fresh store connection.
    let store = dep.open_store().await;
    for s in &acked {
        let who = bulkhead::identity::Identity::new("ben", s).unwrap();
        assert_eq!(
            store.level(&who).await.unwrap(),
            Sensitivity::Confidential,
            "{s}: acknowledged, then lost"
        );
    }
    assert!(
        acked.len() >= sessions * 2 / 3 + acked_by_two_before_kill,
        "acked {}",
        acked.len()
    );
    assert!(lost_calls > 0, "the kill cut no call");
    println!(
        "{} escalations acknowledged and committed ({acked_by_two_before_kill} by the killed replica before its death), {lost_calls} calls failed with it, 0 lost",
        acked.len()
    );
    // The survivors keep serving.
    for r in &mut replicas[..2] {
        assert!(r.alive(), "a surviving replica died");
        let c = client(&r.url, "cy", "after-kill").await;
        let reply = call(
            &c,
            "read_file",
            serde_json::json!({"path": "/workspace/none.txt"}),
        )
        .await
        .unwrap();
        assert!(
            reply.text.contains("not found") || reply.is_error,
            "{reply:?}"
        );
        let _ = c.cancel().await;
    }
}

/// A client that may fail to connect (its replica was killed).
async fn try_client(url: &str, user: &str, session: &str) -> Result<Client, String> {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token(user, session)),
    );
    tokio::time::timeout(Duration::from_secs(20), ().serve(transport))
        .await
        .map_err(|_| "timeout".to_string())?
        .map_err(|e| e.to_string())
}
