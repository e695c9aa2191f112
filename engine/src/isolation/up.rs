//! `bulkhead up`: every instance of a deployment as a local process; `proxied` and `none` ones in
//! their own network namespaces, filtered by nftables. Each proxied instance reaches out only
//! through its egress proxy: Debian's squid on the host side of the egress bridge, running the
//! policy that `generated/proxy/` shows (rendered by the same function). Each instance writes
//! its own workspace layer and reads the less isolated ones, in its own mount namespace
//! (`isolation::layers`). Everything is torn down on drop.

use super::IsolationError;
use super::firewall::ruleset;
use super::netns::{HostLink, Netns, run};
use crate::policy::NetworkMode;
use crate::tooldef::DeploymentDef;
use bulkhead_lang::emit::deploy::{clients, local, proxy};
use bulkhead_vocab::HostPort;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
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
    /// The connectors whose jails go out through a gate, by server: (server, connector, its
    /// own `egress`), so each proxy holds a gate's labelled requests to its connector's list
    /// ([`jail_egress_of`]).
    pub jail_egress: Vec<(String, String, Vec<HostPort>)>,
}

impl UpOptions {
    /// Options with the default address plan ([`local::DEFAULT_SUBNET`], prefix `bh`).
    pub fn new(exe: PathBuf) -> UpOptions {
        UpOptions {
            exe,
            config: None,
            subnet: local::DEFAULT_SUBNET,
            prefix: "bh".into(),
            proxied_egress: None,
            env: Vec::new(),
            jail_egress: Vec::new(),
        }
    }
}

/// The connectors of `dep`'s servers whose jails declare `egress`, with the entries as `env`
/// expands them (for [`UpOptions::jail_egress`]).
pub fn jail_egress_of(
    project: &crate::project::Project,
    dep: &DeploymentDef,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String, Vec<HostPort>)> {
    let mut out = Vec::new();
    for server in dep.servers {
        let Some(def) = project.servers.iter().find(|s| s.name == server.name) else {
            continue;
        };
        let mut used: Vec<&str> = def
            .tools
            .iter()
            .chain(def.resources.iter().map(|r| &r.tool))
            .filter_map(|t| match t.target {
                crate::tooldef::Target::Connector { connector, .. } => Some(connector),
                _ => None,
            })
            .collect();
        used.sort_unstable();
        used.dedup();
        for name in used {
            let Some(c) = project.connectors.iter().find(|c| c.name == name) else {
                continue;
            };
            let entries = allowed(&crate::connectors::jail_egress(c, env));
            if !entries.is_empty() {
                out.push((server.name.to_string(), name.to_string(), entries));
            }
        }
    }
    out
}

/// One egress proxy `up` runs.
#[derive(Clone, Debug)]
pub struct EgressProxy {
    /// The server whose proxied instance uses it.
    pub server: String,
    /// Where it listens (host side of the egress bridge).
    pub addr: SocketAddrV4,
    /// Its folder: `squid.conf` (listen and log lines + `include policy.conf`), `policy.conf`
    /// (the generated policy), `access.log`, `cache.log`.
    pub dir: PathBuf,
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
    /// Its process id (in its own mount namespace; see `isolation::layers`).
    pub pid: u32,
}

/// A deployment that is up; dropping it stops the processes and removes the namespaces.
pub struct Running {
    /// Instances, per server least isolated first.
    pub instances: Vec<Instance>,
    /// The egress bridge (the "outside" the proxied instances may reach through their allowlist).
    pub bridge: String,
    /// The host's address on the egress bridge.
    pub bridge_host: Ipv4Addr,
    /// The egress proxies, one per server with a proxied instance.
    pub proxies: Vec<EgressProxy>,
    children: Vec<Child>,
    _proxy_dirs: Vec<tempfile::TempDir>,
    links: Vec<HostLink>,
    namespaces: Vec<Netns>,
    bridge_link: Option<HostLink>,
}

impl Running {
    /// `mcp_servers` entries for `config.yaml` that reach these instances.
    pub fn client_entries(&self) -> String {
        client_entries(
            self.instances
                .iter()
                .map(|i| (i.server.as_str(), i.mode, i.url.as_str())),
        )
    }

    /// `bulkhead connect` arguments reaching every instance of `server` (desktop clients).
    pub fn connect_args(&self, server: &str) -> Vec<String> {
        let mut args = vec!["connect".to_string(), server.to_string()];
        for i in self.instances.iter().filter(|i| i.server == server) {
            args.extend([clients::url_flag(i.mode).to_string(), i.url.clone()]);
        }
        args
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

/// The squid binary (Debian installs it in /usr/sbin, which a non-root PATH may lack).
fn squid_binary() -> Option<PathBuf> {
    let sbin = PathBuf::from("/usr/sbin/squid");
    if sbin.exists() {
        return Some(sbin);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("squid"))
            .find(|p| p.exists())
    })
}

