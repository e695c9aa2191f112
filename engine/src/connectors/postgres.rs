//! The `postgres` connector: parameterised SQL against PostgreSQL with named `:param` binding
//! (numbered `$n` for the server, typed by the statement's own parameter types). Operations that
//! read run in a `READ ONLY` transaction, so a read tool cannot change data even if its SQL
//! tried; every statement runs under `statement_timeout` (a startup option of each connection). Rows stream out header first through
//! the same sink as SQLite's; nothing holds the whole result. Connections are pooled per
//! instance (deadpool).

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::StreamExt as _;
use serde_json::Value;
use tokio_postgres::types::{ToSql, Type};

use super::stream::{self, Stop};
use super::{ConnectorError, settings};
use crate::errors::ToolError;
use crate::server::{Chunk, JsonObject, ToolOutput, ToolResult};
use crate::signals::{CallSignals, Unit};
use crate::tooldef::ConnectorDef;
use bulkhead_vocab::connector::{OperationBody, PostgresSettings, SetRole};

/// A built `postgres` connector: its connection pool and limits.
pub struct Postgres {
    name: &'static str,
    pool: Pool,
    /// The role each statement runs as, from a parameter bound to the caller's token.
    set_role: Option<SetRole>,
}

/// `sql` with each `:name` replaced by `$n` (one number per distinct name, in order of first
/// use), and the names by number. The placeholder rules are the spec checker's.
pub fn numbered(sql: &str) -> (String, Vec<String>) {
    let mut names: Vec<String> = Vec::new();
    let mut out = String::with_capacity(sql.len());
    let mut last = 0;
    for (at, name) in bulkhead_lang::check::sql_named_params(sql) {
        out.push_str(&sql[last..at]);
        let n = match names.iter().position(|x| *x == name) {
            Some(i) => i + 1,
            None => {
                names.push(name.clone());
                names.len()
            }
        };
        out.push_str(&format!("${n}"));
        last = at + 1 + name.len();
    }
    out.push_str(&sql[last..]);
    (out, names)
}

