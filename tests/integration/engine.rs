//! The generated compose deployment on a real container engine (Debian's `docker.io` and
//! `docker-compose`), unchanged but for a test override that makes every network `internal`,
//! gives the webhook's host name to a listener container on the egress network (with a test CA)
//! and nothing else: no container can reach past this machine.
//!
//! Images are built from `generated/docker/` with the binary this run built; the seeds'
//! scenarios run with the official MCP Python SDK from an agent container on the `agents` network
//! and through `bulkhead connect` on the host; isolation is checked from inside the containers.

#[path = "../support/engine.rs"]
#[expect(
    clippy::module_inception,
    reason = "the shared engine helpers, by path"
)]
mod engine;
use crate::tls;

use engine::{Project, docker, output, run};
use rmcp::ServiceExt;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const ISSUER: &str = "bulkhead-dev";
const AUDIENCE: &str = "bulkhead";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let file = bulkhead_codegen::source::SourceFile::in_memory(path.display().to_string(), &text);
    bulkhead_codegen::yaml::parse(&file)
        .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()))
        .to_json()
}

fn token(secret: &str, user: &str, session: &str) -> String {
    let claims = bulkhead::auth::MintClaims {
        sub: user.into(),
        session_id: session.into(),
        iss: ISSUER.into(),
        aud: AUDIENCE.into(),
        ttl_secs: 900,
    };
    bulkhead::auth::mint::mint_hs256(secret.as_bytes(), &claims).unwrap()
}

/// The test's documentation site (`fetch_page`'s one host), plain HTTP on `egress`.
const DOCS: &str = "docs.example.com:80";

/// The engine's crates, members of this workspace: their manifests and sources are image inputs.
const ENGINE_CRATES: [&str; 4] = ["engine/", "lang/", "codegen/", "vocab/"];

/// The subnet of the test's stand-in for the outside (benchmarking range, opened for the test).
const EGRESS_SUBNET: &str = "198.18.7.0/24";

