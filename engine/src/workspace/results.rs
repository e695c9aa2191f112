//! Saved results under `/workspace/results/`: one file per distinct query (the same tool with the
//! same arguments overwrites its earlier result instead of adding one), written to a temporary
//! file and renamed into place only when complete (a cancelled or failed call leaves nothing
//! behind), cut at `max_result_bytes`, within a per-session results budget where the oldest make
//! room for the newest.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _};

use super::path::RelPath;
use super::{SessionWorkspace, WorkspaceError};

/// Directory (relative to the workspace root) that holds saved tool results.
pub const RESULTS_DIR: &str = "results";

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A result being saved. Dropped without [`commit`](ResultFile::commit), it removes itself.
pub struct ResultFile {
    dir: Dir,
    dir_agent: String,
    tmp: String,
    stem: String,
    file: Option<std::fs::File>,
    cap: u64,
    written: u64,
    cut: bool,
}

/// A saved result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedResult {
    /// Its agent path (`/workspace/results/<tool>-<query>.<ext>`).
    pub path: String,
    /// Bytes saved.
    pub bytes: u64,
    /// Whether the result was longer than `workspace.max_result_bytes` and cut there.
    pub cut: bool,
}

impl Write for ResultFile {
    /// Writes up to the cap and drops the rest (recording that it did).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.cap.saturating_sub(self.written);
        let take = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if take < buf.len() {
            self.cut = true;
        }
        if take > 0 {
            let file = self
                .file
                .as_mut()
                .ok_or_else(|| io::Error::other("result closed"))?;
            file.write_all(&buf[..take])?;
            self.written += take as u64;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), Write::flush)
    }
}

impl Drop for ResultFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = self.dir.remove_file(&self.tmp);
        }
    }
}

impl ResultFile {
    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Renames the complete result into place as `<stem>.<ext>` (replacing the same query's
    /// earlier result), then trims the session's results to their budget, oldest first.
    pub fn commit(
        mut self,
        ws: &SessionWorkspace,
        ext: &str,
    ) -> Result<SavedResult, WorkspaceError> {
        let file = self.file.take().expect("committed once");
        drop(file);
        let ext = sanitize(ext, 16);
        let name = if ext.is_empty() {
            self.stem.clone()
        } else {
            format!("{}.{ext}", self.stem)
        };
        let agent = format!("{}/{name}", self.dir_agent);
        if let Err(e) = self.dir.rename(&self.tmp, &self.dir, &name) {
            let _ = self.dir.remove_file(&self.tmp);
            return Err(WorkspaceError::from_io(&agent, "save result", e));
        }
        trim(
            &self.dir,
            ws.limits.results_max_bytes,
            ws.limits.results_max_files,
            &name,
        );
        Ok(SavedResult {
            path: agent,
            bytes: self.written,
            cut: self.cut,
        })
    }
}

impl SessionWorkspace {
    /// Starts saving a result of `tool` for the query identified by `key` (a hash of the
    /// arguments). Makes room first: the oldest saved results go when the session is at its file
    /// or byte limit. The result may hold at most what the limits leave (and never more than
    /// `max_result_bytes`); refused when nothing is left.
    pub fn save_result(&self, tool: &str, key: u64) -> Result<ResultFile, WorkspaceError> {
        let tool = match sanitize(tool, 64) {
            t if t.is_empty() => "result".to_string(),
            t => t,
        };
        let dir_rel = RelPath::root().join(RESULTS_DIR)?;
        let (dir, _) = self.parent_dir(&dir_rel.join("x")?)?;
        let limits = self.limits;
        // One slot for the new file within the results' own file budget.
        trim(
            &dir,
            u64::MAX,
            limits.results_max_files.saturating_sub(1).max(1),
            "",
        );
        let mut used = self.usage()?;
        if used.files >= limits.max_files || used.bytes >= limits.max_bytes {
            // The whole session is full: older results make room before anything is refused.
            trim(&dir, 0, 1, "");
            used = self.usage()?;
        }
        let free_room = self
            .free_bytes()
            .map_or(u64::MAX, |f| f.saturating_sub(limits.min_free_bytes));
        let cap = limits
            .max_result_bytes
            .min(limits.max_bytes.saturating_sub(used.bytes))
            .min(free_room);
        if free_room == 0 {
            return Err(WorkspaceError::Quota {
                limit: "workspace.min_free_bytes",
                detail: "the server's disk is nearly full; results cannot be saved".into(),
                retryable: false,
            });
        }
        if cap == 0 || used.files >= limits.max_files {
            return Err(WorkspaceError::Quota {
                limit: if used.files >= limits.max_files {
                    "workspace.max_files"
                } else {
                    "workspace.max_bytes"
                },
                detail: format!(
                    "this session's files use {} bytes in {} files, its limit, so the full result cannot be saved",
                    used.bytes, used.files
                ),
                retryable: false,
            });
        }
        let tmp = format!(
            "{}{}-{}",
            super::TEMP_PREFIX,
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true).mode(0o600);
        let dir_agent = dir_rel.to_agent_path();
        let file = dir
            .open_with(&tmp, &opts)
            .map_err(|e| WorkspaceError::from_io(&dir_agent, "create result file", e))?
            .into_std();
        Ok(ResultFile {
            dir,
            dir_agent,
            tmp,
            stem: format!("{tool}-{key:016x}"),
            file: Some(file),
            cap,
            written: 0,
            cut: false,
        })
    }
}

/// Removes the oldest saved results (never `keep`) until at most `max_files` remain and they hold
/// at most `max_bytes`. In-flight temporary files are left alone.
fn trim(dir: &Dir, max_bytes: u64, max_files: u64, keep: &str) {
    let Ok(entries) = dir.entries() else { return };
    let mut files: Vec<(std::time::SystemTime, u64, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let m = e.metadata().ok()?;
            (m.is_file() && !super::is_temp_name(&name)).then(|| {
                let t = m
                    .modified()
                    .map(|t| t.into_std())
                    .unwrap_or(std::time::UNIX_EPOCH);
                (t, m.len(), name)
            })
        })
        .collect();
    files.sort();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    let mut count = files.len() as u64;
    for (_, len, name) in files {
        if count <= max_files && total <= max_bytes {
            break;
        }
        if name == keep {
            continue;
        }
        if dir.remove_file(&name).is_ok() {
            total -= len;
            count -= 1;
        }
    }
}

