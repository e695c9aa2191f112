//! The audit sink of a PostgreSQL store: records are rows of `bulkhead_audit` (append-only by
//! trigger), inserted in batches by the audit writer thread on its own connection. A committed
//! insert is durable, so every batch counts as synced.

use super::AuditSink;
use std::str::FromStr;
use std::time::Duration;

/// Inserts audit lines into `bulkhead_audit`.
pub struct PgAuditSink {
    rt: tokio::runtime::Runtime,
    config: tokio_postgres::Config,
    server: String,
    client: Option<(tokio_postgres::Client, tokio_postgres::Statement)>,
}

const INSERT: &str = "INSERT INTO bulkhead_audit (server, record, line) \
     SELECT $1, x::jsonb, x FROM unnest($2::text[]) WITH ORDINALITY AS t (x, n) ORDER BY n";

impl PgAuditSink {
    /// A sink for `server`'s records in the database at `url` (connects on first use).
    pub fn new(url: &str, server: &str, connect_timeout: Duration) -> Result<PgAuditSink, String> {
        let mut config =
            tokio_postgres::Config::from_str(url).map_err(|e| format!("postgres url: {e}"))?;
        config
            .application_name("bulkhead-audit")
            .connect_timeout(connect_timeout);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(PgAuditSink {
            rt,
            config,
            server: server.to_owned(),
            client: None,
        })
    }

    fn connect(&mut self) -> Result<(), String> {
        if self.client.as_ref().is_none_or(|(c, _)| c.is_closed()) {
            let (client, conn) = self
                .rt
                .block_on(self.config.connect(tokio_postgres::NoTls))
                .map_err(|e| format!("postgres audit: {e}"))?;
            self.rt.spawn(async move {
                let _ = conn.await;
            });
            let insert = self
                .rt
                .block_on(client.prepare(INSERT))
                .map_err(|e| format!("postgres audit: {e}"))?;
            self.client = Some((client, insert));
        }
        Ok(())
    }
}

impl AuditSink for PgAuditSink {
    fn append(&mut self, lines: &[u8], _count: usize, _sync: bool) -> Result<(), String> {
        let text = std::str::from_utf8(lines).map_err(|e| e.to_string())?;
        let rows: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        self.connect()?;
        let (client, insert) = self.client.as_ref().expect("connected");
        let result = self
            .rt
            .block_on(client.execute(insert, &[&self.server, &rows]));
        if let Err(e) = result {
            self.client = None;
            return Err(format!("postgres audit: {e}"));
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn durable_on_append(&self) -> bool {
        true
    }
}
