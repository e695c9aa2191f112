//! A document's JSON Schemas (as OpenAPI writes them) as spec parameters, and the `$ref`s of a
//! document resolved. What has no parameter form (an object, `oneOf`, a pattern Rust's regex
//! cannot read) is named, never approximated: the caller refuses or skips the operation.

use serde_json::{Value, json};

use super::Diag;

/// Most `$ref`s followed in one chain, and deepest a schema is inlined.
const MAX_DEPTH: usize = 32;

/// The document, for resolving its local `$ref`s (`#/components/...`).
pub(crate) struct Doc<'a> {
    pub root: &'a Value,
}

impl<'a> Doc<'a> {
    /// `v`, or what its `$ref` chain ends at.
    pub(crate) fn deref(&self, mut v: &'a Value, at: &str) -> Result<&'a Value, Diag> {
        for _ in 0..MAX_DEPTH {
            let Some(r) = v.get("$ref").and_then(Value::as_str) else {
                return Ok(v);
            };
            v = self.target(r, at)?;
        }
        Err(Diag::new(
            at,
            format!("a `$ref` chain longer than {MAX_DEPTH}"),
        ))
    }

    fn target(&self, r: &str, at: &str) -> Result<&'a Value, Diag> {
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(Diag::new(
                at,
                format!("`$ref: {r}` points into another document, which is not read"),
            ));
        };
        let decoded = percent_decode(pointer);
        self.root
            .pointer(&decoded)
            .ok_or_else(|| Diag::new(at, format!("`$ref: {r}` names nothing in the document")))
    }

    /// The schema with every `$ref` inside it replaced by its target; a schema that refers to
    /// itself is cut where it does (`{}`: no constraint read there).
    pub(crate) fn inline(&self, v: &'a Value, at: &str) -> Result<Value, Diag> {
        self.inline_at(v, at, &mut Vec::new())
    }

    fn inline_at(&self, v: &'a Value, at: &str, seen: &mut Vec<String>) -> Result<Value, Diag> {
        if seen.len() > MAX_DEPTH {
            return Ok(json!({}));
        }
        if let Some(r) = v.get("$ref").and_then(Value::as_str) {
            if seen.iter().any(|s| s == r) {
                return Ok(json!({}));
            }
            seen.push(r.to_owned());
            let out = self.inline_at(self.target(r, at)?, at, seen);
            seen.pop();
            return out;
        }
        Ok(match v {
            Value::Object(map) => {
                let mut out = serde_json::Map::new();
                for (k, child) in map {
                    out.insert(k.clone(), self.inline_at(child, at, seen)?);
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|i| self.inline_at(i, at, seen))
                    .collect::<Result<_, _>>()?,
            ),
            other => other.clone(),
        })
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The schema's one type: `type: x`, `type: [x, "null"]` (3.1) or a single `allOf` member.
pub(crate) fn type_of(schema: &Value) -> Option<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => {
            let kinds: Vec<&str> = ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            (kinds.len() == 1).then(|| kinds[0])
        }
        _ => match schema.get("allOf").and_then(Value::as_array) {
            Some(one) if one.len() == 1 => type_of(&one[0]),
            _ if schema.get("properties").is_some() => Some("object"),
            _ => None,
        },
    }
}

/// A single-member `allOf` is its member.
fn unwrap(schema: &Value) -> &Value {
    match schema.get("allOf").and_then(Value::as_array) {
        Some(one) if one.len() == 1 && schema.get("type").is_none() => unwrap(&one[0]),
        _ => schema,
    }
}

