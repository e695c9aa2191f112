//! `bulkhead up`: every instance of a deployment as a local process; `proxied` and `none` ones in
//! their own network namespaces, filtered by nftables. Everything is torn down on drop.

use super::IsolationError;
use super::firewall::ruleset;
use super::netns::{HostLink, Netns, run};
use crate::policy::NetworkMode;
use crate::tooldef::DeploymentDef;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to bring a deployment up.
#[derive(Clone, Debug)]
pub struct UpOptions {
    /// The `bulkhead` executable to run instances with.
    pub exe: PathBuf,
    /// `--config` passed to every instance (None: their default).
    pub config: Option<PathBuf>,
    /// Second octet of the private addresses used (`10.<subnet>.…`); namespaces are ours alone.
    pub subnet: u8,
    /// Prefix of namespace and link names (keep it short: link names are ≤ 15 bytes).
    pub prefix: String,
    /// Replaces every server's `proxied_egress` (tests point it at their own hosts).
    pub proxied_egress: Option<Vec<String>>,
    /// Extra environment for the instances.
    pub env: Vec<(String, String)>,
}

/// One running instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Server name.
    pub server: String,
    /// Its network mode.
    pub mode: NetworkMode,
    /// Where clients reach it.
    pub url: String,
}

/// A deployment that is up; dropping it stops the processes and removes the namespaces.
pub struct Running {
    /// Instances, per server least isolated first.
    pub instances: Vec<Instance>,
    /// The egress bridge (the "outside" the proxied instances may reach through their allowlist).
    pub bridge: String,
    /// The host's address on the egress bridge.
    pub bridge_host: Ipv4Addr,
    children: Vec<Child>,
    links: Vec<HostLink>,
    namespaces: Vec<Netns>,
    bridge_link: Option<HostLink>,
}

impl Running {
    /// `mcp_servers` entries for `config.yaml` that reach these instances.
    pub fn client_entries(&self) -> String {
        let mut out = String::from("mcp_servers:\n");
        let mut servers: Vec<&str> = self.instances.iter().map(|i| i.server.as_str()).collect();
        servers.dedup();
        for s in servers {
            out.push_str(&format!("  {s}:\n    type: client\n"));
            for i in self.instances.iter().filter(|i| i.server == s) {
                let key = match i.mode {
                    NetworkMode::Full => "url",
                    NetworkMode::Proxied => "url_proxied",
                    NetworkMode::None => "url_isolated",
                };
                out.push_str(&format!("    {key}: {}\n", i.url));
            }
            out.push_str("    read_timeout: 60\n    trusted: true\n");
        }
        out
    }

