//! The `logs` connector: regex search over the regular files of one declared directory, with a
//! time window read from each line's leading timestamp and grep-style context lines.

use std::fs::{File, OpenOptions};
use std::io::BufReader;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::grep::{self, Context};
use super::stream;
use super::{ConnectorError, arg_str, opt_str, opt_usize};
use crate::errors::ToolError;
use crate::server::{JsonObject, ToolResult};
use crate::signals::{CallSignals, Unit};
use crate::tooldef::ConnectorDef;
use bulkhead_vocab::connector::LogsSettings;

/// A built `logs` connector: the directory it searches.
pub struct Logs {
    name: &'static str,
    dir: PathBuf,
}

impl Logs {
    /// Reads the settings (`dir`); the directory is read per call.
    pub fn new(def: &'static ConnectorDef, s: LogsSettings) -> Result<Logs, ConnectorError> {
        if s.dir.is_empty() {
            return Err(ConnectorError::Settings {
                connector: def.name,
                reason: "settings.dir is empty".into(),
            });
        }
        Ok(Logs {
            name: def.name,
            dir: PathBuf::from(s.dir),
        })
    }

    /// Whether the log directory can be listed (for readiness).
    pub fn probe(&self) -> Result<(), String> {
        log_files(self.name, &self.dir, &mut |_| {})
            .map(|_| ())
            .map_err(|e| e.message().to_owned())
    }

    /// Runs `search` (the only action): `pattern`, optional `since`/`until`, `context_lines`.
    pub async fn run(
        &self,
        action: &str,
        args: JsonObject,
        budget: stream::StreamBudget,
        signals: &CallSignals,
    ) -> ToolResult {
        if action != "search" {
            return Err(ToolError::fatal(format!(
                "logs action `{action}` is not available in this build of bulkhead"
            )));
        }
        let re = grep::compile(arg_str(&args, "pattern")?)?;
        let since = opt_str(&args, "since")
            .map(|s| instant("since", s))
            .transpose()?;
        let until = opt_str(&args, "until")
            .map(|s| instant("until", s))
            .transpose()?;
        let window = Window { since, until };
        let context = opt_usize(&args, "context_lines").unwrap_or(0);
        let (name, dir) = (self.name, self.dir.clone());
        stream::run_blocking(budget, signals, move |sink| {
            let files = log_files(name, &dir, &mut |w| sink.warn(w))?;
            // Progress counts bytes against the files' sizes when the search started.
            let total = files.iter().map(|(_, _, len)| len).sum();
            sink.set_total(Unit::Bytes, Some(total));
            let mut cx = Context::new(context);
            let mut buf = Vec::new();
            for (file_name, file, _) in files {
                cx.new_file();
                let mut reader = BufReader::with_capacity(1 << 16, file);
                let mut ts: Option<i128> = None;
                let mut n = 0u64;
                loop {
                    let read = grep::read_line(&mut reader, &mut buf)
                        .map_err(|e| grep::read_error(&file_name, e))?;
                    if read == 0 {
                        break;
                    }
                    sink.tick(read as u64)?;
                    n += 1;
                    if window.is_set()
                        && let Some(t) = leading_timestamp(&buf)
                    {
                        ts = Some(t);
                    }
                    let hit = window.contains(ts) && re.is_match(&buf);
                    cx.line(sink, &file_name, n, &buf, hit)?;
                }
            }
            Ok(())
        })
        .await
    }
}

fn instant(field: &str, text: &str) -> Result<i128, ToolError> {
    OffsetDateTime::parse(text, &Rfc3339)
        .map(|t| t.unix_timestamp_nanos())
        .map_err(|e| {
            ToolError::retry(format!(
                "`{field}` must be an RFC 3339 time like 2026-11-22T14:28:30Z: {e}"
            ))
        })
}

/// `since` inclusive, `until` exclusive; with a window, lines before any timestamp are out.
struct Window {
    since: Option<i128>,
    until: Option<i128>,
}

impl Window {
    fn is_set(&self) -> bool {
        self.since.is_some() || self.until.is_some()
    }

    fn contains(&self, ts: Option<i128>) -> bool {
        if !self.is_set() {
            return true;
        }
        let Some(t) = ts else { return false };
        self.since.is_none_or(|s| t >= s) && self.until.is_none_or(|u| t < u)
    }
}

