//! `bulkhead import openapi`: an OpenAPI 3.0 or 3.1 document as an `http` connector and a server
//! of proposed tools. The document is checked against its version's structure by a parser crate
//! (`openapiv3` for 3.0, `oas3` for 3.1), its `$ref`s resolved, and each path and method mapped:
//! path, query and header parameters and a JSON object body become typed parameters with their
//! constraints, `servers[0]` the base URL behind a `${VAR:-…}`, `securitySchemes` headers from
//! secrets. A tool's permission is `connect` (it reaches the network); its sensitivity and
//! approval are proposed from what the operation does and what its response holds.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::schema::{self, Doc};
use super::{Connector, Diag, Imported, Operation, Param, Proposal, first_line, ident, unique};

/// How to import.
pub(crate) struct Options<'a> {
    pub server: &'a str,
    pub only: &'a [String],
    pub base_url: Option<&'a str>,
    pub skip_unsupported: bool,
}

/// Methods a spec operation can have; the others are named when found.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

/// The document as a connector and proposed tools, or every problem found (nothing written).
pub(crate) fn import(text: &str, source: &str, o: &Options) -> Result<Imported, Vec<Diag>> {
    let doc = parse(text, source)?;
    let version = validate(&doc)?;
    let d = Doc { root: &doc };
    let mut errors = Vec::new();
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let (base, host) = match base_url(&doc, o) {
        Ok(b) => b,
        Err(e) => {
            errors.push(e);
            (String::new(), String::new())
        }
    };
    let (headers, secrets) = security(&d, o.server, &mut notes, &mut errors);
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        errors.push(Diag::new("paths", "the document has no `paths`"));
        return Err(errors);
    };
    let mut operations = Vec::new();
    let mut tools = Vec::new();
    let mut taken = BTreeSet::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    let mut matched: BTreeSet<&str> = BTreeSet::new();
    for (path, item) in paths {
        let at_item = format!("paths.{path}");
        let item = match d.deref(item, &at_item) {
            Ok(i) => i,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let at = format!("{at_item}.{method}");
            let id = op.get("operationId").and_then(Value::as_str);
            if let Some(id) = id
                && let Some(prev) = ids.insert(id.to_owned(), at.clone())
            {
                errors.push(Diag::new(
                    &at,
                    format!("operationId `{id}` is also the one of {prev} (it must be unique)"),
                ));
            }
            if !o.only.is_empty() {
                let tags: Vec<&str> = op
                    .get("tags")
                    .and_then(Value::as_array)
                    .map(|t| t.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let hit: Vec<&str> = o
                    .only
                    .iter()
                    .map(String::as_str)
                    .filter(|w| Some(*w) == id || tags.contains(w))
                    .collect();
                if hit.is_empty() {
                    continue;
                }
                matched.extend(hit);
            }
            let what = format!("{} {path}", method.to_ascii_uppercase());
            match operation(&d, path, method, op, item.get("parameters"), &at) {
                Ok(mapped) => {
                    let base_name = ident(id.unwrap_or(&format!("{method}_{path}")));
                    let name = unique(base_name, &mut taken);
                    tools.push(proposal(&name, o.server, &what, &host, method, &mapped));
                    for n in mapped.notes {
                        notes.push(format!("{name} ({what}): {n}"));
                    }
                    operations.push(Operation {
                        name,
                        ..mapped.op
                    });
                }
                Err(diags) if o.skip_unsupported => skipped.extend(diags),
                Err(diags) => errors.extend(diags.into_iter().map(|mut d| {
                    d.message.push_str(
                        " (leave the operation out with --only, or import the rest with --skip-unsupported)",
                    );
                    d
                })),
            }
        }
    }
    for w in o.only {
        if !matched.contains(w.as_str()) {
            errors.push(Diag::new(
                "--only",
                format!("`{w}` names no tag or operationId"),
            ));
        }
    }
    if errors.is_empty() && operations.is_empty() {
        errors.push(Diag::new("paths", "no operation to import"));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let title = doc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or(o.server);
    let mut settings = vec![("base_url".to_string(), json!(base))];
    settings.push(("timeout_ms".into(), json!(10_000)));
    settings.push(("max_response_bytes".into(), json!(1_048_576)));
    if !headers.is_empty() {
        settings.push(("headers".into(), Value::Object(headers)));
    }
    let upper = o.server.to_ascii_uppercase();
    settings.push((
        "reach_private".into(),
        json!([format!("${{{upper}_REACH_PRIVATE:-}}")]),
    ));
    let var = format!("{upper}_URL");
    Ok(Imported {
        source: source.to_owned(),
        format: format!("OpenAPI {version}"),
        server: o.server.to_owned(),
        instructions: format!(
            "Operations of {} behind Bulkhead's policy.",
            first_line(title)
        ),
        connectors: vec![Connector {
            name: o.server.to_owned(),
            kind: "http",
            description: first_line(&format!("{title} (imported from its OpenAPI document)")),
            sensitivity: "internal",
            settings,
            settings_comments: vec![
                (
                    "base_url".into(),
                    format!("The service's address; deployments set {var}."),
                ),
                (
                    "reach_private".into(),
                    format!(
                        "A service on a private network: {upper}_REACH_PRIVATE names its range (none by default)."
                    ),
                ),
            ],
            secrets,
            operations,
        }],
        tools,
        skipped,
        notes,
    })
}

/// JSON when it reads as JSON, YAML otherwise.
fn parse(text: &str, source: &str) -> Result<Value, Vec<Diag>> {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| {
            vec![Diag::new(
                format!("{source}:{}:{}", e.line(), e.column()),
                format!("not JSON: {e}"),
            )]
        });
    }
    bulkhead::config::load_yaml(text, source)
        .map_err(|e| vec![Diag::new(source, format!("not YAML: {e}"))])
}

