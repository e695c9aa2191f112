//! A user's project as `bulkhead init` writes it, outside this checkout, used the way its
//! README says: it builds (the engine a path dependency, the generator a build-dependency), its
//! own test passes, its starter tool answers the official Python SDK, a commit that weakens its
//! policy fails `check --against` with exit 3, and its generated compose file runs on the real
//! engine with the project's own binary in its image.
//!
//! A test binary of its own: cargo runs test binaries one after another, so the new project's
//! build (the engine compiled for its own target folder, both cores for minutes) never runs
//! beside the integration tests' time-bounded waits.

#[path = "../support/engine.rs"]
mod engine;
#[path = "../support/venv.rs"]
mod venv;

use engine::{self as support, Project, docker, output, run};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bulkhead() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bulkhead"))
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=acme", "-c", "user.email=acme@example.com"])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cargo <args>` in the project with its own target folder (kept under this checkout's
/// `target/`, so a second run is incremental).
fn cargo(project: &Path, target: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(project)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {args:?} in the new project:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the child on drop.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_new_project_builds_tests_serves_reviews_and_deploys() {
    let base = repo().join("target/init-project");
    let project = base.join("acme-tools");
    let _ = std::fs::remove_dir_all(&project);
    std::fs::create_dir_all(&base).unwrap();
    // The engine by a path relative to the project, as `init` writes by default.
    let out = bulkhead().arg("init").arg(&project).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("bulkhead = { path = \"../../../engine\" }"),
        "{manifest}"
    );
    // A second init into the now non-empty folder refuses and changes nothing.
    let before = std::fs::read_dir(&project).unwrap().count();
    let again = bulkhead().arg("init").arg(&project).output().unwrap();
    assert!(!again.status.success());
    assert_eq!(std::fs::read_dir(&project).unwrap().count(), before);

    // Build and test as its README says.
    let target = base.join("target");
    cargo(&project, &target, &["build", "--quiet"]);
    for f in [
        "generated/compose/local.yaml",
        "generated/docker/Dockerfile",
        "generated/rust/acme_tools.rs",
        "generated/POLICY.md",
    ] {
        assert!(project.join(f).is_file(), "{f} was not generated");
    }
    let tested = cargo(&project, &target, &["test"]);
    let said = String::from_utf8_lossy(&tested.stdout);
    assert!(
        said.contains("test the_starter_tool_answers_and_refuses_bad_arguments ... ok"),
        "{said}"
    );
    let exe = target.join("debug/bulkhead");

    // Its starter tool answers the official Python SDK over HTTP.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let serving = Killed(
        Command::new(&exe)
            .args(["serve", "acme_tools", "--listen", &listen])
            .current_dir(&project)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(
            Instant::now() < deadline,
            "the new project's server did not listen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let token = Command::new(&exe)
        .args(["token", "--user", "pat"])
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(token.status.success());
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    let python = venv::venv_python();
    let sdk = Command::new(python)
        .arg(repo().join("tests/interop/starter_client.py"))
        .args([&format!("http://{listen}/mcp"), &token, "acme_tools"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&sdk.stdout);
    assert!(
        sdk.status.success() && said.lines().filter(|l| l.starts_with("ok ")).count() == 4,
        "{said}{}",
        String::from_utf8_lossy(&sdk.stderr)
    );
    drop(serving);

    // Its own repository: a harmless commit passes the review, a weakening one exits 3.
    git(&project, &["init", "-q"]);
    git(&project, &["add", "-A"]);
    git(
        &project,
        &["commit", "-qm", "acme-tools from bulkhead init"],
    );
    let spec = project.join("specs/servers/acme_tools.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text.replacen(
            "instructions: What this server is for",
            "instructions: Greets",
            1,
        ),
    )
    .unwrap();
    git(&project, &["commit", "-qam", "reword"]);
    let review = |what: &str| {
        let out = Command::new(&exe)
            .args(["check", "--against", "HEAD~1"])
            .current_dir(&project)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), format!("{what}: {said}"))
    };
    let (code, said) = review("a reworded instruction");
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("is outside this repository"),
        "the path dependency is named: {said}"
    );
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text.replacen("    permission: read ", "    permission: connect ", 1),
    )
    .unwrap();
    git(&project, &["commit", "-qam", "hello reaches out"]);
    let (code, said) = review("a widened permission");
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains("weakened: permission-widened: tool `acme_tools.hello`: read → connect"),
        "{said}"
    );
    // Its build script is the engine's too.
    std::fs::write(project.join("build.rs"), "fn main() {}\n").unwrap();
    git(&project, &["commit", "-qam", "no generator"]);
    let (code, said) = review("an emptied build.rs");
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains("weakened: engine-changed: build.rs: "),
        "{said}"
    );
    git(&project, &["reset", "-q", "--hard", "HEAD~2"]);

    // Its generated compose file runs on the engine, the image holding the project's binary.
    let _one = support::exclusive();
    support::ensure_engine();
    support::ensure_base_image();
    let compose_path = project.join("generated/compose/local.yaml");
    let compose: serde_json::Value = {
        let text = std::fs::read_to_string(&compose_path).unwrap();
        let file = bulkhead_codegen::source::SourceFile::in_memory("local.yaml", &text);
        bulkhead_codegen::yaml::parse(&file).unwrap().to_json()
    };
    let services: Vec<&String> = compose["services"].as_object().unwrap().keys().collect();
    assert_eq!(
        services,
        ["acme_tools"],
        "one instance: the starter holds no private data"
    );
    let image = compose["services"]["acme_tools"]["image"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(image.starts_with("acme-tools:"), "{image}");
    support::build_project_image(&project, &exe, &image);
    let agent = support::agent_image();
    let dir = tempfile::tempdir_in(support::work_dir()).unwrap();
    let secret = "acme-compose-signing-key-0123456789abcdef";
    std::fs::write(dir.path().join("dev"), secret).unwrap();
    let mut networks = serde_json::Map::new();
    for name in compose["networks"].as_object().unwrap().keys() {
        networks.insert(name.clone(), serde_json::json!({ "internal": true }));
    }
    let over = dir.path().join("override.yaml");
    std::fs::write(
        &over,
        serde_json::to_string_pretty(&serde_json::json!({ "networks": networks })).unwrap(),
    )
    .unwrap();
    let deployed = Project::new(
        &format!("acme{}", std::process::id()),
        vec![compose_path, over],
        vec![(
            "BULKHEAD_DEV_SECRET_FILE".into(),
            dir.path().join("dev").display().to_string(),
        )],
    );
    deployed.up();
    deployed.wait_healthy(Duration::from_secs(180));
    let claims = bulkhead::auth::MintClaims {
        sub: "pat".into(),
        session_id: "acme-compose-1".into(),
        iss: "bulkhead-dev".into(),
        aud: "bulkhead".into(),
        ttl_secs: 900,
    };
    let token = bulkhead::auth::mint::mint_hs256(secret.as_bytes(), &claims).unwrap();
    let network = compose["services"]["acme_tools"]["networks"]
        .as_array()
        .and_then(|n| n.first())
        .and_then(|n| n.as_str())
        .expect("the instance's network")
        .to_string();
    let ran = output(
        docker()
            .args(["run", "--rm", "--network"])
            .arg(format!("{}_{network}", deployed.name))
            .arg("-v")
            .arg(format!(
                "{}:/opt/t:ro",
                repo().join("tests/interop").display()
            ))
            .args([
                &agent,
                "timeout",
                "120",
                "python3",
                "/opt/t/starter_client.py",
            ])
            .args(["http://acme_tools:8000/mcp", &token, "acme_tools"]),
        "starter_client.py in the agent container",
    );
    let said = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success() && said.lines().filter(|l| l.starts_with("ok ")).count() == 4,
        "{said}{}\n{}",
        String::from_utf8_lossy(&ran.stderr),
        deployed.logs(30)
    );
    drop(deployed);
    let _ = run(docker().args(["rmi", &image]), "docker rmi");
}