/// Regular files of `dir` sorted by name with their sizes, opened without following links; a
/// symlink counts only when it resolves to a regular file inside `dir`. A file that cannot be
/// opened is skipped with a warning naming it (its name in `dir`, never a host path).
fn log_files(
    name: &str,
    dir: &Path,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<(String, File, u64)>, ToolError> {
    let unavailable = |e: std::io::Error| {
        ToolError::fatal(format!(
            "log directory of `{name}` unavailable: {}",
            e.kind()
        ))
    };
    let canonical = dir.canonicalize().map_err(unavailable)?;
    let mut entries: Vec<(String, PathBuf)> = std::fs::read_dir(&canonical)
        .map_err(unavailable)?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for (file_name, path) in entries {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let target = if meta.file_type().is_symlink() {
            match path.canonicalize() {
                Ok(t) if t.starts_with(&canonical) => t,
                _ => {
                    warn(format!(
                        "skipped `{file_name}`: a link that leads outside the log directory"
                    ));
                    continue;
                }
            }
        } else if meta.is_file() {
            path
        } else {
            continue;
        };
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(
                (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
            )
            .open(&target);
        match opened.and_then(|f| f.metadata().map(|m| (f, m))) {
            Ok((f, m)) if m.is_file() => out.push((file_name, f, m.len())),
            Ok(_) => continue,
            Err(e) => warn(format!(
                "skipped `{file_name}`: cannot be opened ({})",
                e.kind()
            )),
        }
    }
    Ok(out)
}

/// The time at the start of a log line (optionally after `[`): `YYYY-MM-DDTHH:MM:SS` or with a
/// space, optional fraction, optional `Z`/`±HH:MM`/`±HHMM` (none means UTC), as Unix nanoseconds.
pub fn leading_timestamp(line: &[u8]) -> Option<i128> {
    let s = line.strip_prefix(b"[").unwrap_or(line);
    if s.len() < 19 || !s[0].is_ascii_digit() {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        s[r].iter().try_fold(0u32, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
        })
    };
    let seps = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if seps.iter().any(|&(i, c)| s[i] != c) || !matches!(s[10], b'T' | b't' | b' ') {
        return None;
    }
    let month = time::Month::try_from(u8::try_from(num(5..7)?).ok()?).ok()?;
    let date = time::Date::from_calendar_date(num(0..4)? as i32, month, num(8..10)? as u8).ok()?;
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|b| b.is_ascii_digit()).count();
        for (i, &b) in frac[..digits].iter().take(9).enumerate() {
            nanos += u32::from(b - b'0') * 10u32.pow(8 - i as u32);
        }
        rest = &frac[digits..];
    }
    let time = time::Time::from_hms_nano(
        num(11..13)? as u8,
        num(14..16)? as u8,
        num(17..19)? as u8,
        nanos,
    )
    .ok()?;
    let offset_secs: i32 = match rest.first() {
        Some(b'+') | Some(b'-') if rest.len() >= 5 => {
            let sign = if rest[0] == b'-' { -1 } else { 1 };
            let d = |i: usize| {
                rest.get(i)
                    .filter(|b| b.is_ascii_digit())
                    .map(|b| i32::from(b - b'0'))
            };
            let (h, m) = if rest.get(3) == Some(&b':') {
                (d(1)? * 10 + d(2)?, d(4)? * 10 + d(5)?)
            } else {
                (d(1)? * 10 + d(2)?, d(3)? * 10 + d(4)?)
            };
            sign * (h * 3600 + m * 60)
        }
        _ => 0,
    };
    let utc = time::PrimitiveDateTime::new(date, time).assume_utc();
    Some(utc.unix_timestamp_nanos() - i128::from(offset_secs) * 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::leading_timestamp;

    #[test]
    fn timestamps_parse_in_common_shapes() {
        let z = leading_timestamp(b"2026-11-22T14:28:30Z INFO x").unwrap();
        assert_eq!(leading_timestamp(b"2026-11-22 14:28:30 INFO x"), Some(z));
        assert_eq!(leading_timestamp(b"[2026-11-22T15:28:30+01:00] x"), Some(z));
        assert_eq!(leading_timestamp(b"2026-11-22T13:28:30-0100 x"), Some(z));
        assert_eq!(
            leading_timestamp(b"2026-11-22T14:28:30.5Z").unwrap() - z,
            500_000_000
        );
        assert_eq!(leading_timestamp(b"    at frame 3"), None);
        assert_eq!(leading_timestamp(b"2026-13-22T14:28:30Z"), None);
    }
}
