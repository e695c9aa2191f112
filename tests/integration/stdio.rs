//! stdio serving in a spawned `bulkhead` process: protocol only on stdout, identity from config.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn stdio_speaks_only_protocol_on_stdout_and_uses_the_configured_identity() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    let d = dir.path().display();
    std::fs::write(
        &cfg,
        format!("auth:\n  issuer: i\n  audience: a\n  keys: [{{ alg: HS256, secret: stdio-test-secret-0123456789abcdef0123 }}]\nstate:\n  dir: {d}/state\n  workspaces: {d}/ws\nstdio:\n  user: carol\n  session: desk-1\n"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args([
            "--config",
            cfg.to_str().unwrap(),
            "serve",
            "template",
            "--transport",
            "stdio",
        ])
        .env("BULKHEAD_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bulkhead");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = || {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line)
            .unwrap_or_else(|e| panic!("stdout carried a non-protocol line {line:?}: {e}"))
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    let init = recv();
    assert_eq!(init["result"]["serverInfo"]["name"], "bulkhead-template");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": "/workspace/n.txt", "content": "from stdio"}}}),
    );
    let r = recv();
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(r["result"]["_meta"]["bulkhead/sensitivity"], "internal");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "server exits cleanly when the client closes stdin"
    );
    let written =
        std::fs::read_to_string(dir.path().join("ws/template/carol/desk-1/n.txt")).unwrap();
    assert_eq!(
        written, "from stdio",
        "the call ran as the configured stdio identity"
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("serving on stdio"),
        "logs go to stderr: {stderr}"
    );
}
