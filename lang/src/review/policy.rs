//! The effective policy: every capability a client can reach, every instance that runs them,
//! every connector they reach, and the identity rules of `config.yaml`, resolved from a loaded
//! [`Model`].

use super::config::Identity;
use crate::emit::deploy::plan;
use crate::model::{Connector, Model, OperationBody, Param, Target, Tool};
use crate::spec::ConnectorKind;
use bulkhead_vocab::{HostPort, NetworkMode, Permission, Sensitivity};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A project's effective policy.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Tools, resources and prompts, sorted by (server, kind, name).
    pub capabilities: Vec<Capability>,
    /// Connectors, sorted by name.
    pub connectors: Vec<ConnectorPolicy>,
    /// Instances of every deployment, sorted by (deployment, server, mode).
    pub instances: Vec<InstancePolicy>,
    /// What `config.yaml` says about identity and limits.
    pub identity: Identity,
}

/// One thing a client can reach.
#[derive(Clone, Debug)]
pub struct Capability {
    /// Server name.
    pub server: String,
    /// `tool`, `resource` or `prompt`.
    pub kind: &'static str,
    /// Its name (a resource's URI for resources).
    pub name: String,
    /// The spec file that declares it.
    pub source: String,
    /// What it runs, resolved, as a reviewer reads it (no connector name).
    pub runs: String,
    /// What it runs, normalised (SQL layout and comments dropped): equal keys run the same
    /// thing, which is how a rename is recognised and a change of what runs is found.
    pub key: String,
    /// The `connector.operation` it uses, if any, as the spec names it.
    pub connector: Option<String>,
    /// Required permission (prompts: read).
    pub permission: Permission,
    /// Declared sensitivity (prompts: public).
    pub sensitivity: Sensitivity,
    /// Context preset name and the numbers the server's spec overrides in it.
    pub context: (String, BTreeMap<String, u64>),
    /// Each argument's limits, by name (`max_length`, `maximum`, `max_items`, `pattern`,
    /// `values`), as text.
    pub params: BTreeMap<String, BTreeMap<&'static str, String>>,
    /// Its per-user budget (tools only): its own `rate_limit:`, else `config.yaml`'s
    /// `rate_limits.per_user_tool`; None: unlimited.
    pub rate_limit: Option<bulkhead_vocab::RateLimit>,
    /// Whether [`rate_limit`](Capability::rate_limit) is `config.yaml`'s, not the tool's own.
    pub rate_limit_from_config: bool,
    /// When a person approves a call first (tools only).
    pub approval: Option<bulkhead_vocab::Approval>,
    /// Why its data is not read for credentials (`uninspected:`), if it is not.
    pub uninspected: Option<String>,
}

impl Capability {
    /// `server.kind name`, as reports name it.
    pub fn label(&self) -> String {
        format!("{} `{}.{}`", self.kind, self.server, self.name)
    }

    /// The least isolated instance that serves it.
    pub fn from_mode(&self) -> NetworkMode {
        self.sensitivity.required_mode()
    }
}

/// One connector and what it reaches.
#[derive(Clone, Debug)]
pub struct ConnectorPolicy {
    /// Name.
    pub name: String,
    /// The spec file.
    pub source: String,
    /// Kind.
    pub kind: ConnectorKind,
    /// Declared sensitivity.
    pub sensitivity: Sensitivity,
    /// Where it points (path, folder, URL, base URL), resolved to its default.
    pub location: String,
    /// `host:port` it may reach (http: `allowed_hosts` and the base URL's host; postgres: the
    /// URL's host; sandbox and launched mcp: `egress`).
    pub reach: BTreeSet<String>,
    /// Variables passed as secrets (files), not as plain environment.
    pub secrets: BTreeSet<String>,
    /// The CA bundle it trusts instead of the system's (`ca_file`), resolved; empty: the system's.
    pub trust: String,
    /// Every setting as written (the variables' names as well as their defaults), by key, as
    /// JSON text: what runs and what it reads is decided by all of them.
    pub settings: BTreeMap<String, String>,
    /// The package its lock names (`mcp`), at its exact version; empty: none.
    pub package: String,
}

