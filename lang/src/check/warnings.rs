//! Warnings: what is legal but probably a mistake. They are reported (by `bulkhead check` and as
//! cargo warnings) and the build goes on.

use super::Loaded;
use crate::diag::Diagnostic;
use crate::model::{Connector, OperationBody, Server, Target};
use crate::spec::{DeployEnvironment, DeploymentSpec, FileAction, ServerSpec};

/// A server whose tools save large results to `/workspace/results/…` but that has no tool to
/// read a file back: the model is told where the full result is and cannot open it.
pub fn results_unreadable(
    specs: &[Loaded<ServerSpec>],
    servers: &[Server],
    connectors: &[Connector],
) -> Vec<Diagnostic> {
    let reads_files = |t: &crate::model::Tool| match &t.target {
        Target::Connector {
            connector,
            operation,
        } => connectors
            .iter()
            .find(|c| &c.name == connector)
            .and_then(|c| c.operations.iter().find(|o| &o.name == operation))
            .is_some_and(|o| {
                matches!(
                    o.body,
                    OperationBody::Files {
                        action: FileAction::Read
                    }
                )
            }),
        Target::Handler | Target::Static(_) => false,
    };
    let mut out = Vec::new();
    for s in servers {
        if s.tools.is_empty() || s.tools.iter().any(reads_files) {
            continue;
        }
        let Some(l) = specs.iter().find(|l| l.spec.name == s.name) else {
            continue;
        };
        out.push(
            Diagnostic::warning(
                &l.file,
                l.key_at("/tools"),
                format!(
                    "server `{}` saves large results to /workspace/results/, but none of its tools can read a file back",
                    s.name
                ),
            )
            .label("no tool `uses` a files connector's `read` operation")
            .help("add a tool like `read_file` with `uses: workspace.read`, so the model can open what a truncated result points to"),
        );
    }
    out
}

/// A `secret` tool over a connector that needs the network (`postgres`): secret tools run only
/// on `none` instances, which reach nothing but the state store, so every call would fail.
pub fn unreachable_from_none(
    specs: &[Loaded<ServerSpec>],
    servers: &[Server],
    connectors: &[Connector],
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for s in servers {
        let Some(l) = specs.iter().find(|l| l.spec.name == s.name) else {
            continue;
        };
        for t in s
            .tools
            .iter()
            .filter(|t| t.sensitivity == crate::spec::Sensitivity::Secret)
        {
            let Target::Connector { connector, .. } = &t.target else {
                continue;
            };
            let Some(c) = connectors.iter().find(|c| &c.name == connector) else {
                continue;
            };
            if c.kind != crate::spec::ConnectorKind::Postgres {
                continue;
            }
            out.push(
                Diagnostic::warning(
                    &l.file,
                    l.value_at(&format!("/tools/{}/sensitivity", super::ptr(&t.name))),
                    format!(
                        "tool `{}` is secret, so it runs only on `none` instances, which cannot reach the `{}` database",
                        t.name, c.name
                    ),
                )
                .label("every call would fail there")
                .help("declare it `confidential` (proxied instances reach the database through the egress proxy), or keep secret data in a connector the isolated instance mounts"),
            );
        }
    }
    out
}

/// A `connect` tool whose connector reaches a `host:port` (an `http` connector's host, a jail's
/// `egress`) that the deployment running its server does not list in `egress`: the full
/// instance's egress rules (a Kubernetes NetworkPolicy opens only the listed ports) and the
/// reviewer's table do not show it, and the call may fail where it is deployed.
pub fn connect_reach_undeclared(
    specs: &[Loaded<DeploymentSpec>],
    deployments: &[crate::model::Deployment],
    servers: &[Server],
    connectors: &[Connector],
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for d in deployments {
        let Some(l) = specs.iter().find(|l| l.spec.name == d.name) else {
            continue;
        };
        for ds in &d.servers {
            let Some(s) = servers.iter().find(|s| s.name == ds.name) else {
                continue;
            };
            let listed: Vec<String> = ds.egress.iter().map(|h| h.to_string()).collect();
            let mut seen = std::collections::BTreeSet::new();
            for t in s
                .tools
                .iter()
                .filter(|t| t.permission == crate::spec::Permission::Connect)
            {
                let Target::Connector { connector, .. } = &t.target else {
                    continue;
                };
                let Some(c) = connectors.iter().find(|c| &c.name == connector) else {
                    continue;
                };
                for reach in crate::review::connector_policy(c).reach {
                    // A range the connector opens is no `host:port` a deployment lists.
                    if reach.starts_with(crate::review::NON_PUBLIC)
                        || listed.contains(&reach)
                        || !seen.insert(reach.clone())
                    {
                        continue;
                    }
                    out.push(
                        Diagnostic::warning(
                            &l.file,
                            l.key_at(&format!("/servers/{}", super::ptr(&ds.name))),
                            format!(
                                "`{}.{}` reaches `{reach}` (connector `{}`), which deployment `{}` does not list in `egress`",
                                s.name, t.name, c.name, d.name
                            ),
                        )
                        .label("not among this server's egress")
                        .help(format!(
                            "add `{reach}` to `egress` (the full instance's egress rules open only what is listed), or remove it from the connector"
                        )),
                    );
                }
            }
        }
    }
    out
}

/// A production deployment whose images are named by tag only: a tag can be pushed again, so
/// what runs is not what was reviewed.
pub fn production_without_digest(
    specs: &[Loaded<DeploymentSpec>],
    deployments: &[crate::model::Deployment],
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for d in deployments
        .iter()
        .filter(|d| d.environment == DeployEnvironment::Production)
    {
        let Some(l) = specs.iter().find(|l| l.spec.name == d.name) else {
            continue;
        };
        for (key, image) in [("image", &d.image), ("proxy_image", &d.proxy_image)] {
            if image.digest.is_some() {
                continue;
            }
            let span = if l.spec.image.is_some() && key == "image"
                || l.spec.proxy_image.is_some() && key == "proxy_image"
            {
                l.key_at(&format!("/{key}"))
            } else {
                l.key_at("/environment")
            };
            out.push(
                Diagnostic::warning(
                    &l.file,
                    span,
                    format!(
                        "production deployment `{}` runs `{}` without a digest",
                        d.name,
                        image.tagged()
                    ),
                )
                .label("a tag can be pushed again: what runs may not be what was reviewed")
                .help(format!(
                    "add `{key}: {{ digest: sha256:… }}` (from `docker inspect --format '{{{{index .RepoDigests 0}}}}'` after pushing)"
                )),
            );
        }
    }
    out
}
