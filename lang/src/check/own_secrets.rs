//! No connector is handed the server's own secrets: a connector's settings (an upstream's
//! `env:`, a bearer, a URL) and its `secrets:` may not name a variable the server itself reads a
//! credential from. Those are every `BULKHEAD_*` variable (the engine's namespace: the
//! development key, the session signing key, the state store's URL, …) and every variable the
//! project's `config.yaml` reads in `auth`, `token_service`, `approvals`, `audit` or `state` (the
//! keys that verify and sign tokens, seal approvals, sign the audit chain, and reach the state
//! store). A launched upstream holding the signing key could mint any user's token.

use super::Loaded;
use crate::diag::Diagnostic;
use crate::spec::ConnectorSpec;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The sections of `config.yaml` whose variables are the server's own credentials.
const OWN_SECTIONS: &[&str] = &["auth", "token_service", "approvals", "audit", "state"];

/// The engine's variable namespace.
const ENGINE_PREFIX: &str = "BULKHEAD_";

/// The server's own secret variables named in `config` (variable → where), beyond the
/// `BULKHEAD_*` namespace.
fn config_vars(config: Option<&Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for section in OWN_SECTIONS {
        let Some(v) = config.and_then(|c| c.get(*section)) else {
            continue;
        };
        for r in crate::vars::references(v) {
            out.entry(r.name.clone())
                .or_insert_with(|| format!("config.yaml /{section}{}", r.pointer));
        }
    }
    out
}

/// What `var` is to the server, when it is one of its own secrets.
fn own(var: &str, config: &BTreeMap<String, String>) -> Option<String> {
    if let Some(at) = config.get(var) {
        return Some(format!("the server reads a credential from it ({at})"));
    }
    var.starts_with(ENGINE_PREFIX).then(|| {
        format!("`{ENGINE_PREFIX}*` variables are the server's own (its keys and its state store)")
    })
}

/// An error at each place a connector names one of the server's own secret variables.
pub fn check(
    specs: &[Loaded<ConnectorSpec>],
    config: Option<&Value>,
    errors: &mut Vec<Diagnostic>,
) {
    let config = config_vars(config);
    for l in specs {
        let c = &l.spec;
        for r in crate::vars::references(c.settings.as_ref().unwrap_or(&json!({}))) {
            if let Some(why) = own(&r.name, &config) {
                errors.push(
                    l.error_at_value(
                        &format!("/settings{}", r.pointer),
                        format!(
                            "connector `{}` is handed the server's own secret `{}`",
                            c.name, r.name
                        ),
                    )
                    .label(why)
                    .help("give the connector a credential of its own, in a variable of its own"),
                );
            }
        }
        for (i, name) in c.secrets.iter().enumerate() {
            if let Some(why) = own(name, &config) {
                errors.push(
                    l.error_at_value(
                        &format!("/secrets/{i}"),
                        format!(
                            "connector `{}` declares the server's own secret `{name}`",
                            c.name
                        ),
                    )
                    .label(why)
                    .help("give the connector a credential of its own, in a variable of its own"),
                );
            }
        }
    }
}
