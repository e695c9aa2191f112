//! JSON Schemas of the spec kinds (emitted from the spec types) and validation against them,
//! with each error mapped back to a file position.

use crate::diag::Diagnostic;
use crate::source::SourceFile;
use crate::spec::{ConnectorKind, ConnectorSpec, DeploymentSpec, ServerSpec, SpecKind};
use crate::suggest::did_you_mean;
use crate::yaml::Node;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

/// The JSON Schema of one spec kind, as written to `specs/schema/<kind>.schema.json`.
pub fn schema_of(kind: SpecKind) -> Value {
    let schema = match kind {
        SpecKind::Server => schemars::schema_for!(ServerSpec),
        SpecKind::Connector => schemars::schema_for!(ConnectorSpec),
        SpecKind::Deployment => schemars::schema_for!(DeploymentSpec),
    };
    let mut value = serde_json::to_value(schema).expect("schemars output is JSON");
    if kind == SpecKind::Connector {
        add_settings_by_kind(&mut value);
    }
    value
}

/// Types `settings` by `kind` (`if kind = … then settings: …`), so editors complete the keys of
/// each kind and errors point at the key that is wrong.
fn add_settings_by_kind(schema: &mut Value) {
    add_settings_of(
        schema,
        ConnectorKind::ALL.iter().filter(|k| !k.is_fixture()),
    );
}

/// The test-only kinds (feature `fixture-kind`), added to the schema the checker validates
/// with but never to the published one.
fn add_fixture_kinds(schema: &mut Value) {
    let fixtures: Vec<&ConnectorKind> = ConnectorKind::ALL
        .iter()
        .filter(|k| k.is_fixture())
        .collect();
    if fixtures.is_empty() {
        return;
    }
    if let Some(kinds) = schema["$defs"]["ConnectorKind"]["oneOf"].as_array_mut() {
        for k in &fixtures {
            // Accepted, never offered: a diagnostic's "expected one of" lists the published kinds.
            kinds.push(
                serde_json::json!({ "type": "string", "const": k.as_str(), "x-fixture": true }),
            );
        }
    }
    add_settings_of(schema, fixtures.into_iter());
}

fn add_settings_of<'a>(schema: &mut Value, kinds: impl Iterator<Item = &'a ConnectorKind>) {
    let mut branches = match schema.get_mut("allOf").map(Value::take) {
        Some(Value::Array(existing)) => existing,
        _ => Vec::new(),
    };
    for kind in kinds {
        let (name, def) = kind.settings_schema();
        let kind = kind.as_str();
        let mut def = serde_json::to_value(def).expect("schemars output is JSON");
        let nested = def
            .as_object_mut()
            .and_then(|o| o.remove("$defs"))
            .and_then(|d| d.as_object().cloned())
            .unwrap_or_default();
        if let Some(o) = def.as_object_mut() {
            o.remove("$schema");
        }
        let all = schema["$defs"]
            .as_object_mut()
            .expect("the spec schema has $defs");
        all.insert(name.to_string(), def);
        for (k, v) in nested {
            all.entry(k).or_insert(v);
        }
        branches.push(serde_json::json!({
            "if": { "properties": { "kind": { "const": kind } }, "required": ["kind"] },
            "then": { "properties": { "settings": { "$ref": format!("#/$defs/{name}") } } }
        }));
    }
    schema["allOf"] = Value::Array(branches);
}

/// The `$defs` entry describing `settings` of the connector `value` (by its `kind`).
fn settings_def(value: &Value) -> Option<&'static str> {
    let kind = value.get("kind")?.as_str()?;
    ConnectorKind::parse(kind).map(|k| k.settings_schema().0)
}

/// Compiled validators for every spec kind.
pub struct Schemas {
    entries: Vec<(SpecKind, Value, jsonschema::Validator)>,
}

impl Schemas {
    /// Builds the validators (once per run).
    pub fn new() -> Schemas {
        let entries = SpecKind::ALL
            .into_iter()
            .map(|kind| {
                let mut schema = schema_of(kind);
                if kind == SpecKind::Connector {
                    add_fixture_kinds(&mut schema);
                }
                let validator = jsonschema::options()
                    .should_validate_formats(true)
                    .build(&schema)
                    .expect("spec schemas compile");
                (kind, schema, validator)
            })
            .collect();
        Schemas { entries }
    }

