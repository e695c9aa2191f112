//! The text of the specs an import writes: block YAML with every value written as JSON (a JSON
//! scalar, list or object is YAML too), so no value is read back as anything else.

use std::fmt::Write as _;

use serde_json::Value;

use super::{Connector, Imported};

/// The first line of every file an import writes: a re-import recognises its own files by it.
pub(crate) const MARK: &str = "# Imported by `bulkhead import";

fn j(v: &Value) -> String {
    v.to_string()
}

fn q(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A comment of untrusted text: one line, no control characters.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A connector spec.
pub(crate) fn connector(imp: &Imported, c: &Connector) -> String {
    let mut y = String::new();
    let _ = writeln!(
        y,
        "{MARK} {}` from {} ({}).",
        what(imp),
        comment(&imp.source),
        imp.format
    );
    let _ = writeln!(
        y,
        "# yaml-language-server: $schema=../schema/connector.schema.json"
    );
    let _ = writeln!(
        y,
        "# Importing again replaces the operations (edits here are overwritten); decisions live in"
    );
    let _ = writeln!(
        y,
        "# specs/servers/{}.yaml. Descriptions come from the document: untrusted text, reviewed here.",
        imp.server
    );
    let _ = writeln!(y, "name: {}", c.name);
    let _ = writeln!(y, "kind: {}", c.kind);
    let _ = writeln!(y, "description: {}", q(&c.description));
    let _ = writeln!(
        y,
        "# The least sensitivity of what the service returns: raise it if it holds private data."
    );
    let _ = writeln!(y, "sensitivity: {}", c.sensitivity);
    let _ = writeln!(y, "settings:");
    for (k, v) in &c.settings {
        for (key, text) in &c.settings_comments {
            if key == k {
                let _ = writeln!(y, "  # {}", comment(text));
            }
        }
        let _ = writeln!(y, "  {k}: {}", j(v));
    }
    if !c.secrets.is_empty() {
        let _ = writeln!(y, "secrets: {}", j(&serde_json::json!(c.secrets)));
    }
    let _ = writeln!(y, "operations:");
    for op in &c.operations {
        let _ = writeln!(y, "  {}:", op.name);
        let _ = writeln!(y, "    description: {}", q(&op.description));
        if let Some(m) = &op.method {
            let _ = writeln!(y, "    method: {m}");
        }
        if let Some(p) = &op.path {
            let _ = writeln!(y, "    path: {}", q(p));
        }
        if !op.params.is_empty() {
            let _ = writeln!(y, "    params:");
            for (name, fields) in &op.params {
                let _ = writeln!(y, "      {name}:");
                for (k, v) in fields {
                    let _ = writeln!(y, "        {k}: {}", j(v));
                }
            }
        }
        if let Some(sql) = &op.sql {
            let _ = writeln!(y, "    sql: {}", q(sql));
        }
        for (key, list) in [
            ("query", &op.query),
            ("body", &op.body),
            ("headers", &op.headers),
        ] {
            if !list.is_empty() {
                let _ = writeln!(y, "    {key}: {}", j(&serde_json::json!(list)));
            }
        }
        if let Some(schema) = &op.result_schema {
            let _ = writeln!(y, "    result_schema: {}", j(schema));
        }
    }
    y
}

fn what(imp: &Imported) -> &'static str {
    if imp.format.starts_with("OpenAPI") {
        "openapi"
    } else {
        "toolbox"
    }
}

/// One tool of a server spec: its keys as JSON, written in the spec's usual order.
pub(crate) type Tool = (String, serde_json::Map<String, Value>);

/// A server spec: `tools` in order, and the other sections the file had (kept as they were).
pub(crate) fn server(
    imp: &Imported,
    instructions: &str,
    tools: &[Tool],
    other: &serde_json::Map<String, Value>,
) -> String {
    let mut y = String::new();
    let _ = writeln!(
        y,
        "{MARK} {}` from {} ({}).",
        what(imp),
        comment(&imp.source),
        imp.format
    );
    let _ = writeln!(
        y,
        "# yaml-language-server: $schema=../schema/server.schema.json"
    );
    for line in [
        "# Each imported tool is a proposal: the build refuses it while `undecided:` is there. Confirm",
        "# or change `permission`, `sensitivity` and `approval`, then delete `undecided:`. Importing",
        "# again keeps every decision; a tool whose operation the document changed is asked again.",
        "# Comments in this file are not kept by a re-import.",
    ] {
        let _ = writeln!(y, "{line}");
    }
    for d in &imp.skipped {
        let _ = writeln!(
            y,
            "# not imported: {}: {}",
            comment(&d.at),
            comment(&d.message)
        );
    }
    let _ = writeln!(y, "name: {}", imp.server);
    let _ = writeln!(y, "instructions: {}", q(instructions));
    let _ = writeln!(y, "tools:");
    const ORDER: [&str; 7] = [
        "description",
        "permission",
        "sensitivity",
        "approval",
        "context",
        "uses",
        "undecided",
    ];
    for (name, fields) in tools {
        let _ = writeln!(y, "  {name}:");
        for k in ORDER {
            if let Some(v) = fields.get(k) {
                let _ = writeln!(y, "    {k}: {}", j(v));
            }
        }
        for (k, v) in fields {
            if !ORDER.contains(&k.as_str()) {
                let _ = writeln!(y, "    {k}: {}", j(v));
            }
        }
    }
    for (k, v) in other {
        let _ = writeln!(y, "{k}: {}", j(v));
    }
    y
}
