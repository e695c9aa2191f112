//! `bulkhead audit verify`: checks the audit log's hash chains against the heads anchored in the
//! state store (files beside a SQLite store, or the PostgreSQL table) and names the first record
//! that was altered, removed, reordered or appended, or a cut tail. Exit 0: intact; 1: not.

use bulkhead::audit::chain::{Head, read_verifying_key};
use bulkhead::audit::verify::{Entry, read_files, verify};
use bulkhead::config::Config;
use bulkhead::project::Project;
use bulkhead::state::StoreLocation;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

/// What to do with the audit log.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Verify the chains and their anchored heads.
    Verify {
        /// Only this server's log (files; default: every server's).
        #[arg(long)]
        server: Vec<String>,
        /// The Ed25519 public key (SPKI PEM) whose signatures every anchored head must carry
        /// (default: the one of `audit.signing_key`, when configured).
        #[arg(long)]
        public_key: Option<PathBuf>,
    },
}

/// Runs one action.
pub fn run(project: &Project, config: &Config, action: Action) -> anyhow::Result<ExitCode> {
    let Action::Verify { server, public_key } = action;
    let key = match public_key.or_else(|| config.audit.signing_key.clone()) {
        Some(p) => Some(read_verifying_key(&p).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let servers: Vec<String> = if server.is_empty() {
        project.servers.iter().map(|s| s.name.to_string()).collect()
    } else {
        server
    };
    let (entries, heads, what) = match config.state.location() {
        StoreLocation::Sqlite { db } => {
            let mut heads = sqlite_heads(&db)?;
            heads.retain(|h| servers.contains(&h.server));
            let mut entries = Vec::new();
            let mut files = Vec::new();
            for s in &servers {
                let path = bulkhead::serve::audit_path(config, s);
                if path.exists() || heads.iter().any(|h| &h.server == s) {
                    entries.extend(read_files(&path, config.audit.keep.max(1))?);
                    files.push(path.display().to_string());
                }
            }
            (entries, heads, files.join(", "))
        }
        StoreLocation::Postgres(pg) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (entries, heads) = rt.block_on(pg_log(&pg.url))?;
            (entries, heads, "table bulkhead_audit".to_string())
        }
    };
    let report = verify(&entries, &heads, key.as_ref());
    for n in &report.notes {
        println!("note: {n}");
    }
    for p in &report.problems {
        println!("FAILED: {p}");
    }
    if report.ok() {
        println!(
            "audit log intact: {} records by {} writers in {what}; {} anchored heads{}{}",
            report.records - report.unchained,
            report.writers,
            heads.len(),
            if key.is_some() { ", all signed" } else { "" },
            if report.unchained > 0 {
                format!(
                    " ({} older records unchained, not verifiable)",
                    report.unchained
                )
            } else {
                String::new()
            }
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "audit log NOT intact: {} problem(s) in {what}",
            report.problems.len()
        );
        Ok(ExitCode::from(1))
    }
}

fn sqlite_heads(db: &std::path::Path) -> anyhow::Result<Vec<Head>> {
    let Some(conn) = bulkhead::state::shared::open_sqlite_read(db)? else {
        return Ok(Vec::new());
    };
    let mut stmt =
        conn.prepare("SELECT writer, server, seq, hash, closed, sig FROM audit_heads")?;
    let rows = stmt.query_map([], |r| {
        Ok(Head {
            writer: r.get(0)?,
            server: r.get(1)?,
            seq: r.get(2)?,
            hash: r.get(3)?,
            closed: r.get(4)?,
            sig: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

async fn pg_log(url: &str) -> anyhow::Result<(Vec<Entry>, Vec<Head>)> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT id, coalesce(line, record::text) FROM bulkhead_audit ORDER BY id",
            &[],
        )
        .await?;
    let entries = rows
        .iter()
        .map(|r| Entry {
            at: format!("bulkhead_audit id {}", r.get::<_, i64>(0)),
            line: r.get::<_, String>(1).into_bytes(),
            torn: false,
            after_rotation: false,
        })
        .collect();
    let heads = client
        .query(
            "SELECT writer, server, seq, hash, closed, sig FROM bulkhead_audit_heads",
            &[],
        )
        .await?
        .iter()
        .map(|r| Head {
            writer: r.get(0),
            server: r.get(1),
            seq: r.get(2),
            hash: r.get(3),
            closed: r.get(4),
            sig: r.get(5),
        })
        .collect();
    Ok((entries, heads))
}
