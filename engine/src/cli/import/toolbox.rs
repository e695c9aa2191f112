//! `bulkhead import toolbox`: an MCP Toolbox `tools.yaml` (its classic layout: `sources:`,
//! `authServices:`, `tools:`, `toolsets:`, each entry with a `kind:`) as connectors and a server
//! of proposed tools. `postgres`, `sqlite` and `http` sources become connectors; `postgres-sql`
//! and `sqlite-sql` tools operations whose `$1`/`?` placeholders become named ones, `http` tools
//! operations over their path, query, header and body parameters. A parameter bound by
//! `authServices` takes its value from the caller's token claim (`from_claim`). Everything
//! without a counterpart here (other kinds, `templateParameters`, a templated request body) is
//! listed with its reason.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{Connector, Diag, Imported, Operation, Param, Proposal, first_line, ident, unique};

/// The file as connectors and proposed tools, or every problem found (nothing written).
pub(crate) fn import(text: &str, source: &str, server: &str) -> Result<Imported, Vec<Diag>> {
    let doc = bulkhead::config::load_yaml(text, source)
        .map_err(|e| vec![Diag::new(source, format!("not YAML: {e}"))])?;
    if doc.get("kind").is_some() && doc.get("tools").is_none() {
        return Err(vec![Diag::new(
            "kind",
            "one resource per YAML document (the newer layout) is not read: use the `sources:`/`tools:` maps",
        )]);
    }
    let mut errors = Vec::new();
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let empty = serde_json::Map::new();
    let sources = doc
        .get("sources")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let tools = doc
        .get("tools")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if tools.is_empty() {
        errors.push(Diag::new("tools", "the file has no `tools`"));
    }
    // Source name -> its connector (without operations yet).
    let mut connectors: BTreeMap<String, Connector> = BTreeMap::new();
    for (name, s) in sources {
        let at = format!("sources.{name}");
        match connector(server, name, s, &at) {
            Ok(c) => {
                connectors.insert(name.clone(), c);
            }
            Err(d) => skipped.push(d),
        }
    }
    if let Some(auth) = doc.get("authServices").and_then(Value::as_object) {
        for (name, a) in auth {
            notes.push(format!(
                "authService `{name}` ({}): callers sign in through this deployment's identity provider (`auth:`/`token_service:` in config.yaml); parameters it bound take the claim from the caller's token",
                a.get("kind").and_then(Value::as_str).unwrap_or("?")
            ));
        }
    }
    if doc.get("toolsets").is_some() {
        notes.push(format!(
            "toolsets are not kept: every imported tool is in server `{server}`"
        ));
    }
    let mut proposals = Vec::new();
    let mut taken = BTreeSet::new();
    for (tname, t) in tools {
        let at = format!("tools.{tname}");
        let kind = t.get("kind").and_then(Value::as_str).unwrap_or("");
        let src = t.get("source").and_then(Value::as_str).unwrap_or("");
        let Some(conn) = connectors.get_mut(src) else {
            let why = if sources.contains_key(src) {
                format!("its source `{src}` is not imported (see above)")
            } else {
                format!("it names source `{src}`, which the file does not define")
            };
            let d = Diag::new(format!("{at}.source"), why);
            if sources.contains_key(src) {
                skipped.push(d)
            } else {
                errors.push(d)
            }
            continue;
        };
        let mapped = match (kind, conn.kind) {
            ("postgres-sql", "postgres") | ("sqlite-sql", "sqlite") => sql_tool(t, &at, conn.kind),
            ("http", "http") => http_tool(t, &at),
            (k, c) => Err(Diag::new(
                format!("{at}.kind"),
                format!("tool kind `{k}` over a {c} source has no counterpart here"),
            )),
        };
        let (mut op, bound) = match mapped {
            Ok(m) => m,
            Err(d) => {
                skipped.push(d);
                continue;
            }
        };
        let name = unique(ident(tname), &mut taken);
        op.name = name.clone();
        if t.get("description").is_none() {
            notes.push(format!(
                "{name}: tools.yaml gives no description; write one"
            ));
        }
        if let Some(req) = t.get("authRequired") {
            notes.push(format!(
                "{name}: authRequired {req}: every call here is authenticated by the deployment"
            ));
        }
        for (p, claim) in &bound {
            notes.push(format!(
                "{name}: parameter `{p}` is the caller's `{claim}` claim (authServices)"
            ));
        }
        proposals.push(proposal(&name, &conn.name, kind, &op));
        conn.operations.push(op);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let connectors: Vec<Connector> = connectors
        .into_values()
        .filter(|c| !c.operations.is_empty())
        .collect();
    if connectors.is_empty() {
        return Err(vec![Diag::new("tools", "no tool to import")]);
    }
    Ok(Imported {
        source: source.to_owned(),
        format: "MCP Toolbox tools.yaml".into(),
        server: server.to_owned(),
        instructions: format!("Tools of MCP Toolbox's {source} behind Bulkhead's policy."),
        connectors,
        tools: proposals,
        skipped,
        notes,
    })
}

/// Toolbox's `${VAR}` and `${VAR:default}` as this project's `${VAR}` and `${VAR:-default}`.
fn env(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        match inner.split_once(':') {
            Some((var, default)) if !default.starts_with('-') => {
                out.push_str(&format!("${{{var}:-{default}}}"))
            }
            _ => out.push_str(&format!("${{{inner}}}")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The variables a value refers to.
fn vars(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let inner = &after[..end];
        out.push(
            inner
                .split([':', '-', '?'])
                .next()
                .unwrap_or(inner)
                .to_owned(),
        );
        rest = &after[end + 1..];
    }
    out
}

fn string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A source as a connector (no operations yet), or why it has none.
fn connector(server: &str, name: &str, s: &Value, at: &str) -> Result<Connector, Diag> {
    let cname = format!("{server}_{}", ident(name));
    let var = cname.to_ascii_uppercase();
    let kind = s.get("kind").and_then(Value::as_str).unwrap_or("");
    let field = |k: &str| s.get(k).map(string).map(|v| env(&v));
    let need = |k: &str| {
        field(k)
            .ok_or_else(|| Diag::new(format!("{at}.{k}"), format!("a {kind} source needs `{k}`")))
    };
    let base = |kind: &'static str, settings, secrets| Connector {
        name: cname.clone(),
        kind,
        description: first_line(&format!("Toolbox source `{name}` ({kind}, imported)")),
        sensitivity: "internal",
        settings,
        settings_comments: Vec::new(),
        secrets,
        operations: Vec::new(),
    };
    match kind {
        "postgres" => {
            let (host, port, db, user, password) = (
                need("host")?,
                need("port")?,
                need("database")?,
                need("user")?,
                need("password")?,
            );
            if s.get("queryParams").is_some() {
                return Err(Diag::new(
                    format!("{at}.queryParams"),
                    "a postgres source's `queryParams` have no counterpart here",
                ));
            }
            let url = format!(
                "postgres://{user}:{password}@${{{var}_HOST:-{host}}}:${{{var}_PORT:-{port}}}/{db}"
            );
            let mut secrets = vars(&password);
            secrets.retain(|v| !v.is_empty());
            let mut c = base("postgres", vec![("url".into(), json!(url))], secrets);
            c.settings_comments.push((
                "url".into(),
                format!("From tools.yaml; deployments set {var}_HOST and {var}_PORT (the password goes in the URL as written)."),
            ));
            Ok(c)
        }
        "sqlite" => {
            let db = need("database")?;
            if db == ":memory:" {
                return Err(Diag::new(
                    format!("{at}.database"),
                    "an in-memory database holds nothing to read",
                ));
            }
            Ok(base(
                "sqlite",
                vec![("path".into(), json!(format!("${{{var}_PATH:-{db}}}")))],
                Vec::new(),
            ))
        }
        "http" => {
            let url = need("baseUrl")?;
            for k in ["queryParams", "disableSslVerification"] {
                if s.get(k).is_some_and(|v| v != &Value::Bool(false)) {
                    return Err(Diag::new(
                        format!("{at}.{k}"),
                        format!("an http source's `{k}` has no counterpart here"),
                    ));
                }
            }
            let mut settings = vec![(
                "base_url".to_string(),
                json!(format!("${{{var}_URL:-{url}}}")),
            )];
            let mut secrets = Vec::new();
            if let Some(h) = s.get("headers").and_then(Value::as_object) {
                let headers: serde_json::Map<String, Value> = h
                    .iter()
                    .filter(|(k, _)| !k.eq_ignore_ascii_case("content-type"))
                    .map(|(k, v)| {
                        let v = env(&string(v));
                        secrets.extend(vars(&v));
                        (k.clone(), json!(v))
                    })
                    .collect();
                if !headers.is_empty() {
                    settings.push(("headers".into(), Value::Object(headers)));
                }
            }
            Ok(base("http", settings, secrets))
        }
        other => Err(Diag::new(
            format!("{at}.kind"),
            format!("source kind `{other}` has no connector here"),
        )),
    }
}

/// A Toolbox parameter list as spec parameters, and the ones bound to a claim.
/// Parameters bound to a claim: (spec name, claim).
type Bound = Vec<(String, String)>;

fn params(list: Option<&Value>, at: &str) -> Result<(Vec<Param>, Bound), Diag> {
    let mut out = Vec::new();
    let mut bound = Vec::new();
    let mut names = BTreeSet::new();
    for (i, p) in list
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p_at = format!("{at}[{i}]");
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Diag::new(&p_at, "a parameter needs `name`"))?;
        let ty = match p.get("type").and_then(Value::as_str).unwrap_or("") {
            "string" => "string",
            "integer" => "integer",
            "float" => "number",
            "boolean" => "boolean",
            "array" => "array",
            other => {
                return Err(Diag::new(
                    format!("{p_at}.type"),
                    format!("parameter type `{other}` has no spec form"),
                ));
            }
        };
        let ours = unique(ident(name), &mut names);
        let description = p
            .get("description")
            .and_then(Value::as_str)
            .map(first_line)
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "(no description in tools.yaml)".into());
        let mut fields: Vec<(String, Value)> = vec![
            ("type".into(), json!(ty)),
            ("description".into(), json!(description)),
        ];
        if ty == "array" {
            let item = match p.pointer("/items/type").and_then(Value::as_str) {
                Some("string") => "string",
                Some("integer") => "integer",
                Some("float") => "number",
                Some("boolean") => "boolean",
                _ => {
                    return Err(Diag::new(
                        format!("{p_at}.items"),
                        "an array parameter needs scalar `items`",
                    ));
                }
            };
            fields.push(("items".into(), json!(item)));
        }
        if let Some(auth) = p.get("authServices").and_then(Value::as_array) {
            let claim = auth
                .iter()
                .find_map(|a| a.get("field").and_then(Value::as_str))
                .ok_or_else(|| {
                    Diag::new(
                        format!("{p_at}.authServices"),
                        "an authService binding needs `field` (the claim)",
                    )
                })?;
            fields.push(("from_claim".into(), json!(claim)));
            bound.push((ours.clone(), claim.to_owned()));
        } else if let Some(d) = p.get("default") {
            fields.push(("default".into(), d.clone()));
        } else if p.get("required") == Some(&Value::Bool(false)) {
            fields.push(("optional".into(), json!(true)));
        }
        out.push((ours, fields));
    }
    Ok((out, bound))
}

