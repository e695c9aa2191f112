//! Per-mode workspace layers under `bulkhead up`, enforced by the kernel as compose enforces them
//! with volumes: each instance runs in its own mount namespace where the layers of *more*
//! isolated instances are covered by an empty read-only tmpfs and the layers of *less* isolated
//! ones are read-only bind mounts. So a networked instance cannot open what a more isolated one
//! wrote, even as root, and a more isolated one cannot change what it reads from below.

use crate::config::Config;
use crate::policy::NetworkMode;
use std::path::{Path, PathBuf};

/// What one instance sees of a server's workspace layers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerView {
    /// Layers covered (more isolated instances').
    pub hidden: Vec<PathBuf>,
    /// Layers mounted read-only (less isolated instances').
    pub read_only: Vec<PathBuf>,
}

/// The view of `server`'s instance in `mode`, given the modes the server has instances in.
pub fn view(config: &Config, server: &str, mode: NetworkMode, modes: &[NetworkMode]) -> LayerView {
    LayerView {
        hidden: modes
            .iter()
            .filter(|m| **m > mode)
            .map(|m| config.state.workspace_layer(server, *m))
            .collect(),
        read_only: config.state.workspace_lower(server, mode),
    }
}

/// Creates every layer folder (mode 0700) so each can be a mount point.
pub fn create_all(config: &Config, server: &str, modes: &[NetworkMode]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    for m in modes {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(config.state.workspace_layer(server, *m))?;
    }
    Ok(())
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// A command prefix that runs the rest in a private mount namespace with `view` applied:
/// `unshare --mount --propagation private -- sh -c '<mounts>; exec "$@"' bulkhead-layers`.
pub fn prefix(view: &LayerView) -> Vec<String> {
    let mut script = String::from("set -e; ");
    for h in &view.hidden {
        script.push_str(&format!(
            "mount -t tmpfs -o ro,size=4k,mode=000 bulkhead-hidden {}; ",
            quoted(h)
        ));
    }
    for r in &view.read_only {
        let q = quoted(r);
        script.push_str(&format!(
            "mount --bind {q} {q}; mount -o remount,bind,ro {q} {q}; "
        ));
    }
    script.push_str("exec \"$@\"");
    vec![
        "unshare".into(),
        "--mount".into(),
        "--propagation".into(),
        "private".into(),
        "--".into(),
        "sh".into(),
        "-c".into(),
        script,
        "bulkhead-layers".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_instance_hides_the_layers_above_and_reads_the_ones_below() {
        let config = Config::parse(
            "auth:\n  issuer: i\n  audience: a\n  keys: [{kid: k, alg: HS256, secret: 0123456789abcdef0123456789abcdef}]\nstate:\n  dir: /s\n  workspaces: /w\n",
            "t",
            &|_| None,
        )
        .unwrap();
        let all = [NetworkMode::Full, NetworkMode::Proxied, NetworkMode::None];
        let full = view(&config, "t", NetworkMode::Full, &all);
        assert_eq!(
            full.hidden,
            [PathBuf::from("/w/t.proxied"), PathBuf::from("/w/t.none")]
        );
        assert!(full.read_only.is_empty());
        let none = view(&config, "t", NetworkMode::None, &all);
        assert!(none.hidden.is_empty());
        assert_eq!(
            none.read_only,
            [PathBuf::from("/w/t.proxied"), PathBuf::from("/w/t")]
        );
        let p = prefix(&view(&config, "t", NetworkMode::Proxied, &all));
        assert_eq!(
            p[7],
            "set -e; mount -t tmpfs -o ro,size=4k,mode=000 bulkhead-hidden '/w/t.none'; mount --bind '/w/t' '/w/t'; mount -o remount,bind,ro '/w/t' '/w/t'; exec \"$@\""
        );
    }
}