/// The test override: every network internal, the webhook host a listener on `egress`, the
/// proxies' policies with that subnet opened (`internal_ranges`).
fn override_file(dir: &Path, compose: &Value, agent: &str, tls: &Path) -> PathBuf {
    let mut networks = serde_json::Map::new();
    for name in compose["networks"].as_object().unwrap().keys() {
        networks.insert(name.clone(), json!({ "internal": true }));
    }
    // The listener standing in for hooks.example.com sits on `egress`, a subnet of the
    // benchmarking range that squid refuses like every special-purpose range: the test says so
    // as a deployment would, naming the range (`internal_ranges`) in the proxy's policy.
    networks.insert(
        "egress".into(),
        json!({ "internal": true, "ipam": { "config": [{ "subnet": EGRESS_SUBNET }] } }),
    );
    let ca = tls.join("ca.pem").display().to_string();
    let mut services = serde_json::Map::new();
    // The instances that run the webhook tool trust the listener's test CA; those that run
    // `fetch_page` may reach the test's documentation site.
    for (name, svc) in compose["services"].as_object().unwrap() {
        if svc["environment"].get("FETCH_EGRESS").is_some() {
            services.insert(
                name.clone(),
                json!({ "environment": { "FETCH_EGRESS": DOCS } }),
            );
        }
        if svc["environment"].get("WEBHOOK_URL").is_some() {
            services.insert(
                name.clone(),
                json!({
                    "environment": {
                        "WEBHOOK_CA_FILE": "/run/test-ca/ca.pem",
                        // The listener containers are on a private network.
                        "WEBHOOK_REACH_PRIVATE": EGRESS_SUBNET,
                    },
                    "volumes": [format!("{ca}:/run/test-ca/ca.pem:ro")],
                }),
            );
        }
    }
    for (name, svc) in compose["services"].as_object().unwrap() {
        let Some(policy) = svc["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .find(|v| v.ends_with(":/etc/squid/policy.conf:ro"))
        else {
            continue;
        };
        let generated = root()
            .join("generated/compose")
            .join(policy.split(':').next().unwrap());
        let text = std::fs::read_to_string(&generated).unwrap();
        let mut allowed: Vec<bulkhead_vocab::HostPort> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter_map(|l| bulkhead_vocab::HostPort::parse(l).ok())
            .collect();
        // The test's documentation site is plain HTTP (`docs`, below).
        if allowed.iter().any(|a| a.host == "docs.example.com") {
            allowed.push(bulkhead_vocab::HostPort::parse(DOCS).unwrap());
        }
        let file = dir.join(format!("{name}.policy.conf"));
        std::fs::write(
            &file,
            bulkhead_codegen::emit::deploy::proxy::squid_policy(
                &allowed,
                &[EGRESS_SUBNET.into()],
                &[],
            ),
        )
        .unwrap();
        services.insert(
            name.clone(),
            json!({ "volumes": [format!("{}:/etc/squid/policy.conf:ro", file.display())] }),
        );
    }
    services.insert(
        "docs".into(),
        json!({
            "image": agent,
            "command": ["python3", "-m", "http.server", "80", "--directory", "/opt/t"],
            "networks": { "egress": { "aliases": ["docs.example.com"] } },
            "volumes": [format!("{}:/opt/t:ro", root().join("tests/interop").display())],
        }),
    );
    services.insert(
        "hooks".into(),
        json!({
            "image": agent,
            "command": ["python3", "/opt/t/https_stand_in.py", "0.0.0.0", "443", "/tmp/port",
                        "/opt/tls/srv.pem", "/opt/tls/srv.key"],
            "networks": { "egress": { "aliases": ["hooks.example.com"] } },
            "volumes": [
                format!("{}:/opt/t:ro", root().join("tests/interop").display()),
                format!("{}:/opt/tls:ro", tls.display()),
            ],
        }),
    );
    let doc = json!({ "networks": networks, "services": services });
    let path = dir.join("override.yaml");
    // JSON is YAML: docker-compose reads it as such.
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

fn image_of(compose: &Value, service: &str) -> String {
    compose["services"][service]["image"]
        .as_str()
        .unwrap_or_else(|| panic!("service {service} names no image"))
        .to_string()
}

/// `bulkhead connect` with the generated desktop entry's arguments, its 127.0.0.1 ports mapped to
/// relays this test runs on the host: the engine publishes no port of a container on internal
/// networks only, so these stand in for the published ports and reach the containers' addresses.
async fn desktop_session(
    project: &Project,
    compose: &Value,
    token: &str,
    stop: &tokio_util::sync::CancellationToken,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tokio::process::Child,
) {
    let entry = serde_json::from_str::<Value>(
        &std::fs::read_to_string(
            root().join("generated/clients/local.compose.claude_desktop.json"),
        )
        .unwrap(),
    )
    .unwrap()["mcpServers"]["template"]
        .clone();
    let mut args: Vec<String> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    for arg in args
        .iter_mut()
        .filter(|a| a.starts_with("http://127.0.0.1:"))
    {
        let port: u16 = arg["http://127.0.0.1:".len()..]
            .trim_end_matches("/mcp")
            .parse()
            .unwrap();
        // The service publishing that port, and the port inside it.
        let (service, inner) = compose["services"]
            .as_object()
            .unwrap()
            .iter()
            .find_map(|(name, svc)| {
                svc["ports"].as_array()?.iter().find_map(|p| {
                    let p = p.as_str()?;
                    let rest = p.strip_prefix(&format!("127.0.0.1:{port}:"))?;
                    Some((name.clone(), rest.to_string()))
                })
            })
            .unwrap_or_else(|| panic!("no service publishes 127.0.0.1:{port}"));
        let net = format!("{}_agents", project.name);
        let ip = project.inspect(
            &service,
            &format!("{{{{(index .NetworkSettings.Networks \"{net}\").IPAddress}}}}"),
        );
        assert!(!ip.is_empty(), "{service} has no address on {net}");
        let listener = bulkhead::endpoint::Bound::bind(&"127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let local = listener.local().unwrap();
        let route = bulkhead::relay::Route {
            listen: local.clone(),
            target: format!("{ip}:{inner}").parse().unwrap(),
        };
        tokio::spawn(bulkhead::relay::run(
            route,
            listener,
            Default::default(),
            stop.clone(),
        ));
        *arg = format!("http://{local}/mcp");
    }
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(&args)
        .env("BULKHEAD_TOKEN", token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve((stdout, stdin)).await.expect("bulkhead connect");
    (client, child)
}

/// One call through the desktop bridge: (is_error, text, level).
async fn call(c: &super::procs::Client, tool: &str, args: Value) -> (bool, String, Option<String>) {
    let r = super::procs::call_within(c, tool, args, Duration::from_secs(60))
        .await
        .unwrap();
    let level = (!r.level.is_empty()).then_some(r.level);
    (r.is_error, r.text, level)
}

/// Runs `tests/interop/<script>` with `args` in an agent container on the deployment's `agents`
/// network (at most 180 s); asserts it succeeded with `oks` lines starting `ok `.
fn agent_script(project: &Project, agent: &str, script: &str, args: &[&str], oks: usize) {
    let run = output(
        docker()
            .args(["run", "--rm", "--network"])
            .arg(format!("{}_agents", project.name))
            .arg("-v")
            .arg(format!(
                "{}:/opt/t:ro",
                root().join("tests/interop").display()
            ))
            .args([agent, "timeout", "180", "python3"])
            .arg(format!("/opt/t/{script}"))
            .args(args),
        script,
    );
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && said.lines().filter(|l| l.starts_with("ok ")).count() == oks,
        "{script} in the agent container:\n{said}{}\n{}",
        String::from_utf8_lossy(&run.stderr),
        project.logs(30)
    );
}

/// `curl` in a container; (exit code, stdout+stderr).
fn curl_in(project: &Project, service: &str, args: &[&str]) -> (i32, String) {
    let mut cmd = vec!["curl", "-sS", "--max-time", "5"];
    cmd.extend_from_slice(args);
    let out = project.exec(service, &cmd);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_generated_compose_deployment_runs_on_a_real_engine() {
    let _one = engine::exclusive();
    engine::ensure_engine();
    engine::ensure_base_image();
    let compose_path = root().join("generated/compose/local.yaml");
    let compose = yaml(&compose_path);
    let (server_image, proxy_image) = (
        image_of(&compose, "template"),
        image_of(&compose, "template-egress-proxy"),
    );
    assert!(
        !server_image.ends_with(":latest") && !proxy_image.ends_with(":latest"),
        "{server_image} {proxy_image}"
    );
    engine::build_server_image(&server_image);
    engine::build(
        &root(),
        &root().join("generated/docker/Dockerfile.proxy"),
        &proxy_image,
        &[],
    );
    let agent = engine::agent_image();

    let dir = tempfile::tempdir_in(engine::work_dir()).unwrap();
    let tls_dir = dir.path().join("tls");
    std::fs::create_dir_all(&tls_dir).unwrap();
    tls::test_ca(&tls_dir, "DNS:hooks.example.com");
    for f in ["ca.pem", "srv.pem", "srv.key"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tls_dir.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let secret = "compose-test-signing-key-0123456789abcdef";
    let secrets = dir.path().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("dev"), secret).unwrap();
    std::fs::write(secrets.join("webhook"), "hook-token").unwrap();
    let over = override_file(dir.path(), &compose, &agent, &tls_dir);
    let project = Project::new(
        &format!("bhengine{}", std::process::id()),
        vec![compose_path.clone(), over],
        vec![
            (
                "BULKHEAD_DEV_SECRET_FILE".into(),
                secrets.join("dev").display().to_string(),
            ),
            (
                "WEBHOOK_TOKEN_FILE".into(),
                secrets.join("webhook").display().to_string(),
            ),
        ],
    );
    project.up();
    project.wait_healthy(Duration::from_secs(180));

    // Every network of the deployment is internal under the override.
    for net in compose["networks"].as_object().unwrap().keys() {
        let internal = run(
            docker().args([
                "network",
                "inspect",
                "-f",
                "{{.Internal}}",
                &format!("{}_{net}", project.name),
            ]),
            "docker network inspect",
        );
        assert_eq!(internal.trim(), "true", "network {net}");
    }

    // Proxied and isolated instances: loopback only, whatever the engine does with routes.
    for service in ["template-proxied", "template-isolated"] {
        assert_eq!(
            project.inspect(service, "{{.HostConfig.NetworkMode}}"),
            "none"
        );
        let out = project.exec(service, &["cat", "/proc/net/route"]);
        let routes = String::from_utf8_lossy(&out.stdout);
        assert_eq!(routes.lines().count(), 1, "{service} has routes:\n{routes}");
    }

    // The seeds' scenarios from an agent container on the agents network.
    let (alice, bob) = (
        token(secret, "alice", "compose-1"),
        token(secret, "bob", "compose-2"),
    );
    agent_script(
        &project,
        &agent,
        "compose_agent.py",
        &[
            "http://template:8000/mcp",
            "http://template-proxied:8000/mcp",
            "http://template-isolated:8000/mcp",
            &alice,
            &bob,
        ],
        17,
    );

    // An upstream MCP server nobody here wrote, installed in the image at its pinned version,
    // runs in its jail on both instances of `third_party`, under the session-wide ratchet.
    let carol = token(secret, "carol", "compose-3");
    agent_script(
        &project,
        &agent,
        "compose_upstream.py",
        &[
            "http://third_party:8010/mcp",
            "http://third_party-proxied:8010/mcp",
            "http://template:8000/mcp",
            &carol,
        ],
        10,
    );

    // Isolation from inside: neither instance reaches the listener on `egress` directly.
    let ca = ["--cacert", "/run/test-ca/ca.pem"];
    for service in ["template-proxied", "template-isolated"] {
        let (code, said) = curl_in(
            &project,
            service,
            &[
                "--noproxy",
                "*",
                "--cacert",
                "/dev/null",
                "https://hooks.example.com/direct",
            ],
        );
        assert_ne!(code, 0, "{service} reached the listener directly: {said}");
        assert!(!said.contains("delivered"), "{said}");
    }
    // The proxied one reaches it through squid (its loopback forward, the relay, the proxy) …
    let mut args = vec!["-x", "http://127.0.0.1:3128"];
    args.extend_from_slice(&ca);
    args.push("https://hooks.example.com/through-squid");
    let (code, said) = curl_in(&project, "template-proxied", &args);
    assert!(
        code == 0 && said.contains("delivered"),
        "through squid: {said}"
    );
    // … and squid refuses what the allowlist does not name.
    for target in ["https://hooks.example.com:8443/", "http://169.254.169.254/"] {
        let (code, said) = curl_in(
            &project,
            "template-proxied",
            &[
                "-x",
                "http://127.0.0.1:3128",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                target,
            ],
        );
        assert!(
            code != 0 || said.trim() == "403",
            "squid let {target} through: {code} {said}"
        );
    }
    let squid = project.logs(200);
    assert!(
        squid.contains("TCP_TUNNEL/200") && squid.contains("CONNECT hooks.example.com:443"),
        "squid logged no tunnel to the webhook:\n{squid}"
    );

    // A desktop client on the host through `bulkhead connect`, one session across the instances.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let stop = tokio_util::sync::CancellationToken::new();
        let (c, _child) =
            desktop_session(&project, &compose, &token(secret, "carol", "desk-1"), &stop).await;
        let (err, text, _) = call(
            &c,
            "write_file",
            json!({"path": "/workspace/d.txt", "content": "from the desktop"}),
        )
        .await;
        assert!(!err, "{text}");
        // The code sandbox inside the container: bubblewrap in the image, its user namespace
        // allowed by the generated security options.
        let (err, text, _) = call(&c, "run_python", json!({"code": "print(open('d.txt').read().upper())"})).await;
        assert!(!err && text.contains("FROM THE DESKTOP"), "run_python on the full instance: {text}");
        let (err, text, level) = call(
            &c,
            "load_sensitive_dataset",
            json!({"dataset_name": "customers_2026"}),
        )
        .await;
        assert!(!err && level.as_deref() == Some("confidential"), "{text}");
        let (err, text, _) = call(&c, "search_records", json!({"query": "Acme", "limit": 2})).await;
        assert!(!err, "{text}");
        let (err, text, _) =
            call(&c, "notify_team", json!({"channel": "ops", "message": "x"})).await;
        assert!(
            err && text.starts_with("[FATAL]"),
            "connect after a private load: {text}"
        );
        let (err, text, level) = call(&c, "search_security_logs", json!({"pattern": "."})).await;
        assert!(!err && level.as_deref() == Some("secret"), "{text}");
        let (err, text, _) = call(&c, "read_file", json!({"path": "/workspace/d.txt"})).await;
        assert!(!err && text.contains("from the desktop"), "{text}");
        let (err, text, _) = call(
            &c,
            "run_python",
            json!({"code": "import socket\nprint(open('d.txt').read(), [n for _, n in socket.if_nameindex()])"}),
        )
        .await;
        assert!(
            !err && text.contains("from the desktop ['lo']"),
            "run_python on the isolated instance: {text}"
        );
        c.cancel().await.ok();
        stop.cancel();
    });

    // The self-check refuses an instance with a route out: on this engine (Docker before 25) a
    // container on an internal network has a default route, and `serve --mode none` refuses it.
    let net = format!("{}_agents", project.name);
    let routes = run(
        docker().args([
            "run",
            "--rm",
            "--network",
            &net,
            "--entrypoint",
            "cat",
            &server_image,
            "/proc/net/route",
        ]),
        "routes on an internal network",
    );
    let has_default = routes
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().nth(1) == Some("00000000"));
    for mode in ["none", "proxied"] {
        let out = output(
            docker()
                .args(["run", "--rm", "--network", &net, "--entrypoint", "timeout"])
                .args(["-e", "BULKHEAD_DEV_SECRET=0123456789abcdef0123456789abcdef"])
                .args([
                    server_image.as_str(),
                    "30",
                    "bulkhead",
                    "serve",
                    "template",
                    "--listen",
                    "127.0.0.1:8000",
                    "--mode",
                    mode,
                ]),
            "serve on an internal network",
        );
        let said = String::from_utf8_lossy(&out.stderr);
        if has_default {
            assert!(
                !out.status.success()
                    && said.contains("refusing to serve")
                    && said.contains("default route"),
                "--mode {mode} with a default route was not refused: {said}"
            );
        } else {
            panic!("this engine gives internal networks no default route (Docker 25+?): {routes}");
        }
    }
    drop(project);
}

/// The server image's build context after the README's first hour (a demo, the First call: local
/// state and workspaces under `.bulkhead/`, a virtualenv, a debug build in `target/`, a
/// `secrets/` folder, a 50 MB stray file), on the legacy builder (Debian's Docker 20.10 default)
/// and on BuildKit: only the workspace's manifests and sources, `specs/`, `config.yaml` and the
/// prebuilt-binary path arrive (`.dockerignore`, generated), and nothing else.
#[test]
fn the_build_context_holds_only_what_the_image_is_built_from() {
    let _one = engine::exclusive();
    engine::ensure_engine();
    let dir = tempfile::tempdir_in(engine::work_dir()).unwrap();
    let ctx = dir.path().join("repo");
    // The repository as a fresh clone has it.
    let files = run(
        std::process::Command::new("git")
            .args(["ls-files", "-z"])
            .current_dir(root()),
        "git ls-files",
    );
    for f in files.split('\0').filter(|f| !f.is_empty()) {
        let to = ctx.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if let Ok(bytes) = std::fs::read(root().join(f)) {
            std::fs::write(&to, bytes).unwrap();
        }
    }
    // Freshly generated, as the build leaves it.
    std::fs::copy(root().join(".dockerignore"), ctx.join(".dockerignore")).unwrap();
    // What the first hour leaves behind.
    let junk = [
        ".bulkhead/state/compliance.db",
        ".bulkhead/state/audit-template.jsonl",
        ".bulkhead/workspaces/template/local/session-1/hello.txt",
        ".venv/lib/python3.11/site-packages/mcp/__init__.py",
        "target/debug/bulkhead",
        "target/release/.fingerprint/x",
        "secrets/bulkhead_dev_secret",
        "first_call.py",
        "notes/stray.bin",
        "src/handlers/.template.rs.swp",
    ];
    for j in junk {
        let p = ctx.join(j);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "left behind").unwrap();
    }
    std::fs::File::create(ctx.join("notes/stray.bin"))
        .unwrap()
        .set_len(50 << 20)
        .unwrap();
    std::fs::create_dir_all(ctx.join("target/docker")).unwrap();
    std::fs::write(ctx.join("target/docker/bulkhead"), "a prebuilt binary").unwrap();
    // A context lister: copy everything that arrives into an image, then list the image.
    let lister = dir.path().join("Dockerfile.list");
    std::fs::write(&lister, "FROM scratch\nCOPY . /ctx/\n").unwrap();
    for buildkit in ["0", "1"] {
        let tag = format!("bulkhead-context-test:{}-{buildkit}", std::process::id());
        run(
            engine::docker()
                .env("DOCKER_BUILDKIT", buildkit)
                .args(["build", "--quiet", "--tag", &tag, "--file"])
                .arg(&lister)
                .arg(&ctx),
            "docker build (context lister)",
        );
        let id = run(
            engine::docker().args(["create", &tag, "/none"]),
            "docker create",
        );
        let id = id.trim();
        let tar = output(engine::docker().args(["export", id]), "docker export");
        run(engine::docker().args(["rm", id]), "docker rm");
        run(engine::docker().args(["rmi", &tag]), "docker rmi");
        let exported = dir.path().join(format!("context-{buildkit}.tar"));
        std::fs::write(&exported, &tar.stdout).unwrap();
        let listed = run(
            std::process::Command::new("tar").arg("-tvf").arg(&exported),
            "tar -t",
        );
        let mut bytes: u64 = 0;
        let mut arrived = Vec::new();
        for line in listed.lines().filter(|l| !l.starts_with('d')) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(path) = words.last().and_then(|p| p.strip_prefix("ctx/")) else {
                continue;
            };
            bytes += words
                .get(2)
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            arrived.push(path.to_string());
        }
        let admitted = |p: &str| {
            [
                "Cargo.toml",
                "Cargo.lock",
                "build.rs",
                "config.yaml",
                "target/docker/bulkhead",
            ]
            .contains(&p)
                || ["src/", "specs/"].iter().any(|d| p.starts_with(d))
                || ENGINE_CRATES.iter().any(|d| {
                    p.strip_prefix(d)
                        .is_some_and(|r| r == "Cargo.toml" || r.starts_with("src/"))
                })
        };
        let strays: Vec<&String> = arrived.iter().filter(|p| !admitted(p)).collect();
        assert!(
            strays.is_empty(),
            "BUILDKIT={buildkit}: outside the image's inputs: {strays:?}"
        );
        for needed in [
            "Cargo.lock",
            "src/main.rs",
            "engine/src/lib.rs",
            "engine/src/config/default.yaml",
            "lang/src/lib.rs",
            "codegen/src/lib.rs",
            "vocab/src/lib.rs",
            "specs/servers/template.yaml",
            "config.yaml",
            "build.rs",
            "target/docker/bulkhead",
        ] {
            assert!(
                arrived.iter().any(|p| p == needed),
                "BUILDKIT={buildkit}: {needed} missing"
            );
        }
        assert!(
            bytes < 8 << 20,
            "BUILDKIT={buildkit}: the context holds {bytes} bytes"
        );
        eprintln!(
            "BUILDKIT={buildkit}: {} files, {bytes} bytes in the context",
            arrived.len()
        );
    }
}
