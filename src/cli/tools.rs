//! `bulkhead tools [server]`: every tool with its declared permission, sensitivity and context
//! preset, what it runs, and the least isolated instance that may run it.

use bulkhead::tooldef::Target;
use std::fmt::Write as _;
use std::process::ExitCode;

/// Prints the table for one server, or for every server.
pub fn run(server: Option<&str>) -> anyhow::Result<ExitCode> {
    let servers: Vec<_> = bulkhead::servers::SERVERS
        .iter()
        .filter(|s| server.is_none_or(|n| n == s.name))
        .collect();
    if servers.is_empty() {
        let known: Vec<&str> = bulkhead::servers::SERVERS.iter().map(|s| s.name).collect();
        anyhow::bail!(
            "no server named `{}` in specs/servers (known: {})",
            server.unwrap_or_default(),
            known.join(", ")
        );
    }
    print!("{}", table(&servers));
    Ok(ExitCode::SUCCESS)
}

fn table(servers: &[&&'static bulkhead::codegen::ServerDef]) -> String {
    let mut out = String::new();
    for s in servers {
        let _ = writeln!(out, "server `{}`", s.name);
        let rows: Vec<[String; 6]> = s
            .tools
            .iter()
            .map(|t| {
                let runs = match t.target {
                    Target::Connector {
                        connector,
                        operation,
                    } => format!("{connector}.{operation}"),
                    Target::Handler => "handler (rust)".into(),
                    Target::Static(_) => "fixed text".into(),
                };
                [
                    t.name.to_string(),
                    t.permission.to_string(),
                    t.sensitivity.to_string(),
                    t.context.to_string(),
                    runs,
                    t.sensitivity.required_mode().to_string(),
                ]
            })
            .collect();
        let head = [
            "tool",
            "permission",
            "sensitivity",
            "context",
            "runs",
            "instance",
        ];
        let mut width = head.map(str::len);
        for r in &rows {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[&str]| {
            let mut l = String::from(" ");
            for (c, w) in cells.iter().zip(width) {
                let _ = write!(l, " {c:<w$} ");
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(out, "{}", line(&head));
        for r in &rows {
            let cells: Vec<&str> = r.iter().map(String::as_str).collect();
            let _ = writeln!(out, "{}", line(&cells));
        }
        for r in s.resources {
            let _ = writeln!(
                out,
                "  resource {}  ({}, {}, instance {})",
                r.uri,
                r.tool.sensitivity,
                match r.tool.target {
                    Target::Connector {
                        connector,
                        operation,
                    } => format!("{connector}.{operation}"),
                    _ => "fixed text".into(),
                },
                r.tool.sensitivity.required_mode()
            );
        }
        for p in s.prompts {
            let args: Vec<&str> = p.arguments.iter().map(|a| a.name).collect();
            let _ = writeln!(out, "  prompt {}({})", p.name, args.join(", "));
        }
        let _ = writeln!(
            out,
            "  instance: the least isolated mode that runs the tool (full < proxied < none); once a session holds private data, connect tools are refused everywhere\n"
        );
    }
    out
}
