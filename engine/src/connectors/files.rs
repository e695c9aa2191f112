//! The `files` connector: read, write, list and search inside the caller's own workspace.

use std::io::{BufRead as _, BufReader, Read as _};
use std::sync::Arc;

use super::grep::{self, Context};
use super::stream::{self, Sink, Stop};
use super::{arg_str, opt_str, opt_usize};
use crate::errors::ToolError;
use crate::server::{JsonObject, ToolOutput, ToolResult};
use crate::signals::{CallSignals, Unit};
use crate::workspace::{SessionWorkspace, WorkspaceError};

fn map_err(e: WorkspaceError) -> ToolError {
    if e.is_retryable() {
        ToolError::retry(e)
    } else {
        ToolError::fatal(e)
    }
}

/// Runs one file action.
pub async fn run(
    action: &str,
    ws: &Arc<SessionWorkspace>,
    args: &JsonObject,
    budget: stream::StreamBudget,
    signals: &CallSignals,
) -> ToolResult {
    match action {
        "search" => {
            let re = grep::compile(arg_str(args, "pattern")?)?;
            let path = opt_str(args, "path").unwrap_or("/workspace").to_owned();
            let context = opt_usize(args, "context_lines").unwrap_or(0);
            // Fail early (and plainly) on a path that is not a directory of this workspace.
            ws.list(&path).map_err(map_err)?;
            let ws = ws.clone();
            stream::run_blocking(budget, signals, move |sink| {
                sink.set_total(Unit::Bytes, None);
                search(&ws, &path, &re, context, sink)
            })
            .await
        }
        "read" => {
            let path = arg_str(args, "path")?;
            let bytes = ws.read(path).map_err(map_err)?;
            let text = String::from_utf8(bytes)
                .map_err(|_| ToolError::retry(format!("{path} is not UTF-8 text")))?;
            Ok(ToolOutput::Text(text))
        }
        "write" => {
            let path = arg_str(args, "path")?;
            let content = arg_str(args, "content")?;
            ws.write(path, content.as_bytes()).map_err(map_err)?;
            Ok(ToolOutput::Text(format!(
                "Wrote {} bytes to {}",
                content.len(),
                path
            )))
        }
        "delete" => {
            let path = arg_str(args, "path")?;
            ws.remove(path).map_err(map_err)?;
            Ok(ToolOutput::Text(format!("Deleted {path}")))
        }
        "list" => {
            let path = arg_str(args, "path")?;
            let pattern = args.get("pattern").and_then(|v| v.as_str()).unwrap_or("*");
            let entries = ws.list(path).map_err(map_err)?;
            let lines: Vec<String> = entries
                .into_iter()
                .filter(|e| glob_match(pattern, &e.name))
                .map(|e| {
                    if e.is_dir {
                        format!("{}/", e.name)
                    } else {
                        format!("{}\t{}", e.name, e.size)
                    }
                })
                .collect();
            Ok(ToolOutput::Text(lines.join("\n")))
        }
        other => Err(ToolError::fatal(format!(
            "files action `{other}` is not available in this build of bulkhead"
        ))),
    }
}

/// Directories a search visits at most (symlinked directories could otherwise loop).
const MAX_DIRS: usize = 10_000;

/// Depth-first, name-ordered regex search below `root`. Each file is read only up to the size
/// it had when listed, so a result file growing under the search cannot feed it forever.
fn search(
    ws: &SessionWorkspace,
    root: &str,
    re: &regex::bytes::Regex,
    context: usize,
    sink: &mut Sink,
) -> Result<(), Stop> {
    let mut cx = Context::new(context);
    let mut buf = Vec::new();
    let mut pending = vec![root.trim_end_matches('/').to_owned()];
    let mut visited = 0usize;
    while let Some(dir) = pending.pop() {
        visited += 1;
        if visited > MAX_DIRS {
            sink.push(crate::server::Chunk::Line(format!(
                "search stopped after {MAX_DIRS} directories; narrow `path`"
            )))?;
            break;
        }
        // A directory that vanished or turned into an escaping link is skipped, not fatal.
        let Ok(entries) = ws.list(&dir) else { continue };
        let mut subdirs = Vec::new();
        for e in entries {
            let child = format!("{dir}/{}", e.name);
            if e.is_dir {
                subdirs.push(child);
                continue;
            }
            let Ok(file) = ws.open(&child) else { continue };
            let mut reader = BufReader::with_capacity(1 << 16, file.take(e.size));
            if reader.fill_buf().map(|b| b.contains(&0)).unwrap_or(true) {
                continue; // binary
            }
            cx.new_file();
            let mut n = 0u64;
            loop {
                let read = grep::read_line(&mut reader, &mut buf)
                    .map_err(|e| grep::read_error(&child, e))?;
                if read == 0 {
                    break;
                }
                sink.tick(read as u64)?;
                n += 1;
                let hit = re.is_match(&buf);
                cx.line(sink, &child, n, &buf, hit)?;
            }
        }
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// `*` and `?` glob over one file name (dynamic programming: linear in pattern × name).
fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // row[j]: pattern prefix matches name prefix of length j.
    let mut row = vec![false; n.len() + 1];
    row[0] = true;
    for &pc in &p {
        let mut next = vec![false; n.len() + 1];
        if pc == '*' {
            next[0] = row[0];
            for j in 1..=n.len() {
                next[j] = row[j] || next[j - 1];
            }
        } else {
            for j in 1..=n.len() {
                next[j] = row[j - 1] && (pc == '?' || pc == n[j - 1]);
            }
        }
        row = next;
    }
    row[n.len()]
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("*", "a.txt"));
        assert!(glob_match("*.csv", "x.csv"));
        assert!(!glob_match("*.csv", "x.csvx"));
        assert!(glob_match("a?c", "abc"));
    }
}
