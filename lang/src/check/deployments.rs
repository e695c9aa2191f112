//! Deployment rules: servers exist, ports are unique, egress entries are `host:port`.

use super::{Loaded, is_snake_ident, ptr};
use crate::diag::Diagnostic;
use crate::model::{DeployedServer, Deployment, Server};
use crate::spec::{DeploymentSpec, SpecKind};
use crate::suggest::did_you_mean;
use bulkhead_vocab::HostPort;
use std::collections::{BTreeMap, BTreeSet};

/// Checks deployments against the servers; returns model deployments (sorted by name).
pub fn check(
    specs: &[Loaded<DeploymentSpec>],
    servers: &[Server],
    declared: &BTreeSet<(SpecKind, String)>,
    default_tag: &str,
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
            let mut endpoints = |key: &str, list: &[String]| -> Vec<HostPort> {
                let mut parsed = Vec::new();
                for (i, entry) in list.iter().enumerate() {
                    match HostPort::parse(entry) {
                        Ok(hp) => parsed.push(hp),
                        Err(why) => errors.push(
                            l.error_at_value(
                                &format!("{at}/{key}/{i}"),
                                format!("`{entry}` is not `host:port`"),
                            )
                            .label(why.to_string()),
                        ),
                    }
                }
                parsed
            };
            let egress = endpoints("egress", &s.egress);
            let proxied_egress = endpoints("proxied_egress", &s.proxied_egress);
            for (i, range) in s.internal_ranges.iter().enumerate() {
                if let Err(why) = internal_range(range) {
                    errors.push(
                        l.error_at_value(
                            &format!("{at}/internal_ranges/{i}"),
                            format!("`{range}` is not an internal address range"),
                        )
                        .label(why),
                    );
                }
            }
            deployed.push(DeployedServer {
                name: name.clone(),
                port: s.port,
                egress,
                proxied_egress,
                internal_ranges: s.internal_ranges.clone(),
                trust_domain: match &s.trust_domain {
                    Some(t) => {
                        if !super::is_trust_domain(t) {
                            errors.push(
                                l.error_at_value(
                                    &format!("{at}/trust_domain"),
                                    format!("`{t}` is not a trust domain name"),
                                )
                                .label("use 1 to 64 lowercase letters, digits, `_` and `-`"),
                            );
                        }
                        t.clone()
                    }
                    None => crate::model::default_trust_domain(&d.name),
                },
                max_sensitivity: server.max_sensitivity(),
                replicas: s.replicas.unwrap_or(1).max(1),
            });
        }
        check_host_ports(l, &deployed, errors);
        let image = resolve_image(
            l,
            "/image",
            d.image.as_ref(),
            "bulkhead",
            default_tag,
            errors,
        );
        let proxy_image = resolve_image(
            l,
            "/proxy_image",
            d.proxy_image.as_ref(),
            "bulkhead-egress-proxy",
            default_tag,
            errors,
        );
        out.push(Deployment {
            name: d.name.clone(),
            source: l.file.display.clone(),
            environment: d.environment.unwrap_or_default(),
            image,
            proxy_image,
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

/// Resolves an image spec at `at`: the default repository and `default_tag` (the package's
/// version) fill what is not given; `latest` and a malformed digest are errors.
fn resolve_image(
    l: &Loaded<DeploymentSpec>,
    at: &str,
    spec: Option<&crate::spec::ImageSpec>,
    default_repo: &str,
    default_tag: &str,
    errors: &mut Vec<Diagnostic>,
) -> crate::model::Image {
    let spec = spec.cloned().unwrap_or_default();
    let repository = spec.repository.unwrap_or_else(|| default_repo.to_string());
    let tag = spec.tag.unwrap_or_else(|| default_tag.to_string());
    let repo_ok = !repository.is_empty()
        && repository
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/:".contains(&b))
        && !repository.contains('@');
    if !repo_ok {
        errors.push(
            l.error_at_value(
                &format!("{at}/repository"),
                format!("`{repository}` is not an image repository"),
            )
            .label("lowercase letters, digits, `.`, `_`, `-`, `/` and a registry `host:port`"),
        );
    }
    let tag_ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !tag.starts_with(['.', '-']);
    if !tag_ok {
        errors.push(
            l.error_at_value(&format!("{at}/tag"), format!("`{tag}` is not an image tag"))
                .label("letters, digits, `.`, `_` and `-`, at most 128"),
        );
    } else if tag == "latest" {
        errors.push(
            l.error_at_value(&format!("{at}/tag"), "an image tagged `latest` does not decide what runs")
                .label("a moving tag")
                .help("name a version (the default is the package's version) and, for production, a `digest`"),
        );
    }
    if let Some(d) = &spec.digest {
        let ok = d.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        });
        if !ok {
            errors.push(
                l.error_at_value(
                    &format!("{at}/digest"),
                    format!("`{d}` is not an image digest"),
                )
                .label("expected `sha256:` and 64 lowercase hex digits"),
            );
        }
    }
    crate::model::Image {
        repository,
        tag,
        digest: spec.digest,
    }
}

/// Compose publishes each server's instances on consecutive host ports (`port` for full, the
/// next ones for proxied and isolated, on 127.0.0.1): no two servers' ranges may overlap.
fn check_host_ports(
    l: &Loaded<DeploymentSpec>,
    deployed: &[DeployedServer],
    errors: &mut Vec<Diagnostic>,
) {
    let ranges: Vec<(&DeployedServer, u32, u32)> = deployed
        .iter()
        .map(|s| {
            let n = bulkhead_vocab::NetworkMode::needed_for(s.max_sensitivity).count() as u32;
            (s, u32::from(s.port), u32::from(s.port) + n - 1)
        })
        .collect();
    for (i, (a, a0, a1)) in ranges.iter().enumerate() {
        if *a1 > 65535 {
            errors.push(
                l.error_at_value(&format!("/servers/{}/port", ptr(&a.name)), format!("`{}` needs host ports {a0} to {a1}", a.name))
                    .label("past 65535")
                    .help("compose publishes the proxied and isolated instances on the ports after `port`"),
            );
        }
        for (b, b0, b1) in &ranges[..i] {
            if a.port != b.port && a0 <= b1 && b0 <= a1 {
                errors.push(
                    l.error_at_value(
                        &format!("/servers/{}/port", ptr(&a.name)),
                        format!("`{}` publishes host ports {a0} to {a1}, which overlap `{}`'s {b0} to {b1}", a.name, b.name),
                    )
                    .label("overlapping host ports")
                    .help("compose publishes the proxied and isolated instances on the ports after `port`; leave room between servers"),
                );
            }
        }
    }
}

/// Checks an `internal_ranges` entry: a CIDR range inside the private (10/8, 172.16/12,
/// 192.168/16), shared (100.64/10) or unique-local (fc00::/7) space. Loopback, link-local (cloud
/// metadata) and unspecified addresses are never reachable through the proxy.
pub fn internal_range(range: &str) -> Result<(), String> {
    bulkhead_vocab::ranges::openable(range)
}