/// A SQL tool: its statement with `$n` (postgres) or `?` (sqlite) replaced by `:name`.
fn sql_tool(t: &Value, at: &str, kind: &str) -> Result<(Operation, Bound), Diag> {
    if t.get("templateParameters").is_some() {
        return Err(Diag::new(
            format!("{at}.templateParameters"),
            "template parameters are pasted into the SQL text (an injection path): no spec form",
        ));
    }
    let statement = t
        .get("statement")
        .and_then(Value::as_str)
        .ok_or_else(|| Diag::new(at, "a SQL tool needs `statement`"))?;
    let (params, bound) = params(t.get("parameters"), &format!("{at}.parameters"))?;
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    let sql = placeholders(statement, kind, &names)
        .map_err(|m| Diag::new(format!("{at}.statement"), m))?;
    Ok((
        Operation {
            description: description(t),
            sql: Some(sql.trim().trim_end_matches(';').trim().to_owned()),
            params,
            ..Default::default()
        },
        bound,
    ))
}

fn description(t: &Value) -> String {
    let d = t
        .get("description")
        .and_then(Value::as_str)
        .map(first_line)
        .unwrap_or_default();
    if d.is_empty() {
        "(no description in tools.yaml)".into()
    } else {
        d
    }
}

/// `$1`… (postgres) or `?` (sqlite, in order) as `:name`, outside quoted text; every parameter
/// used, none missing.
fn placeholders(sql: &str, kind: &str, names: &[&str]) -> Result<String, String> {
    let mut out = String::new();
    let mut used = vec![false; names.len()];
    let mut next = 0;
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                out.push(c);
            }
            '$' if kind == "postgres" && chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut n = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    n.push(*d);
                    chars.next();
                }
                let i: usize = n.parse().unwrap_or(0);
                let name = i.checked_sub(1).and_then(|i| names.get(i)).ok_or_else(|| {
                    format!("`${n}` has no parameter (there are {})", names.len())
                })?;
                used[i - 1] = true;
                out.push(':');
                out.push_str(name);
            }
            '?' if kind == "sqlite" => {
                let name = names
                    .get(next)
                    .ok_or_else(|| format!("more `?` than the {} parameters", names.len()))?;
                used[next] = true;
                next += 1;
                out.push(':');
                out.push_str(name);
            }
            _ => out.push(c),
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(format!("parameter `{}` is not in the statement", names[i]));
    }
    Ok(out)
}