/// The document's version, once its structure is that version's (checked by the parser
/// crate, which names the path to what does not fit).
fn validate(doc: &Value) -> Result<String, Vec<Diag>> {
    let version = match doc.get("openapi").and_then(Value::as_str) {
        Some(v) => v.to_owned(),
        None if doc.get("swagger").is_some() => {
            return Err(vec![Diag::new(
                "swagger",
                "Swagger 2.0 is not read: convert the document to OpenAPI 3 first",
            )]);
        }
        None => {
            return Err(vec![Diag::new(
                "openapi",
                "not an OpenAPI document (no `openapi` version)",
            )]);
        }
    };
    let at = |e: &serde_path_to_error::Path| {
        let p = e.to_string();
        if p == "." {
            "(document)".to_string()
        } else {
            p
        }
    };
    // The crates' maps of paths do not carry the path into an error: each path item is read
    // again on its own to name where.
    fn check<T: serde::de::DeserializeOwned, P: serde::de::DeserializeOwned>(
        doc: &Value,
        version: &str,
        at: &dyn Fn(&serde_path_to_error::Path) -> String,
    ) -> Result<(), Vec<Diag>> {
        let Err(e) = serde_path_to_error::deserialize::<_, T>(doc.clone()) else {
            return Ok(());
        };
        let whole = vec![Diag::new(
            at(e.path()),
            format!("not OpenAPI {version}: {}", e.inner()),
        )];
        if !at(e.path()).starts_with("paths") {
            return Err(whole);
        }
        for (p, item) in doc
            .get("paths")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Err(e) = serde_path_to_error::deserialize::<_, P>(item.clone()) {
                let inner = at(e.path());
                let place = if inner == "(document)" {
                    format!("paths.{p}")
                } else {
                    format!("paths.{p}.{inner}")
                };
                return Err(vec![Diag::new(
                    place,
                    format!("not OpenAPI {version}: {}", e.inner()),
                )]);
            }
        }
        Err(whole)
    }
    if version.starts_with("3.0.") {
        check::<openapiv3::OpenAPI, openapiv3::PathItem>(doc, &version, &at)?;
    } else if version.starts_with("3.1.") {
        check::<oas3::Spec, oas3::spec::PathItem>(doc, &version, &at)?;
    } else {
        return Err(vec![Diag::new(
            "openapi",
            format!("version `{version}`: OpenAPI 3.0 and 3.1 are read"),
        )]);
    }
    Ok(version)
}