/// One running instance of a deployed server.
#[derive(Clone, Debug)]
pub struct InstancePolicy {
    /// Deployment name.
    pub deployment: String,
    /// The deployment's spec file.
    pub source: String,
    /// Server name.
    pub server: String,
    /// Service name.
    pub service: String,
    /// Network mode.
    pub mode: NetworkMode,
    /// Its trust domain (whose sessions share one level).
    pub trust_domain: String,
    /// `production` or `development`.
    pub environment: String,
    /// Whether its image is pinned by digest.
    pub pinned: bool,
    /// The images it runs from: the server's, and the egress proxy's on `proxied`
    /// (`repository:tag[@digest]`).
    pub images: BTreeSet<String>,
    /// Whether its container runs without the engine's system-call filter (compose
    /// `seccomp=unconfined`, Kubernetes `Unconfined`): it runs jails (the code sandbox, upstream
    /// MCP servers), which install their own, narrower filter.
    pub unconfined: bool,
    /// What it may reach: `full`: the declared egress (informational); `proxied`: the proxy's
    /// allowlist; `none`: nothing.
    pub egress: BTreeSet<HostPort>,
    /// Private ranges its allowlisted names may resolve to (`proxied`).
    pub internal_ranges: BTreeSet<String>,
    /// Connector data it mounts: `<where the connector points> (<setting>, ro|rw)`.
    pub mounts: BTreeSet<String>,
    /// Secrets it receives (variables).
    pub secrets: BTreeSet<String>,
}

/// `${VAR:-default}` → `default` in every string of `v`.
fn defaults(v: &Value) -> Value {
    match v {
        Value::String(s) => {
            let mut out = s.clone();
            for r in crate::vars::references(v) {
                if let Some(d) = r.default() {
                    out = out.replacen(&r.written(), d, 1);
                }
            }
            Value::String(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(defaults).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), defaults(v))).collect())
        }
        other => other.clone(),
    }
}

/// SQL with whitespace runs collapsed, as a reviewer reads it.
fn sql_display(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Drops layout and comments (outside literals, which it keeps as written): equal for SQL that
/// differs only in them.
fn sql_key(sql: &str) -> String {
    crate::sql::words(sql)
        .iter()
        .map(|t| match t {
            crate::sql::Token::Word { text, quoted: true } => format!("\"{text}\""),
            crate::sql::Token::Word { text, .. } => text.clone(),
            crate::sql::Token::Punct(c) => c.to_string(),
            crate::sql::Token::Literal(l) => l.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn location(c: &Connector) -> String {
    match defaults(&Value::String(c.settings.location())) {
        Value::String(s) => s,
        _ => String::new(),
    }
}

/// `host:port` of a URL (default port by scheme), as text.
fn url_authority(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let auth = rest.split(['/', '?', '#']).next()?;
    let auth = auth.rsplit_once('@').map_or(auth, |(_, a)| a);
    if auth.is_empty() {
        return None;
    }
    let has_port = auth
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok());
    Some(if has_port {
        auth.to_string()
    } else {
        let port = match scheme {
            "https" => 443,
            "http" => 80,
            "postgres" | "postgresql" => 5432,
            _ => 0,
        };
        format!("{auth}:{port}")
    })
}

/// How a connector's reach names a non-public range it opens (`reach_private`).
pub(crate) const NON_PUBLIC: &str = "non-public ";

/// What `c` is and reaches, resolved (the one home of a connector's reach: review and the
/// deployment warnings read it).
pub(crate) fn connector_policy(c: &Connector) -> ConnectorPolicy {
    let settings = defaults(&c.settings_json());
    let location = location(c);
    let mut reach = BTreeSet::new();
    if matches!(c.kind, ConnectorKind::Http | ConnectorKind::Postgres)
        && let Some(a) = url_authority(&location)
    {
        reach.insert(a);
    }
    for h in settings
        .get("allowed_hosts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(h) = h.as_str() {
            reach.insert(h.to_string());
        }
    }
    // Non-public ranges an http connector opens, as written (a `${VAR}` is what the operator
    // sets, and review shows that it is the operator's).
    for e in c
        .settings_json()
        .get("reach_private")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        reach.insert(format!("{NON_PUBLIC}{e}"));
    }
    // A jail's way out (`sandbox`, launched `mcp`): from no network to any host is a widening.
    reach.extend(c.egress.iter().map(|h| h.to_string()));
    ConnectorPolicy {
        name: c.name.clone(),
        source: c.source.clone(),
        kind: c.kind,
        sensitivity: c.sensitivity,
        location,
        reach,
        secrets: c.secrets.iter().cloned().collect(),
        settings: match c.settings_json() {
            Value::Object(m) => m.into_iter().map(|(k, v)| (k, v.to_string())).collect(),
            _ => BTreeMap::new(),
        },
        package: c
            .package
            .as_ref()
            .map(|p| match p.registry {
                crate::model::Registry::Pypi => format!("pypi:{}=={}", p.name, p.version),
                crate::model::Registry::Npm => format!("npm:{}@{}", p.name, p.version),
            })
            .unwrap_or_default(),
        trust: settings
            .get("ca_file")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    }
}

/// An operation as a reviewer reads it, and its comparison key.
fn op_text(body: &OperationBody) -> (String, String) {
    let text = match body {
        OperationBody::Files { action } | OperationBody::Logs { action } => {
            action.as_str().to_string()
        }
        OperationBody::Sql { sql, .. } => {
            return (sql_display(sql), sql_key(sql));
        }
        OperationBody::Http {
            method,
            path,
            query,
            body,
            headers,
            renames,
        } => {
            // Headers and renames only when there are any: the text of operations without them
            // stays what earlier reviews wrote.
            let mut text = format!(
                "{} {path} query={query:?} body={body:?}",
                format!("{method:?}").to_ascii_uppercase()
            );
            if !headers.is_empty() {
                text.push_str(&format!(" headers={headers:?}"));
            }
            let renamed: String = renames.iter().map(|(o, t)| format!(" {o}→{t}")).collect();
            text.push_str(&renamed);
            text
        }
        OperationBody::Sandbox { command } => format!("run {command:?}"),
        OperationBody::Mcp {
            tool,
            pin,
            server,
            renames,
            ..
        } => {
            let renamed: String = renames.iter().map(|(o, t)| format!(" {o}→{t}")).collect();
            format!("upstream tool `{tool}` of {server} pinned {pin}{renamed}")
        }
        #[cfg(feature = "fixture-kind")]
        OperationBody::Echo => "echo".to_string(),
    };
    (text.clone(), text)
}

fn params(list: &[Param]) -> BTreeMap<String, BTreeMap<&'static str, String>> {
    list.iter()
        .map(|p| {
            let mut m = BTreeMap::new();
            m.insert("type", p.ty.as_str().to_string());
            if let Some(v) = p.max_length {
                m.insert("max_length", v.to_string());
            }
            if let Some(v) = p.min_length {
                m.insert("min_length", v.to_string());
            }
            if let Some(v) = p.minimum {
                m.insert("minimum", v.to_string());
            }
            if let Some(v) = p.min_items {
                m.insert("min_items", v.to_string());
            }
            if let Some(v) = p.items {
                m.insert("items", v.as_str().to_string());
            }
            if let Some(v) = &p.default {
                m.insert("default", v.to_string());
            }
            if let Some(v) = &p.from_claim {
                m.insert("from_claim", v.clone());
            }
            if let Some(v) = p.maximum {
                m.insert("maximum", v.to_string());
            }
            if let Some(v) = p.max_items {
                m.insert("max_items", v.to_string());
            }
            if let Some(v) = &p.pattern {
                m.insert("pattern", v.clone());
            }
            if !p.values.is_empty() {
                m.insert("values", p.values.join("|"));
            }
            (p.name.clone(), m)
        })
        .collect()
}

