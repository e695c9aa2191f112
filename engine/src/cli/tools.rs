//! `bulkhead tools [server]`: every tool with its declared permission, sensitivity and context
//! preset, what it runs, and the least isolated instance that may run it. Read from the
//! project's `specs/` when there are some (what `check` and the next build read), else from the
//! specs compiled into this binary; when both exist and disagree, it says so.

use bulkhead::project::Project;
use bulkhead::tooldef::Target;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

/// Prints the table for one server, or for every server.
pub fn run(project: &Project, root: &Path, server: Option<&str>) -> anyhow::Result<ExitCode> {
    let specs = root.join("specs");
    if specs.join("servers").is_dir() {
        let model = bulkhead_lang::load(&specs, root)
            .map_err(|e| anyhow::anyhow!("{e}\n(`bulkhead check` shows the same)"))?;
        let policy = bulkhead_lang::review::resolve(&model);
        let names: Vec<&str> = model.servers.iter().map(|s| s.name.as_str()).collect();
        let shown: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| server.is_none_or(|s| s == *n))
            .collect();
        if shown.is_empty() {
            anyhow::bail!(
                "no server named `{}` in {} (known: {})",
                server.unwrap_or_default(),
                specs.join("servers").display(),
                names.join(", ")
            );
        }
        print!("{}", from_specs(&policy, &shown));
        if differs_from_binary(project, &policy) {
            println!(
                "note: {} differ from the specs compiled into this binary; `cargo build` to serve these",
                specs.display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    compiled(project, server)
}

/// Whether the tools (name, permission, sensitivity, context) of `policy` differ from the
/// compiled-in servers'.
fn differs_from_binary(project: &Project, policy: &bulkhead_lang::review::Policy) -> bool {
    let mut files: Vec<String> = policy
        .capabilities
        .iter()
        .filter(|c| c.kind == "tool")
        .map(|c| {
            format!(
                "{}.{} {} {} {}",
                c.server, c.name, c.permission, c.sensitivity, c.context.0
            )
        })
        .collect();
    let mut built: Vec<String> = project
        .servers
        .iter()
        .flat_map(|s| {
            s.tools.iter().map(move |t| {
                format!(
                    "{}.{} {} {} {}",
                    s.name, t.name, t.permission, t.sensitivity, t.context
                )
            })
        })
        .collect();
    files.sort();
    built.sort();
    files != built
}

fn from_specs(policy: &bulkhead_lang::review::Policy, servers: &[&str]) -> String {
    let mut out = String::new();
    for s in servers {
        let _ = writeln!(out, "server `{s}`");
        let rows: Vec<[String; 6]> = policy
            .capabilities
            .iter()
            .filter(|c| c.server == *s && c.kind == "tool")
            .map(|c| {
                [
                    c.name.clone(),
                    c.permission.to_string(),
                    c.sensitivity.to_string(),
                    c.context.0.clone(),
                    c.connector.clone().unwrap_or_else(|| {
                        if c.runs.starts_with("handler") {
                            "handler (rust)".into()
                        } else {
                            "fixed text".into()
                        }
                    }),
                    c.from_mode().to_string(),
                ]
            })
            .collect();
        out.push_str(&render(&rows));
        for c in policy.capabilities.iter().filter(|c| c.server == *s) {
            match c.kind {
                "resource" => {
                    let _ = writeln!(
                        out,
                        "  resource {}  ({}, {}, instance {})",
                        c.name,
                        c.sensitivity,
                        c.connector.as_deref().unwrap_or("fixed text"),
                        c.from_mode()
                    );
                }
                "prompt" => {
                    let _ = writeln!(out, "  prompt {}", c.name);
                }
                _ => {}
            }
        }
        let _ = writeln!(out, "{FOOTER}\n");
    }
    out
}

const FOOTER: &str = "  instance: the least isolated mode that runs the tool (full < proxied < none); once a session holds private data, connect tools are refused everywhere";

fn render(rows: &[[String; 6]]) -> String {
    let head = [
        "tool",
        "permission",
        "sensitivity",
        "context",
        "runs",
        "instance",
    ];
    let mut width = head.map(str::len);
    for r in rows {
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
    let mut out = String::new();
    let _ = writeln!(out, "{}", line(&head));
    for r in rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&cells));
    }
    out
}

/// The table of the specs compiled into this binary.
fn compiled(project: &Project, server: Option<&str>) -> anyhow::Result<ExitCode> {
    let servers: Vec<_> = project
        .servers
        .iter()
        .filter(|s| server.is_none_or(|n| n == s.name))
        .collect();
    if servers.is_empty() {
        anyhow::bail!(
            "no server named `{}` in specs/servers (known: {})",
            server.unwrap_or_default(),
            project.server_names()
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
        out.push_str(&render(&rows));
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
        let _ = writeln!(out, "{FOOTER}\n");
    }
    out
}
