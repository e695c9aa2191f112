//! `bulkhead import`: specs from what teams already describe. `mcp` lists an MCP server
//! ([`super::mcp`]); `openapi` reads an OpenAPI 3.0 or 3.1 document ([`openapi`]); `toolbox`
//! reads an MCP Toolbox `tools.yaml` ([`toolbox`]).
//!
//! Nothing here decides a tool's permission, sensitivity or approval: an OpenAPI or Toolbox
//! import writes a proposal and says why (`undecided:`), and the build refuses the tool until a
//! person confirms it. Importing again is a diff ([`merge`]): every decision a person made is
//! kept, and an operation the document changed is asked again. A document that cannot be
//! imported gets diagnostics at its own paths (`paths./pet/{petId}.delete.parameters[1]`) and
//! nothing is written.

mod emit;
mod merge;
mod openapi;
mod schema;
mod toolbox;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

/// `import` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Import {
    /// List an MCP server and write its connector spec, its lock, and a server spec listing
    /// every tool with `permission` and `sensitivity` left for a person to decide.
    Mcp {
        /// Name of the connector and the server spec to write.
        #[arg(long)]
        name: String,
        /// Reach it over Streamable HTTP instead of launching the command.
        #[arg(long)]
        url: Option<String>,
        /// The package it comes from, at its exact version (recorded in the lock).
        #[arg(long)]
        package: Option<String>,
        /// The command that launches it over stdio.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Read an OpenAPI 3.0 or 3.1 document (JSON or YAML, a file or an http(s) URL) and write an
    /// `http` connector (one operation per path and method) and a server spec whose tools are
    /// proposed, undecided. Again after the document changed: a diff that keeps decisions.
    Openapi {
        /// The document: a file, or an `https://` (or loopback `http://`) URL.
        source: String,
        /// Name of the connector and the server spec.
        #[arg(long)]
        server: String,
        /// Only these operations: tags or operationIds (repeatable, or comma-separated).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// The service's base URL when the document's `servers[0].url` is relative or absent.
        #[arg(long)]
        base_url: Option<String>,
        /// Import the operations that can be, listing each that cannot with its reason
        /// (without it, one that cannot is an error and nothing is written).
        #[arg(long)]
        skip_unsupported: bool,
    },
    /// Read an MCP Toolbox `tools.yaml`: its postgres, sqlite and http sources become
    /// connectors, its SQL tools operations, its tools proposed and undecided; kinds that have
    /// no counterpart here are listed with the reason.
    Toolbox {
        /// The `tools.yaml` file.
        file: PathBuf,
        /// Name of the server spec (connectors are named `<server>_<source>`).
        #[arg(long)]
        server: String,
    },
}

/// Runs an import.
pub fn run(root: &Path, what: Import) -> anyhow::Result<ExitCode> {
    let imported = match what {
        Import::Mcp {
            name,
            url,
            package,
            command,
        } => return super::mcp::import(root, name, url, package, command),
        Import::Openapi {
            source,
            server,
            only,
            base_url,
            skip_unsupported,
        } => {
            check_name(&server)?;
            let text = read_source(&source)?;
            openapi::import(
                &text,
                &source,
                &openapi::Options {
                    server: &server,
                    only: &only,
                    base_url: base_url.as_deref(),
                    skip_unsupported,
                },
            )
        }
        Import::Toolbox { file, server } => {
            check_name(&server)?;
            let text = std::fs::read_to_string(&file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            toolbox::import(&text, &file.display().to_string(), &server)
        }
    };
    let imported = match imported {
        Ok(i) => i,
        Err(diags) => {
            for d in &diags {
                eprintln!("error: {}: {}", d.at, d.message);
            }
            eprintln!(
                "nothing written: {} problem(s) in the document",
                diags.len()
            );
            return Ok(ExitCode::from(1));
        }
    };
    merge::write(root, imported)
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if !bulkhead_lang::check::is_snake_ident(name) {
        anyhow::bail!("--server `{name}`: use lowercase letters, digits and `_`");
    }
    Ok(())
}

/// Largest document read, in bytes.
const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// The document's text: a file, or fetched (https, or http on loopback).
fn read_source(source: &str) -> anyhow::Result<String> {
    if !(source.starts_with("http://") || source.starts_with("https://")) {
        let bytes = std::fs::read(source).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
        if bytes.len() > MAX_DOCUMENT_BYTES {
            anyhow::bail!("{source}: larger than 16 MiB");
        }
        return String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{source}: not UTF-8"));
    }
    let url = reqwest::Url::parse(source).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    let loopback = matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    if url.scheme() == "http" && !loopback {
        anyhow::bail!("{source}: fetch documents over https (http only on loopback)");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let resp = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()?
            .get(url)
            .send()
            .await?
            .error_for_status()?;
        let bytes = resp.bytes().await?;
        if bytes.len() > MAX_DOCUMENT_BYTES {
            anyhow::bail!("{source}: larger than 16 MiB");
        }
        String::from_utf8(bytes.to_vec()).map_err(|_| anyhow::anyhow!("{source}: not UTF-8"))
    })
}