fn capability(
    model: &Model,
    server: &crate::model::Server,
    kind: &'static str,
    name: &str,
    t: &Tool,
) -> Capability {
    let (runs, key, connector) = match &t.target {
        Target::Connector {
            connector,
            operation,
        } => {
            let (runs, key) = match model.connector(connector) {
                Some(c) => {
                    let (text, key) = c
                        .operations
                        .iter()
                        .find(|o| &o.name == operation)
                        .map(|o| op_text(&o.body))
                        .unwrap_or_default();
                    let at = format!("{} {}", c.kind.as_str(), location(c));
                    (format!("{at}: {text}"), format!("{at}: {key}"))
                }
                None => {
                    let t = format!("connector {connector}.{operation}");
                    (t.clone(), t)
                }
            };
            (runs, key, Some(format!("{connector}.{operation}")))
        }
        Target::Handler => {
            let ps: Vec<String> = params(&t.params)
                .into_iter()
                .map(|(n, m)| format!("{n}:{}", m.get("type").cloned().unwrap_or_default()))
                .collect();
            let runs = format!("handler of server {} ({})", server.name, ps.join(", "));
            (runs.clone(), runs, None)
        }
        Target::Static(text) => {
            let runs = format!("text {:?}", text.trim());
            (runs.clone(), runs, None)
        }
    };
    let preset = server.presets.iter().find(|p| p.name == t.context);
    let overrides = preset
        .map(|p| p.overrides.iter().cloned().collect())
        .unwrap_or_default();
    // A server preset is named with what it is based on: changing that is changing the preset.
    let preset_name = match preset {
        Some(p) => format!("{} (based on {})", t.context, p.based_on),
        None => t.context.clone(),
    };
    Capability {
        server: server.name.clone(),
        kind,
        name: name.to_string(),
        source: server.source.clone(),
        runs,
        key,
        connector,
        permission: t.permission,
        sensitivity: t.sensitivity,
        context: (preset_name, overrides),
        rate_limit: t.rate_limit,
        rate_limit_from_config: false,
        approval: t.approval.clone(),
        uninspected: t.uninspected.clone(),
        params: params(&t.params),
    }
}