    /// Validates one parsed file; every error comes back positioned.
    pub fn validate(
        &self,
        kind: SpecKind,
        file: &SourceFile,
        root: &Node,
        value: &Value,
    ) -> Vec<Diagnostic> {
        let (_, schema, validator) = self
            .entries
            .iter()
            .find(|(k, _, _)| *k == kind)
            .expect("all kinds compiled");
        // Several keys missing from one item make one diagnostic (an imported tool without
        // `permission` and `sensitivity` is one decision left to its author).
        let mut out: Vec<Diagnostic> = Vec::new();
        let mut missing: Vec<(String, usize, Vec<String>)> = Vec::new();
        for e in validator.iter_errors(value) {
            let pointer = e.instance_path().to_string();
            let d = to_diagnostic(
                file,
                root,
                schema,
                value,
                kind,
                &pointer,
                e.kind(),
                &e.to_string(),
            );
            if let ValidationErrorKind::Required { property } = e.kind() {
                let prop = property.as_str().unwrap_or_default().to_string();
                if let Some(m) = missing.iter_mut().find(|m| m.0 == pointer) {
                    m.2.push(prop);
                    continue;
                }
                missing.push((pointer, out.len(), vec![prop]));
            }
            out.push(d);
        }
        for (_, at, props) in missing.into_iter().filter(|m| m.2.len() > 1) {
            let d = &mut out[at];
            let listed: Vec<String> = props.iter().map(|p| format!("`{p}`")).collect();
            let first = format!("`{}`", props[0]);
            d.message = d.message.replace(&first, &listed.join(" and "));
            d.label = format!("{} are required here", listed.join(" and "));
            d.help = Some(if props == ["permission", "sensitivity"] {
                "decide both: `permission: read | write | connect` and `sensitivity: public | internal | confidential | secret`; neither has a default".to_string()
            } else {
                props
                    .iter()
                    .filter_map(|p| required_help(p))
                    .collect::<Vec<_>>()
                    .join("; ")
            });
        }
        out
    }
}

impl Schemas {
    /// `value` without the parts that fail the schema (unknown keys removed, invalid values and
    /// objects missing a required key left out), so the rest can still be checked; `None` when
    /// nothing valid is left at the top.
    pub fn prune(&self, kind: SpecKind, value: &Value) -> Option<Value> {
        let (_, _, validator) = self
            .entries
            .iter()
            .find(|(k, _, _)| *k == kind)
            .expect("all kinds compiled");
        let mut v = value.clone();
        for _ in 0..6 {
            let cuts: Vec<String> = validator
                .iter_errors(&v)
                .flat_map(|e| {
                    let at = e.instance_path().to_string();
                    match e.kind() {
                        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
                            .iter()
                            .map(|k| format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")))
                            .collect(),
                        // A bad value inside a named item (a tool, an operation, a deployed
                        // server, a preset) leaves the whole item out: checking the rest of it
                        // would only report what its schema error already says.
                        _ => vec![item_of(&at)],
                    }
                })
                .collect();
            if cuts.is_empty() {
                return Some(v);
            }
            for cut in cuts {
                if cut.is_empty() {
                    return None;
                }
                remove_at(&mut v, &cut);
            }
        }
        None
    }
}

/// The named item a pointer lies in (`/tools/read_file/permission` → `/tools/read_file`), or the
/// pointer itself.
fn item_of(pointer: &str) -> String {
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    match parts.as_slice() {
        [coll, name, _, ..]
            if matches!(
                *coll,
                "tools" | "operations" | "servers" | "context_presets"
            ) =>
        {
            format!("/{coll}/{name}")
        }
        _ => pointer.to_string(),
    }
}

/// Removes the value at a JSON pointer (a map entry or an array item).
fn remove_at(v: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    match v.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.remove(&key);
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = key.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        _ => {}
    }
}

impl Default for Schemas {
    fn default() -> Self {
        Schemas::new()
    }
}

#[allow(clippy::too_many_arguments)]
fn to_diagnostic(
    file: &SourceFile,
    root: &Node,
    schema: &Value,
    value: &Value,
    spec: SpecKind,
    pointer: &str,
    kind: &ValidationErrorKind,
    fallback: &str,
) -> Diagnostic {
    let (node_span, key_span) = root.locate(pointer);
    let what = if pointer.is_empty() {
        format!("the {} spec", spec.schema_name())
    } else {
        describe(pointer)
    };
    match kind {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let key = unexpected.first().cloned().unwrap_or_default();
            let child = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
            let (_, span) = root.locate(&child);
            let allowed = match (spec, pointer, settings_def(value)) {
                (SpecKind::Connector, "/settings", Some(def)) => schema
                    .pointer(&format!("/$defs/{def}/properties"))
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default(),
                _ => allowed_keys(schema, pointer),
            };
            let mut d = Diagnostic::error(
                file,
                span.unwrap_or(node_span),
                format!("unknown key `{key}` in {what}"),
            )
            .label("not a known key");
            d = match did_you_mean(&key, allowed.iter().map(String::as_str)) {
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None if !allowed.is_empty() => {
                    d.help(format!("known keys: {}", allowed.join(", ")))
                }
                None => d,
            };
            d
        }
        ValidationErrorKind::Required { property } => {
            let prop = property.as_str().unwrap_or_default();
            let d = Diagnostic::error(
                file,
                key_span.unwrap_or(node_span),
                format!("{what} is missing `{prop}`"),
            )
            .label(format!("`{prop}` is required here"));
            match required_help(prop) {
                Some(h) => d.help(h),
                None => d,
            }
        }
        ValidationErrorKind::Enum { options } => {
            let opts: Vec<&str> = options
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            enum_error(file, root, pointer, node_span, &opts)
        }
        // Documented enums come out of schemars as `oneOf` of `const`s (and `Option`s of them as
        // `anyOf`): report them like plain enums, with the accepted values.
        ValidationErrorKind::OneOfNotValid { .. } | ValidationErrorKind::AnyOf { .. }
            if !enum_options(schema, pointer).is_empty() =>
        {
            let opts = enum_options(schema, pointer);
            let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
            enum_error(file, root, pointer, node_span, &opts)
        }
        ValidationErrorKind::Type { .. } => {
            Diagnostic::error(file, node_span, format!("wrong type for {what}"))
                .label(fallback.to_string())
        }
        _ => Diagnostic::error(file, node_span, format!("invalid {what}"))
            .label(fallback.to_string()),
    }
}

