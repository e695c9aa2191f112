//! Credentials of a production deployment reach its containers as files, never as plain
//! environment variables (which every process the server starts, and anyone who can read its
//! `/proc/<pid>/environ`, would see): a connector of a server that a `production` deployment
//! runs may read a variable whose name says it is a credential only through `secrets:`.

use super::Loaded;
use crate::diag::Diagnostic;
use crate::model::{Connector, Deployment, Server, Target};
use crate::spec::{ConnectorSpec, DeployEnvironment};

/// Name parts that mark a variable as a credential.
const CREDENTIAL_WORDS: &[&str] = &[
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
    "DATABASE_URL",
    "DSN",
];

/// Whether a variable's name says it holds a credential.
pub fn looks_like_credential(var: &str) -> bool {
    let upper = var.to_ascii_uppercase();
    CREDENTIAL_WORDS.iter().any(|w| upper.contains(w))
}

/// An error at each credential-like variable read by a connector of a production deployment's
/// servers without being declared in the connector's `secrets:`.
pub fn check(
    specs: &[Loaded<ConnectorSpec>],
    connectors: &[Connector],
    servers: &[Server],
    deployments: &[Deployment],
    errors: &mut Vec<Diagnostic>,
) {
    for c in connectors {
        let Some(production) = deployments.iter().find(|d| {
            d.environment == DeployEnvironment::Production
                && d.servers.iter().any(|ds| {
                    servers.iter().any(|s| {
                        s.name == ds.name
                            && s.tools.iter().chain(s.resources.iter().map(|r| &r.tool)).any(
                                |t| matches!(&t.target, Target::Connector { connector, .. } if connector == &c.name),
                            )
                    })
                })
        }) else {
            continue;
        };
        let Some(l) = specs.iter().find(|l| l.spec.name == c.name) else {
            continue;
        };
        for r in crate::vars::references(&c.settings_json()) {
            if c.secrets.contains(&r.name) || !looks_like_credential(&r.name) {
                continue;
            }
            errors.push(
                l.error_at_value(
                    &format!("/settings{}", r.pointer),
                    format!(
                        "`{}` looks like a credential, but `{}` reads it as a plain environment variable",
                        r.name, c.name
                    ),
                )
                .label("not declared in `secrets:`")
                .help(format!(
                    "the production deployment `{}` ({}) would pass it in the containers' environment; add `secrets: [{}]` so it is mounted as a file and read through `{}_FILE`",
                    production.name, production.source, r.name, r.name
                )),
            );
        }
    }
}
