//! `bulkhead new`: scaffolding for a server or a tool. Writes the spec (schema header, every
//! required key present, the choices in comments) and, for `handler: rust` tools, the handler
//! module, its `pub mod` line and its `handlers()` function, so the next `cargo build` compiles.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What to create.
#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// A server: `specs/servers/<name>.yaml` with one `handler: rust` tool, and its handler module.
    Server {
        /// Server name (lowercase letters, digits, `_`).
        name: String,
    },
    /// A tool in an existing server's spec (a `handler: rust` tool gets a method stub too).
    Tool {
        /// Server name.
        server: String,
        /// Tool name (lowercase letters, digits, `_`).
        tool: String,
        /// Run a connector operation (`connector.operation`) instead of a Rust handler.
        #[arg(long)]
        uses: Option<String>,
    },
}

/// Runs one scaffolding command in the project at `root`.
pub fn run(root: &Path, what: What) -> anyhow::Result<ExitCode> {
    let written = match what {
        What::Server { name } => new_server(root, &name)?,
        What::Tool { server, tool, uses } => new_tool(root, &server, &tool, uses.as_deref())?,
    };
    for (path, what) in &written {
        println!("{what:<8} {}", path.display());
    }
    println!("next: edit the spec (the choices are in its comments), then `cargo build`");
    Ok(ExitCode::SUCCESS)
}

fn check_name(kind: &str, name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    anyhow::ensure!(
        ok,
        "{kind} name `{name}`: use 1–64 lowercase letters, digits and `_`, starting with a letter"
    );
    Ok(())
}

/// `Tool name` → `ToolNameArgs`, as the generator names argument structs.
fn args_struct(tool: &str) -> String {
    let mut out = String::new();
    for part in tool.split('_').filter(|p| !p.is_empty()) {
        let mut c = part.chars();
        if let Some(first) = c.next() {
            out.extend(first.to_uppercase());
            out.push_str(c.as_str());
        }
    }
    out.push_str("Args");
    out
}

fn tool_yaml(tool: &str, uses: Option<&str>) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "  {tool}:");
    let _ = writeln!(
        y,
        "    description: What `{tool}` does, in a sentence the model reads."
    );
    let _ = writeln!(
        y,
        "    permission: read          # read | write | connect (reaches outside; refused once the session holds private data)"
    );
    let _ = writeln!(
        y,
        "    context: default          # default | sql_query | log_search | a preset of this server's context_presets"
    );
    let _ = writeln!(
        y,
        "    sensitivity: public       # public | internal | confidential | secret (at least its connector's)"
    );
    match uses {
        Some(op) => {
            let _ = writeln!(
                y,
                "    uses: {op}        # parameters come from the operation"
            );
        }
        None => {
            let _ = writeln!(
                y,
                "    handler: rust             # or `uses: <connector>.<operation>`; implemented in src/handlers/"
            );
            let _ = writeln!(y, "    params:");
            let _ = writeln!(y, "      text:");
            let _ = writeln!(
                y,
                "        type: string          # string | integer | number | boolean | array | enum"
            );
            let _ = writeln!(y, "        description: An example argument");
            let _ = writeln!(
                y,
                "        max_length: 1000      # limits: min_length, max_length, pattern, minimum, maximum, …"
            );
        }
    }
    y
}

fn handler_method(tool: &str) -> String {
    format!(
        "    async fn {tool}(&self, cx: ToolContext, args: {args}) -> ToolResult {{\n        // The wrapper has checked identity, mode, permission and arguments and raised the session\n        // before this runs; return the data (large results are truncated and saved for you).\n        let _ = cx;\n        Ok(ToolOutput::Text(format!(\"{tool}: {{}}\", args.text)))\n    }}\n",
        args = args_struct(tool)
    )
}

fn handler_module(server: &str, tools: &[&str]) -> String {
    let args: Vec<String> = tools.iter().map(|t| args_struct(t)).collect();
    let mut m = String::new();
    let _ = writeln!(m, "//! Handlers of the `{server}` server's Rust tools.\n");
    let _ = writeln!(
        m,
        "use crate::codegen::{{ToolContext, ToolOutput, ToolResult}};"
    );
    let _ = writeln!(
        m,
        "use crate::servers::{server}::{{Handlers, {}}};\n",
        args.join(", ")
    );
    let _ = writeln!(m, "/// The `{server}` server's handlers.");
    let _ = writeln!(m, "#[derive(Debug, Default)]");
    let ty = args_struct(server).trim_end_matches("Args").to_string();
    let _ = writeln!(m, "pub struct {ty};\n");
    let _ = writeln!(
        m,
        "/// Constructs the handlers (called by the generated registry)."
    );
    let _ = writeln!(m, "pub fn handlers() -> {ty} {{\n    {ty}\n}}\n");
    let _ = writeln!(m, "impl Handlers for {ty} {{");
    for (i, t) in tools.iter().enumerate() {
        if i > 0 {
            m.push('\n');
        }
        m.push_str(&handler_method(t));
    }
    m.push_str("}\n");
    m
}

