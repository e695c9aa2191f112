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
    /// A connector: `specs/connectors/<name>.yaml` of one kind, with its settings and one
    /// operation to adapt (an `mcp` connector comes from `bulkhead import mcp`).
    Connector {
        /// Connector name (lowercase letters, digits, `_`).
        name: String,
        /// Its kind: files, sqlite, http, logs, postgres, sandbox.
        #[arg(long)]
        kind: String,
    },
}

/// Runs one scaffolding command in the project at `root`.
pub fn run(root: &Path, what: What) -> anyhow::Result<ExitCode> {
    let written = match what {
        What::Server { name } => new_server(root, &name)?,
        What::Tool { server, tool, uses } => new_tool(root, &server, &tool, uses.as_deref())?,
        What::Connector { name, kind } => new_connector(root, &name, &kind)?,
    };
    for (path, what) in &written {
        println!("{what:<8} {}", path.display());
    }
    println!("next: edit the spec (the choices are in its comments), then `cargo build`");
    Ok(ExitCode::SUCCESS)
}

/// `specs/connectors/<name>.yaml` from the kind's example (the vocabulary's).
fn new_connector(
    root: &Path,
    name: &str,
    kind: &str,
) -> anyhow::Result<Vec<(PathBuf, &'static str)>> {
    use bulkhead_vocab::connector::ConnectorKind;
    check_name("connector", name)?;
    let known: Vec<&str> = ConnectorKind::ALL
        .iter()
        .filter(|k| !k.is_fixture() || cfg!(feature = "fixture-kind"))
        .map(|k| k.as_str())
        .collect();
    let k = ConnectorKind::parse(kind)
        .ok_or_else(|| anyhow::anyhow!("kind `{kind}`: one of {}", known.join(", ")))?;
    let example = k.example().ok_or_else(|| {
        anyhow::anyhow!(
            "an `{kind}` connector is imported, not written: `bulkhead import mcp --name {name} -- <the command that starts the server>` lists its tools and pins them in a lock"
        )
    })?;
    let path = root.join(format!("specs/connectors/{name}.yaml"));
    anyhow::ensure!(
        !path.exists(),
        "{} exists; remove it or choose another name",
        path.display()
    );
    std::fs::create_dir_all(path.parent().expect("has a parent"))?;
    let text = format!(
        "# yaml-language-server: $schema=../schema/connector.schema.json\nname: {name}\nkind: {kind}\n{}",
        example
            .replace("data/NAME", &format!("data/{name}"))
            .replace("NAME", &name.to_ascii_uppercase())
    );
    std::fs::write(&path, text)?;
    Ok(vec![(path, "spec")])
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

/// What a new tool declares: defaults for a handler, its operation's needs for `--uses`.
struct Declared {
    permission: &'static str,
    context: &'static str,
    sensitivity: &'static str,
}

const HANDLER_DEFAULTS: Declared = Declared {
    permission: "read",
    context: "default",
    sensitivity: "public",
};

/// What a tool using `op` (`connector.operation`) must declare at least: the connector's
/// sensitivity, the permission the operation needs (it writes, it reaches the network) and
/// the context preset made for its results. Read from the project's specs, so `bulkhead check`
/// accepts what is written.
fn declared_for(root: &Path, op: &str) -> anyhow::Result<Declared> {
    let (connector, operation) = op
        .split_once('.')
        .ok_or_else(|| anyhow::anyhow!("--uses `{op}`: expected `<connector>.<operation>`"))?;
    let model = bulkhead_lang::load(&root.join("specs"), root).map_err(|e| {
        anyhow::anyhow!("specs/ must load to look up `{op}`; fix these first:\n{e}")
    })?;
    let c = model.connector(connector).ok_or_else(|| {
        let known: Vec<&str> = model.connectors.iter().map(|c| c.name.as_str()).collect();
        anyhow::anyhow!(
            "--uses `{op}`: no connector `{connector}` (known: {})",
            known.join(", ")
        )
    })?;
    let o = c.operations.iter().find(|o| o.name == operation).ok_or_else(|| {
        let known: Vec<&str> = c.operations.iter().map(|o| o.name.as_str()).collect();
        anyhow::anyhow!(
            "--uses `{op}`: connector `{connector}` has no operation `{operation}` (it has: {})",
            known.join(", ")
        )
    })?;
    use bulkhead_lang::model::OperationBody;
    Ok(Declared {
        permission: if o.body.reaches_network() {
            "connect"
        } else if o.body.writes() {
            "write"
        } else {
            "read"
        },
        context: match o.body {
            OperationBody::Sql { .. } => "sql_query",
            OperationBody::Logs { .. } => "log_search",
            _ => "default",
        },
        sensitivity: c.sensitivity.as_str(),
    })
}

fn tool_yaml(tool: &str, uses: Option<&str>, d: &Declared) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "  {tool}:");
    let _ = writeln!(
        y,
        "    description: What `{tool}` does, in a sentence the model reads."
    );
    let _ = writeln!(
        y,
        "    permission: {:<18}# read | write | connect (reaches outside; refused once the session holds private data)",
        d.permission
    );
    let _ = writeln!(
        y,
        "    context: {:<21}# default | sql_query | log_search | a preset of this server's context_presets",
        d.context
    );
    let _ = writeln!(
        y,
        "    sensitivity: {:<17}# public | internal | confidential | secret (at least its connector's)",
        d.sensitivity
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
        "    async fn {tool}(&self, cx: ToolContext, args: {args}) -> bulkhead::codegen::ToolResult {{\n        // The wrapper has checked identity, mode, permission and arguments and raised the session\n        // before this runs; return the data (large results are truncated and saved for you).\n        let _ = cx;\n        Ok(bulkhead::codegen::ToolOutput::Text(format!(\"{tool}: {{}}\", args.text)))\n    }}\n",
        args = args_struct(tool)
    )
}

