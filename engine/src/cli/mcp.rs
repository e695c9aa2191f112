//! `bulkhead mcp lock|check <connector>` and `bulkhead import mcp`: pinning the MCP servers
//! nobody here wrote. Nothing here decides a tool's permission or sensitivity: `import` leaves
//! both to a person, and the build refuses the tool until they are written.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bulkhead::connectors::mcp::{lockfile, pin};
use serde_json::Value;

/// `mcp` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Start the connector's upstream and write its lock (every listed tool pinned); review the
    /// change and commit it.
    Lock {
        /// The `mcp` connector (a file in specs/connectors/).
        connector: String,
        /// The package the upstream comes from, at its exact version (kept when not given).
        #[arg(long)]
        package: Option<String>,
    },
    /// Start the connector's upstream and report what drifted from its lock; exits 3 when a
    /// tool a spec uses drifted or vanished.
    Check {
        /// The `mcp` connector.
        connector: String,
    },
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// The connector's spec file and its settings, `${VAR}` expanded from the environment.
fn connector(root: &Path, name: &str) -> anyhow::Result<(PathBuf, Value)> {
    let (set, _) = bulkhead_lang::load::load_dir(&root.join("specs"), root)?;
    let c = set
        .connectors
        .iter()
        .find(|c| c.spec.name == name)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no connector named `{name}` in {}",
                root.join("specs/connectors").display()
            )
        })?;
    if c.spec.kind != bulkhead_lang::spec::ConnectorKind::Mcp {
        anyhow::bail!(
            "connector `{name}` is of kind `{}`, not `mcp`",
            c.spec.kind.as_str()
        );
    }
    let mut settings = c.spec.settings.clone().unwrap_or_default();
    bulkhead::config::expand(&mut settings, &bulkhead::config::env_lookup)?;
    Ok((c.file.path.with_extension("lock.json"), settings))
}

