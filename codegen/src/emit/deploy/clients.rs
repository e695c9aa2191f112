//! `clients/<deployment>.*`: how clients reach a deployment's servers. The `config.yaml`
//! `mcp_servers` entries name every instance (agents on the `agents` network switch between
//! them). The Claude Desktop, VS Code and Cursor files run `bulkhead connect <server>`, a stdio
//! server holding the isolating client, against the deployment as `bulkhead up` runs it here,
//! so confidential and secret tools reach their instances from those clients too.

use super::{Mode, ServerPlan, local, plan};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::{Deployment, Model};
use serde_json::{Map, Value, json};

/// Seconds a client waits for a result.
pub const READ_TIMEOUT: u64 = 60;

fn url(p: &ServerPlan, mode: Mode) -> Option<String> {
    p.instance(mode)
        .map(|i| format!("http://{}:{}/mcp", i.service, p.server.port))
}

/// `bulkhead connect` arguments reaching every instance of `p` as `bulkhead up` runs them.
fn connect_args(p: &ServerPlan) -> Vec<String> {
    let mut args = vec!["connect".to_string(), p.server.name.clone()];
    let index = u8::try_from(p.index).unwrap_or(u8::MAX);
    for inst in &p.instances {
        let flag = match inst.mode {
            Mode::Full => "--url",
            Mode::Proxied => "--url-proxied",
            Mode::None => "--url-isolated",
        };
        let addr = local::instance_addr(local::DEFAULT_SUBNET, index, inst.mode, p.server.port);
        args.push(flag.to_string());
        args.push(format!("http://{addr}/mcp"));
    }
    args
}

/// Adds the `mcp_servers` entries and the desktop client files of `d`.
pub fn emit(model: &Model, d: &Deployment, out: &mut Output) {
    let plans = plan(model, d);
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
        let args = connect_args(p);
        claude.insert(
            name.clone(),
            json!({
                "command": "bulkhead",
                "args": args,
                "env": { "BULKHEAD_TOKEN": "<token from `bulkhead token`>" },
            }),
        );
        vscode.insert(
            name.clone(),
            json!({
                "type": "stdio",
                "command": "bulkhead",
                "args": args,
                "env": { "BULKHEAD_TOKEN": "${input:bulkhead_token}" },
            }),
        );
        cursor.insert(
            name,
            json!({
                "command": "bulkhead",
                "args": args,
                "env": { "BULKHEAD_TOKEN": "${env:BULKHEAD_TOKEN}" },
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