impl Postgres {
    /// Reads the settings and builds the pool (connections open on first use).
    pub fn new(
        def: &'static ConnectorDef,
        s: PostgresSettings,
        ops: &[super::Operation],
    ) -> Result<Postgres, ConnectorError> {
        let err = |reason: String| ConnectorError::Settings {
            connector: def.name,
            reason,
        };
        // The build refuses these too; a tampered or hand-written definition is refused here.
        for op in ops {
            if let OperationBody::Sql { sql, writes: false } = &op.body {
                let calls = bulkhead_lang::sql::side_effects(sql);
                if !calls.is_empty() {
                    return Err(err(format!(
                        "operation `{}` reads but calls {}, whose effect outlives its read-only transaction",
                        op.def.name,
                        calls.join(", ")
                    )));
                }
            }
        }
        let mut target = crate::pg_tls::PgTarget::parse(&s.url)
            .map_err(|e| err(format!("settings.url: {e}")))?;
        let config = target.config_mut();
        let connect_timeout =
            Duration::from_millis(s.connect_timeout_ms().map_err(settings::invalid(def))?);
        config.connect_timeout(connect_timeout);
        config.application_name("bulkhead");
        // Set once per connection (startup options), not per statement: one round trip less.
        config.options(format!(
            "-c statement_timeout={}",
            s.statement_timeout_ms().map_err(settings::invalid(def))?
        ));
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        // A proxied instance reaches its database only through its egress proxy (a CONNECT
        // tunnel, allowed when the database's `host:port` is on `proxied_egress`).
        let manager = match tunnel::proxy_for(target.config()) {
            Some((proxy, host, port)) => Manager::from_connect(
                target.config().clone(),
                tunnel::ThroughProxy {
                    proxy,
                    host,
                    port,
                    target,
                },
                manager_config,
            ),
            None => target.manager(manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(
                s.max_connections()
                    .map_err(settings::invalid(def))?
                    .clamp(1, 64) as usize,
            )
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(connect_timeout))
            .create_timeout(Some(connect_timeout))
            .build()
            .map_err(|e| err(format!("cannot build the connection pool: {e}")))?;
        if let Some(problem) = s.set_role.as_ref().and_then(SetRole::problem) {
            return Err(err(problem));
        }
        Ok(Postgres {
            name: def.name,
            pool,
            set_role: s.set_role,
        })
    }

    /// The role this call runs as: the value of the `set_role` parameter (bound to the caller's
    /// token by the call wrapper, never the model's), when it is one of the allowed roles.
    ///
    /// Invariant: a statement of an operation that declares the role parameter never runs under
    /// the connector's own login (the call wrapper refuses a call whose token lacks the claim,
    /// so the argument is there). The role is set with `SET LOCAL ROLE` inside the statement's
    /// transaction, so it ends with it and a pooled connection never carries one caller's role
    /// to the next; a value outside `roles` (each a plain lowercase identifier, so spliced
    /// unquoted) refuses the call. Operations without the parameter run as the login.
    fn role(&self, args: &JsonObject) -> Result<Option<String>, ToolError> {
        let Some(set) = &self.set_role else {
            return Ok(None);
        };
        let Some(value) = args.get(&set.param) else {
            return Ok(None);
        };
        let value = value.as_str().ok_or_else(|| {
            ToolError::fatal(format!(
                "connector `{}`: the role (`{}`) is not a string",
                self.name, set.param
            ))
        })?;
        if !set.allows(value) {
            return Err(ToolError::fatal(format!(
                "connector `{}`: your sign-in names the database role `{value}`, which is not one it may act as (settings.set_role.roles)",
                self.name
            )));
        }
        Ok(Some(value.to_owned()))
    }

    /// Whether the server answers (for readiness).
    pub async fn probe(&self) -> Result<(), String> {
        let client = self
            .pool
            .get()
            .await
            .map_err(|e| pool_error(self.name, &e))?;
        client
            .simple_query("SELECT 1")
            .await
            .map(drop)
            .map_err(|e| db_error(self.name, &e).to_string())
    }

    /// Runs `sql` with the arguments bound by name: a write reports the rows changed; a read
    /// streams its rows (header first) in a read-only transaction.
    pub async fn run(
        &self,
        sql: &str,
        writes: bool,
        args: JsonObject,
        budget: stream::StreamBudget,
        signals: &CallSignals,
    ) -> ToolResult {
        let name = self.name;
        let role = self.role(&args)?;
        let (text, names) = numbered(sql);
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|e| ToolError::fatal(pool_error(name, &e)))?;
        if writes {
            let tx = client
                .build_transaction()
                .start()
                .await
                .map_err(|e| db_error(name, &e))?;
            if let Some(role) = &role {
                tx.batch_execute(&format!("SET LOCAL ROLE {role}"))
                    .await
                    .map_err(|e| db_error(name, &e))?;
            }
            let stmt = tx
                .prepare_cached(&text)
                .await
                .map_err(|e| db_error(name, &e))?;
            let params = bind(name, stmt.params(), &names, &args)?;
            let changed = tx
                .execute_raw(
                    &stmt,
                    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)),
                )
                .await
                .map_err(|e| db_error(name, &e))?;
            tx.commit().await.map_err(|e| db_error(name, &e))?;
            let noun = if changed == 1 { "row" } else { "rows" };
            return Ok(ToolOutput::Text(format!("{changed} {noun} changed")));
        }
        // Reads: this task talks to the server and hands rows over a bounded channel to the
        // sink's thread; when the consumer stops (cut, cancelled), the channel closes and this
        // task drops the stream and the transaction (rolled back).
        let (tx_rows, mut rx_rows) =
            tokio::sync::mpsc::channel::<Result<Vec<String>, ToolError>>(64);
        tokio::spawn(async move {
            let work = async {
                let tx = client
                    .build_transaction()
                    .read_only(true)
                    .start()
                    .await
                    .map_err(|e| db_error(name, &e))?;
                if let Some(role) = &role {
                    tx.batch_execute(&format!("SET LOCAL ROLE {role}"))
                        .await
                        .map_err(|e| db_error(name, &e))?;
                }
                // Prepared once per connection (deadpool's statement cache).
                let stmt = tx
                    .prepare_cached(&text)
                    .await
                    .map_err(|e| db_error(name, &e))?;
                let columns: Vec<(String, Type)> = stmt
                    .columns()
                    .iter()
                    .map(|c| (c.name().to_string(), c.type_().clone()))
                    .collect();
                for (col, ty) in &columns {
                    if !renderable(ty) {
                        return Err(ToolError::fatal(format!(
                            "connector `{name}`: column `{col}` has type `{ty}`, which this connector does not render; cast it in the SQL (`{col}::text`)"
                        )));
                    }
                }
                let params = bind(name, stmt.params(), &names, &args)?;
                let rows = tx
                    .query_raw(
                        &stmt,
                        params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)),
                    )
                    .await
                    .map_err(|e| db_error(name, &e))?;
                let header: Vec<String> = columns.iter().map(|(c, _)| c.clone()).collect();
                if tx_rows.send(Ok(header)).await.is_err() {
                    return Ok(());
                }
                futures::pin_mut!(rows);
                while let Some(row) = rows.next().await {
                    let row = row.map_err(|e| db_error(name, &e))?;
                    let cells = (0..columns.len())
                        .map(|i| render(&row, i, &columns[i].1))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| db_error(name, &e))?;
                    if tx_rows.send(Ok(cells)).await.is_err() {
                        return Ok(());
                    }
                }
                Ok(())
            };
            if let Err(e) = work.await {
                let _ = tx_rows.send(Err(e)).await;
            }
        });
        stream::run_blocking(budget, signals, move |sink| {
            sink.set_total(Unit::Rows, None);
            let mut header = None;
            while let Some(msg) = rx_rows.blocking_recv() {
                let cells = msg.map_err(Stop::Failed)?;
                if header.is_none() {
                    header = Some(cells);
                    continue;
                }
                // The header goes out with the first row, so an error before it is plain.
                if let Some(h) = header
                    .as_mut()
                    .and_then(|h: &mut Vec<String>| (!h.is_empty()).then(|| std::mem::take(h)))
                {
                    sink.push(Chunk::Row(h))?;
                }
                sink.push(Chunk::Row(cells))?;
                sink.tick(1)?;
            }
            if let Some(h) = header.filter(|h| !h.is_empty()) {
                sink.push(Chunk::Row(h))?;
            }
            Ok(())
        })
        .await
    }
}