fn enum_error(
    file: &SourceFile,
    root: &Node,
    pointer: &str,
    node_span: crate::source::Span,
    opts: &[&str],
) -> Diagnostic {
    let found = root_value(root, pointer);
    let d = Diagnostic::error(
        file,
        node_span,
        format!("`{found}` is not a valid {}", last_segment(pointer)),
    )
    .label(format!("expected one of: {}", opts.join(", ")));
    match did_you_mean(&found, opts.iter().copied()) {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None => d,
    }
}

/// The accepted strings when the schema at `pointer` is an enum (`enum`, or `oneOf` of `const`s).
fn enum_options(schema: &Value, pointer: &str) -> Vec<String> {
    let Some(node) = schema_at(schema, pointer) else {
        return Vec::new();
    };
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
    }
    let Some(branches) = node.get("oneOf").and_then(Value::as_array) else {
        return Vec::new();
    };
    if !branches
        .iter()
        .all(|b| b.get("const").is_some_and(Value::is_string))
    {
        return Vec::new();
    }
    branches
        .iter()
        .filter(|b| b.get("x-fixture").is_none())
        .filter_map(|b| b.get("const").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// Human name of the object a pointer designates, e.g. "tool `read_file`".
fn describe(pointer: &str) -> String {
    let parts: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    match parts.as_slice() {
        [] => "the spec".to_string(),
        [collection, name] => format!("{} `{name}`", singular(collection)),
        [_, parent, collection, name] => format!("{} `{name}` of `{parent}`", singular(collection)),
        [.., last] => format!("`{last}`"),
    }
}

fn singular(collection: &str) -> &str {
    match collection {
        "tools" => "tool",
        "operations" => "operation",
        "params" => "parameter",
        "servers" => "server",
        "context_presets" => "preset",
        other => other,
    }
}

fn last_segment(pointer: &str) -> String {
    pointer.rsplit('/').next().unwrap_or_default().to_string()
}

fn root_value(root: &Node, pointer: &str) -> String {
    let v = root.to_json();
    match v.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn required_help(prop: &str) -> Option<&'static str> {
    Some(match prop {
        "permission" => {
            "every tool declares `permission: read | write | connect`; there is no default"
        }
        "context" => {
            "every tool declares `context:` with a preset name (`default`, `sql_query`, `log_search` or one of the server's `context_presets`)"
        }
        "sensitivity" => {
            "every tool declares `sensitivity: public | internal | confidential | secret`; there is no default"
        }
        "description" => {
            "the model chooses tools by their description: say what it does and when to use it"
        }
        _ => return None,
    })
}

/// The subschema (with references resolved) that applies to the instance at `pointer`.
fn schema_at<'a>(schema: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut node = schema;
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        node = resolve(schema, node);
        node = node
            .get("properties")
            .and_then(|p| p.get(&part))
            .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
            .or_else(|| node.get("items"))?;
    }
    Some(resolve(schema, node))
}

/// The keys the schema allows at the object `pointer` designates (for did-you-mean).
fn allowed_keys(schema: &Value, pointer: &str) -> Vec<String> {
    let Some(node) = schema_at(schema, pointer) else {
        return Vec::new();
    };
    node.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> &'a Value {
    for _ in 0..8 {
        match node.get("$ref").and_then(Value::as_str) {
            Some(r) => match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(n) => node = n,
                None => break,
            },
            None => {
                // `Option<T>` fields come out as `anyOf: [{$ref}, {type: null}]`.
                match node
                    .get("anyOf")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find(|s| s.get("$ref").is_some()))
                {
                    Some(n) => node = n,
                    None => break,
                }
            }
        }
    }
    node
}