/// A stable 64-bit key for a query: FNV-1a over the tool name and the arguments with their keys
/// sorted (so the same query always names the same file).
pub fn query_key(tool: &str, args: &serde_json::Map<String, serde_json::Value>) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.eat(tool.as_bytes());
    let mut keys: Vec<&String> = args.keys().collect();
    keys.sort_unstable();
    for k in keys {
        h.eat(&[0]);
        h.eat(k.as_bytes());
        h.eat(&[0]);
        let _ = serde_json::to_writer(&mut h, &args[k]);
    }
    h.0
}

/// FNV-1a, fed through `io::Write` so values hash without being formatted into a string.
struct Fnv(u64);

impl Fnv {
    fn eat(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

impl io::Write for Fnv {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.eat(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Keeps `[A-Za-z0-9_-]`, replaces anything else with `_`, cuts at `max` characters.
fn sanitize(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_tool_and_ext() {
        assert_eq!(sanitize("../sql query", 64), "___sql_query");
        assert_eq!(sanitize("a/b\0c", 64), "a_b_c");
        assert_eq!(sanitize(&"x".repeat(100), 64).len(), 64);
    }

    #[test]
    fn the_same_query_has_the_same_key_whatever_the_key_order() {
        let a: serde_json::Map<_, _> = serde_json::from_str(r#"{"query":"x","limit":3}"#).unwrap();
        let b: serde_json::Map<_, _> = serde_json::from_str(r#"{"limit":3,"query":"x"}"#).unwrap();
        let c: serde_json::Map<_, _> = serde_json::from_str(r#"{"limit":4,"query":"x"}"#).unwrap();
        assert_eq!(query_key("t", &a), query_key("t", &b));
        assert_ne!(query_key("t", &a), query_key("t", &c));
        assert_ne!(query_key("t", &a), query_key("u", &a));
    }
}
