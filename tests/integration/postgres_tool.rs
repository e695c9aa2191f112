//! The example `crm` server's tools, backed by the `postgres` connector, end to end: a real
//! PostgreSQL database, `bulkhead serve crm` as a process, the official rmcp client. The tool
//! answers rows with their declared shape, raises the session, and the connection URL (a
//! `secrets:` variable) is read from a file, never an inline value.

use super::procs::{Deployment, Store, call, client};
use serde_json::json;

use crate::tls;

/// A client whose token carries a `db_role` claim (as the token service copies it from the
/// identity provider's token).
async fn role_client(
    url: &str,
    user: &str,
    session: &str,
    role: Option<&str>,
) -> super::procs::Client {
    use rmcp::ServiceExt as _;
    let mut claims = json!({
        "sub": user, "session_id": session, "iss": "test-issuer", "aud": "bulkhead-test",
        "exp": jsonwebtoken::get_current_timestamp() + 600,
    });
    if let Some(role) = role {
        claims["db_role"] = json!(role);
    }
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(super::procs::SECRET.as_bytes()),
    )
    .unwrap();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.to_string(),
        )
        .auth_header(token),
    );
    ().serve(transport).await.expect("client connects")
}

/// A new database holding the `crm` example's `accounts` table with three accounts; its URL.
pub async fn crm_database(tag: &str) -> String {
    let url = super::procs::pg::database(tag);
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    db.batch_execute(
        "CREATE TABLE accounts (id int4 PRIMARY KEY, name text NOT NULL, owner text NOT NULL);
         INSERT INTO accounts VALUES (1, 'Acme Corp', 'ana'), (2, 'Globex', 'ben'), (3, 'acme labs', 'chen');
         DO $$ BEGIN CREATE ROLE crm_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         DO $$ BEGIN CREATE ROLE crm_manager; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT SELECT ON accounts TO crm_reader;",
    )
    .await
    .unwrap();
    url
}

