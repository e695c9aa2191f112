//! The `sqlite` connector: parameterised SQL with named `:param` binding. Reads run on a
//! connection opened read-only (plus `PRAGMA query_only`), writes on a read-write one that never
//! creates the file. Rows stream out header first; nothing holds the whole result.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OpenFlags, ffi::ErrorCode};
use serde_json::Value;

use super::stream::{self, Sink, Stop};
use super::{ConnectorError, settings};
use crate::errors::ToolError;
use crate::server::{Chunk, JsonObject, ToolOutput, ToolResult};
use crate::signals::{CallSignals, Unit};
use crate::tooldef::ConnectorDef;
use bulkhead_vocab::connector::SqliteSettings;

/// A built `sqlite` connector: where its database lives.
pub struct Sqlite {
    name: &'static str,
    path: PathBuf,
    busy_timeout: Duration,
}

impl Sqlite {
    /// Reads the settings (`path`, optional `busy_timeout_ms`); the file is opened per call.
    pub fn new(def: &'static ConnectorDef, s: SqliteSettings) -> Result<Sqlite, ConnectorError> {
        if s.path.is_empty() {
            return Err(ConnectorError::Settings {
                connector: def.name,
                reason: "settings.path is empty".into(),
            });
        }
        let busy_timeout =
            Duration::from_millis(s.busy_timeout_ms().map_err(settings::invalid(def))?);
        Ok(Sqlite {
            name: def.name,
            path: PathBuf::from(s.path),
            busy_timeout,
        })
    }

    /// Whether the database opens read-only and answers (for readiness).
    pub async fn probe(&self) -> Result<(), String> {
        let (name, path, busy) = (self.name, self.path.clone(), self.busy_timeout);
        tokio::task::spawn_blocking(move || open(name, &path, true, busy).map(|_| ()))
            .await
            .map_err(|_| "probe stopped unexpectedly".to_string())?
            .map_err(|e| e.message().to_owned())
    }

    /// Runs `sql` with the arguments bound by name.
    pub async fn run(
        &self,
        sql: &str,
        writes: bool,
        params_schema: &'static str,
        args: JsonObject,
        budget: stream::StreamBudget,
        signals: &CallSignals,
    ) -> ToolResult {
        // The statement goes to a blocking thread with the call.
        let sql = sql.to_owned();
        let name = self.name;
        let path = self.path.clone();
        let busy = self.busy_timeout;
        if writes {
            let signals = signals.clone();
            let changed = tokio::task::spawn_blocking(move || {
                let conn = open(name, &path, false, busy)?;
                interrupt_when_stopped(&conn, &signals);
                let mut stmt = conn.prepare(&sql).map_err(|e| classify(name, e))?;
                bind(name, &mut stmt, params_schema, &args)?;
                stmt.raw_execute().map_err(|e| {
                    if signals.is_stopped() {
                        ToolError::retry("the call was cancelled")
                    } else {
                        classify(name, e)
                    }
                })
            })
            .await
            .map_err(|_| ToolError::bug("sqlite write stopped unexpectedly"))??;
            let noun = if changed == 1 { "row" } else { "rows" };
            return Ok(ToolOutput::Text(format!("{changed} {noun} changed")));
        }
        stream::run_blocking(budget, signals, move |sink| {
            query(name, &path, busy, &sql, params_schema, &args, sink)
        })
        .await
    }
}

fn query(
    name: &'static str,
    path: &Path,
    busy: Duration,
    sql: &str,
    params_schema: &str,
    args: &JsonObject,
    sink: &mut Sink,
) -> Result<(), Stop> {
    let conn = open(name, path, true, busy)?;
    interrupt_when_stopped(&conn, sink.signals());
    sink.set_total(Unit::Rows, None);
    let mut stmt = conn.prepare(sql).map_err(|e| classify(name, e))?;
    bind(name, &mut stmt, params_schema, args)?;
    let header: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
    let width = header.len();
    let mut rows = stmt.raw_query();
    let mut header = Some(header);
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            // Interrupted by the progress handler: the call was cancelled.
            Err(_) if sink.signals().is_stopped() => return Err(Stop::Closed),
            Err(e) => return Err(classify(name, e).into()),
        };
        // The header goes out with the first row, so a failing first step is a plain error.
        if let Some(h) = header.take() {
            sink.push(Chunk::Row(h))?;
        }
        let mut cells = Vec::with_capacity(width);
        for i in 0..width {
            let cell = row.get_ref(i).map_err(|e| classify(name, e))?;
            cells.push(render(cell));
        }
        sink.push(Chunk::Row(cells))?;
        sink.tick(1)?;
    }
    if let Some(h) = header.take() {
        sink.push(Chunk::Row(h))?;
    }
    Ok(())
}

