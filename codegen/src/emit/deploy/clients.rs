//! `clients/<deployment>.*`: how clients reach a deployment's servers. The `config.yaml`
//! `mcp_servers` entries name every instance (agents on the `agents` network switch between
//! them); the Claude Desktop, VS Code and Cursor files reach the full instance published on
//! this machine's loopback.

use super::{Mode, ServerPlan, plan};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::Deployment;
use serde_json::{Map, Value, json};

/// Seconds a client waits for a result.
pub const READ_TIMEOUT: u64 = 60;

fn url(p: &ServerPlan, mode: Mode) -> Option<String> {
    p.instance(mode)
        .map(|i| format!("http://{}:{}/mcp", i.service, p.server.port))
}

fn local_url(p: &ServerPlan) -> String {
    format!("http://localhost:{}/mcp", p.server.port)
}

/// Adds the `mcp_servers` entries and the desktop client files of `d`.
pub fn emit(d: &Deployment, out: &mut Output) {
    let plans = plan(d);
    let mut entries = Map::new();
    for p in &plans {
        let mut e = Map::new();
        e.insert("type".into(), json!("client"));
        e.insert("url".into(), json!(url(p, Mode::Full)));
        if let Some(u) = url(p, Mode::Proxied) {
            e.insert("url_proxied".into(), json!(u));
        }
        if let Some(u) = url(p, Mode::None) {
            e.insert("url_isolated".into(), json!(u));
        }
        e.insert("read_timeout".into(), json!(READ_TIMEOUT));
        e.insert("trusted".into(), json!(true));
        entries.insert(p.server.name.clone(), Value::Object(e));
    }
    let mut text = header("#", &[&d.source]);
    text.push_str(&format!(
        "# `mcp_servers` entries for config.yaml: an agent on the `{}` deployment's `agents` network\n\
         # reaches every instance and moves to a more isolated one as its session's level rises.\n",
        d.name
    ));
    text.push_str(&to_yaml(&json!({ "mcp_servers": entries })));
    out.add(format!("clients/{}.yaml", d.name), text);

    let note = header("", &[&d.source])
        .replace('\n', " ")
        .trim()
        .to_string();
    let mut claude = Map::new();
    let mut vscode = Map::new();
    let mut cursor = Map::new();
    for p in &plans {
        let name = p.server.name.clone();
        claude.insert(
            name.clone(),
            json!({
                "command": "npx",
                "args": ["mcp-remote", local_url(p), "--header", "Authorization:${AUTH_HEADER}"],
                "env": { "AUTH_HEADER": "Bearer <token from `bulkhead token`>" },
            }),
        );
        vscode.insert(
            name.clone(),
            json!({
                "type": "http",
                "url": local_url(p),
                "headers": { "Authorization": "Bearer ${input:bulkhead_token}" },
            }),
        );
        cursor.insert(
            name,
            json!({
                "url": local_url(p),
                "headers": { "Authorization": "Bearer ${env:BULKHEAD_TOKEN}" },
            }),
        );
    }
    let inputs = json!([{
        "type": "promptString",
        "id": "bulkhead_token",
        "description": "Bulkhead bearer token (`bulkhead token`)",
        "password": true,
    }]);
    let files = [
        (
            "claude_desktop",
            json!({ "//": note, "mcpServers": claude }),
        ),
        (
            "vscode",
            json!({ "//": note, "inputs": inputs, "servers": vscode }),
        ),
        ("cursor", json!({ "//": note, "mcpServers": cursor })),
    ];
    for (client, doc) in files {
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        out.add(format!("clients/{}.{client}.json", d.name), text);
    }
}
