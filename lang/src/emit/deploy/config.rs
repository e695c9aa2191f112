//! `config/<deployment>.yaml`: the runtime configuration every instance of a deployment reads
//! (mounted read-only at `/etc/bulkhead/config.yaml`): its compose service names as accepted
//! `Host` values, state and workspaces in their separate volumes, keys from the environment, and
//! the deployment as the trust domain (one session level across all its servers).

use super::{STATE_DIR, WORKSPACES_DIR, plan};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::{Deployment, Model};
use serde_json::json;

/// Adds `config/<deployment>.yaml`.
pub fn emit(model: &Model, d: &Deployment, out: &mut Output) {
    let mut hosts: Vec<String> = plan(model, d)
        .iter()
        .flat_map(|p| p.instances.iter().map(|i| i.service.clone()))
        .collect();
    hosts.sort();
    hosts.extend(["localhost".to_string(), "127.0.0.1".to_string()]);
    let doc = json!({
        "environment": "${BULKHEAD_ENV:-development}",
        "auth": {
            "issuer": "${BULKHEAD_ISSUER:-bulkhead-dev}",
            "audience": "${BULKHEAD_AUDIENCE:-bulkhead}",
            "keys": [{
                "kid": "dev",
                "alg": "HS256",
                "secret": "${BULKHEAD_DEV_SECRET:?set BULKHEAD_DEV_SECRET (32 bytes or more) before starting the deployment}",
            }],
        },
        // The token service (`POST /token` on every instance): the identity provider's token in,
        // a session token out. The development key plays the provider; the signing key is made
        // once in the shared state volume, or read from BULKHEAD_SESSION_KEY_FILE (production
        // refuses to start without it).
        "token_service": {
            "signing_key_file": "${BULKHEAD_SESSION_KEY_FILE:-}",
            "provider": {
                "issuer": "${BULKHEAD_ISSUER:-bulkhead-dev}",
                "audience": "${BULKHEAD_AUDIENCE:-bulkhead}",
                "keys": [{
                    "kid": "dev",
                    "alg": "HS256",
                    "secret": "${BULKHEAD_DEV_SECRET:?set BULKHEAD_DEV_SECRET (32 bytes or more) before starting the deployment}",
                }],
            },
        },
        "http": { "allowed_hosts": hosts, "stateful": true },
        "state": {
            "dir": format!("${{BULKHEAD_STATE_DIR:-{STATE_DIR}}}"),
            "workspaces": format!("${{BULKHEAD_WORKSPACES:-{WORKSPACES_DIR}}}"),
            // Every server of the deployment keeps one level per agent session.
            "trust_domain": format!(
                "${{BULKHEAD_TRUST_DOMAIN:-{}}}",
                crate::model::default_trust_domain(&d.name)
            ),
        },
    });
    let mut text = header("#", &[&d.source]);
    text.push_str(&format!(
        "# Runtime configuration of the `{}` instances, mounted read-only at /etc/bulkhead/config.yaml\n\
         # by compose/{}.yaml. `allowed_hosts` lists the compose service names (the Host check).\n\
         # `token_service`: identity provider tokens are exchanged at `POST /token` of any instance\n\
         # for session tokens (the development key plays the provider; production sets\n\
         # BULKHEAD_SESSION_KEY_FILE to an ES256 key, or the instances refuse to start).\n",
        d.name, d.name
    ));
    text.push_str(&to_yaml(&doc));
    out.add(format!("config/{}.yaml", d.name), text);
}