/// `${<SERVER>_URL:-<servers[0].url>}` and its `host:port`.
fn base_url(doc: &Value, o: &Options) -> Result<(String, String), Diag> {
    let written = match o.base_url {
        Some(u) => u.to_owned(),
        None => {
            let server = doc.pointer("/servers/0");
            let Some(mut url) = server
                .and_then(|s| s.get("url"))
                .and_then(Value::as_str)
                .map(str::to_owned)
            else {
                return Err(Diag::new(
                    "servers",
                    "the document names no server: pass --base-url with the service's address",
                ));
            };
            for (name, var) in server
                .and_then(|s| s.get("variables"))
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                if let Some(d) = var.get("default").and_then(Value::as_str) {
                    url = url.replace(&format!("{{{name}}}"), d);
                }
            }
            url
        }
    };
    let at = if o.base_url.is_some() {
        "--base-url"
    } else {
        "servers[0].url"
    };
    let parsed = reqwest::Url::parse(&written).map_err(|_| {
        Diag::new(
            at,
            format!(
                "`{written}` is not an absolute URL: pass --base-url with the service's address"
            ),
        )
    })?;
    if !matches!(parsed.scheme(), "https" | "http") {
        return Err(Diag::new(
            at,
            format!("`{written}`: an http(s) URL is needed"),
        ));
    }
    let host = format!(
        "{}:{}",
        parsed.host_str().unwrap_or_default(),
        parsed.port_or_known_default().unwrap_or(443)
    );
    let var = format!("{}_URL", o.server.to_ascii_uppercase());
    Ok((
        format!("${{{var}:-{}}}", written.trim_end_matches('/')),
        host,
    ))
}