/// `bulkhead mcp …`.
pub fn run(root: &Path, action: Action) -> anyhow::Result<ExitCode> {
    match action {
        Action::Lock {
            connector: name,
            package,
        } => {
            let (lock_path, settings) = connector(root, &name)?;
            let old: Option<Value> = std::fs::read_to_string(&lock_path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
            let package = package.or_else(|| {
                old.as_ref()
                    .and_then(|o| o.get("package"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            let listing = runtime()?.block_on(lockfile::list(leak(&name), settings))?;
            let lock = lockfile::lock_json(&listing, package.as_deref());
            std::fs::write(&lock_path, serde_json::to_string_pretty(&lock)? + "\n")?;
            println!(
                "wrote {} ({}, protocol {}, {} tools pinned); review the change and commit it",
                lock_path.display(),
                listing.server,
                listing.protocol,
                listing.tools.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Action::Check { connector: name } => {
            let (lock_path, settings) = connector(root, &name)?;
            let text = std::fs::read_to_string(&lock_path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", lock_path.display()))?;
            let lock: bulkhead_lang::spec::McpLock = serde_json::from_str(&text)?;
            let used = used_tools(root, &name);
            let listing = runtime()?.block_on(lockfile::list(leak(&name), settings))?;
            let mut drifted = 0;
            if listing.server != lock.server {
                println!("upstream: {} (locked {})", listing.server, lock.server);
            }
            for (tool, locked) in &lock.tools {
                let live = listing.tools.iter().find(|(t, _)| t.name == *tool);
                let used_here = used.contains(tool);
                let note = if used_here {
                    "used"
                } else {
                    "not used by any spec"
                };
                match live {
                    None => {
                        println!("vanished: `{tool}` ({note})");
                        drifted += usize::from(used_here);
                    }
                    Some((_, d)) if pin::pin_of(d) != locked.pin => {
                        let fields = pin::changed_fields(&locked.definition, d);
                        println!("drifted: `{tool}` ({note}): {} changed", fields.join(", "));
                        drifted += usize::from(used_here);
                    }
                    Some(_) => {}
                }
            }
            for (t, _) in &listing.tools {
                if !lock.tools.contains_key(t.name.as_ref()) {
                    println!("new: `{}` (not pinned, not callable)", t.name);
                }
            }
            if drifted > 0 {
                println!(
                    "{drifted} used tool(s) drifted: they are refused until `bulkhead mcp lock {name}` is run and the lock reviewed"
                );
                return Ok(ExitCode::from(3));
            }
            println!("no used tool of `{name}` drifted from its lock");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Upstream tools some operation of connector `name` calls.
fn used_tools(root: &Path, name: &str) -> Vec<String> {
    let Ok((set, _)) = bulkhead_lang::load::load_dir(&root.join("specs"), root) else {
        return Vec::new();
    };
    set.connectors
        .iter()
        .filter(|c| c.spec.name == name)
        .flat_map(|c| c.spec.operations.values().filter_map(|o| o.tool.clone()))
        .collect()
}

/// `bulkhead import mcp`.
pub fn import(
    root: &Path,
    name: String,
    url: Option<String>,
    package: Option<String>,
    command: Vec<String>,
) -> anyhow::Result<ExitCode> {
    if !bulkhead_lang::check::is_snake_ident(&name) {
        anyhow::bail!("--name `{name}`: use lowercase letters, digits and `_`");
    }
    // `npx -y <package>` / `uvx <package>`: installed here first, at one exact version.
    let installed = super::runner::install(root, &name, &command)?;
    let (command, package) = match installed {
        Some(i) => {
            println!(
                "installed {} into .bulkhead/upstreams/{name} (the lock records it; the image installs it the same way)",
                i.package
            );
            (i.command, package.or(Some(i.package)))
        }
        None => (command, package),
    };
    let settings = match (&url, command.is_empty()) {
        (Some(u), true) => serde_json::json!({ "url": u }),
        (None, false) => serde_json::json!({ "command": command }),
        _ => anyhow::bail!(
            "give the command after `--` (stdio) or `--url` (Streamable HTTP), not both"
        ),
    };
    let conn_path = root.join(format!("specs/connectors/{name}.yaml"));
    let server_path = root.join(format!("specs/servers/{name}.yaml"));
    for p in [&conn_path, &server_path] {
        if p.exists() {
            anyhow::bail!("{} exists; remove it or choose another --name", p.display());
        }
    }
    let listing = runtime()?.block_on(lockfile::list(leak(&name), settings.clone()))?;
    let lock = lockfile::lock_json(&listing, package.as_deref());
    std::fs::create_dir_all(conn_path.parent().expect("has a parent"))?;
    std::fs::create_dir_all(server_path.parent().expect("has a parent"))?;
    std::fs::write(
        conn_path.with_extension("lock.json"),
        serde_json::to_string_pretty(&lock)? + "\n",
    )?;
    let (written, local) = portable(&name, &settings);
    std::fs::write(&conn_path, connector_yaml(&name, &written, &listing))?;
    std::fs::write(&server_path, server_yaml(&name, &listing))?;
    println!(
        "wrote {}, its lock, and {} ({} tools). Decide `permission` and `sensitivity` of each tool: the build refuses them until then.",
        conn_path.display(),
        server_path.display(),
        listing.tools.len()
    );
    if let Some((var, path)) = local {
        println!(
            "the spec starts the program by name (the image installs it from the lock's package); on this machine, run with {var}={path}"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The settings as the spec should hold them: a program given by path (this machine's, such as
/// `/tmp/x/node_modules/.bin/server`) becomes `${MCP_<NAME>:-<file name>}`, found on `PATH`
/// where the image installs it; returns the variable and this machine's path to say so.
fn portable(name: &str, settings: &Value) -> (Value, Option<(String, String)>) {
    let mut settings = settings.clone();
    let Some(program) = settings
        .get("command")
        .and_then(|c| c.get(0))
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return (settings, None);
    };
    if !program.contains('/') {
        return (settings, None);
    }
    let Some(file) = Path::new(&program).file_name().and_then(|f| f.to_str()) else {
        return (settings, None);
    };
    let var = format!("MCP_{}", name.to_ascii_uppercase());
    settings["command"][0] = Value::String(format!("${{{var}:-{file}}}"));
    (settings, Some((var, program)))
}

/// A spec identifier for an upstream tool name (MCP names may hold `-`, `.`, capitals).
fn ident(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 && !out.ends_with('_') {
            out.push('_');
        }
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.starts_with(|c: char| c.is_ascii_digit()) || out.is_empty() {
        format!("t_{out}")
    } else {
        out
    }
}

/// YAML text of a string (JSON is YAML).
fn q(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn connector_yaml(name: &str, settings: &Value, listing: &lockfile::Listing) -> String {
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# yaml-language-server: $schema=../schema/connector.schema.json"
    );
    let _ = writeln!(
        y,
        "# Imported by `bulkhead import mcp` from {}.",
        listing.server
    );
    let _ = writeln!(
        y,
        "# Descriptions below come from the upstream: untrusted text, reviewed here."
    );
    let _ = writeln!(y, "name: {name}");
    let _ = writeln!(y, "kind: mcp");
    let _ = writeln!(
        y,
        "description: {}",
        q(&format!("MCP server {} (imported)", listing.server))
    );
    let _ = writeln!(
        y,
        "# The least sensitivity of what the upstream reads: raise it if it reads private data."
    );
    let _ = writeln!(y, "sensitivity: public");
    let _ = writeln!(y, "settings:");
    if let Some(cmd) = settings.get("command") {
        let _ = writeln!(y, "  command: {cmd}");
    }
    if let Some(url) = settings.get("url").and_then(Value::as_str) {
        let _ = writeln!(y, "  url: {}", q(url));
    }
    let _ = writeln!(y, "operations:");
    for (t, _) in &listing.tools {
        let _ = writeln!(y, "  {}:", ident(&t.name));
        let _ = writeln!(y, "    tool: {}", q(&t.name));
        if let Some(d) = &t.description {
            let _ = writeln!(y, "    description: {}", q(first_line(d)));
        }
        let params = params_yaml(&Value::Object((*t.input_schema).clone()));
        if !params.is_empty() {
            let _ = writeln!(y, "    params:");
            y.push_str(&params);
        }
    }
    y
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default().trim()
}

/// The declared parameters of an input schema (best effort: unsupported types become a
/// comment the author must resolve, so the build stops there).
fn params_yaml(schema: &Value) -> String {
    let mut y = String::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return y;
    };
    for (pname, p) in props {
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
        let ty = match ty {
            "string" | "integer" | "number" | "boolean" | "array" => ty,
            other => {
                let _ = writeln!(
                    y,
                    "      # `{pname}`: type `{other}` has no spec form; declare it by hand"
                );
                continue;
            }
        };
        let ty = if p.get("enum").is_some() { "enum" } else { ty };
        let ours = ident(pname);
        let _ = writeln!(y, "      {ours}:");
        let _ = writeln!(y, "        type: {ty}");
        if &ours != pname {
            // The upstream's own name, checked against the pinned schema at build time.
            let _ = writeln!(y, "        upstream: {}", q(pname));
        }
        let desc = p
            .get("description")
            .and_then(Value::as_str)
            .map(first_line)
            .filter(|d| !d.is_empty())
            .unwrap_or("(no description upstream)");
        let _ = writeln!(y, "        description: {}", q(desc));
        for (from, to) in [
            ("minLength", "min_length"),
            ("maxLength", "max_length"),
            ("minimum", "minimum"),
            ("maximum", "maximum"),
            ("pattern", "pattern"),
        ] {
            if let Some(v) = p.get(from) {
                let _ = writeln!(y, "        {to}: {v}");
            }
        }
        if let Some(values) = p.get("enum") {
            let _ = writeln!(y, "        values: {values}");
        }
        if ty == "array"
            && let Some(it) = p.pointer("/items/type").and_then(Value::as_str)
        {
            let _ = writeln!(y, "        items: {{ type: {it} }}");
        }
        if let Some(d) = p.get("default") {
            let _ = writeln!(y, "        default: {d}");
        } else if !required.contains(&pname.as_str()) {
            let _ = writeln!(y, "        optional: true");
        }
    }
    y
}

fn server_yaml(name: &str, listing: &lockfile::Listing) -> String {
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# yaml-language-server: $schema=../schema/server.schema.json"
    );
    let _ = writeln!(
        y,
        "# Imported by `bulkhead import mcp` from {}.",
        listing.server
    );
    let _ = writeln!(y, "# Each tool needs a person's decision before it builds:");
    let _ = writeln!(
        y,
        "#   permission: read | write | connect   (what it does to data and the network)"
    );
    let _ = writeln!(
        y,
        "#   sensitivity: public | internal | confidential | secret   (what it reads)"
    );
    let _ = writeln!(
        y,
        "# The upstream's own hints are listed as comments; they are untrusted and decide nothing."
    );
    let _ = writeln!(y, "name: {name}");
    let _ = writeln!(
        y,
        "instructions: {}",
        q(&format!(
            "Tools of {} behind Bulkhead's policy.",
            listing.server
        ))
    );
    let _ = writeln!(y, "tools:");
    for (t, _) in &listing.tools {
        let op = ident(&t.name);
        let _ = writeln!(y, "  {op}:");
        let desc = t
            .description
            .as_deref()
            .map(first_line)
            .filter(|d| !d.is_empty())
            .unwrap_or("(no description upstream)");
        let _ = writeln!(y, "    description: {}", q(desc));
        if let Some(a) = &t.annotations {
            let hints: Vec<String> = [
                ("readOnlyHint", a.read_only_hint),
                ("destructiveHint", a.destructive_hint),
                ("idempotentHint", a.idempotent_hint),
                ("openWorldHint", a.open_world_hint),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
            .collect();
            if !hints.is_empty() {
                let _ = writeln!(y, "    # upstream hints: {}", hints.join(", "));
            }
        }
        let _ = writeln!(y, "    context: default");
        let _ = writeln!(y, "    uses: {name}.{op}");
    }
    y
}