/// A connection URL that says `sslmode=verify-full` (with the test server's CA) reaches the
/// database encrypted: the tool answers, and the server lists the connector's connection as TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_backed_tool_reaches_its_database_over_verified_tls() {
    let url = crm_database("crm_tls").await;
    let ca = super::procs::pg::server().ca.display().to_string();
    let mut dep = Deployment::new(Store::Sqlite, "crm").await;
    let secret = dep.path().join("crm_database_url");
    std::fs::write(
        &secret,
        format!("{url}?sslmode=verify-full&sslrootcert={ca}\n"),
    )
    .unwrap();
    dep.set_env("CRM_DATABASE_URL_FILE", secret.to_str().unwrap());
    let p = dep.try_start_server("crm", "proxied", None).unwrap();
    let c = client(&p.url, "ana", "crm-tls").await;
    let r = call(&c, "get_account", json!({"id": 2})).await.unwrap();
    assert!(r.text.contains("2,Globex,ben"), "{}", r.text);
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let name = url.rsplit('/').next().unwrap();
    let row = db
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.datname = $1 AND a.application_name = 'bulkhead'",
            &[&name],
        )
        .await
        .unwrap();
    let (encrypted, all): (i64, i64) = (row.get(0), row.get(1));
    assert!(all >= 1, "the connector's connection is open");
    assert_eq!(encrypted, all, "a connector connection in clear");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_backed_tool_answers_through_the_server() {
    let url = crm_database("crm").await;
    let mut dep = Deployment::new(Store::Sqlite, "crm").await;
    // The URL as a compose secret would pass it: a file named by `<VAR>_FILE`.
    let secret = dep.path().join("crm_database_url");
    std::fs::write(&secret, format!("{url}\n")).unwrap();
    dep.set_env("CRM_DATABASE_URL_FILE", secret.to_str().unwrap());
    let p = dep.try_start_server("crm", "proxied", None).unwrap();
    let c = client(&p.url, "ana", "crm-1").await;
    let r = call(&c, "search_accounts", json!({"query": "ACME"}))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    assert!(
        r.text.contains("1,Acme Corp,ana") && r.text.contains("3,acme labs,chen"),
        "{}",
        r.text
    );
    assert!(!r.text.contains("Globex"), "{}", r.text);
    assert_eq!(r.level, "confidential");
    let r = call(&c, "get_account", json!({"id": 2})).await.unwrap();
    assert!(r.text.contains("2,Globex,ben"), "{}", r.text);
    let r = call(&c, "get_account", json!({"id": "two"})).await.unwrap();
    assert!(
        r.is_error && !r.text.starts_with("[FATAL]"),
        "bad input is retryable: {}",
        r.text
    );
    // `my_accounts` reads the caller's own accounts as the caller's database role: `owner` comes
    // from the token's `sub` and `db_role` from its `db_role` claim; the model neither sees them
    // in the schema nor may pass them.
    let ana = role_client(&p.url, "ana", "crm-1", Some("crm_reader")).await;
    let r = call(&ana, "my_accounts", json!({})).await.unwrap();
    assert!(!r.is_error, "{}", r.text);
    assert!(
        r.text.contains("1,Acme Corp,ana,crm_reader"),
        "runs as the role: {}",
        r.text
    );
    assert!(
        !r.text.contains("ben") && !r.text.contains("chen"),
        "{}",
        r.text
    );
    let r = call(&ana, "my_accounts", json!({"owner": "ben"}))
        .await
        .unwrap();
    assert!(
        r.is_error && r.text.contains("unknown argument") && !r.text.contains("Globex"),
        "a bound parameter cannot be overridden: {}",
        r.text
    );
    let r = call(&ana, "my_accounts", json!({"db_role": "postgres"}))
        .await
        .unwrap();
    assert!(
        r.is_error && r.text.contains("unknown argument"),
        "{}",
        r.text
    );
    let tools = ana.list_all_tools().await.unwrap();
    let mine = tools.iter().find(|t| t.name == "my_accounts").unwrap();
    assert_eq!(
        serde_json::Value::Object((*mine.input_schema).clone())["properties"],
        json!({}),
        "the bound parameters are not shown to the model"
    );
    let _ = ana.cancel().await;
    // The role is really used: crm_manager is allowed but has no grant on the table.
    let ben = role_client(&p.url, "ben", "crm-2", Some("crm_manager")).await;
    let r = call(&ben, "my_accounts", json!({})).await.unwrap();
    assert!(
        r.is_error && r.text.contains("permission denied"),
        "{}",
        r.text
    );
    let _ = ben.cancel().await;
    // A role outside the allowlist, and a token without the claim, are refused before SQL.
    let eve = role_client(&p.url, "eve", "crm-3", Some("postgres")).await;
    let r = call(&eve, "my_accounts", json!({})).await.unwrap();
    assert!(
        r.is_error && r.text.contains("not one it may act as"),
        "{}",
        r.text
    );
    let _ = eve.cancel().await;
    let r = call(&c, "my_accounts", json!({})).await.unwrap();
    assert!(
        r.is_error && r.text.contains("`db_role` claim"),
        "{}",
        r.text
    );
    // The audit says on whose behalf the call ran: the bound values, never the token.
    let audit = std::fs::read_to_string(dep.path().join("state/audit-crm.jsonl")).unwrap();
    let acted = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["tool"] == "my_accounts" && r["user"] == "ana" && r["outcome"] == "allowed")
        .expect("an audit record of ana's call");
    assert_eq!(
        acted["args"]["bound"],
        json!({"owner": "ana", "db_role": "crm_reader"}),
        "{acted}"
    );
    assert!(!audit.contains("eyJ"), "no token in the audit");
    let _ = c.cancel().await;
    drop(p);
}