/// SQLite's virtual machine asks every [`PROGRESS_OPS`] instructions whether to go on: a
/// cancelled call interrupts a statement even while it scans without producing rows.
fn interrupt_when_stopped(conn: &Connection, signals: &CallSignals) {
    let signals = signals.clone();
    conn.progress_handler(PROGRESS_OPS, Some(move || signals.is_stopped()));
}

/// Virtual machine instructions between two cancellation checks (a few microseconds).
const PROGRESS_OPS: std::ffi::c_int = 10_000;

fn open(name: &str, path: &Path, read_only: bool, busy: Duration) -> Result<Connection, ToolError> {
    let mode = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    };
    let flags = mode | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // rusqlite appends the file path to open errors: report only SQLite's code description.
    let conn = Connection::open_with_flags(path, flags).map_err(|e| {
        let reason = match &e {
            rusqlite::Error::SqliteFailure(f, _) => f.to_string(),
            _ => "unexpected error".to_owned(),
        };
        ToolError::fatal(format!(
            "database of connector `{name}` cannot be opened: {reason}"
        ))
    })?;
    let setup = conn
        .busy_timeout(busy)
        .and_then(|_| {
            if read_only {
                conn.pragma_update(None, "query_only", 1)
            } else {
                Ok(())
            }
        })
        .and_then(|_| conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(())));
    setup.map_err(|e| classify(name, e))?;
    Ok(conn)
}

/// Binds every `:name` placeholder from the arguments; an optional parameter that was not given
/// binds NULL. A placeholder the operation does not declare is a misconfiguration.
fn bind(
    name: &str,
    stmt: &mut rusqlite::Statement<'_>,
    params_schema: &str,
    args: &JsonObject,
) -> Result<(), ToolError> {
    let declared: Option<Value> = serde_json::from_str(params_schema).ok();
    let props = declared.as_ref().and_then(|d| d.get("properties"));
    for i in 1..=stmt.parameter_count() {
        let Some(placeholder) = stmt.parameter_name(i).map(str::to_owned) else {
            return Err(ToolError::fatal(format!(
                "connector `{name}`: the statement uses a positional `?` placeholder; use `:name`"
            )));
        };
        let key = placeholder.trim_start_matches([':', '@', '$']);
        if props.and_then(|p| p.get(key)).is_none() {
            return Err(ToolError::fatal(format!(
                "connector `{name}`: placeholder `{placeholder}` is not a declared parameter"
            )));
        }
        let value = match args.get(key) {
            None | Some(Value::Null) => SqlValue::Null,
            Some(Value::Bool(b)) => SqlValue::Integer(i64::from(*b)),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(i) => SqlValue::Integer(i),
                None => SqlValue::Real(n.as_f64().unwrap_or(f64::NAN)),
            },
            Some(Value::String(s)) => SqlValue::Text(s.clone()),
            Some(other) => SqlValue::Text(other.to_string()),
        };
        stmt.raw_bind_parameter(i, value)
            .map_err(|e| classify(name, e))?;
    }
    Ok(())
}

fn render(cell: ValueRef<'_>) -> String {
    use base64::Engine as _;
    match cell {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(b) => base64::engine::general_purpose::STANDARD.encode(b),
    }
}

/// Bad input (constraints, types, sizes, a busy database) is retryable; everything else means the
/// database or the operation is broken, which the model cannot fix.
fn classify(name: &str, e: rusqlite::Error) -> ToolError {
    let msg = short(&e);
    match &e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            ErrorCode::ConstraintViolation | ErrorCode::TypeMismatch | ErrorCode::TooBig => {
                ToolError::retry(format!("rejected by the database: {msg}"))
            }
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                ToolError::retry(format!("database is busy, try again: {msg}"))
            }
            _ => ToolError::fatal(format!("database of connector `{name}`: {msg}")),
        },
        rusqlite::Error::ToSqlConversionFailure(_)
        | rusqlite::Error::IntegralValueOutOfRange(..) => {
            ToolError::retry(format!("argument rejected by the database: {msg}"))
        }
        _ => ToolError::fatal(format!("database of connector `{name}`: {msg}")),
    }
}

/// SQLite's message without rusqlite's wrapping; SQLite never puts the file path in it.
fn short(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
        rusqlite::Error::SqliteFailure(f, None) => f.to_string(),
        other => other.to_string(),
    }
}