/// `host:port` allowlist entries as the proxy policy takes them (entries that are not
/// `host:port` are left out and logged; `bulkhead check` refuses them in specs).
fn allowed(entries: &[String]) -> Vec<HostPort> {
    let mut out: Vec<HostPort> = entries
        .iter()
        .filter_map(|e| match HostPort::parse(e) {
            Ok(hp) => Some(hp),
            Err(why) => {
                tracing::warn!(entry = %e, %why, "left out of the proxy allowlist");
                None
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Starts squid on `addr` (host side) with the generated policy for `entries`; waits until it
/// accepts connections. Returns the child, its folder and the folder's owner handle.
fn start_proxy(
    prefix: &str,
    index: u8,
    addr: SocketAddrV4,
    entries: &[String],
    internal: &[String],
    jail_egress: &[(String, Vec<HostPort>)],
) -> Result<(Child, PathBuf, tempfile::TempDir), IsolationError> {
    let squid = squid_binary().ok_or_else(|| {
        IsolationError::NotPermitted(
            "`squid` not found (Debian package squid): proxied instances reach out through it"
                .into(),
        )
    })?;
    let other = |e: std::io::Error| IsolationError::Other(format!("egress proxy folder: {e}"));
    let tmp = tempfile::Builder::new()
        .prefix("bulkhead-proxy-")
        .tempdir()
        .map_err(other)?;
    let dir = tmp.path().to_path_buf();
    let gated: Vec<proxy::Gated<'_>> = jail_egress
        .iter()
        .map(|(connector, egress)| proxy::Gated { connector, egress })
        .collect();
    let policy = proxy::squid_policy(&allowed(entries), internal, &gated);
    std::fs::write(dir.join("policy.conf"), &policy).map_err(other)?;
    let wrapper = format!(
        "http_port {addr}
         pid_filename none
         cache_log {dir}/cache.log
         access_log stdio:{dir}/access.log
         coredump_dir none
         cache_effective_user proxy
         include {dir}/policy.conf
",
        dir = dir.display()
    );
    std::fs::write(dir.join("squid.conf"), wrapper).map_err(other)?;
    // Started as root, squid switches to `proxy`, which must be able to write its logs.
    run(&["chown", "-R", "proxy:proxy", &dir.display().to_string()])?;
    let mut perms = std::fs::metadata(&dir).map_err(other)?.permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&dir, perms).map_err(other)?;
    // Each squid needs its own shared-memory names (`-n`); a killed run leaves its segments.
    let service: String = format!("{prefix}eg{index}")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    if let Ok(entries) = std::fs::read_dir("/dev/shm") {
        for e in entries.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{service}-cf__"))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let conf = dir.join("squid.conf");
    let mut child = Command::new(&squid)
        .args(["-N", "-d", "1", "-n", &service, "-f"])
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| IsolationError::Command {
            cmd: format!("{} -N -f {}", squid.display(), conf.display()),
            detail: e.to_string(),
        })?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("cache.log")).unwrap_or_default();
            let fatal: Vec<&str> = log.lines().filter(|l| l.contains("FATAL")).collect();
            return Err(IsolationError::Other(format!(
                "the egress proxy exited during start ({status}): {}",
                fatal.join("; ")
            )));
        }
        if TcpStream::connect_timeout(&addr.into(), Duration::from_millis(100)).is_ok() {
            return Ok((child, dir, tmp));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(IsolationError::Other(format!(
                "the egress proxy did not listen on {addr} within 10 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Brings `dep` up. Needs root (namespaces, links, nftables) and, for proxied instances, squid.
pub fn up(dep: &DeploymentDef, opts: &UpOptions) -> Result<Running, IsolationError> {
    let s = opts.subnet;
    // The instances' configuration, with `opts.env` over the process environment (to find the
    // workspace layers they will use).
    let config = crate::config::Config::load_with(opts.config.as_deref(), &|k: &str| {
        opts.env
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .or_else(|| crate::config::env_lookup(k))
    })
    .map_err(|e| IsolationError::Other(format!("configuration: {e}")))?;
    let bridge_host = local::bridge_host(s);
    let bridge_name = format!("{}-eg", opts.prefix);
    let bridge_link = HostLink::bridge(&bridge_name, &format!("{bridge_host}/24"))?;
    let mut running = Running {
        instances: Vec::new(),
        bridge: bridge_name,
        bridge_host,
        proxies: Vec::new(),
        children: Vec::new(),
        _proxy_dirs: Vec::new(),
        links: Vec::new(),
        namespaces: Vec::new(),
        bridge_link: Some(bridge_link),
    };
    for (i, server) in dep.servers.iter().enumerate() {
        let i = u8::try_from(i).map_err(|_| IsolationError::Other("too many servers".into()))?;
        let modes = server.modes();
        super::layers::create_all(&config, server.name, &modes).map_err(|e| {
            IsolationError::Other(format!("workspace layers of `{}`: {e}", server.name))
        })?;
        for mode in modes.iter().copied() {
            let mut extra_env: Vec<(String, String)> = Vec::new();
            let (listen, prefix, ns_ip) = match mode {
                NetworkMode::Full => (
                    SocketAddrV4::new(Ipv4Addr::LOCALHOST, server.port),
                    Vec::new(),
                    None,
                ),
                NetworkMode::Proxied => {
                    let ns = Netns::create(&format!("{}-{}p", opts.prefix, i))?;
                    let ip = *local::instance_addr(s, i, NetworkMode::Proxied, 0).ip();
                    let link = HostLink::veth(
                        &format!("{}{}p", opts.prefix, i),
                        &format!("{}{}pc", opts.prefix, i),
                        &ns,
                        "",
                        &format!("{ip}/24"),
                    )?;
                    link.attach(running.bridge_link.as_ref().expect("bridge exists"))?;
                    let entries: Vec<String> = match &opts.proxied_egress {
                        Some(list) => list.clone(),
                        None => server
                            .proxied_egress
                            .iter()
                            .map(|e| e.to_string())
                            .collect(),
                    };
                    let proxy_addr = local::proxy_addr(s, i);
                    let (child, dir, tmp) = start_proxy(
                        &opts.prefix,
                        i,
                        proxy_addr,
                        &entries,
                        &server
                            .internal_ranges
                            .iter()
                            .map(|r| r.to_string())
                            .collect::<Vec<_>>(),
                        &opts
                            .jail_egress
                            .iter()
                            .filter(|(s, _, _)| s == server.name)
                            .map(|(_, c, e)| (c.clone(), e.clone()))
                            .collect::<Vec<_>>(),
                    )?;
                    running.children.push(child);
                    running._proxy_dirs.push(tmp);
                    running.proxies.push(EgressProxy {
                        server: server.name.to_string(),
                        addr: proxy_addr,
                        dir,
                    });
                    // The namespace may open connections to its proxy only.
                    ns.nft(&ruleset(server.port, &[proxy_addr]))?;
                    let proxy_url = format!("http://{proxy_addr}");
                    for var in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                        extra_env.push((var.to_string(), proxy_url.clone()));
                    }
                    for var in ["NO_PROXY", "no_proxy"] {
                        extra_env.push((var.to_string(), "localhost,127.0.0.1".to_string()));
                    }
                    let prefix = ns.exec_prefix();
                    running.links.push(link);
                    running.namespaces.push(ns);
                    (SocketAddrV4::new(ip, server.port), prefix, Some(ip))
                }
                NetworkMode::None => {
                    let ns = Netns::create(&format!("{}-{}n", opts.prefix, i))?;
                    let (host_ip, ip) = local::isolated_link(s, i);
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
            // Its own mount namespace: the layers above hidden, the ones below read-only.
            let view = super::layers::view(&config, server.name, mode, &modes);
            args.extend(super::layers::prefix(&view));
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
            for (k, v) in opts.env.iter().chain(&extra_env) {
                cmd.env(k, v);
            }
            let mut child = cmd.spawn().map_err(|e| IsolationError::Command {
                cmd: args.join(" "),
                detail: e.to_string(),
            })?;
            let healthy = wait_healthy(listen, &mut child);
            let pid = child.id();
            running.children.push(child);
            healthy?;
            running.instances.push(Instance {
                server: server.name.to_string(),
                mode,
                url: format!("http://{listen}/mcp"),
                pid,
            });
        }
    }
    Ok(running)
}

/// Whether real isolation can run here: root (namespaces are created and removed as a probe), `ip`
/// (iproute2), `nft` (nftables) and `squid`. The error says what is missing.
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
    if squid_binary().is_none() {
        missing.push("`squid` (Debian package squid, the egress proxy)".to_string());
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

/// `mcp_servers` entries (YAML) reaching `instances` (server, mode, URL; each server's together):
/// one isolating-client entry per server.
pub fn client_entries<'a>(
    instances: impl Iterator<Item = (&'a str, NetworkMode, &'a str)>,
) -> String {
    let mut out = String::from("mcp_servers:\n");
    let mut last = None;
    for (server, mode, url) in instances {
        if last != Some(server) {
            if last.is_some() {
                out.push_str("    read_timeout: 60\n    trusted: true\n");
            }
            out.push_str(&format!("  {server}:\n    type: client\n"));
            last = Some(server);
        }
        out.push_str(&format!("    {}: {url}\n", clients::url_key(mode)));
    }
    if last.is_some() {
        out.push_str("    read_timeout: 60\n    trusted: true\n");
    }
    out
}
