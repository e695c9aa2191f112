//! `bulkhead audit`: `verify` checks the audit log's hash chains against the store's signed
//! checkpoints (and an anchor kept outside the store) and names the first record that was
//! altered, removed, reordered or appended, a cut tail, a writer gone missing, a checkpoint
//! forged or rolled back (exit 0: intact; 1: not); `anchor` exports the newest checkpoint, to
//! keep outside the store for `verify --anchor`.

use bulkhead::audit::chain::read_verifying_key;
use bulkhead::audit::checkpoint::Stored;
use bulkhead::audit::heads;
use bulkhead::audit::verify::{Anchor, At, Evidence, Reader, judge, read_files, wanted};
use bulkhead::config::Config;
use bulkhead::project::Project;
use bulkhead::state::StoreLocation;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What to do with the audit log.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Verify the chains against the store's checkpoints.
    Verify {
        /// Only this server's log (files; default: every server's).
        #[arg(long)]
        server: Vec<String>,
        /// The Ed25519 public key (SPKI PEM) whose signature every checkpoint must carry
        /// (default: the one of `audit.signing_key`, when configured).
        #[arg(long)]
        public_key: Option<PathBuf>,
        /// A checkpoint kept outside the store (`bulkhead audit anchor` output, or a JSON line
        /// with its `n` and `hash`): proves the log was not rolled back or cut since.
        #[arg(long)]
        anchor: Option<PathBuf>,
        /// Longest time to wait for writers alive to cover their newest records (ms).
        #[arg(long, default_value_t = 5000)]
        wait_ms: u64,
    },
    /// Print the newest checkpoint as one JSON line, to keep outside the store.
    Anchor {
        /// Write it to this file instead of stdout (replaced atomically).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// Runs one action.
pub fn run(project: &Project, config: &Config, action: Action) -> anyhow::Result<ExitCode> {
    match action {
        Action::Verify {
            server,
            public_key,
            anchor,
            wait_ms,
        } => verify(
            project,
            config,
            server,
            public_key,
            anchor,
            Duration::from_millis(wait_ms),
        ),
        Action::Anchor { out } => {
            let newest = checkpoints(config)?
                .pop()
                .ok_or_else(|| anyhow::anyhow!("the store holds no audit checkpoint yet"))?;
            let mut line = serde_json::to_string(&Anchor::of(&newest))?;
            line.push('\n');
            match out {
                Some(path) => {
                    let tmp = path.with_extension("tmp");
                    std::fs::write(&tmp, &line)?;
                    std::fs::rename(&tmp, &path)?;
                    eprintln!(
                        "anchored checkpoint #{} ({}) in {}",
                        newest.checkpoint.n,
                        newest.hash(),
                        path.display()
                    );
                }
                None => print!("{line}"),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn verify(
    project: &Project,
    config: &Config,
    server: Vec<String>,
    public_key: Option<PathBuf>,
    anchor: Option<PathBuf>,
    wait: Duration,
) -> anyhow::Result<ExitCode> {
    let key = match public_key.or_else(|| config.audit.signing_key.clone()) {
        Some(p) => Some(read_verifying_key(&p).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let anchor: Option<Anchor> = match &anchor {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            let line = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            Some(
                serde_json::from_str(line)
                    .map_err(|e| anyhow::anyhow!("{}: not an audit anchor ({e})", p.display()))?,
            )
        }
        None => None,
    };
    let only = !server.is_empty();
    let servers: Vec<String> = if only {
        server
    } else {
        project.servers.iter().map(|s| s.name.to_string()).collect()
    };
    let started = Instant::now();
    // The checkpoint read before the log: whatever it names, the log must hold.
    let before = checkpoints(config)?.pop();
    let mut reader = Reader::new(
        before.as_ref().map(|s| &s.checkpoint),
        wanted(before.as_ref(), anchor.as_ref()),
    );
    let what = match config.state.location() {
        StoreLocation::Sqlite { .. } => {
            let mut files = Vec::new();
            for s in &servers {
                let path = bulkhead::serve::audit_path(config, s);
                read_files(&path, config.audit.keep.max(1), &mut reader)?;
                files.push(path.display().to_string());
            }
            files.join(", ")
        }
        StoreLocation::Postgres(pg) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(pg_log(&pg, &mut reader))?;
            "table bulkhead_audit".to_string()
        }
    };
    let read_secs = started.elapsed().as_secs_f64();
    let lease = config.audit.options().lease.as_secs() as i64;
    let deadline = Instant::now() + wait;
    let (report, kept) = loop {
        let kept = checkpoints(config)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs() as i64;
        let mut report = judge(
            &reader,
            &Evidence {
                checkpoints: &kept,
                before: before.as_ref(),
                key: key.as_ref(),
                anchor: anchor.as_ref(),
                servers: Some(&servers),
                now,
                lease,
            },
        );
        if report.pending.is_empty() || Instant::now() >= deadline {
            let pending = std::mem::take(&mut report.pending);
            report.problems.extend(
                pending
                    .into_iter()
                    .map(|p| format!("{p} after waiting {} ms", wait.as_millis())),
            );
            break (report, kept);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for n in &report.notes {
        println!("note: {n}");
    }
    for p in &report.problems {
        println!("FAILED: {p}");
    }
    if !report.ok() {
        println!(
            "audit log NOT intact: {} problem(s) in {what}",
            report.problems.len()
        );
        return Ok(ExitCode::from(1));
    }
    let newest = match &report.newest {
        Some((n, hash)) => format!(
            "checkpoint #{n} ({hash}), {} kept{}",
            kept.len(),
            if key.is_some() {
                ", all signed"
            } else {
                ", unsigned"
            }
        ),
        None => "no checkpoint".into(),
    };
    println!(
        "audit log intact: {} records by {} writers in {what}; {newest}{}",
        report.records,
        report.writers,
        match &anchor {
            Some(a) => format!("; consistent with anchor #{}", a.n),
            None => String::new(),
        }
    );
    tracing::info!(
        bytes = report.bytes,
        secs = read_secs,
        "audit log read at {:.0} MB/s",
        report.bytes as f64 / 1e6 / read_secs.max(1e-9)
    );
    Ok(ExitCode::SUCCESS)
}

fn checkpoints(config: &Config) -> anyhow::Result<Vec<Stored>> {
    match config.state.location() {
        StoreLocation::Sqlite { db } => heads::read_sqlite(&db).map_err(anyhow::Error::msg),
        StoreLocation::Postgres(pg) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let (client, _task) = pg.target().map_err(anyhow::Error::msg)?.connect().await?;
                heads::read_pg(&client).await.map_err(anyhow::Error::msg)
            })
        }
    }
}

async fn pg_log(
    pg: &bulkhead::state::postgres::PgOptions,
    reader: &mut Reader,
) -> anyhow::Result<()> {
    use futures::TryStreamExt;
    let (client, _task) = pg.target().map_err(anyhow::Error::msg)?.connect().await?;
    let rows = client
        .query_raw(
            "SELECT id, coalesce(line, record::text) FROM bulkhead_audit ORDER BY id",
            std::iter::empty::<&str>(),
        )
        .await?;
    let mut rows = std::pin::pin!(rows);
    while let Some(row) = rows.try_next().await? {
        let id: i64 = row.get(0);
        let line: &str = row.get(1);
        reader.line(|| At::Row(id), line.as_bytes(), false);
    }
    Ok(())
}
