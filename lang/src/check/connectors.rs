//! Connector rules: names, settings per kind, and what each kind's operations must declare.

use super::{Loaded, is_snake_ident, params, placeholders, ptr};
use crate::diag::Diagnostic;
use crate::model::{Connector, Operation, OperationBody, Param};
use crate::spec::{
    ConnectorKind, ConnectorSpec, FileAction, FilesSettings, HttpSettings, LogsSettings, McpLock,
    McpSettings, OperationSpec, ParamSpec, ParamType, PostgresSettings, SandboxSettings,
    SqliteSettings,
};
use bulkhead_vocab::HostPort;
use bulkhead_vocab::connector::Settings;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// Checks every connector spec; returns the model connectors (sorted by name).
pub fn check(specs: &[Loaded<ConnectorSpec>], errors: &mut Vec<Diagnostic>) -> Vec<Connector> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for l in specs {
        let c = &l.spec;
        if !is_snake_ident(&c.name) {
            errors.push(
                l.error_at_value(
                    "/name",
                    format!("connector name `{}` is not a lowercase identifier", c.name),
                )
                .label("use lowercase letters, digits and `_`"),
            );
        }
        if let Some(first) = seen.insert(&c.name, &l.file.display) {
            errors.push(
                l.error_at_value("/name", format!("connector `{}` is defined twice", c.name))
                    .label("second definition")
                    .help(format!("the first is in {first}")),
            );
            continue;
        }
        let settings = if l.partial {
            unparsed(c.kind)
        } else {
            let typed = check_settings(l, errors);
            check_secrets(l, errors);
            typed
        };
        let lock = if c.kind == ConnectorKind::Mcp {
            mcp_lock(l, errors)
        } else {
            None
        };
        // The parameter the connector itself consumes (a database role, a bearer token), if any.
        let role_param = match &settings {
            Settings::Postgres(p) => p.set_role.as_ref().map(|r| r.param.clone()),
            Settings::Http(h) => h.bearer_param.clone(),
            _ => None,
        };
        let operations = c
            .operations
            .iter()
            .map(|(name, op)| operation(l, name, op, &lock, role_param.as_deref(), errors))
            .collect();
        let package = lock
            .as_ref()
            .and_then(|lk| lk.package.as_deref())
            .and_then(|p| match crate::model::Package::parse(p) {
                Ok(p) => Some(p),
                Err(e) => {
                    errors.push(
                        l.error_at_value(
                            "/kind",
                            format!("the package in the lock of `{}` is not usable: {e}", c.name),
                        )
                        .label("the image installs this package at build time")
                        .help("write e.g. `pypi:mcp-server-time==2026.10.19` or `npm:@modelcontextprotocol/server-filesystem@2026.8.31`"),
                    );
                    None
                }
            });
        let egress = egress(l, &settings, errors);
        out.push(Connector {
            egress,
            name: c.name.clone(),
            source: l.file.display.clone(),
            kind: c.kind,
            sensitivity: c.sensitivity,
            settings,
            secrets: c.secrets.clone(),
            operations,
            package,
            uninspected: c.uninspected.as_ref().map(|r| {
                super::reason::check(l, "/uninspected", r, errors);
                r.trim().to_string()
            }),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// A jail connector's `egress` (`sandbox`, launched `mcp`), each entry checked with variables at
/// their defaults; an error for `egress` on any other kind or on a `url` upstream.
fn egress(
    l: &Loaded<ConnectorSpec>,
    settings: &Settings,
    errors: &mut Vec<Diagnostic>,
) -> Vec<HostPort> {
    let list = settings.egress();
    if list.is_empty() {
        return Vec::new();
    }
    if let Settings::Mcp(s) = settings
        && s.program().is_none()
    {
        // A `url` upstream is reached by the server itself, through the instance's own egress.
        errors.push(
            l.error_at_key(
                "/settings/egress",
                "`egress` is for a launched upstream (`command`)",
            )
            .label("a `url` upstream is reached by the server, not from a jail"),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, text) in list.iter().enumerate() {
        match HostPort::parse(&crate::vars::with_defaults(text)) {
            Ok(hp) => out.push(hp),
            Err(why) => errors.push(
                l.error_at_value(
                    &format!("/settings/egress/{i}"),
                    format!("`{text}` is not a `host:port` a jail may reach"),
                )
                .label(why.to_string()),
            ),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The connector's settings, typed by its kind, after the authoring rules each kind has beyond
/// its type; a connector whose settings fail gets an error and [`unparsed`] settings (the build
/// stops on the error, so nothing emits them).
fn check_settings(l: &Loaded<ConnectorSpec>, errors: &mut Vec<Diagnostic>) -> Settings {
    let c = &l.spec;
    let value = c.settings.clone().unwrap_or_else(|| json!({}));
    let result = c
        .kind
        .settings(value)
        .map_err(|e| match c.kind {
            ConnectorKind::Files => {
                "a `files` connector takes no settings: it works in the caller's workspace"
                    .to_string()
            }
            kind => format!("{kind} settings: {e}"),
        })
        .and_then(|typed| authoring_rules(&typed).map(|()| typed));
    match result {
        Ok(typed) => typed,
        Err(why) => {
            settings_error(l, why, errors);
            unparsed(c.kind)
        }
    }
}

/// Settings that stand in for ones that failed (never emitted: their error stops the build).
fn unparsed(kind: ConnectorKind) -> Settings {
    match kind {
        ConnectorKind::Files => Settings::Files(FilesSettings::default()),
        ConnectorKind::Sqlite => Settings::Sqlite(SqliteSettings {
            path: String::new(),
            busy_timeout_ms: None,
        }),
        ConnectorKind::Http => Settings::Http(HttpSettings {
            base_url: String::new(),
            allowed_hosts: None,
            timeout_ms: None,
            max_response_bytes: None,
            headers: None,
            ca_file: None,
            bearer_param: None,
            reach_private: None,
        }),
        ConnectorKind::Logs => Settings::Logs(LogsSettings { dir: String::new() }),
        ConnectorKind::Postgres => Settings::Postgres(PostgresSettings {
            url: String::new(),
            connect_timeout_ms: None,
            statement_timeout_ms: None,
            max_connections: None,
            set_role: None,
        }),
        ConnectorKind::Sandbox => Settings::Sandbox(SandboxSettings::default()),
        ConnectorKind::Mcp => Settings::Mcp(McpSettings::default()),
        #[cfg(feature = "fixture-kind")]
        ConnectorKind::Echo => Settings::Echo(Default::default()),
    }
}

/// What each kind's settings must hold beyond their type (as written: `${VAR}` unexpanded).
fn authoring_rules(settings: &Settings) -> Result<(), String> {
    match settings {
        Settings::Files(_) | Settings::Sqlite(_) | Settings::Logs(_) | Settings::Sandbox(_) => {
            Ok(())
        }
        #[cfg(feature = "fixture-kind")]
        Settings::Echo(_) => Ok(()),
        Settings::Mcp(s) if s.command.is_some() && s.reach_private.is_some() => Err(
            "`reach_private` is for a `url` upstream; a launched one reaches out through `egress`"
                .into(),
        ),
        Settings::Mcp(s) => match (&s.command, &s.url) {
            (Some(c), None) if !c.is_empty() && !c[0].is_empty() => {
                let program = crate::vars::with_defaults(&c[0]);
                if program.starts_with('/') {
                    if program
                        .chars()
                        .any(|ch| ch.is_whitespace() || "'\"\\$`;|&<>".contains(ch))
                    {
                        return Err(format!(
                            "the program path `{program}` holds a character a shell would read"
                        ));
                    }
                    Ok(())
                } else if crate::vars::is_program_name(&program) {
                    Ok(())
                } else {
                    Err(format!(
                        "the program `{program}` must be a plain name (letters, digits, `._+-`, not starting with `-`) found on PATH, or an absolute path"
                    ))
                }
            }
            (Some(_), None) => Err("`command` needs a program".to_string()),
            (None, Some(u)) => {
                reach_private(s.reach_private.as_deref())?;
                if !(u.starts_with("http://") || u.starts_with("https://") || u.starts_with("${")) {
                    return Err(format!(
                        "`url` must start with http:// or https://, found `{u}`"
                    ));
                }
                if s.env.is_some() {
                    return Err("`env` is for a launched upstream (`command`), not a `url`".into());
                }
                if s.proc.is_some() {
                    return Err("`proc` is for a launched upstream (`command`), not a `url`".into());
                }
                let host = u
                    .split_once("://")
                    .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
                    .filter(|_| !u.starts_with("${"));
                match host.and_then(never_reachable) {
                    Some(why) => Err(format!("`{u}`: {why}")),
                    None => Ok(()),
                }
            }
            (Some(_), Some(_)) => {
                Err("set `command` (launch over stdio) or `url` (Streamable HTTP), not both".into())
            }
            (None, None) => {
                Err("set `command` (launch over stdio) or `url` (Streamable HTTP)".into())
            }
        },
        Settings::Postgres(s) => {
            if let Some(problem) = s.set_role.as_ref().and_then(|r| r.problem()) {
                return Err(problem);
            }
            if s.url.starts_with("postgres://")
                || s.url.starts_with("postgresql://")
                || s.url.starts_with("${")
            {
                Ok(())
            } else {
                Err("`url` must start with postgres:// (or be a `${VAR}`)".to_string())
            }
        }
        Settings::Http(s) => {
            if !(s.base_url.starts_with("http://")
                || s.base_url.starts_with("https://")
                || s.base_url.starts_with("${"))
            {
                return Err(format!(
                    "`base_url` must start with http:// or https://, found `{}`",
                    s.base_url
                ));
            }
            // Cloud metadata and other never-routable addresses are no connector's
            // destination, whatever the instance's mode (the proxy refuses them too, but a
            // full instance has no proxy).
            let base_host = s
                .base_url
                .split_once("://")
                .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
                .filter(|_| !s.base_url.starts_with("${"));
            for entry in base_host
                .into_iter()
                .chain(s.allowed_hosts.iter().flatten().map(String::as_str))
            {
                if let Some(why) = never_reachable(entry) {
                    return Err(format!("`{entry}`: {why}"));
                }
            }
            reach_private(s.reach_private.as_deref())?;
            Ok(())
        }
    }
}

/// `reach_private` with each entry as its variables' defaults make it: CIDR ranges only
/// ([`bulkhead_vocab::ranges::opened`], the parser the runtime uses).
fn reach_private(entries: Option<&[String]>) -> Result<(), String> {
    let written: Vec<String> = entries
        .unwrap_or_default()
        .iter()
        .map(|e| crate::vars::with_defaults(e))
        .collect();
    bulkhead_vocab::ranges::opened(&written)
        .map(|_| ())
        .map_err(|e| format!("settings.reach_private: {e}"))
}

/// The error for settings that failed their kind's type or rules.
fn settings_error(l: &Loaded<ConnectorSpec>, why: String, errors: &mut Vec<Diagnostic>) {
    let c = &l.spec;
    let at = if c.settings.is_some() {
        "/settings"
    } else {
        "/kind"
    };
    errors.push(
        l.error_at_key(
            at,
            format!(
                "invalid settings for {} connector `{}`",
                c.kind.as_str(),
                c.name
            ),
        )
        .label(why),
    );
}

/// Every declared secret is a variable of the settings, with no default but an empty one (a
/// credential with a default would be a credential in the spec).
fn check_secrets(l: &Loaded<ConnectorSpec>, errors: &mut Vec<Diagnostic>) {
    let refs = crate::vars::references(l.spec.settings.as_ref().unwrap_or(&json!({})));
    for (i, name) in l.spec.secrets.iter().enumerate() {
        let at = format!("/secrets/{i}");
        let uses: Vec<_> = refs.iter().filter(|r| &r.name == name).collect();
        if uses.is_empty() {
            errors.push(
                l.error_at_value(&at, format!("secret `{name}` is not used in the settings"))
                    .label("declare only variables that settings read as `${VAR}`"),
            );
        }
        for r in uses {
            if r.default().is_some_and(|d| !d.is_empty()) {
                errors.push(
                    l.error_at_value(
                        &format!("/settings{}", r.pointer),
                        format!("secret `{name}` has a default value"),
                    )
                    .label("a credential may not be written in the spec")
                    .help(format!(
                        "write `${{{name}}}` (required) or `${{{name}:-}}` (optional)"
                    )),
                );
            }
        }
    }
}

fn operation(
    l: &Loaded<ConnectorSpec>,
    name: &str,
    op: &OperationSpec,
    lock: &Option<McpLock>,
    role_param: Option<&str>,
    errors: &mut Vec<Diagnostic>,
) -> Operation {
    let at = format!("/operations/{}", ptr(name));
    let kind = l.spec.kind;
    if !is_snake_ident(name) {
        errors.push(
            l.error_at_key(
                &at,
                format!("operation name `{name}` is not a lowercase identifier"),
            )
            .label("use lowercase letters, digits and `_`"),
        );
    }
    let allowed = kind.operation_fields();
    let present = [
        ("action", op.action.is_some()),
        ("params", op.params.is_some()),
        ("sql", op.sql.is_some()),
        ("method", op.method.is_some()),
        ("path", op.path.is_some()),
        ("query", op.query.is_some()),
        ("body", op.body.is_some()),
        ("headers", op.headers.is_some()),
        ("result_schema", op.result_schema.is_some()),
        ("command", op.command.is_some()),
        ("tool", op.tool.is_some()),
    ];
    for (key, is) in present {
        if is && !allowed.contains(&key) {
            errors.push(
                l.error_at_key(
                    &format!("{at}/{key}"),
                    format!("`{key}` does not apply to a {} operation", kind.as_str()),
                )
                .label(format!(
                    "a {} operation takes: {}",
                    kind.as_str(),
                    allowed.join(", ")
                )),
            );
        }
    }
    let declared = op
        .params
        .as_ref()
        .map(|p| params::check(l, &format!("{at}/params"), p, errors))
        .unwrap_or_default();
    if !matches!(kind, ConnectorKind::Mcp | ConnectorKind::Http) {
        for (pname, p) in op.params.iter().flatten() {
            if p.upstream.is_some() {
                errors.push(
                    l.error_at_key(
                        &format!("{at}/params/{}/upstream", ptr(pname)),
                        "`upstream` names an upstream MCP tool's or an HTTP service's parameter",
                    )
                    .label(format!("a {} operation has no upstream", kind.as_str())),
                );
            }
        }
    }
    let missing = |key: &str, errors: &mut Vec<Diagnostic>| {
        errors.push(
            l.error_at_key(
                &at,
                format!("{} operation `{name}` has no `{key}`", kind.as_str()),
            )
            .label(format!("needs `{key}`")),
        );
    };
    let carrier = if kind == ConnectorKind::Http {
        role_param
    } else {
        None
    };
    params::check_exchange(l, &format!("{at}/params"), &declared, carrier, errors);
    // The parameter the connector consumes itself (settings.set_role, settings.bearer_param)
    // carries the caller's identity: the model must never give it, so it is bound to a claim.
    if let Some(own) = role_param
        && let Some(p) = declared.iter().find(|p| p.name == own)
        && p.from_claim.is_none()
    {
        errors.push(
            l.error_at_key(
                &format!("{at}/params/{}", ptr(own)),
                format!(
                    "`{own}` carries the caller's identity (settings.{}), but the model would give it",
                    if kind == ConnectorKind::Postgres { "set_role" } else { "bearer_param" }
                ),
            )
            .label("needs `from_claim`")
            .help(format!("bind it to the caller's token: `{own}: {{ type: string, description: …, from_claim: <claim> }}`")),
        );
    }
    let (body, params) = match kind {
        ConnectorKind::Files | ConnectorKind::Logs => {
            let action = op.action.unwrap_or_else(|| {
                missing("action", errors);
                FileAction::Read
            });
            if kind == ConnectorKind::Logs && action != FileAction::Search {
                errors.push(
                    l.error_at_value(
                        &format!("{at}/action"),
                        format!(
                            "a logs operation can only `search`, not `{}`",
                            action.as_str()
                        ),
                    )
                    .label("use `action: search`"),
                );
            }
            let body = if kind == ConnectorKind::Files {
                OperationBody::Files { action }
            } else {
                OperationBody::Logs { action }
            };
            (body, implied_params(kind, action))
        }
        ConnectorKind::Sqlite | ConnectorKind::Postgres => {
            let sql = op.sql.clone().unwrap_or_else(|| {
                missing("sql", errors);
                String::new()
            });
            let in_sql: Vec<Param> = declared
                .iter()
                .filter(|p| Some(p.name.as_str()) != role_param)
                .cloned()
                .collect();
            check_sql(l, &at, &sql, &in_sql, errors);
            if kind == ConnectorKind::Postgres && !crate::sql::writes(&sql) {
                for f in crate::sql::side_effects(&sql) {
                    errors.push(
                        l.error_at_value(
                            &format!("{at}/sql"),
                            format!("a reading PostgreSQL operation calls `{f}`, whose effect outlives its read-only transaction"),
                        )
                        .label(format!("calls `{f}`"))
                        .help("a read operation must have no effect outside its transaction: move it to a `write` operation, or remove the call"),
                    );
                }
            }
            (
                OperationBody::Sql {
                    writes: crate::sql::writes(&sql),
                    sql,
                },
                declared,
            )
        }
        ConnectorKind::Http => {
            let method = op.method.unwrap_or_else(|| {
                missing("method", errors);
                crate::spec::HttpMethod::Get
            });
            let path = op.path.clone().unwrap_or_else(|| {
                missing("path", errors);
                String::new()
            });
            let query = op.query.clone().unwrap_or_default();
            let body = op.body.clone().unwrap_or_default();
            let headers = op.headers.clone().unwrap_or_default();
            let sent: Vec<Param> = declared
                .iter()
                .filter(|p| Some(p.name.as_str()) != role_param)
                .cloned()
                .collect();
            check_http(l, &at, &path, &query, &body, &headers, &sent, errors);
            let renames = http_names(l, &at, op, &headers, errors);
            (
                OperationBody::Http {
                    method,
                    path,
                    query,
                    body,
                    headers,
                    renames,
                },
                declared,
            )
        }
        ConnectorKind::Sandbox => {
            let command = op.command.clone().unwrap_or_else(|| {
                missing("command", errors);
                Vec::new()
            });
            check_command(l, &at, &command, &declared, errors);
            (OperationBody::Sandbox { command }, declared)
        }
        ConnectorKind::Mcp => {
            let tool = op.tool.clone().unwrap_or_else(|| {
                missing("tool", errors);
                String::new()
            });
            let lock = lock.as_ref();
            let locked = lock.and_then(|l| l.tools.get(&tool));
            let pin = locked.map(|t| t.pin.clone());
            let definition = locked.map(|t| t.definition.to_string()).unwrap_or_default();
            if pin.is_none() && lock.is_some() && !tool.is_empty() {
                errors.push(
                    l.error_at_value(
                        &format!("{at}/tool"),
                        format!("upstream tool `{tool}` is not pinned in the lock of `{}`", l.spec.name),
                    )
                    .label("no pinned definition")
                    .help(format!(
                        "run `bulkhead mcp lock {}` against the upstream, review the lock's change, and commit it",
                        l.spec.name
                    )),
                );
            }
            let remote = l
                .spec
                .settings
                .as_ref()
                .is_some_and(|s| s.get("url").is_some());
            let renames = upstream_names(l, &at, op, locked.map(|t| &t.definition), &tool, errors);
            (
                OperationBody::Mcp {
                    tool,
                    pin: pin.unwrap_or_default(),
                    definition,
                    server: lock.map(|l| l.server.clone()).unwrap_or_default(),
                    remote,
                    renames,
                },
                declared,
            )
        }
        #[cfg(feature = "fixture-kind")]
        ConnectorKind::Echo => (OperationBody::Echo, declared),
    };
    let result_schema = op.result_schema.clone().filter(|schema| {
        let problem = if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            Some("a tool's result is an object: `result_schema` needs `type: object`".to_string())
        } else {
            jsonschema::validator_for(schema)
                .err()
                .map(|e| format!("`result_schema` is not a JSON Schema: {e}"))
        };
        if let Some(p) = &problem {
            errors.push(
                l.error_at_key(&format!("{at}/result_schema"), p.clone())
                    .label("not a result schema"),
            );
        }
        problem.is_none()
    });
    Operation {
        name: name.to_string(),
        description: op.description.clone(),
        params,
        body,
        result_schema,
    }
}

/// The (spec name, upstream name) pairs of an `mcp` operation's parameters that `upstream:`
/// renames; with a pinned definition, an error for each parameter the upstream tool does not
/// take (under its own name or the one `upstream:` gives), naming what it does take.
fn upstream_names(
    l: &Loaded<ConnectorSpec>,
    at: &str,
    op: &OperationSpec,
    pinned: Option<&serde_json::Value>,
    tool: &str,
    errors: &mut Vec<Diagnostic>,
) -> Vec<(String, String)> {
    let takes: Option<Vec<String>> = pinned
        .and_then(|d| d.get("inputSchema"))
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.as_object())
        .map(|p| p.keys().cloned().collect());
    let mut renames = Vec::new();
    for (pname, p) in op.params.iter().flatten() {
        let theirs = p.upstream.clone().unwrap_or_else(|| pname.clone());
        if p.upstream.is_some() {
            renames.push((pname.clone(), theirs.clone()));
        }
        let Some(takes) = &takes else { continue };
        if takes.contains(&theirs) {
            continue;
        }
        let pointer = if p.upstream.is_some() {
            format!("{at}/params/{}/upstream", ptr(pname))
        } else {
            format!("{at}/params/{}", ptr(pname))
        };
        let mut e = l
            .error_at_key(
                &pointer,
                format!("the pinned `{tool}` takes no parameter `{theirs}`"),
            )
            .label(format!("it takes: {}", takes.join(", ")));
        let folded = |s: &str| s.replace('_', "").to_ascii_lowercase();
        if let Some(same) = takes.iter().find(|t| folded(t) == folded(pname)) {
            e = e.help(if same == pname {
                format!("the upstream calls it `{same}`, as the spec does: remove `upstream`")
            } else {
                format!("the upstream calls it `{same}`: add `upstream: {same}`")
            });
        }
        errors.push(e);
    }
    renames.sort();
    renames
}

/// The lock beside an `mcp` connector's spec (`<name>.lock.json`), or an error saying how to
/// make one.
fn mcp_lock(l: &Loaded<ConnectorSpec>, errors: &mut Vec<Diagnostic>) -> Option<McpLock> {
    let path = l.file.path.with_extension("lock.json");
    let shown = std::path::Path::new(&l.file.display)
        .with_extension("lock.json")
        .display()
        .to_string();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(_) => {
            errors.push(
                l.error_at_value("/kind", format!("mcp connector `{}` has no lock ({shown})", l.spec.name))
                    .label("every upstream tool must be pinned")
                    .help(format!(
                        "run `bulkhead mcp lock {}` against the upstream (or `bulkhead import mcp`), review the lock, and commit it",
                        l.spec.name
                    )),
            );
            return None;
        }
    };
    match serde_json::from_str::<McpLock>(&text) {
        Ok(lock) => Some(lock),
        Err(e) => {
            errors.push(
                l.error_at_value(
                    "/kind",
                    format!("the lock of `{}` ({shown}) is unreadable: {e}", l.spec.name),
                )
                .label("fails closed: no upstream tool is pinned"),
            );
            None
        }
    }
}

/// A sandbox command: a fixed program, then arguments that are text or exactly `{param}`; every
/// declared parameter is passed exactly once.
fn check_command(
    l: &Loaded<ConnectorSpec>,
    at: &str,
    command: &[String],
    params: &[Param],
    errors: &mut Vec<Diagnostic>,
) {
    let at = format!("{at}/command");
    let Some(program) = command.first() else {
        errors.push(
            l.error_at_value(&at, "a sandbox command needs a program")
                .label("empty command"),
        );
        return;
    };
    if program.contains('{') || program.is_empty() {
        errors.push(
            l.error_at_value(
                &format!("{at}/0"),
                format!("the program `{program}` must be fixed text"),
            )
            .label("a parameter can be an argument, never the program"),
        );
    }
    let declared: BTreeSet<&str> = params.iter().map(|p| p.name.as_str()).collect();
    let mut used = BTreeSet::new();
    for (i, arg) in command.iter().enumerate().skip(1) {
        let here = format!("{at}/{i}");
        let whole = arg
            .strip_prefix('{')
            .and_then(|a| a.strip_suffix('}'))
            .filter(|n| is_snake_ident(n));
        match whole {
            Some(n) if !declared.contains(n) => errors.push(
                l.error_at_value(
                    &here,
                    format!("`{{{n}}}` in `command` is not a declared parameter"),
                )
                .label("undeclared parameter"),
            ),
            Some(n) if !used.insert(n) => errors.push(
                l.error_at_value(&here, format!("parameter `{n}` is passed twice"))
                    .label("pass each parameter once"),
            ),
            Some(_) => {}
            None if arg.contains('{') || arg.contains('}') => errors.push(
                l.error_at_value(
                    &here,
                    format!("argument `{arg}` mixes text and a parameter"),
                )
                .label("an argument is either fixed text or exactly `{param}`"),
            ),
            None => {}
        }
    }
    for d in declared.difference(&used) {
        errors.push(
            l.error_at_value(&at, format!("parameter `{d}` is not passed"))
                .label("not in `command`"),
        );
    }
}

/// `:name` placeholders of an SQL statement (outside quoted strings).
pub fn sql_placeholders(sql: &str) -> BTreeSet<String> {
    sql_named_params(sql)
        .into_iter()
        .map(|(_, name)| name)
        .collect()
}

/// Every `:name` placeholder of `sql` with its byte offset (of the `:`), in order. Quoted text
/// (`'…'`, `"…"`) and PostgreSQL casts (`::type`) are not placeholders. The runtime numbers
/// them the same way for PostgreSQL (`$1`, `$2`, …).
pub fn sql_named_params(sql: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let bytes = sql.as_bytes();
    let (mut i, mut quote) = (0, None);
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b':' && bytes.get(i + 1) == Some(&b':') => {
                i += 2;
                continue;
            }
            None if b == b':'
                && i + 1 < bytes.len()
                && (bytes[i + 1].is_ascii_alphabetic() || bytes[i + 1] == b'_') =>
            {
                let start = i + 1;
                let mut end = start;
                while end < bytes.len()
                    && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_')
                {
                    end += 1;
                }
                out.push((i, sql[start..end].to_string()));
                i = end;
                continue;
            }
            None => {}
        }
        i += 1;
    }
    out
}

fn check_sql(
    l: &Loaded<ConnectorSpec>,
    at: &str,
    sql: &str,
    params: &[Param],
    errors: &mut Vec<Diagnostic>,
) {
    let used = sql_placeholders(sql);
    let declared: BTreeSet<&str> = params.iter().map(|p| p.name.as_str()).collect();
    for u in &used {
        if !declared.contains(u.as_str()) {
            let span = l.value_at(&format!("{at}/sql")).find(
                &l.file.text,
                &format!(":{u}"),
                sql.len() * 2 + 16,
                |after| !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'),
            );
            errors.push(
                Diagnostic::error(
                    &l.file,
                    span,
                    format!("SQL placeholder `:{u}` is not a declared parameter"),
                )
                .label("undeclared placeholder")
                .help(format!("declare `{u}` under `params`, or remove `:{u}`")),
            );
        }
    }
    for d in declared {
        if !used.contains(d) {
            errors.push(
                l.error_at_key(
                    &format!("{at}/params/{}", ptr(d)),
                    format!("parameter `{d}` is not used by the SQL"),
                )
                .label("unused parameter")
                .help(format!(
                    "use `:{d}` in the statement or remove the parameter"
                )),
            );
        }
    }
    let body = sql.trim().trim_end_matches(';');
    if body.contains(';') {
        errors.push(
            l.error_at_value(
                &format!("{at}/sql"),
                "an operation runs exactly one SQL statement",
            )
            .label("more than one statement"),
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn check_http(
    l: &Loaded<ConnectorSpec>,
    at: &str,
    path: &str,
    query: &[String],
    body: &[String],
    headers: &[String],
    params: &[Param],
    errors: &mut Vec<Diagnostic>,
) {
    let declared: BTreeSet<&str> = params.iter().map(|p| p.name.as_str()).collect();
    let in_path = placeholders(path);
    let mut used = BTreeSet::new();
    for (key, names) in [
        ("path", in_path.as_slice()),
        ("query", query),
        ("body", body),
        ("headers", headers),
    ] {
        for n in names {
            if !declared.contains(n.as_str()) {
                errors.push(
                    l.error_at_value(
                        &format!("{at}/{key}"),
                        format!("`{n}` in `{key}` is not a declared parameter"),
                    )
                    .label("undeclared parameter"),
                );
            }
            if !used.insert(n.as_str()) {
                errors.push(
                    l.error_at_value(
                        &format!("{at}/{key}"),
                        format!("parameter `{n}` is sent twice"),
                    )
                    .label("used in more than one place"),
                );
            }
        }
    }
    if !path.starts_with('/') {
        errors.push(
            l.error_at_value(&format!("{at}/path"), "an http `path` starts with `/`")
                .label("relative to the connector's `base_url`"),
        );
    }
    for d in declared {
        if !used.contains(d) {
            errors.push(
                l.error_at_key(
                    &format!("{at}/params/{}", ptr(d)),
                    format!("parameter `{d}` is not sent"),
                )
                .label("not in path, query, body or headers"),
            );
        }
    }
}

/// The service's names of an `http` operation's parameters (`upstream`), sorted: a header name
/// must be a valid one and not one the connector sets itself; a path placeholder keeps the spec
/// name (the path template names it).
fn http_names(
    l: &Loaded<ConnectorSpec>,
    at: &str,
    op: &OperationSpec,
    headers: &[String],
    errors: &mut Vec<Diagnostic>,
) -> Vec<(String, String)> {
    const OWN: [&str; 6] = [
        "authorization",
        "content-type",
        "content-length",
        "host",
        "transfer-encoding",
        "connection",
    ];
    let in_path = placeholders(op.path.as_deref().unwrap_or(""));
    let mut renames = Vec::new();
    for (pname, p) in op.params.iter().flatten() {
        let theirs = p.upstream.as_deref().unwrap_or(pname);
        let pointer = format!("{at}/params/{}", ptr(pname));
        if p.upstream.is_some() && in_path.iter().any(|n| n == pname) {
            errors.push(
                l.error_at_key(
                    &format!("{pointer}/upstream"),
                    "a path parameter is named by the path template",
                )
                .label("remove `upstream`, or rename the placeholder"),
            );
        }
        if headers.iter().any(|h| h == pname) {
            let valid = !theirs.is_empty()
                && theirs
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid {
                errors.push(
                    l.error_at_key(&pointer, format!("`{theirs}` is not an HTTP header name"))
                        .label("a header name is a token (RFC 9110 §5.1)"),
                );
            } else if OWN.contains(&theirs.to_ascii_lowercase().as_str()) {
                errors.push(
                    l.error_at_key(
                        &pointer,
                        format!("header `{theirs}` is set by the connector itself"),
                    )
                    .label("not a parameter"),
                );
            }
            if !matches!(
                p.ty,
                ParamType::String
                    | ParamType::Integer
                    | ParamType::Number
                    | ParamType::Boolean
                    | ParamType::Enum
            ) {
                errors.push(
                    l.error_at_key(&pointer, "a header parameter is a scalar")
                        .label(format!("`{}` cannot be a header value", p.ty.as_str())),
                );
            }
        }
        if let Some(theirs) = &p.upstream {
            renames.push((pname.clone(), theirs.clone()));
        }
    }
    renames.sort();
    renames
}

/// The parameters a built-in `files`/`logs` action takes.
pub fn implied_params(kind: ConnectorKind, action: FileAction) -> Vec<Param> {
    let s = |desc: &str| ParamSpec {
        upstream: None,
        ty: ParamType::String,
        description: desc.into(),
        default: None,
        from_claim: None,
        optional: false,
        min_length: Some(1),
        max_length: Some(4096),
        pattern: None,
        minimum: None,
        maximum: None,
        values: None,
        items: None,
        min_items: None,
        max_items: None,
    };
    let path = s("Path under /workspace, e.g. /workspace/notes.txt");
    let dir = ParamSpec {
        default: Some(json!("/workspace")),
        ..s("Directory under /workspace to look in")
    };
    let context_lines = ParamSpec {
        ty: ParamType::Integer,
        default: Some(json!(2)),
        minimum: Some(0.0),
        maximum: Some(20.0),
        min_length: None,
        max_length: None,
        ..s("Lines of context before and after each match")
    };
    let mut out: Vec<(&str, ParamSpec)> = match (kind, action) {
        (ConnectorKind::Logs, _) => vec![
            (
                "pattern",
                ParamSpec {
                    max_length: Some(1024),
                    ..s("Regular expression to search for")
                },
            ),
            (
                "since",
                ParamSpec {
                    optional: true,
                    max_length: Some(64),
                    ..s("Only entries at or after this RFC 3339 time")
                },
            ),
            (
                "until",
                ParamSpec {
                    optional: true,
                    max_length: Some(64),
                    ..s("Only entries before this RFC 3339 time")
                },
            ),
            ("context_lines", context_lines),
        ],
        (_, FileAction::Read | FileAction::Delete) => vec![("path", path)],
        (_, FileAction::Write) => vec![
            ("path", path),
            (
                "content",
                ParamSpec {
                    min_length: None,
                    max_length: Some(16 * 1024 * 1024),
                    ..s("Text to write; replaces the file")
                },
            ),
        ],
        (_, FileAction::List) => vec![
            ("path", dir),
            (
                "pattern",
                ParamSpec {
                    default: Some(json!("*")),
                    max_length: Some(256),
                    ..s("Glob over file names, e.g. *.csv")
                },
            ),
        ],
        (_, FileAction::Search) => vec![
            (
                "pattern",
                ParamSpec {
                    max_length: Some(1024),
                    ..s("Regular expression to search for")
                },
            ),
            ("path", dir),
            ("context_lines", context_lines),
        ],
    };
    out.sort_by(|a, b| a.0.cmp(b.0));
    out.iter().map(|(n, p)| params::lower(n, p)).collect()
}

/// Why `entry` (`host`, `host:port`, `[v6]:port`) can never be a connector's destination: an
/// unspecified, link-local (cloud metadata, 169.254.0.0/16, fe80::/10), multicast or broadcast
/// address. Names and other addresses pass (a name's resolution is checked where it is used).
fn never_reachable(entry: &str) -> Option<&'static str> {
    use std::net::IpAddr;
    let host = entry
        .strip_prefix('[')
        .and_then(|r| r.split_once(']').map(|(h, _)| h))
        .or_else(|| entry.parse::<IpAddr>().ok().map(|_| entry))
        .unwrap_or_else(|| entry.rsplit_once(':').map_or(entry, |(h, _)| h));
    match host.parse::<IpAddr>().ok()? {
        IpAddr::V4(ip) if ip.is_link_local() => {
            Some("link-local addresses (cloud metadata, 169.254.0.0/16) are never a destination")
        }
        IpAddr::V4(ip) if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() => {
            Some("unspecified, broadcast and multicast addresses are never a destination")
        }
        IpAddr::V6(ip) if (ip.segments()[0] & 0xffc0) == 0xfe80 => {
            Some("link-local addresses (fe80::/10) are never a destination")
        }
        IpAddr::V6(ip) if ip.is_unspecified() || ip.is_multicast() => {
            Some("unspecified and multicast addresses are never a destination")
        }
        _ => None,
    }
}

#[cfg(test)]
mod never_reachable_tests {
    use super::never_reachable;

    #[test]
    fn metadata_and_unroutable_addresses_are_refused_in_every_spelling() {
        for bad in [
            "169.254.169.254",
            "169.254.169.254:80",
            "0.0.0.0:443",
            "224.0.0.1",
            "255.255.255.255:9",
            "[fe80::1]:80",
            "fe80::1",
            "[::]:443",
        ] {
            assert!(never_reachable(bad).is_some(), "{bad}");
        }
        for ok in [
            "hooks.example.com",
            "hooks.example.com:443",
            "10.0.0.5:80",
            "127.0.0.1:8080",
            "[2001:db8::1]:443",
        ] {
            assert_eq!(never_reachable(ok), None, "{ok}");
        }
    }
}