/// An http tool: `{{.param}}` path parameters and its query, header and body parameters.
fn http_tool(t: &Value, at: &str) -> Result<(Operation, Bound), Diag> {
    if t.get("requestBody").is_some() {
        return Err(Diag::new(
            format!("{at}.requestBody"),
            "a templated request body has no spec form (body parameters do)",
        ));
    }
    for k in ["headers", "queryParams"] {
        if t.get(k)
            .is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty()))
        {
            return Err(Diag::new(
                format!("{at}.{k}"),
                format!("a tool's fixed `{k}` have no counterpart here"),
            ));
        }
    }
    let method = t
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("GET")
        .to_ascii_uppercase();
    if !matches!(method.as_str(), "GET" | "POST" | "PUT" | "PATCH" | "DELETE") {
        return Err(Diag::new(
            format!("{at}.method"),
            format!("method {method} has no spec form"),
        ));
    }
    let mut path = t
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_owned();
    if path.contains('?') {
        return Err(Diag::new(
            format!("{at}.path"),
            "a fixed query in the path has no counterpart here",
        ));
    }
    let mut all = Vec::new();
    let mut bound = Vec::new();
    let mut lists: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (key, place) in [
        ("pathParams", "path"),
        ("queryParams", "query"),
        ("headerParams", "headers"),
        ("bodyParams", "body"),
    ] {
        if key == "queryParams" && t.get(key).is_some_and(Value::is_object) {
            continue;
        }
        let (ps, b) = params(t.get(key), &format!("{at}.{key}"))?;
        for (ours, mut fields) in ps {
            let theirs = t
                .get(key)
                .and_then(Value::as_array)
                .and_then(|l| {
                    l.iter()
                        .map(|p| p.get("name").and_then(Value::as_str).unwrap_or(""))
                        .find(|n| ident(n) == ours)
                })
                .unwrap_or(&ours)
                .to_owned();
            if place == "path" {
                path = path.replace(&format!("{{{{.{theirs}}}}}"), &format!("{{{ours}}}"));
            } else {
                if theirs != ours {
                    fields.insert(2, ("upstream".into(), json!(theirs)));
                }
                lists.entry(place).or_default().push(ours.clone());
            }
            all.push((ours, fields));
        }
        bound.extend(b);
    }
    if path.contains("{{") {
        return Err(Diag::new(
            format!("{at}.path"),
            "a path template other than `{{.param}}` has no spec form",
        ));
    }
    Ok((
        Operation {
            description: description(t),
            method: Some(method),
            path: Some(path),
            params: all,
            query: lists.remove("query").unwrap_or_default(),
            body: lists.remove("body").unwrap_or_default(),
            headers: lists.remove("headers").unwrap_or_default(),
            ..Default::default()
        },
        bound,
    ))
}