/// A spec parameter (its keys in the spec's order) for an inlined `schema`, or why it has none.
pub(crate) fn param(
    schema: &Value,
    description: &str,
    required: bool,
    upstream: Option<&str>,
) -> Result<Vec<(String, Value)>, String> {
    let schema = unwrap(schema);
    for key in ["oneOf", "anyOf", "not"] {
        if schema.get(key).is_some() {
            return Err(format!("`{key}` has no parameter form"));
        }
    }
    let strings: Option<Vec<String>> = schema.get("enum").and_then(Value::as_array).map(|vs| {
        vs.iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    });
    let all_strings = schema
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|vs| vs.iter().all(|v| v.is_string() || v.is_null()));
    let ty = match (type_of(schema), all_strings) {
        (Some("string") | None, true) => "enum",
        (Some(t @ ("string" | "integer" | "number" | "boolean" | "array")), _) => t,
        (Some("object"), _) => return Err("an object has no parameter form".into()),
        (Some(other), _) => return Err(format!("type `{other}` has no parameter form")),
        (None, _) if schema.get("type").is_some_and(Value::is_array) => {
            return Err(format!(
                "more than one type ({}) has no parameter form",
                schema["type"]
            ));
        }
        (None, _) => return Err("the schema names no type".into()),
    };
    let mut out: Vec<(String, Value)> = vec![
        ("type".into(), json!(ty)),
        ("description".into(), json!(description)),
    ];
    if let Some(u) = upstream {
        out.push(("upstream".into(), json!(u)));
    }
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let count = |k: &str| schema.get(k).and_then(Value::as_u64);
    match ty {
        "enum" => {
            let values = strings.unwrap_or_default();
            if values.is_empty() {
                return Err("an empty `enum`".into());
            }
            out.push(("values".into(), json!(values)));
        }
        "string" => string_rules(schema, &mut out)?,
        "integer" | "number" => {
            let integer = ty == "integer";
            let (mut min, mut max) = (num("minimum"), num("maximum"));
            // 3.0: a boolean beside `minimum`; 3.1: the bound itself.
            match schema.get("exclusiveMinimum") {
                Some(Value::Bool(true)) => {
                    min = min.map(|m| m + if integer { 1.0 } else { f64::EPSILON })
                }
                Some(v) if v.is_number() => {
                    min = v
                        .as_f64()
                        .map(|m| m + if integer { 1.0 } else { f64::EPSILON })
                }
                _ => {}
            }
            match schema.get("exclusiveMaximum") {
                Some(Value::Bool(true)) => {
                    max = max.map(|m| m - if integer { 1.0 } else { f64::EPSILON })
                }
                Some(v) if v.is_number() => {
                    max = v
                        .as_f64()
                        .map(|m| m - if integer { 1.0 } else { f64::EPSILON })
                }
                _ => {}
            }
            if integer && schema.get("format").and_then(Value::as_str) == Some("int32") {
                min = Some(min.unwrap_or(i32::MIN as f64).max(i32::MIN as f64));
                max = Some(max.unwrap_or(i32::MAX as f64).min(i32::MAX as f64));
            }
            if let Some(values) = schema.get("enum").and_then(Value::as_array) {
                // Numbers listed: the smallest range holding them (the list itself has no form).
                let ns: Vec<f64> = values.iter().filter_map(Value::as_f64).collect();
                if let (Some(lo), Some(hi)) = (
                    ns.iter().cloned().reduce(f64::min),
                    ns.iter().cloned().reduce(f64::max),
                ) {
                    min = Some(min.map_or(lo, |m| m.max(lo)));
                    max = Some(max.map_or(hi, |m| m.min(hi)));
                }
            }
            if let Some(m) = min {
                out.push(("minimum".into(), number(m, integer)));
            }
            if let Some(m) = max {
                out.push(("maximum".into(), number(m, integer)));
            }
        }
        "array" => {
            let items = schema.get("items").map(unwrap).unwrap_or(&Value::Null);
            let item = match (type_of(items), items.get("enum").is_some()) {
                (Some("string") | None, true) => "string",
                (Some(t @ ("string" | "integer" | "number" | "boolean")), _) => t,
                _ => {
                    return Err("an array whose items are not scalars has no parameter form".into());
                }
            };
            out.push(("items".into(), json!(item)));
            if let Some(n) = count("minItems") {
                out.push(("min_items".into(), json!(n)));
            }
            if let Some(n) = count("maxItems") {
                out.push(("max_items".into(), json!(n)));
            }
        }
        _ => {}
    }
    let default = schema.get("default").filter(|d| fits(d, ty));
    match default {
        Some(d) => out.push(("default".into(), d.clone())),
        None if !required => out.push(("optional".into(), json!(true))),
        None => {}
    }
    Ok(out)
}