mod tunnel {
    //! Connections through an HTTP CONNECT proxy (`HTTPS_PROXY`/`HTTP_PROXY`, minus `NO_PROXY`):
    //! how a proxied instance's database traffic passes its egress proxy.

    use crate::pg_tls::Failed;
    use deadpool_postgres::Connect;
    use futures::future::BoxFuture;
    use std::io;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpStream;
    use tokio_postgres::config::Host;

    /// `(proxy host:port, database host, database port)` when this process has an egress proxy
    /// and the database is not exempt by `NO_PROXY`.
    pub fn proxy_for(config: &tokio_postgres::Config) -> Option<(String, String, u16)> {
        let proxy = crate::config::egress_proxy()?;
        let host = match config.get_hosts().first()? {
            Host::Tcp(h) => h.clone(),
            _ => return None, // a Unix socket is local
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let exempt = ["NO_PROXY", "no_proxy"]
            .iter()
            .filter_map(|k| crate::config::env_lookup(k))
            .flat_map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .any(|n| {
                !n.is_empty()
                    && (n == host || host.ends_with(&format!(".{}", n.trim_start_matches('.'))))
            });
        (!exempt).then_some((proxy, host, port))
    }

    /// Opens `CONNECT host:port` on the proxy; the stream after a 200.
    async fn open(proxy: &str, host: &str, port: u16) -> io::Result<TcpStream> {
        let mut s = TcpStream::connect(proxy).await?;
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        s.write_all(
            format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
        )
        .await?;
        // Read the reply head byte by byte (it is short, and nothing after it may be consumed).
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() > 8192 {
                return Err(io::Error::other("the egress proxy's reply is too long"));
            }
            let b = s.read_u8().await?;
            head.push(b);
        }
        let status = String::from_utf8_lossy(&head);
        let line = status.lines().next().unwrap_or("").to_string();
        if line.split_whitespace().nth(1) == Some("200") {
            Ok(s)
        } else {
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the egress proxy refused {authority} ({line}): it is not on this instance's allowlist"
                ),
            ))
        }
    }

    /// Every pooled connection opened through the proxy (TLS, when the URL asks for it, runs
    /// through the tunnel to the database itself).
    pub struct ThroughProxy {
        pub proxy: String,
        pub host: String,
        pub port: u16,
        pub target: crate::pg_tls::PgTarget,
    }

    impl Connect for ThroughProxy {
        fn connect(
            &self,
            pg_config: &tokio_postgres::Config,
        ) -> BoxFuture<'_, crate::pg_tls::Connected> {
            let mut target = self.target.clone();
            *target.config_mut() = pg_config.clone();
            Box::pin(async move {
                match open(&self.proxy, &self.host, self.port).await {
                    Ok(stream) => target.handshake(stream).await,
                    // A refused tunnel surfaces as the handshake's I/O error.
                    Err(e) => target.handshake(Failed(Some(e))).await,
                }
            })
        }
    }
}