    /// The instance of `server` in `mode`.
    pub fn instance(&self, server: &str, mode: NetworkMode) -> Option<&Instance> {
        self.instances
            .iter()
            .find(|i| i.server == server && i.mode == mode)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(c.id() as i32).expect("child pid"),
                rustix::process::Signal::TERM,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for c in &mut self.children {
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.links.clear();
        self.namespaces.clear();
        self.bridge_link = None;
    }
}

fn resolve(entries: &[String]) -> Vec<SocketAddrV4> {
    let mut out = Vec::new();
    for e in entries {
        match e.to_socket_addrs() {
            Ok(addrs) => out.extend(addrs.filter_map(|a| match a {
                std::net::SocketAddr::V4(v4) => Some(v4),
                std::net::SocketAddr::V6(_) => None,
            })),
            Err(err) => {
                tracing::warn!(entry = %e, error = %err, "allowlist entry does not resolve here; it stays blocked")
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn wait_healthy(addr: SocketAddrV4, child: &mut Child) -> Result<(), IsolationError> {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(IsolationError::Other(format!(
                "instance on {addr} exited during start ({status})"
            )));
        }
        if let Ok(mut s) = TcpStream::connect_timeout(&addr.into(), Duration::from_millis(200)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = write!(
                s,
                "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                addr.ip()
            );
            let mut buf = String::new();
            let _ = s.read_to_string(&mut buf);
            if buf.starts_with("HTTP/1.1 200") {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(IsolationError::Other(format!(
        "instance on {addr} did not become healthy in 15 s"
    )))
}

/// Brings `dep` up. Needs root (namespaces, links, nftables).
pub fn up(dep: &DeploymentDef, opts: &UpOptions) -> Result<Running, IsolationError> {
    let s = opts.subnet;
    let bridge_host = Ipv4Addr::new(10, s, 0, 1);
    let bridge_name = format!("{}-eg", opts.prefix);
    let bridge_link = HostLink::bridge(&bridge_name, &format!("{bridge_host}/24"))?;
    let mut running = Running {
        instances: Vec::new(),
        bridge: bridge_name,
        bridge_host,
        children: Vec::new(),
        links: Vec::new(),
        namespaces: Vec::new(),
        bridge_link: Some(bridge_link),
    };
    for (i, server) in dep.servers.iter().enumerate() {
        let i = u8::try_from(i).map_err(|_| IsolationError::Other("too many servers".into()))?;
        for mode in server.modes() {
            let (listen, prefix, ns_ip) = match mode {
                NetworkMode::Full => (
                    SocketAddrV4::new(Ipv4Addr::LOCALHOST, server.port),
                    Vec::new(),
                    None,
                ),
                NetworkMode::Proxied => {
                    let ns = Netns::create(&format!("{}-{}p", opts.prefix, i))?;
                    let ip = Ipv4Addr::new(10, s, 0, 10 + i);
                    let link = HostLink::veth(
                        &format!("{}{}p", opts.prefix, i),
                        &format!("{}{}pc", opts.prefix, i),
                        &ns,
                        "",
                        &format!("{ip}/24"),
                    )?;
                    link.attach(running.bridge_link.as_ref().expect("bridge exists"))?;
                    let allow = resolve(
                        opts.proxied_egress.as_deref().unwrap_or(
                            &server
                                .proxied_egress
                                .iter()
                                .map(|e| e.to_string())
                                .collect::<Vec<_>>(),
                        ),
                    );
                    ns.nft(&ruleset(server.port, &allow))?;
                    let prefix = ns.exec_prefix();
                    running.links.push(link);
                    running.namespaces.push(ns);
                    (SocketAddrV4::new(ip, server.port), prefix, Some(ip))
                }
                NetworkMode::None => {
                    let ns = Netns::create(&format!("{}-{}n", opts.prefix, i))?;
                    let (host_ip, ip) = (
                        Ipv4Addr::new(10, s, 10 + i, 1),
                        Ipv4Addr::new(10, s, 10 + i, 2),
                    );
                    let link = HostLink::veth(
                        &format!("{}{}n", opts.prefix, i),
                        &format!("{}{}nc", opts.prefix, i),
                        &ns,
                        &format!("{host_ip}/30"),
                        &format!("{ip}/30"),
                    )?;
                    ns.nft(&ruleset(server.port, &[]))?;
                    let prefix = ns.exec_prefix();
                    running.links.push(link);
                    running.namespaces.push(ns);
                    (SocketAddrV4::new(ip, server.port), prefix, Some(ip))
                }
            };
            let mut args: Vec<String> = prefix;
            args.push(opts.exe.display().to_string());
            if let Some(c) = &opts.config {
                args.extend(["--config".into(), c.display().to_string()]);
            }
            args.extend([
                "serve".into(),
                server.name.into(),
                "--listen".into(),
                listen.to_string(),
                "--mode".into(),
                mode.as_str().into(),
            ]);
            if let Some(ip) = ns_ip {
                args.extend(["--allow-host".into(), ip.to_string()]);
            }
            let mut cmd = Command::new(&args[0]);
            cmd.args(&args[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            for (k, v) in &opts.env {
                cmd.env(k, v);
            }
            let mut child = cmd.spawn().map_err(|e| IsolationError::Command {
                cmd: args.join(" "),
                detail: e.to_string(),
            })?;
            let healthy = wait_healthy(listen, &mut child);
            running.children.push(child);
            healthy?;
            running.instances.push(Instance {
                server: server.name.to_string(),
                mode,
                url: format!("http://{listen}/mcp"),
            });
        }
    }
    Ok(running)
}

/// Whether real isolation can run here: root (namespaces are created and removed as a probe), `ip`
/// (iproute2) and `nft` (nftables). The error says what is missing.
pub fn namespaces_permitted() -> Result<(), IsolationError> {
    let mut missing = Vec::new();
    for (tool, package) in [("ip", "iproute2"), ("nft", "nftables")] {
        let found = std::process::Command::new(tool)
            .arg("-V")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok();
        if !found {
            missing.push(format!("`{tool}` (Debian package {package})"));
        }
    }
    if !missing.is_empty() {
        return Err(IsolationError::NotPermitted(format!(
            "{} not found",
            missing.join(" and ")
        )));
    }
    if !rustix::process::geteuid().is_root() {
        return Err(IsolationError::NotPermitted("not running as root".into()));
    }
    let name = format!("bh-probe-{}", std::process::id());
    run(&["ip", "netns", "add", &name]).map_err(|e| IsolationError::NotPermitted(e.to_string()))?;
    run(&["ip", "netns", "del", &name])
}