/// A proxied instance reaches its database only through its egress proxy: with the database's
/// `host:port` on the allowlist the connector tunnels through squid (CONNECT); without it, squid
/// refuses and the call says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_instance_reaches_its_database_through_the_egress_proxy() {
    use bulkhead_codegen::emit::deploy::proxy::squid_policy;
    use bulkhead_vocab::HostPort;
    let url = super::procs::pg::database("crm_proxied");
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    db.batch_execute(
        "CREATE TABLE accounts (id int4 PRIMARY KEY, name text NOT NULL, owner text NOT NULL);
         INSERT INTO accounts VALUES (1, 'Acme Corp', 'ana');",
    )
    .await
    .unwrap();
    let port: u16 = url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    let allow = |p: u16| {
        squid_policy(
            &[HostPort {
                host: "127.0.0.1".into(),
                port: p,
            }],
            &[],
            &[],
        )
    };
    let open = tls::Squid::start(&allow(port));
    let closed = tls::Squid::start(&allow(port + 1));

    let mut dep = Deployment::new(Store::Sqlite, "crm-proxied").await;
    dep.set_env("CRM_DATABASE_URL", &url);
    dep.set_env("HTTPS_PROXY", &format!("http://127.0.0.1:{}", open.port));
    let p = dep.try_start_server("crm", "proxied", None).unwrap();
    let c = client(&p.url, "ana", "crm-p1").await;
    let r = call(&c, "get_account", json!({"id": 1})).await.unwrap();
    assert!(
        !r.is_error && r.text.contains("1,Acme Corp,ana"),
        "{}",
        r.text
    );
    let _ = c.cancel().await;
    drop(p);
    // squid logs a tunnel when it closes (the pooled connection lived until the process ended).
    open.wait_log(|l| l.contains(&format!("CONNECT 127.0.0.1:{port}")) && l.contains("TCP_TUNNEL"));

    dep.set_env("HTTPS_PROXY", &format!("http://127.0.0.1:{}", closed.port));
    let p = dep.try_start_server("crm", "proxied", None).unwrap();
    let c = client(&p.url, "ana", "crm-p2").await;
    let r = call(&c, "get_account", json!({"id": 1})).await.unwrap();
    assert!(r.is_error && r.text.starts_with("[FATAL] "), "{}", r.text);
    assert!(
        r.text.contains("the egress proxy refused 127.0.0.1"),
        "{}",
        r.text
    );
    assert!(
        !r.text.contains("postgres://"),
        "no URL in the message: {}",
        r.text
    );
    closed.wait_log(|l| l.contains("TCP_DENIED/403"));
    let _ = c.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_read_role_reads_and_has_no_side_effects() {
    // scripts/postgres-read-role.sql, as docs/specs.md tells an operator to run it.
    let url = crm_database("readrole").await;
    let role = format!("bh_read_{}", std::process::id());
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres-read-role.sql"),
    )
    .unwrap()
    .replace("bulkhead_read", &role);
    let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin.batch_execute(&script).await.unwrap();
    let role_url = url.replacen("postgres://bulkhead@", &format!("postgres://{role}@"), 1);
    let (reader, conn) = tokio_postgres::connect(&role_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    for call in [
        "SELECT pg_notify('accounts', 'x')",
        "SELECT set_config('search_path', 'evil', false)",
        "SELECT pg_advisory_lock(42)",
        "SELECT pg_try_advisory_xact_lock(42)",
        "SELECT pg_cancel_backend(pg_backend_pid())",
    ] {
        let err = reader.simple_query(call).await.unwrap_err();
        let msg = err
            .as_db_error()
            .map(|e| e.message().to_string())
            .unwrap_or(err.to_string());
        assert!(msg.contains("permission denied"), "{call}: {msg}");
    }
    // Writes are refused too, and reads work: the crm server's tool answers with this role.
    let err = reader
        .simple_query("UPDATE accounts SET owner = 'x'")
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("read-only")
            || err
                .as_db_error()
                .is_some_and(|e| e.message().contains("permission denied")
                    || e.message().contains("read-only")),
        "{err}"
    );
    let mut dep = Deployment::new(Store::Sqlite, "readrole").await;
    dep.set_env("CRM_DATABASE_URL", &role_url);
    let p = dep.try_start_server("crm", "proxied", None).unwrap();
    let c = client(&p.url, "ana", "readrole").await;
    let r = call(&c, "search_accounts", json!({"query": "acme"}))
        .await
        .unwrap();
    assert!(!r.is_error && r.text.contains("Acme Corp"), "{}", r.text);
}
