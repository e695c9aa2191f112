//! Deployment rules: servers exist, ports are unique, egress entries are `host:port`.

use super::{Loaded, is_snake_ident, ptr};
use crate::diag::Diagnostic;
use crate::model::{DeployedServer, Deployment, Server};
use crate::spec::{DeploymentSpec, SpecKind};
use crate::suggest::did_you_mean;
use std::collections::{BTreeMap, BTreeSet};

/// Checks deployments against the servers; returns model deployments (sorted by name).
pub fn check(
    specs: &[Loaded<DeploymentSpec>],
    servers: &[Server],
    declared: &BTreeSet<(SpecKind, String)>,
    errors: &mut Vec<Diagnostic>,
) -> Vec<Deployment> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for l in specs {
        let d = &l.spec;
        if !is_snake_ident(&d.name) {
            errors.push(
                l.error_at_value(
                    "/name",
                    format!("deployment name `{}` is not a lowercase identifier", d.name),
                )
                .label("use lowercase letters, digits and `_`"),
            );
        }
        if let Some(first) = seen.insert(&d.name, &l.file.display) {
            errors.push(
                l.error_at_value("/name", format!("deployment `{}` is defined twice", d.name))
                    .label("second definition")
                    .help(format!("the first is in {first}")),
            );
            continue;
        }
        let mut ports: BTreeMap<u16, &str> = BTreeMap::new();
        let mut deployed = Vec::new();
        for (name, s) in &d.servers {
            let at = format!("/servers/{}", ptr(name));
            let Some(server) = servers.iter().find(|x| &x.name == name) else {
                if declared.contains(&(SpecKind::Server, name.clone())) {
                    continue; // the server's own file has errors, reported there
                }
                let mut e = l
                    .error_at_key(
                        &at,
                        format!("deployment names server `{name}`, which does not exist"),
                    )
                    .label("unknown server");
                if let Some(h) = did_you_mean(name, servers.iter().map(|s| s.name.as_str())) {
                    e = e.help(format!("did you mean `{h}`?"));
                }
                errors.push(e);
                continue;
            };
            if s.port == 0 {
                errors.push(
                    l.error_at_value(&format!("{at}/port"), "port 0 is not a fixed port")
                        .label("choose a port from 1 to 65535"),
                );
            }
            if let Some(other) = ports.insert(s.port, name) {
                errors.push(
                    l.error_at_value(
                        &format!("{at}/port"),
                        format!("port {} is already used by `{other}`", s.port),
                    )
                    .label("duplicate port"),
                );
            }
            for (key, list) in [("egress", &s.egress), ("proxied_egress", &s.proxied_egress)] {
                for (i, entry) in list.iter().enumerate() {
                    if let Err(why) = host_port(entry) {
                        errors.push(
                            l.error_at_value(
                                &format!("{at}/{key}/{i}"),
                                format!("`{entry}` is not `host:port`"),
                            )
                            .label(why),
                        );
                    }
                }
            }
            deployed.push(DeployedServer {
                name: name.clone(),
                port: s.port,
                egress: s.egress.clone(),
                proxied_egress: s.proxied_egress.clone(),
                max_sensitivity: server.max_sensitivity(),
                replicas: s.replicas.unwrap_or(1).max(1),
            });
        }
        out.push(Deployment {
            name: d.name.clone(),
            source: l.file.display.clone(),
            servers: deployed,
            targets: {
                let mut t = d
                    .targets
                    .clone()
                    .unwrap_or_else(|| vec![crate::spec::DeployTarget::Compose]);
                t.sort();
                t.dedup();
                t
            },
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Checks a `host:port` entry: a DNS name or IPv4 address, and a port from 1 to 65535.
pub fn host_port(entry: &str) -> Result<(), String> {
    let (host, port) = entry.rsplit_once(':').ok_or("missing `:port`")?;
    let port: u32 = port
        .parse()
        .map_err(|_| "the port is not a number".to_string())?;
    if !(1..=65535).contains(&port) {
        return Err("the port must be from 1 to 65535".into());
    }
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
        });
    if !ok {
        return Err("the host is not a DNS name or IPv4 address".into());
    }
    match host.parse::<std::net::Ipv4Addr>() {
        Ok(ip) if ip.is_loopback() || ip.is_unspecified() || ip.octets()[0] == 0 => {
            Err("loopback and unspecified addresses are never egress".into())
        }
        Ok(ip) if ip.is_link_local() => {
            Err("link-local addresses (cloud metadata, 169.254.0.0/16) are never egress".into())
        }
        Ok(ip) if ip.is_multicast() || ip.is_broadcast() => {
            Err("multicast and broadcast addresses are never egress".into())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::host_port;

    #[test]
    fn host_port_accepts_names_and_routable_addresses() {
        for ok in ["db.internal:5432", "hooks.example.com:443", "10.1.2.3:80"] {
            assert_eq!(host_port(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn host_port_refuses_metadata_loopback_and_malformed() {
        for bad in [
            "169.254.169.254:80",
            "169.254.1.1:443",
            "127.0.0.1:8000",
            "0.0.0.0:80",
            "224.0.0.1:5353",
            "255.255.255.255:9",
            "host",
            "host:0",
            "host:70000",
            "-bad.example:80",
        ] {
            assert!(host_port(bad).is_err(), "{bad}");
        }
    }
}