fn number(v: f64, integer: bool) -> Value {
    if integer || v.fract() == 0.0 && v.abs() < 9.0e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

fn fits(v: &Value, ty: &str) -> bool {
    match ty {
        "string" | "enum" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        _ => false,
    }
}

/// A string's length and pattern; a `format` with a fixed shape becomes its pattern.
fn string_rules(schema: &Value, out: &mut Vec<(String, Value)>) -> Result<(), String> {
    if let Some(n) = schema.get("minLength").and_then(Value::as_u64) {
        out.push(("min_length".into(), json!(n)));
    }
    if let Some(n) = schema.get("maxLength").and_then(Value::as_u64) {
        out.push(("max_length".into(), json!(n)));
    }
    let pattern = match schema.get("pattern").and_then(Value::as_str) {
        Some(p) => Some(p.to_owned()),
        None => schema
            .get("format")
            .and_then(Value::as_str)
            .and_then(format_pattern)
            .map(str::to_owned),
    };
    if let Some(p) = pattern {
        regex::Regex::new(&p)
            .map_err(|_| format!("pattern `{p}` uses syntax Rust's regex cannot read"))?;
        out.push(("pattern".into(), json!(p)));
    }
    Ok(())
}

/// The pattern of a string `format` whose shape is fixed.
fn format_pattern(format: &str) -> Option<&'static str> {
    Some(match format {
        "uuid" => "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
        "date" => "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
        "date-time" => {
            "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
        }
        "email" => "^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$",
        _ => return None,
    })
}

/// Field names anywhere in `schema` that say personal or secret data (`email`, `ssn`, `token`,
/// …): why an operation is proposed `confidential`.
pub(crate) fn personal_fields(schema: &Value) -> Vec<String> {
    const WORDS: [&str; 20] = [
        "email",
        "ssn",
        "social_security",
        "password",
        "passwd",
        "secret",
        "token",
        "api_key",
        "apikey",
        "phone",
        "address",
        "birth",
        "dob",
        "credit_card",
        "card_number",
        "iban",
        "salary",
        "passport",
        "tax_id",
        "national_id",
    ];
    let mut found = std::collections::BTreeSet::new();
    let mut stack = vec![schema];
    let mut visited = 0;
    while let Some(v) = stack.pop() {
        visited += 1;
        if visited > 10_000 {
            break;
        }
        match v {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    for name in props.keys() {
                        let folded = super::ident(name);
                        if WORDS.iter().any(|w| folded.contains(w)) {
                            found.insert(name.clone());
                        }
                    }
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items.iter()),
            _ => {}
        }
    }
    found.into_iter().collect()
}

/// Largest result schema written, in bytes of JSON (a bigger one is left out).
const MAX_RESULT_SCHEMA: usize = 64 * 1024;

/// An inlined response schema as a tool's result schema: only an object (a tool's result is one),
/// written as JSON Schema 2020-12 reads it — OpenAPI 3.0's `nullable` as a `null` type, its
/// boolean `exclusiveMinimum`/`exclusiveMaximum` as bounds, its `xml` and `example` dropped.
pub(crate) fn result_schema(schema: Value) -> Option<Value> {
    let schema = unwrap(&schema).clone();
    if type_of(&schema) != Some("object") {
        return None;
    }
    let mut schema = json_schema(schema);
    if let Value::Object(m) = &mut schema {
        m.insert("type".into(), json!("object"));
    }
    (serde_json::to_vec(&schema).map_or(usize::MAX, |v| v.len()) <= MAX_RESULT_SCHEMA)
        .then_some(schema)
}

fn json_schema(v: Value) -> Value {
    match v {
        Value::Object(mut m) => {
            for k in [
                "xml",
                "example",
                "examples",
                "externalDocs",
                "discriminator",
            ] {
                m.remove(k);
            }
            if m.remove("nullable") == Some(Value::Bool(true))
                && let Some(Value::String(t)) = m.get("type").cloned()
            {
                m.insert("type".into(), json!([t, "null"]));
            }
            for (flag, bound) in [
                ("exclusiveMinimum", "minimum"),
                ("exclusiveMaximum", "maximum"),
            ] {
                match m.get(flag) {
                    Some(Value::Bool(true)) => {
                        if let Some(b) = m.remove(bound) {
                            m.insert(flag.into(), b);
                        } else {
                            m.remove(flag);
                        }
                    }
                    Some(Value::Bool(false)) => {
                        m.remove(flag);
                    }
                    _ => {}
                }
            }
            Value::Object(
                m.into_iter()
                    .map(|(k, v)| {
                        let v = match (k.as_str(), v) {
                            // A map of names to schemas: its keys are names, never keywords.
                            (
                                "properties" | "patternProperties" | "$defs" | "definitions"
                                | "dependentSchemas",
                                Value::Object(names),
                            ) => Value::Object(
                                names
                                    .into_iter()
                                    .map(|(n, s)| (n, json_schema(s)))
                                    .collect(),
                            ),
                            (_, v) => json_schema(v),
                        };
                        (k, v)
                    })
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(json_schema).collect()),
        other => other,
    }
}