/// Headers for the document's `securitySchemes` that are headers: each from a secret variable
/// (`${<SERVER>_<SCHEME>:-}`, empty sends none). The others are named in the notes.
fn security(
    d: &Doc,
    server: &str,
    notes: &mut Vec<String>,
    errors: &mut Vec<Diag>,
) -> (serde_json::Map<String, Value>, Vec<String>) {
    let mut headers = serde_json::Map::new();
    let mut secrets = Vec::new();
    let Some(schemes) = d
        .root
        .pointer("/components/securitySchemes")
        .and_then(Value::as_object)
    else {
        return (headers, secrets);
    };
    for (name, scheme) in schemes {
        let at = format!("components.securitySchemes.{name}");
        let scheme = match d.deref(scheme, &at) {
            Ok(s) => s,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let var = format!("{}_{}", server, ident(name)).to_ascii_uppercase();
        let kind = scheme.get("type").and_then(Value::as_str).unwrap_or("");
        match (kind, scheme.get("in").and_then(Value::as_str)) {
            ("apiKey", Some("header")) => {
                let header = scheme.get("name").and_then(Value::as_str).unwrap_or(name);
                headers.insert(header.to_owned(), json!(format!("${{{var}:-}}")));
                notes.push(format!("security scheme `{name}`: header `{header}` from the secret {var} (unset: not sent)"));
                secrets.push(var);
            }
            ("http", _) => {
                let how = scheme.get("scheme").and_then(Value::as_str).unwrap_or("");
                if how.eq_ignore_ascii_case("bearer") || how.eq_ignore_ascii_case("basic") {
                    headers.insert("Authorization".into(), json!(format!("${{{var}:-}}")));
                    notes.push(format!(
                        "security scheme `{name}`: header Authorization from the secret {var}, holding the whole value (`{} …`; unset: not sent)",
                        if how.eq_ignore_ascii_case("bearer") { "Bearer" } else { "Basic" }
                    ));
                    secrets.push(var);
                } else {
                    notes.push(format!("security scheme `{name}` (http `{how}`) is not configured: set a header by hand"));
                }
            }
            ("oauth2" | "openIdConnect", _) => notes.push(format!(
                "security scheme `{name}` ({kind}): the user's own token is a parameter bound with `from_claim: \"exchange:<audience>\"` and `settings.bearer_param`, written by hand"
            )),
            _ => notes.push(format!("security scheme `{name}` ({kind}) is not configured: only header credentials are written")),
        }
    }
    (headers, secrets)
}

/// One mapped operation.
struct Mapped {
    /// The operation (named by the caller).
    op: Operation,
    /// Personal or secret fields of its response.
    personal: Vec<String>,
    notes: Vec<String>,
}

/// An operation as a spec operation, or why it cannot be one (each at its path).
fn operation(
    d: &Doc,
    path: &str,
    method: &str,
    op: &Value,
    common: Option<&Value>,
    at: &str,
) -> Result<Mapped, Vec<Diag>> {
    if matches!(method, "head" | "options" | "trace") {
        return Err(vec![Diag::new(
            at,
            format!("method {} has no spec form", method.to_ascii_uppercase()),
        )]);
    }
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    let mut params: Vec<Param> = Vec::new();
    let mut names = BTreeSet::new();
    let (mut query, mut headers, mut body) = (Vec::new(), Vec::new(), Vec::new());
    let mut template = path.to_owned();
    // Path-level parameters, overridden by the operation's own of the same name and place.
    let item_at = at.rsplit_once('.').map_or(at, |(item, _)| item);
    let mut listed: Vec<(String, &Value)> = Vec::new();
    for (base, list) in [
        (format!("{item_at}.parameters"), common),
        (format!("{at}.parameters"), op.get("parameters")),
    ] {
        for (i, raw) in list
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let p_at = format!("{base}[{i}]");
            match d.deref(raw, &p_at) {
                Ok(p) => {
                    let id = |p: &Value| {
                        (
                            p.get("name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_owned(),
                            p.get("in").and_then(Value::as_str).unwrap_or("").to_owned(),
                        )
                    };
                    listed.retain(|(_, q)| id(q) != id(p));
                    listed.push((p_at, p));
                }
                Err(e) => errors.push(e),
            }
        }
    }
    for (p_at, p) in listed {
        let name = p.get("name").and_then(Value::as_str).unwrap_or("");
        let place = p.get("in").and_then(Value::as_str).unwrap_or("");
        if place == "cookie" {
            errors.push(Diag::new(
                &p_at,
                format!("cookie parameter `{name}` has no spec form"),
            ));
            continue;
        }
        let Some(raw_schema) = p.get("schema") else {
            errors.push(Diag::new(&p_at, format!("parameter `{name}` has no `schema` (one described by `content` has no spec form)")));
            continue;
        };
        let schema = match d.inline(raw_schema, &p_at) {
            Ok(s) => s,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let required = place == "path" || p.get("required") == Some(&Value::Bool(true));
        let description = describe(p.get("description").or(schema.get("description")));
        let ours = unique(ident(name), &mut names);
        let upstream = (place != "path" && ours != name).then_some(name);
        match schema::param(&schema, &description, required, upstream) {
            Ok(spec) => {
                match place {
                    "path" => {
                        template = template.replace(&format!("{{{name}}}"), &format!("{{{ours}}}"))
                    }
                    "query" => query.push(ours.clone()),
                    "header" => headers.push(ours.clone()),
                    other => {
                        errors.push(Diag::new(
                            &p_at,
                            format!("`in: {other}` is not a parameter place"),
                        ));
                        continue;
                    }
                }
                params.push((ours, spec));
            }
            Err(why) => errors.push(Diag::new(&p_at, format!("parameter `{name}`: {why}"))),
        }
    }
    if let Some(raw) = op.get("requestBody") {
        let b_at = format!("{at}.requestBody");
        match request_body(d, raw, &b_at, &mut names, &mut notes) {
            Ok(fields) => {
                for (ours, spec) in fields {
                    body.push(ours.clone());
                    params.push((ours, spec));
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let description = match (op.get("summary"), op.get("description")) {
        (Some(s), _) if !first_line(s.as_str().unwrap_or("")).is_empty() => {
            first_line(s.as_str().unwrap_or(""))
        }
        (_, Some(s)) if !first_line(s.as_str().unwrap_or("")).is_empty() => {
            first_line(s.as_str().unwrap_or(""))
        }
        _ => format!("{} {path}", method.to_ascii_uppercase()),
    };
    let answer = response_schema(d, op, at);
    let personal = answer
        .as_ref()
        .map(schema::personal_fields)
        .unwrap_or_default();
    let result_schema = answer.and_then(schema::result_schema);
    Ok(Mapped {
        op: Operation {
            name: String::new(),
            description,
            method: Some(method.to_ascii_uppercase()),
            path: Some(template),
            sql: None,
            params,
            query,
            body,
            headers,
            result_schema,
        },
        personal,
        notes,
    })
}

fn describe(text: Option<&Value>) -> String {
    let line = text
        .and_then(Value::as_str)
        .map(first_line)
        .unwrap_or_default();
    if line.is_empty() {
        "(no description in the document)".into()
    } else {
        line
    }
}

/// A JSON object body's fields as parameters (`allOf` members merged). A required field that
/// has no parameter form makes the operation unsupported; an optional one is left out, noted.
fn request_body(
    d: &Doc,
    raw: &Value,
    at: &str,
    names: &mut BTreeSet<String>,
    notes: &mut Vec<String>,
) -> Result<Vec<Param>, Diag> {
    let body = d.deref(raw, at)?;
    let required_body = body.get("required") == Some(&Value::Bool(true));
    let content = body
        .get("content")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some((ct, media)) = content
        .iter()
        .find(|(ct, _)| *ct == "application/json" || ct.ends_with("+json"))
    else {
        let types: Vec<&String> = content.keys().collect();
        return Err(Diag::new(
            format!("{at}.content"),
            format!("a request body of {types:?} has no spec form (a JSON object's fields do)"),
        ));
    };
    let s_at = format!("{at}.content.{ct}.schema");
    let schema = d.inline(media.get("schema").unwrap_or(&Value::Null), &s_at)?;
    let mut props = serde_json::Map::new();
    let mut required: Vec<String> = Vec::new();
    let members: Vec<&Value> = match schema.get("allOf").and_then(Value::as_array) {
        Some(all) => all.iter().chain(std::iter::once(&schema)).collect(),
        None => vec![&schema],
    };
    for m in members {
        if let Some(p) = m.get("properties").and_then(Value::as_object) {
            props.extend(p.clone());
        }
        required.extend(
            m.get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned),
        );
    }
    if props.is_empty() {
        return Err(Diag::new(
            &s_at,
            "a request body that is not a JSON object with properties has no spec form",
        ));
    }
    let mut out = Vec::new();
    for (field, prop) in &props {
        if prop.get("readOnly") == Some(&Value::Bool(true)) {
            continue; // set by the service, never sent
        }
        let f_at = format!("{s_at}.properties.{field}");
        let needed = required_body && required.contains(field);
        let mut ours = ident(field);
        if names.contains(&ours) {
            ours = format!("body_{ours}");
        }
        let ours = unique(ours, names);
        let upstream = (ours != *field).then_some(field.as_str());
        match schema::param(prop, &describe(prop.get("description")), needed, upstream) {
            Ok(spec) => out.push((ours, spec)),
            Err(why) if needed => {
                return Err(Diag::new(&f_at, format!("required field `{field}`: {why}")));
            }
            Err(why) => {
                names.remove(&ours);
                notes.push(format!("optional body field `{field}` left out: {why}"));
            }
        }
    }
    Ok(out)
}

/// The JSON schema of the operation's first success response, inlined.
fn response_schema(d: &Doc, op: &Value, at: &str) -> Option<Value> {
    let responses = op.get("responses")?.as_object()?;
    let (code, resp) = responses
        .iter()
        .find(|(c, _)| c.starts_with('2'))
        .or_else(|| responses.iter().find(|(c, _)| *c == "default"))?;
    let r_at = format!("{at}.responses.{code}");
    let resp = d.deref(resp, &r_at).ok()?;
    let content = resp.get("content")?.as_object()?;
    let (_, media) = content
        .iter()
        .find(|(ct, _)| *ct == "application/json" || ct.ends_with("+json"))?;
    d.inline(media.get("schema")?, &r_at).ok()
}

fn proposal(
    name: &str,
    server: &str,
    what: &str,
    host: &str,
    method: &str,
    m: &Mapped,
) -> Proposal {
    let (sensitivity, read) = if m.personal.is_empty() {
        (
            "internal",
            "its response names no personal or secret field".to_string(),
        )
    } else {
        (
            "confidential",
            format!("its response holds {}", m.personal.join(", ")),
        )
    };
    let approval = method != "get";
    let asks = if approval {
        format!(
            "; approval always ({} changes data at the service)",
            method.to_ascii_uppercase()
        )
    } else {
        String::new()
    };
    Proposal {
        name: name.to_owned(),
        description: m.op.description.clone(),
        permission: "connect",
        sensitivity,
        context: "default",
        approval,
        uses: format!("{server}.{name}"),
        what: what.to_owned(),
        why: format!(
            "{what}: proposed permission connect (it calls {host}), sensitivity {sensitivity} ({read}){asks}"
        ),
    }
}