/// A problem at a place in the imported document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Diag {
    /// Where: the document's path to the element (`paths./pet.post.requestBody`).
    pub at: String,
    /// What is wrong.
    pub message: String,
}

impl Diag {
    pub(crate) fn new(at: impl Into<String>, message: impl Into<String>) -> Diag {
        Diag {
            at: at.into(),
            message: message.into(),
        }
    }
}

/// What an import produced, before anything is written.
#[derive(Debug, Default)]
pub(crate) struct Imported {
    /// Where it came from (for the files' first comment).
    pub source: String,
    /// What kind of document (`OpenAPI 3.0.4`, `MCP Toolbox tools.yaml`).
    pub format: String,
    /// The server spec's name.
    pub server: String,
    /// Its instructions.
    pub instructions: String,
    /// The connectors, each with its operations.
    pub connectors: Vec<Connector>,
    /// One proposed tool per operation.
    pub tools: Vec<Proposal>,
    /// What was not imported, and why (never silently dropped).
    pub skipped: Vec<Diag>,
    /// What a person should know (a left-out optional field, a scheme configured by hand).
    pub notes: Vec<String>,
}

/// A connector spec to write.
#[derive(Debug)]
pub(crate) struct Connector {
    pub name: String,
    pub kind: &'static str,
    pub description: String,
    /// The least sensitivity of what it reads.
    pub sensitivity: &'static str,
    /// `settings:`, as JSON (written in this key order).
    pub settings: Vec<(String, Value)>,
    /// Comments above a settings key.
    pub settings_comments: Vec<(String, String)>,
    pub secrets: Vec<String>,
    pub operations: Vec<Operation>,
}

/// A parameter: its name and its spec's keys, in the spec's order.
pub(crate) type Param = (String, Vec<(String, Value)>);

/// A connector operation to write.
#[derive(Clone, Debug, Default)]
pub(crate) struct Operation {
    pub name: String,
    pub description: String,
    /// `http`: the method and path template.
    pub method: Option<String>,
    pub path: Option<String>,
    /// `sqlite`, `postgres`: the statement.
    pub sql: Option<String>,
    pub params: Vec<Param>,
    pub query: Vec<String>,
    pub body: Vec<String>,
    pub headers: Vec<String>,
    /// `http`: the JSON Schema of the answer, when it is an object.
    pub result_schema: Option<Value>,
}

impl Operation {
    /// The operation as its spec's JSON (what a re-import compares).
    pub(crate) fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert(
            "description".into(),
            Value::String(self.description.clone()),
        );
        if let Some(v) = &self.method {
            m.insert("method".into(), Value::String(v.clone()));
        }
        if let Some(v) = &self.path {
            m.insert("path".into(), Value::String(v.clone()));
        }
        if let Some(v) = &self.sql {
            m.insert("sql".into(), Value::String(v.clone()));
        }
        if !self.params.is_empty() {
            let params = self
                .params
                .iter()
                .map(|(n, fields)| (n.clone(), Value::Object(fields.iter().cloned().collect())))
                .collect();
            m.insert("params".into(), Value::Object(params));
        }
        for (key, list) in [
            ("query", &self.query),
            ("body", &self.body),
            ("headers", &self.headers),
        ] {
            if !list.is_empty() {
                m.insert(key.into(), serde_json::json!(list));
            }
        }
        if let Some(schema) = &self.result_schema {
            m.insert("result_schema".into(), schema.clone());
        }
        Value::Object(m)
    }
}

/// A tool proposed for an operation: what a person confirms or changes.
#[derive(Clone, Debug)]
pub(crate) struct Proposal {
    pub name: String,
    pub description: String,
    pub permission: &'static str,
    pub sensitivity: &'static str,
    pub context: &'static str,
    /// `always` when the operation changes data.
    pub approval: bool,
    /// `connector.operation`.
    pub uses: String,
    /// What the operation is, for the report (`DELETE /pet/{petId}`).
    pub what: String,
    /// Why these were proposed.
    pub why: String,
}

/// A spec name for a document's name (`petId` → `pet_id`, `X-Request-ID` → `x_request_id`),
/// valid as a spec identifier (a Rust keyword gets a trailing `_`).
pub(crate) fn ident(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    let mut out = out.trim_matches('_').to_string();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out = format!("n_{out}");
    }
    out.truncate(60);
    let out = out.trim_end_matches('_').to_string();
    if bulkhead_lang::check::is_snake_ident(&out) {
        out
    } else {
        format!("{out}_")
    }
}

/// `name`, or `name_2`, `name_3`, … when `taken` has it.
pub(crate) fn unique(name: String, taken: &mut std::collections::BTreeSet<String>) -> String {
    let mut candidate = name.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{name}_{n}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// The first line of a text, trimmed and at most 300 characters.
pub(crate) fn first_line(s: &str) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    line.chars().take(300).collect()
}

/// The files an import writes, under `root`.
pub(crate) fn connector_path(root: &Path, name: &str) -> PathBuf {
    root.join(format!("specs/connectors/{name}.yaml"))
}

/// The server spec an import writes.
pub(crate) fn server_path(root: &Path, name: &str) -> PathBuf {
    root.join(format!("specs/servers/{name}.yaml"))
}