/// Types [`render`] knows; others must be cast in the SQL.
fn renderable(ty: &Type) -> bool {
    [
        Type::BOOL,
        Type::INT2,
        Type::INT4,
        Type::INT8,
        Type::FLOAT4,
        Type::FLOAT8,
        Type::TEXT,
        Type::VARCHAR,
        Type::BPCHAR,
        Type::NAME,
        Type::OID,
    ]
    .contains(ty)
}

/// One cell as text (SQL NULL: empty, as in the CSV the context presets write).
fn render(row: &tokio_postgres::Row, i: usize, ty: &Type) -> Result<String, tokio_postgres::Error> {
    fn text<T: ToString>(v: Option<T>) -> String {
        v.map(|v| v.to_string()).unwrap_or_default()
    }
    Ok(match *ty {
        Type::BOOL => text(row.try_get::<_, Option<bool>>(i)?),
        Type::INT2 => text(row.try_get::<_, Option<i16>>(i)?),
        Type::INT4 => text(row.try_get::<_, Option<i32>>(i)?),
        Type::INT8 => text(row.try_get::<_, Option<i64>>(i)?),
        Type::FLOAT4 => text(row.try_get::<_, Option<f32>>(i)?),
        Type::FLOAT8 => text(row.try_get::<_, Option<f64>>(i)?),
        Type::OID => text(row.try_get::<_, Option<u32>>(i)?),
        _ => row.try_get::<_, Option<String>>(i)?.unwrap_or_default(),
    })
}

type Param = Box<dyn ToSql + Sync + Send>;

/// Each `$n` from the argument named `names[n-1]`, converted to the type the statement expects.
/// An optional parameter that was not given binds NULL; a value of the wrong type is retryable.
fn bind(
    connector: &str,
    types: &[Type],
    names: &[String],
    args: &JsonObject,
) -> Result<Vec<Param>, ToolError> {
    let mut out: Vec<Param> = Vec::with_capacity(types.len());
    for (ty, key) in types.iter().zip(names) {
        let v = args.get(key).filter(|v| !v.is_null());
        let wrong = || ToolError::retry(format!("`{key}` must be {}", expected(ty)));
        let p: Param = match *ty {
            Type::BOOL => Box::new(v.map(|v| v.as_bool().ok_or_else(wrong)).transpose()?),
            Type::INT2 => Box::new(
                v.map(|v| {
                    v.as_i64()
                        .and_then(|n| i16::try_from(n).ok())
                        .ok_or_else(wrong)
                })
                .transpose()?,
            ),
            Type::INT4 => Box::new(
                v.map(|v| {
                    v.as_i64()
                        .and_then(|n| i32::try_from(n).ok())
                        .ok_or_else(wrong)
                })
                .transpose()?,
            ),
            Type::INT8 => Box::new(v.map(|v| v.as_i64().ok_or_else(wrong)).transpose()?),
            Type::FLOAT4 => Box::new(
                v.map(|v| v.as_f64().map(|f| f as f32).ok_or_else(wrong))
                    .transpose()?,
            ),
            Type::FLOAT8 => Box::new(v.map(|v| v.as_f64().ok_or_else(wrong)).transpose()?),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                Box::new(v.map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }))
            }
            _ => {
                return Err(ToolError::fatal(format!(
                    "connector `{connector}`: parameter `{key}` has type `{ty}`, which this connector does not bind; cast it in the SQL (`:{key}::{ty}` from text)"
                )));
            }
        };
        out.push(p);
    }
    Ok(out)
}