fn new_server(root: &Path, name: &str) -> anyhow::Result<Vec<(PathBuf, &'static str)>> {
    check_name("server", name)?;
    let spec = root.join("specs/servers").join(format!("{name}.yaml"));
    anyhow::ensure!(!spec.exists(), "{} exists already", spec.display());
    let module = root.join("src/handlers").join(format!("{name}.rs"));
    anyhow::ensure!(!module.exists(), "{} exists already", module.display());
    let tool = "hello";
    let text = format!(
        "# yaml-language-server: $schema=../schema/server.schema.json\nname: {name}\ninstructions: What this server is for, in a sentence or two the model reads.\ntools:\n{}",
        tool_yaml(tool, None)
    );
    std::fs::create_dir_all(spec.parent().expect("has a parent"))?;
    std::fs::write(&spec, text)?;
    std::fs::write(&module, handler_module(name, &[tool]))?;
    let registry = add_mod_line(root, name)?;
    Ok(vec![
        (spec, "spec"),
        (module, "handlers"),
        (registry, "updated"),
    ])
}

/// Adds `pub mod <server>;` to `src/handlers/mod.rs` (kept sorted) unless it is there.
fn add_mod_line(root: &Path, server: &str) -> anyhow::Result<PathBuf> {
    let path = root.join("src/handlers/mod.rs");
    let text = std::fs::read_to_string(&path)?;
    let line = format!("pub mod {server};");
    if text.lines().any(|l| l.trim() == line) {
        return Ok(path);
    }
    let (head, mut mods): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| !l.starts_with("pub mod "));
    mods.push(&line);
    mods.sort_unstable();
    let mut out = head.join("\n").trim_end().to_string();
    out.push_str("\n\n");
    out.push_str(&mods.join("\n"));
    out.push('\n');
    std::fs::write(&path, out)?;
    Ok(path)
}

fn new_tool(
    root: &Path,
    server: &str,
    tool: &str,
    uses: Option<&str>,
) -> anyhow::Result<Vec<(PathBuf, &'static str)>> {
    check_name("tool", tool)?;
    let spec = root.join("specs/servers").join(format!("{server}.yaml"));
    let text = std::fs::read_to_string(&spec).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e} (create the server with `bulkhead new server {server}`)",
            spec.display()
        )
    })?;
    anyhow::ensure!(
        !text.lines().any(|l| l.trim_end() == format!("  {tool}:")),
        "server `{server}` has a tool `{tool}` already"
    );
    // Tools go at the end of the `tools:` block, which must be the last top-level key.
    let last_top = text
        .lines()
        .filter(|l| !l.starts_with([' ', '#']) && !l.trim().is_empty())
        .last()
        .unwrap_or_default();
    anyhow::ensure!(
        last_top.starts_with("tools:"),
        "{}: `tools:` is not the last top-level key; add the tool by hand (see README, Adding a tool)",
        spec.display()
    );
    let mut out = text.trim_end().to_string();
    out.push('\n');
    out.push_str(&tool_yaml(tool, uses));
    std::fs::write(&spec, out)?;
    let mut written = vec![(spec, "updated")];
    if uses.is_none() {
        let module = root.join("src/handlers").join(format!("{server}.rs"));
        match std::fs::read_to_string(&module) {
            Ok(m) => {
                let end = m.rfind("\n}").ok_or_else(|| {
                    anyhow::anyhow!("{}: no closing `}}` of the Handlers impl", module.display())
                })?;
                let mut updated = m[..end + 1].to_string();
                updated.push('\n');
                updated.push_str(&handler_method(tool));
                updated.push_str(&m[end + 1..]);
                // The new argument struct joins the `use` line of the generated module.
                let args = args_struct(tool);
                let updated = updated.replacen(
                    &format!("use crate::servers::{server}::{{Handlers"),
                    &format!("use crate::servers::{server}::{{Handlers, {args}"),
                    1,
                );
                std::fs::write(&module, updated)?;
                written.push((module, "updated"));
            }
            Err(_) => {
                std::fs::write(&module, handler_module(server, &[tool]))?;
                written.push((module, "handlers"));
                written.push((add_mod_line(root, server)?, "updated"));
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_structs_are_named_like_the_generator_names_them() {
        assert_eq!(
            args_struct("load_sensitive_dataset"),
            "LoadSensitiveDatasetArgs"
        );
        assert_eq!(args_struct("hello"), "HelloArgs");
    }

    #[test]
    fn a_server_and_a_tool_are_scaffolded_into_a_project() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/handlers")).unwrap();
        std::fs::write(
            root.join("src/handlers/mod.rs"),
            "//! Handlers.\n\npub mod template;\n",
        )
        .unwrap();
        new_server(root, "support").unwrap();
        let mods = std::fs::read_to_string(root.join("src/handlers/mod.rs")).unwrap();
        assert_eq!(
            mods,
            "//! Handlers.\n\npub mod support;\npub mod template;\n"
        );
        new_tool(root, "support", "lookup", None).unwrap();
        new_tool(root, "support", "search", Some("records.search")).unwrap();
        let spec = std::fs::read_to_string(root.join("specs/servers/support.yaml")).unwrap();
        assert!(
            spec.contains("  lookup:\n") && spec.contains("uses: records.search"),
            "{spec}"
        );
        let m = std::fs::read_to_string(root.join("src/handlers/support.rs")).unwrap();
        assert!(
            m.contains("use crate::servers::support::{Handlers, LookupArgs, HelloArgs};"),
            "{m}"
        );
        assert!(
            m.contains("async fn lookup(") && m.contains("async fn hello("),
            "{m}"
        );
        assert!(new_server(root, "support").is_err(), "no overwrite");
        assert!(
            new_tool(root, "support", "lookup", None).is_err(),
            "no duplicate"
        );
        assert!(new_server(root, "Bad-Name").is_err());
    }
}
