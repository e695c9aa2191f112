//! Fresh, never-reused result files under `/workspace/results/`.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{OpenOptions, OpenOptionsExt as _};

use super::path::RelPath;
use super::{SessionWorkspace, WorkspaceError};

/// Directory (relative to the workspace root) that holds saved tool results.
pub const RESULTS_DIR: &str = "results";

static RESULT_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Attempts before giving up when names keep colliding with existing files.
const MAX_ATTEMPTS: u32 = 64;

impl SessionWorkspace {
    /// Reserves a fresh agent path `/workspace/results/<tool>-<utc timestamp>-<counter>.<ext>` and
    /// creates it empty with `create_new`, so it is unique across concurrent calls in the process
    /// and never overwrites an existing file. `tool` and `ext` are reduced to `[A-Za-z0-9_-]`
    /// (at most 64 and 16 characters); an empty `ext` gives a name without extension.
    pub fn new_result_path(&self, tool: &str, ext: &str) -> Result<String, WorkspaceError> {
        let tool = sanitize(tool, 64);
        let tool = if tool.is_empty() {
            "result".into()
        } else {
            tool
        };
        let ext = sanitize(ext, 16);
        let dir_rel = RelPath::root().join(RESULTS_DIR)?;
        let probe = dir_rel.join("x")?;
        // Creates `results/` (0700) through the same path as any write.
        let (dir, _) = self.parent_dir(&probe)?;
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true).mode(0o600);
        for _ in 0..MAX_ATTEMPTS {
            let n = RESULT_COUNTER.fetch_add(1, Ordering::Relaxed);
            let mut name = format!("{tool}-{}-{n}", utc_stamp());
            if !ext.is_empty() {
                name.push('.');
                name.push_str(&ext);
            }
            match dir.open_with(&name, &opts) {
                Ok(_) => return Ok(dir_rel.join(&name)?.to_agent_path()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(WorkspaceError::from_io(
                        &dir_rel.to_agent_path(),
                        "create result file",
                        e,
                    ));
                }
            }
        }
        Err(WorkspaceError::Io {
            path: dir_rel.to_agent_path(),
            op: "create result file",
            kind: io::ErrorKind::AlreadyExists,
            source: io::Error::new(io::ErrorKind::AlreadyExists, "no free result name"),
        })
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

/// `YYYYMMDDTHHMMSSZ` in UTC, without characters that need quoting in a file name.
fn utc_stamp() -> String {
    let t = time::OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_tool_and_ext() {
        assert_eq!(sanitize("../sql query", 64), "___sql_query");
        assert_eq!(sanitize("a/b\0c", 64), "a_b_c");
        assert_eq!(sanitize(&"x".repeat(100), 64).len(), 64);
        let stamp = utc_stamp();
        assert_eq!(stamp.len(), 16, "{stamp}");
        assert!(stamp.ends_with('Z'));
    }
}