/// Resolves `model` (and its `config.yaml`, when it has one) to its effective policy.
pub fn resolve(model: &Model) -> Policy {
    let mut capabilities = Vec::new();
    for s in &model.servers {
        for t in &s.tools {
            capabilities.push(capability(model, s, "tool", &t.name, t));
        }
        for r in &s.resources {
            capabilities.push(capability(model, s, "resource", &r.uri, &r.tool));
        }
        for p in &s.prompts {
            let text: Vec<String> = p.messages.iter().map(|(_, m)| m.clone()).collect();
            capabilities.push(Capability {
                server: s.name.clone(),
                kind: "prompt",
                name: p.name.clone(),
                source: s.source.clone(),
                runs: format!("prompt text {:?}", text.join("\n")),
                key: format!("prompt text {:?}", text.join("\n")),
                connector: None,
                permission: Permission::Read,
                sensitivity: Sensitivity::Public,
                context: ("-".into(), BTreeMap::new()),
                params: BTreeMap::new(),
                rate_limit: None,
                rate_limit_from_config: false,
                approval: None,
                uninspected: None,
            });
        }
    }
    capabilities.sort_by(|a, b| (&a.server, a.kind, &a.name).cmp(&(&b.server, b.kind, &b.name)));
    let connectors = model.connectors.iter().map(connector_policy).collect();
    let mut instances = Vec::new();
    for d in &model.deployments {
        for p in plan(model, d) {
            for i in &p.instances {
                let reaches = |from: NetworkMode| from <= i.mode;
                instances.push(InstancePolicy {
                    deployment: d.name.clone(),
                    source: d.source.clone(),
                    server: p.server.name.clone(),
                    service: i.service.clone(),
                    mode: i.mode,
                    trust_domain: p.server.trust_domain.clone(),
                    environment: format!("{:?}", d.environment).to_ascii_lowercase(),
                    pinned: d.image.digest.is_some(),
                    images: std::iter::once(d.image.reference())
                        .chain(i.mode.uses_proxy().then(|| d.proxy_image.reference()))
                        .collect(),
                    unconfined: p.sandbox,
                    egress: match i.mode {
                        NetworkMode::Full => p.server.egress.iter().cloned().collect(),
                        NetworkMode::Proxied => p.allowed.iter().cloned().collect(),
                        NetworkMode::None => BTreeSet::new(),
                    },
                    internal_ranges: if i.mode.uses_proxy() {
                        p.server.internal_ranges.iter().cloned().collect()
                    } else {
                        BTreeSet::new()
                    },
                    mounts: p
                        .data
                        .iter()
                        .filter(|m| reaches(m.from))
                        .map(|m| {
                            // The file or folder the setting names: a CA bundle is its own
                            // path, never the base URL of the connector that trusts it.
                            let at = model
                                .connector(&m.connector)
                                .map(|c| match m.setting {
                                    "ca_file" => connector_policy(c).trust,
                                    _ => location(c),
                                })
                                .unwrap_or_default();
                            format!(
                                "{at} ({}, {})",
                                m.setting,
                                if m.read_only { "ro" } else { "rw" }
                            )
                        })
                        .collect(),
                    secrets: p
                        .secrets
                        .iter()
                        .filter(|s| reaches(s.from))
                        .map(|s| s.var.clone())
                        .collect(),
                });
            }
        }
    }
    let identity = Identity::of(model.config.as_ref());
    // The effective budget: a tool without its own limit counts under the configured one.
    let per_user_tool = identity
        .set_value("rate_limits.per_user_tool")
        .and_then(|v| serde_json::from_value::<bulkhead_vocab::RateLimit>(v.clone()).ok());
    for c in capabilities.iter_mut().filter(|c| c.kind == "tool") {
        if c.rate_limit.is_none() && per_user_tool.is_some() {
            c.rate_limit = per_user_tool;
            c.rate_limit_from_config = true;
        }
    }
    Policy {
        capabilities,
        connectors,
        instances,
        identity,
    }
}

#[cfg(test)]
mod tests {
    use super::sql_key;

    #[test]
    fn sql_keys_ignore_layout_and_comments_but_not_literals() {
        let base = "SELECT * FROM orders WHERE tenant = 'acme'";
        assert_eq!(
            sql_key(base),
            sql_key(
                "-- the tenant's rows\nSELECT *\n  FROM orders /* it's */ WHERE tenant = 'acme'"
            )
        );
        for changed in [
            "-- the tenant's rows\nSELECT * FROM orders WHERE tenant = 'evil'",
            "SELECT * FROM orders WHERE tenant = $$acme$$",
            "SELECT * FROM orders WHERE tenant = E'acme'",
        ] {
            assert_ne!(sql_key(base), sql_key(changed), "{changed}");
        }
        assert_ne!(
            sql_key("SELECT 1 WHERE a = $q$public$q$"),
            sql_key("SELECT 1 WHERE a = $q$secret$q$")
        );
    }
}
