//! Thin wrappers over `ip` for namespaces, veth pairs and bridges; every object is removed on drop.

use super::IsolationError;
use std::process::{Command, Stdio};

/// Runs a command; its stderr becomes the error.
pub fn run(args: &[&str]) -> Result<(), IsolationError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| IsolationError::Command {
            cmd: args.join(" "),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        let detail = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if detail.contains("Operation not permitted") || detail.contains("Permission denied") {
            return Err(IsolationError::NotPermitted(detail));
        }
        Err(IsolationError::Command {
            cmd: args.join(" "),
            detail,
        })
    }
}

/// Runs a command with `input` on stdin (for `nft -f -`).
pub fn run_with_input(args: &[&str], input: &str) -> Result<(), IsolationError> {
    use std::io::Write;
    let cmd = args.join(" ");
    let mut child = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| IsolationError::Command {
            cmd: cmd.clone(),
            detail: e.to_string(),
        })?;
    child
        .stdin
        .take()
        .map(|mut s| s.write_all(input.as_bytes()))
        .transpose()
        .map_err(|e| IsolationError::Command {
            cmd: cmd.clone(),
            detail: e.to_string(),
        })?;
    let out = child
        .wait_with_output()
        .map_err(|e| IsolationError::Command {
            cmd: cmd.clone(),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(IsolationError::Command {
            cmd,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `name` (replacing a stale one left by a killed run) with loopback up.
    pub fn create(name: &str) -> Result<Netns, IsolationError> {
        let _ = run(&["ip", "netns", "del", name]);
        run(&["ip", "netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip <args>` inside the namespace.
    pub fn ip(&self, args: &[&str]) -> Result<(), IsolationError> {
        let mut full = vec!["ip", "-n", self.name.as_str()];
        full.extend_from_slice(args);
        run(&full)
    }

    /// Loads an nftables ruleset inside the namespace.
    pub fn nft(&self, ruleset: &str) -> Result<(), IsolationError> {
        run_with_input(
            &["ip", "netns", "exec", &self.name, "nft", "-f", "-"],
            ruleset,
        )
    }

    /// A command prefix that runs a program inside the namespace: `nsenter --net`, which enters
    /// only the network namespace. (`ip netns exec` also mounts a fresh `/sys`, which hides
    /// `/sys/fs/cgroup`, so the instance's jails could make no cgroup.)
    pub fn exec_prefix(&self) -> Vec<String> {
        vec![
            "nsenter".into(),
            format!("--net=/run/netns/{}", self.name),
            "--".into(),
        ]
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

/// A host-side link (veth end or bridge), deleted on drop unless borrowed with [`HostLink::existing`].
#[derive(Debug)]
pub struct HostLink {
    name: String,
    owned: bool,
}

impl HostLink {
    /// A veth pair: `host` stays here with `host_addr` (CIDR), `inner` moves into `ns` with `ns_addr`.
    pub fn veth(
        host: &str,
        inner: &str,
        ns: &Netns,
        host_addr: &str,
        ns_addr: &str,
    ) -> Result<HostLink, IsolationError> {
        let _ = run(&["ip", "link", "del", host]);
        run(&[
            "ip", "link", "add", host, "type", "veth", "peer", "name", inner,
        ])?;
        let link = HostLink {
            name: host.to_string(),
            owned: true,
        };
        run(&["ip", "link", "set", inner, "netns", ns.name()])?;
        if !host_addr.is_empty() {
            run(&["ip", "addr", "add", host_addr, "dev", host])?;
        }
        run(&["ip", "link", "set", host, "up"])?;
        ns.ip(&["addr", "add", ns_addr, "dev", inner])?;
        ns.ip(&["link", "set", inner, "up"])?;
        Ok(link)
    }

    /// A bridge with `addr` (CIDR) on the host side.
    pub fn bridge(name: &str, addr: &str) -> Result<HostLink, IsolationError> {
        let _ = run(&["ip", "link", "del", name]);
        run(&["ip", "link", "add", name, "type", "bridge"])?;
        let link = HostLink {
            name: name.to_string(),
            owned: true,
        };
        run(&["ip", "addr", "add", addr, "dev", name])?;
        run(&["ip", "link", "set", name, "up"])?;
        Ok(link)
    }

    /// A handle on a link someone else owns (not deleted on drop).
    pub fn existing(name: &str) -> HostLink {
        HostLink {
            name: name.to_string(),
            owned: false,
        }
    }

    /// Enslaves this (veth) link to `bridge`.
    pub fn attach(&self, bridge: &HostLink) -> Result<(), IsolationError> {
        run(&["ip", "link", "set", &self.name, "master", &bridge.name])
    }

    /// The link name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for HostLink {
    fn drop(&mut self) {
        if self.owned {
            let _ = run(&["ip", "link", "del", &self.name]);
        }
    }
}
