//! The checked-in deployment artifacts against the real tools that consume them: every
//! `generated/compose/*.yaml` passes `docker-compose config` (Debian's `docker-compose`, which
//! validates without a Docker engine), and every `generated/config/*.yaml` loads in the runtime
//! and names the compose services as accepted hosts.

use bulkhead::auth::Verifier;
use bulkhead::config::Config;
use std::path::{Path, PathBuf};
use std::process::Command;

fn generated(folder: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("generated")
        .join(folder);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo build`)", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no YAML files in {}", dir.display());
    files
}

/// `docker-compose -f <file> config -q` run beside the file; `Err` holds its complaint.
fn compose_config(file: &Path) -> Result<(), String> {
    let out = Command::new("docker-compose")
        .arg("-f")
        .arg(file)
        .args(["config", "-q"])
        .current_dir(file.parent().expect("file in a folder"))
        .env_remove("COMPOSE_FILE")
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`docker-compose` is not installed, so the generated compose files cannot be \
             validated: install it with `apt-get install -y docker-compose` (.ci/run does)"
        ),
        Err(e) => panic!("cannot run docker-compose: {e}"),
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn docker_compose_accepts_every_generated_compose_file() {
    let failures: Vec<String> = generated("compose")
        .iter()
        .filter_map(|f| {
            compose_config(f)
                .err()
                .map(|e| format!("{}: {e}", f.display()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "docker-compose rejected:\n{}",
        failures.join("\n")
    );
}

#[test]
fn docker_compose_rejects_a_broken_file() {
    // The control: the validator really validates (an undefined network, a bad healthcheck).
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("broken.yaml");
    std::fs::write(
        &file,
        "services:\n  a:\n    image: x\n    networks: [nowhere]\n    healthcheck: {retries: many}\n",
    )
    .expect("write");
    assert!(
        compose_config(&file).is_err(),
        "docker-compose accepted a broken file"
    );
}

#[test]
fn generated_runtime_configs_load_and_accept_the_service_names() {
    let secret = "a-compose-test-secret-of-32-bytes-or-more";
    for file in generated("config") {
        let text = std::fs::read_to_string(&file).expect("read");
        let origin = file.display().to_string();
        let missing = Config::parse(&text, &origin, &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            missing.contains("BULKHEAD_DEV_SECRET"),
            "{origin}: loads without a secret ({missing})"
        );
        let config = Config::parse(&text, &origin, &|k| {
            (k == "BULKHEAD_DEV_SECRET").then(|| secret.to_string())
        })
        .unwrap_or_else(|e| panic!("{origin}: {e}"));
        Verifier::new(&config.auth).unwrap_or_else(|e| panic!("{origin}: {e}"));
        assert_eq!(config.state.dir, Path::new("/var/lib/bulkhead/state"));
        assert_eq!(
            config.state.workspaces,
            Path::new("/var/lib/bulkhead/workspaces")
        );
        let deployment = file
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .to_string();
        let compose = std::fs::read_to_string(
            file.parent()
                .and_then(Path::parent)
                .expect("generated/")
                .join("compose")
                .join(format!("{deployment}.yaml")),
        )
        .expect("the compose file of the same deployment");
        let compose = bulkhead::config::load_yaml(&compose, "compose").expect("compose YAML");
        for (name, svc) in compose["services"].as_object().expect("services") {
            let is_instance = svc["command"]
                .as_array()
                .is_some_and(|c| c.iter().any(|a| a == "--mode"));
            if is_instance {
                assert!(
                    config.http.allowed_hosts.contains(name),
                    "{origin}: {name} is not an allowed host"
                );
            }
        }
    }
}

#[test]
fn the_generated_images_are_tagged_with_this_crates_version() {
    // The default tag is the crate's version (never `latest`): what the review names is the
    // binary these sources build.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/compose/local.yaml"),
    )
    .unwrap();
    let images: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("image: "))
        .map(|i| i.trim_matches('"'))
        .collect();
    assert!(!images.is_empty());
    for image in images {
        assert!(
            image.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))),
            "{image}"
        );
    }
}