fn proposal(name: &str, connector: &str, kind: &str, op: &Operation) -> Proposal {
    let (permission, context, what, why) = match &op.sql {
        Some(sql) => {
            let writes = bulkhead_lang::sql::writes(sql);
            let p = if writes { "write" } else { "read" };
            (
                p,
                "sql_query",
                format!("{kind} `{}`", first_line(sql)),
                format!(
                    "permission {p} (the statement {})",
                    if writes { "changes data" } else { "only reads" }
                ),
            )
        }
        None => (
            "connect",
            "default",
            format!(
                "http {} {}",
                op.method.as_deref().unwrap_or(""),
                op.path.as_deref().unwrap_or("")
            ),
            "permission connect (it calls a service over the network)".into(),
        ),
    };
    let text =
        format!("{} {}", op.description, op.sql.as_deref().unwrap_or("")).to_ascii_lowercase();
    let personal: Vec<&str> = [
        "email", "ssn", "password", "phone", "address", "birth", "salary", "user_id", "token",
    ]
    .into_iter()
    .filter(|w| text.contains(w) || op.params.iter().any(|(n, _)| n.contains(w)))
    .collect();
    let (sensitivity, read) = if personal.is_empty() {
        ("internal", "it names no personal field".to_string())
    } else {
        (
            "confidential",
            format!("it touches {}", personal.join(", ")),
        )
    };
    let approval = permission != "read" && op.method.as_deref() != Some("GET");
    Proposal {
        name: name.to_owned(),
        description: op.description.clone(),
        permission,
        sensitivity,
        context,
        approval,
        uses: format!("{connector}.{name}"),
        what: what.clone(),
        why: format!(
            "{what}: proposed {why}, sensitivity {sensitivity} ({read}){}",
            if approval {
                "; approval always (it changes data)"
            } else {
                ""
            }
        ),
    }
}
