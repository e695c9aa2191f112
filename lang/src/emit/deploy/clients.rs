//! `clients/<deployment>.*`: how clients reach a deployment's servers. The `config.yaml`
//! `mcp_servers` entries name every instance (agents on the `agents` network switch between
//! them). The Claude Desktop, VS Code and Cursor files run `bulkhead connect <server>`, a stdio
//! server holding the isolating client, so confidential and secret tools reach their instances
//! from those clients too: `<deployment>.compose.<client>.json` against the compose deployment
//! (its ports published on 127.0.0.1), `<deployment>.up.<client>.json` against `bulkhead up`.

use super::{NetworkMode, ServerPlan, local, plan};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::{Deployment, Model};
use serde_json::{Map, Value, json};

/// Seconds a client waits for a result.
pub const READ_TIMEOUT: u64 = 60;

fn url(p: &ServerPlan, mode: NetworkMode) -> Option<String> {
    p.instance(mode)
        .map(|i| format!("http://{}:{}/mcp", i.service, p.server.port))
}

/// How a desktop client on this machine reaches the deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    /// `docker compose up` on the generated file: every instance published on 127.0.0.1.
    Compose,
    /// `bulkhead up`: the isolated instances in network namespaces.
    Up,
}

impl Runner {
    fn as_str(self) -> &'static str {
        match self {
            Runner::Compose => "compose",
            Runner::Up => "up",
        }
    }
}

/// The `bulkhead connect` option that names the instance in `mode` (`--url`, `--url-proxied`,
/// `--url-isolated`).
pub fn url_flag(mode: NetworkMode) -> &'static str {
    match mode {
        NetworkMode::Full => "--url",
        NetworkMode::Proxied => "--url-proxied",
        NetworkMode::None => "--url-isolated",
    }
}

/// The `mcp_servers` key that holds the URL of the instance in `mode` (`url`, `url_proxied`,
/// `url_isolated`).
pub fn url_key(mode: NetworkMode) -> &'static str {
    match mode {
        NetworkMode::Full => "url",
        NetworkMode::Proxied => "url_proxied",
        NetworkMode::None => "url_isolated",
    }
}

/// `bulkhead connect` arguments reaching every instance of `p` as `runner` runs them.
pub fn connect_args(p: &ServerPlan, runner: Runner) -> Vec<String> {
    let mut args = vec!["connect".to_string(), p.server.name.clone()];
    let index = u8::try_from(p.index).unwrap_or(u8::MAX);
    for inst in &p.instances {
        let flag = url_flag(inst.mode);
        let addr = match runner {
            Runner::Compose => format!("127.0.0.1:{}", p.host_port(inst.mode)),
            Runner::Up => {
                local::instance_addr(local::DEFAULT_SUBNET, index, inst.mode, p.server.port)
                    .to_string()
            }
        };
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
        for mode in NetworkMode::ALL {
            if let Some(u) = url(p, mode) {
                e.insert(url_key(mode).into(), json!(u));
            }
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

    // With a native or device client configured, `bulkhead connect` signs the user in itself.
    let signs_in = ["native_client_id", "device_client_id"].iter().any(|key| {
        model
            .config
            .as_ref()
            .and_then(|c| c.pointer(&format!("/token_service/login/{key}")))
            .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    });
    for runner in [Runner::Compose, Runner::Up] {
        desktop_files(d, &plans, runner, signs_in, out);
    }
}

/// The Claude Desktop, VS Code and Cursor files of `d` run by `runner`. When `signs_in`, the
/// entries carry no token: `bulkhead connect` signs the user in (device grant) and exchanges and
/// refreshes per start.
fn desktop_files(
    d: &Deployment,
    plans: &[ServerPlan],
    runner: Runner,
    signs_in: bool,
    out: &mut Output,
) {
    let how = match runner {
        Runner::Compose => format!(
            "For the compose deployment (docker compose -f generated/compose/{}.yaml up), its ports published on 127.0.0.1.",
            d.name
        ),
        Runner::Up => format!(
            "For `bulkhead up --deployment {}` on this machine (isolated instances in network namespaces).",
            d.name
        ),
    };
    let token = if signs_in {
        "No token here: `bulkhead connect` signs you in at the identity provider (in a browser, or with `--device` by a code), then exchanges for a session token and refreshes it."
    } else {
        "BULKHEAD_TOKEN is a session token (exchange the identity provider's at the deployment's POST /token; on the development defaults `bulkhead token` prints one), or leave it out and set token_service.login.native_client_id or device_client_id so `bulkhead connect` signs you in."
    };
    let note = format!(
        "{} {how} {token}",
        header("", &[&d.source]).replace('\n', " ").trim()
    );
    let mut claude = Map::new();
    let mut vscode = Map::new();
    let mut cursor = Map::new();
    let env = |value: &str| {
        if signs_in {
            json!({})
        } else {
            json!({ "BULKHEAD_TOKEN": value })
        }
    };
    for p in plans {
        let name = p.server.name.clone();
        let args = connect_args(p, runner);
        claude.insert(
            name.clone(),
            json!({
                "command": "bulkhead",
                "args": args,
                "env": env("<token from `bulkhead token`>"),
            }),
        );
        vscode.insert(
            name.clone(),
            json!({
                "type": "stdio",
                "command": "bulkhead",
                "args": args,
                "env": env("${input:bulkhead_token}"),
            }),
        );
        cursor.insert(
            name,
            json!({
                "command": "bulkhead",
                "args": args,
                "env": env("${env:BULKHEAD_TOKEN}"),
            }),
        );
    }
    let inputs = if signs_in {
        json!([])
    } else {
        json!([{
            "type": "promptString",
            "id": "bulkhead_token",
            "description": "Bulkhead session token (`bulkhead token`, or an exchanged one)",
            "password": true,
        }])
    };
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
        out.add(
            format!("clients/{}.{}.{client}.json", d.name, runner.as_str()),
            text,
        );
    }
}
