//! The audit sink of a PostgreSQL store: records are rows of `bulkhead_audit` (append-only by
//! trigger), written in batches by the audit writer thread on its own connection, one binary
//! `COPY` per batch (all of its rows or none, in order). Only the line as written is stored; its
//! jsonb is derived when read (`bulkhead_audit_records`), not parsed on the write path. A
//! committed batch is durable, so every batch counts as synced. [`PgLink`] is that thread's
//! connection, as [`super::heads::PgHeads`] has its own.

use super::AuditSink;
use crate::state::postgres::PgOptions;

/// A blocking connection of the audit writer thread to PostgreSQL: made on first use, and
/// again after it closed or a statement failed.
pub struct PgLink {
    rt: tokio::runtime::Runtime,
    target: crate::pg_tls::PgTarget,
    client: Option<tokio_postgres::Client>,
}

impl PgLink {
    /// A link to the store `pg`, named `application` in `pg_stat_activity`.
    pub fn new(pg: &PgOptions, application: &str) -> Result<PgLink, String> {
        let mut target = pg.target()?;
        target
            .config_mut()
            .application_name(application)
            .connect_timeout(pg.connect_timeout);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(PgLink {
            rt,
            target,
            client: None,
        })
    }

    /// Connects unless connected; whether the connection is new (statements prepared on an
    /// older one are gone).
    pub fn connect(&mut self) -> Result<bool, String> {
        let fresh = self.client.as_ref().is_none_or(|c| c.is_closed());
        if fresh {
            let (client, _task) = self
                .rt
                .block_on(self.target.connect())
                .map_err(|e| e.to_string())?;
            self.client = Some(client);
        }
        Ok(fresh)
    }

    /// The runtime to block on and the connection (after [`connect`](PgLink::connect)).
    pub fn parts(&self) -> (&tokio::runtime::Runtime, &tokio_postgres::Client) {
        (&self.rt, self.client.as_ref().expect("connected first"))
    }

    /// Drops the connection after a failed statement (the next use connects again).
    pub fn reset(&mut self) {
        self.client = None;
    }
}

/// Copies audit lines into `bulkhead_audit`.
pub struct PgAuditSink {
    link: PgLink,
    server: String,
    copy: Option<tokio_postgres::Statement>,
}

const COPY: &str = "COPY bulkhead_audit (server, line) FROM STDIN (FORMAT binary)";

impl PgAuditSink {
    /// A sink for `server`'s records in the store `pg` (connects on first use).
    pub fn new(pg: &PgOptions, server: &str) -> Result<PgAuditSink, String> {
        Ok(PgAuditSink {
            link: PgLink::new(pg, "bulkhead-audit")?,
            server: server.to_owned(),
            copy: None,
        })
    }

    fn insert(&mut self, rows: &[&str]) -> Result<(), String> {
        use tokio_postgres::binary_copy::BinaryCopyInWriter;
        use tokio_postgres::types::Type;
        let fresh = self.link.connect()?;
        let (rt, client) = self.link.parts();
        if fresh || self.copy.is_none() {
            self.copy = Some(
                rt.block_on(client.prepare(COPY))
                    .map_err(|e| e.to_string())?,
            );
        }
        let copy = self.copy.as_ref().expect("prepared");
        let server = self.server.as_str();
        rt.block_on(async {
            let sink = client.copy_in(copy).await?;
            let writer = BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::TEXT]);
            let mut writer = std::pin::pin!(writer);
            for row in rows {
                writer.as_mut().write(&[&server, row]).await?;
            }
            writer.finish().await
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    }
}

impl AuditSink for PgAuditSink {
    fn append(&mut self, lines: &[u8], _count: usize, _sync: bool) -> Result<(), String> {
        let text = std::str::from_utf8(lines).map_err(|e| e.to_string())?;
        let rows: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        self.insert(&rows).map_err(|e| {
            self.link.reset();
            format!("postgres audit: {e}")
        })
    }

    fn sync(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn durable_on_append(&self) -> bool {
        true
    }

    fn tail(
        &mut self,
        writer: &str,
        seq: i64,
        hash: &str,
    ) -> Result<Option<(u64, String)>, String> {
        self.link
            .connect()
            .map_err(|e| format!("postgres audit: {e}"))?;
        let (rt, client) = self.link.parts();
        let needle = format!("\"w\":\"{writer}\"");
        let rows = rt
            .block_on(client.query(
                "SELECT line FROM bulkhead_audit WHERE server = $1 AND strpos(line, $2) > 0 ORDER BY id",
                &[&self.server, &needle],
            ))
            .map_err(|e| {
                self.link.reset();
                format!("postgres audit: {e}")
            })?;
        let mine = rows.iter().filter_map(|r| {
            let line: &str = r.get(0);
            let l = super::chain::parse_link(line.as_bytes())?;
            (l.writer == writer && l.seq as i64 > seq).then(|| {
                let h = super::chain::hex(&super::chain::line_hash(line.as_bytes()));
                (l.seq, l.prev.to_owned(), h)
            })
        });
        Ok(super::chain::last_continuing(seq, hash, mine))
    }
}
