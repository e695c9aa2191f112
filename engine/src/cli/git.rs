//! `git` as the review commands run it: in a folder, its stdout, or why it failed.

use std::path::Path;

/// Runs `git` in `root`; its stdout, or why it failed.
pub(super) fn git(root: &Path, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()?;
    if !out.status.success() {
        anyhow::bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}