fn expected(ty: &Type) -> &'static str {
    match *ty {
        Type::BOOL => "true or false",
        Type::INT2 | Type::INT4 | Type::INT8 => "a whole number in range",
        Type::FLOAT4 | Type::FLOAT8 => "a number",
        _ => "text",
    }
}

fn pool_error(name: &str, e: &deadpool_postgres::PoolError) -> String {
    format!(
        "database of connector `{name}` is unreachable: {}",
        chain(e)
    )
}

/// An error with its causes (`a: b: c`), each once. PostgreSQL's and the proxy's messages never
/// carry the connection URL.
fn chain(e: &dyn std::error::Error) -> String {
    let top = e.to_string();
    let mut parts = super::error_causes(e);
    parts.retain(|c| !top.contains(c.as_str()));
    parts.insert(0, top);
    parts.join(": ")
}

/// Bad input (constraint violations, invalid values, a cancelled statement) is retryable;
/// everything else means the database or the operation is broken, which the model cannot fix.
/// Messages are the server's, which never carry the connection URL.
fn db_error(name: &str, e: &tokio_postgres::Error) -> ToolError {
    let Some(db) = e.as_db_error() else {
        return ToolError::fatal(format!("database of connector `{name}`: {}", chain(e)));
    };
    let class = &db.code().code()[..2];
    let msg = db.message();
    match class {
        // 22 data exception, 23 integrity constraint violation, 57 cancelled (statement_timeout),
        // 40 transaction rollback (serialization, deadlock): the model or a retry can fix it.
        "22" | "23" => ToolError::retry(format!("rejected by the database: {msg}")),
        "57" | "40" => ToolError::retry(format!(
            "the database stopped the statement, try again: {msg}"
        )),
        "25" => ToolError::fatal(format!(
            "database of connector `{name}`: {msg} (a read tool runs in a read-only transaction)"
        )),
        _ => ToolError::fatal(format!("database of connector `{name}`: {msg}")),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_reading_operation_with_an_effect_outside_its_transaction_is_refused_at_start() {
        use crate::tooldef::{ConnectorDef, OperationDef};
        static OPS: [OperationDef; 1] = [OperationDef {
            name: "search",
            params_schema: "{}",
            body: r#"{"sql": {"sql": "SELECT id FROM t WHERE pg_notify('c', 'x') IS NULL", "writes": false}}"#,
        }];
        static DEF: ConnectorDef = ConnectorDef {
            secrets: &[],
            name: "db",
            kind: bulkhead_vocab::connector::ConnectorKind::Postgres,
            sensitivity: crate::policy::Sensitivity::Confidential,
            settings: r#"{"url": "postgres://u@127.0.0.1:1/x"}"#,
            operations: &OPS,
        };
        let err = crate::connectors::Connectors::new([&DEF], &|_| None).expect_err("refused");
        assert!(err.to_string().contains("pg_notify"), "{err}");
    }

    use super::numbered;

    #[test]
    fn named_placeholders_become_numbered_once_per_name() {
        let (sql, names) = numbered(
            "SELECT id, title::text FROM t WHERE a = :q OR b = :q AND c > :n AND d = ':nope'",
        );
        assert_eq!(
            sql,
            "SELECT id, title::text FROM t WHERE a = $1 OR b = $1 AND c > $2 AND d = ':nope'"
        );
        assert_eq!(names, ["q", "n"]);
    }
}