fn handler_module(server: &str, tools: &[&str]) -> String {
    let args: Vec<String> = tools.iter().map(|t| args_struct(t)).collect();
    let mut m = String::new();
    let _ = writeln!(m, "//! Handlers of the `{server}` server's Rust tools.\n");
    let _ = writeln!(m, "use bulkhead::codegen::ToolContext;");
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

pub(super) fn new_server(root: &Path, name: &str) -> anyhow::Result<Vec<(PathBuf, &'static str)>> {
    check_name("server", name)?;
    let spec = root.join("specs/servers").join(format!("{name}.yaml"));
    anyhow::ensure!(!spec.exists(), "{} exists already", spec.display());
    let module = root.join("src/handlers").join(format!("{name}.rs"));
    anyhow::ensure!(!module.exists(), "{} exists already", module.display());
    let tool = "hello";
    let text = format!(
        "# yaml-language-server: $schema=../schema/server.schema.json\nname: {name}\ninstructions: What this server is for, in a sentence or two the model reads.\ntools:\n{}",
        tool_yaml(tool, None, &HANDLER_DEFAULTS)
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

/// `spec` with `block` added at the end of its top-level `tools:` mapping, wherever that is
/// (before `resources:` or `prompts:`, say), or in a new `tools:` at the end.
fn insert_tool(spec: &str, block: &str) -> String {
    let lines: Vec<&str> = spec.lines().collect();
    let Some(start) = lines.iter().position(|l| l.trim_end() == "tools:") else {
        return format!("{}\ntools:\n{block}", spec.trim_end());
    };
    let top_level = |l: &str| !l.is_empty() && !l.starts_with([' ', '#']);
    let mut end = lines[start + 1..]
        .iter()
        .position(|l| top_level(l))
        .map_or(lines.len(), |p| start + 1 + p);
    // Blank lines and column-0 comments just before the next key belong to it.
    while end > start + 1 && (lines[end - 1].trim().is_empty() || lines[end - 1].starts_with('#')) {
        end -= 1;
    }
    let mut out = lines[..end].join("\n");
    out.push('\n');
    out.push_str(block);
    if end < lines.len() {
        out.push_str(&lines[end..].join("\n"));
        out.push('\n');
    }
    out
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
    let declared = match uses {
        Some(op) => declared_for(root, op)?,
        None => HANDLER_DEFAULTS,
    };
    let out = insert_tool(&text, &tool_yaml(tool, uses, &declared));
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
    fn a_connector_of_every_written_kind_passes_check() {
        use bulkhead_vocab::connector::ConnectorKind;
        for kind in ConnectorKind::ALL {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let made = new_connector(root, "stock", kind.as_str());
            if kind.example().is_none() {
                let e = made.expect_err("imported, not written").to_string();
                assert!(e.contains("bulkhead import mcp"), "{e}");
                continue;
            }
            made.unwrap();
            let text = std::fs::read_to_string(root.join("specs/connectors/stock.yaml")).unwrap();
            assert!(!text.contains("NAME"), "{text}");
            if let Err(e) = bulkhead_lang::load(&root.join("specs"), root) {
                panic!("`new connector --kind {kind}` does not pass check:\n{e}\n{text}");
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let e = new_connector(dir.path(), "stock", "ftp")
            .unwrap_err()
            .to_string();
        assert!(e.contains("one of files, sqlite"), "{e}");
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
        let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/project");
        std::fs::create_dir_all(root.join("specs/connectors")).unwrap();
        std::fs::copy(
            project.join("specs/connectors/records.yaml"),
            root.join("specs/connectors/records.yaml"),
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
        // `--uses` declares what the operation needs, so the specs still check.
        assert!(
            spec.contains("    permission: read ")
                && spec.contains("    context: sql_query ")
                && spec.contains("    sensitivity: confidential "),
            "{spec}"
        );
        bulkhead_lang::load(&root.join("specs"), root).unwrap_or_else(|e| panic!("{e}"));
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

    /// The shipped template spec has `resources:` and `prompts:` after `tools:`: a new tool goes
    /// into the `tools:` block and the specs still load.
    #[test]
    fn a_tool_joins_the_tools_block_wherever_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/project");
        for sub in ["servers", "connectors"] {
            std::fs::create_dir_all(root.join("specs").join(sub)).unwrap();
            for e in std::fs::read_dir(project.join("specs").join(sub)).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), root.join("specs").join(sub).join(e.file_name())).unwrap();
            }
        }
        std::fs::create_dir_all(root.join("src/handlers")).unwrap();
        std::fs::copy(
            project.join("src/handlers/template.rs"),
            root.join("src/handlers/template.rs"),
        )
        .unwrap();
        new_tool(root, "template", "lookup_owner", None).unwrap();
        new_tool(root, "template", "find_record", Some("records.get")).unwrap();
        let model =
            bulkhead_lang::load(&root.join("specs"), root).unwrap_or_else(|e| panic!("{e}"));
        let t = model.server("template").unwrap();
        let names: Vec<&str> = t.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(
            names.contains(&"lookup_owner") && names.contains(&"find_record"),
            "{names:?}"
        );
        assert!(!t.resources.is_empty() && !t.prompts.is_empty());
        let m = std::fs::read_to_string(root.join("src/handlers/template.rs")).unwrap();
        assert!(
            m.contains("async fn lookup_owner(") && m.contains("LookupOwnerArgs"),
            "{m}"
        );
    }
}
