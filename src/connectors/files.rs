//! The `files` connector: read, write and list inside the caller's own workspace.

use super::arg_str;
use crate::errors::ToolError;
use crate::server::{JsonObject, ToolOutput, ToolResult};
use crate::workspace::{SessionWorkspace, WorkspaceError};

fn map_err(e: WorkspaceError) -> ToolError {
    if e.is_retryable() {
        ToolError::retry(e)
    } else {
        ToolError::fatal(e)
    }
}

/// Runs one file action.
pub fn run(action: &str, ws: &SessionWorkspace, args: &JsonObject) -> ToolResult {
    match action {
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
