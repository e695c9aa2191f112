//! The official MCP Python SDK (`mcp` from PyPI) in a virtualenv under `target/`, made on first
//! use and reused.

use std::path::PathBuf;
use std::process::Command;

/// The venv's interpreter, made once per test process: the tests of this file run in parallel,
/// and two `python3 -m venv` + `pip install` runs into one folder break each other.
pub fn venv_python() -> PathBuf {
    static VENV: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    VENV.get_or_init(make_venv).clone()
}

fn make_venv() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let venv = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("interop-venv");
    let python = venv.join("bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args(["-c", "import mcp.client.streamable_http"])
            .status()
            .is_ok_and(|s| s.success());
    if !ready {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "mcp==2.3.0"])
                .status()
                .is_ok_and(|s| s.success());
        assert!(
            ok,
            "could not create {} with the `mcp` package (needs python3-venv and PyPI)",
            venv.display()
        );
    }
    python
}
