//! Parameter rules: names, per-type keys, limits, and defaults inside the limits.

use super::{Loaded, is_snake_ident, ptr};
use crate::diag::Diagnostic;
use crate::model::Param;
use crate::spec::{ParamSpec, ParamType};
use serde_json::Value;
use std::collections::BTreeMap;

/// Refuses a parameter bound to an upstream token (`from_claim: "exchange:…"`) unless it is
/// `carrier`, the one parameter its connector sends only as `Authorization: Bearer`: anywhere
/// else (SQL, a query string, a body, a handler, a jail, an upstream tool's arguments) the
/// user's token would travel where no header rule keeps it.
pub fn check_exchange<T>(
    loaded: &Loaded<T>,
    at: &str,
    params: &[Param],
    carrier: Option<&str>,
    errors: &mut Vec<Diagnostic>,
) {
    for p in params {
        if p.from_claim
            .as_deref()
            .is_some_and(|c| c.starts_with("exchange:"))
            && Some(p.name.as_str()) != carrier
        {
            errors.push(
                loaded
                    .error_at_value(&format!("{at}/{}/from_claim", ptr(&p.name)), format!("`{}` would carry the user's upstream token somewhere other than an `Authorization` header", p.name))
                    .label("only an http connector's `bearer_param`")
                    .help("name it in the http connector's `settings.bearer_param`, or bind another claim"),
            );
        }
    }
}

/// Checks a params map found at JSON pointer `at` and lowers it to model params.
pub fn check<T>(
    loaded: &Loaded<T>,
    at: &str,
    params: &BTreeMap<String, ParamSpec>,
    errors: &mut Vec<Diagnostic>,
) -> Vec<Param> {
    params
        .iter()
        .map(|(name, spec)| {
            let here = format!("{at}/{}", ptr(name));
            if !is_snake_ident(name) {
                errors.push(
                    loaded
                        .error_at_key(&here, format!("parameter name `{name}` is not a lowercase identifier"))
                        .label("not allowed as a parameter name")
                        .help("use lowercase letters, digits and `_`, starting with a letter, and no Rust keyword"),
                );
            }
            check_one(loaded, &here, name, spec, errors);
            lower(name, spec)
        })
        .collect()
}

/// Lowers one param spec (no checks).
pub fn lower(name: &str, spec: &ParamSpec) -> Param {
    Param {
        name: name.to_string(),
        ty: spec.ty,
        description: spec.description.trim().to_string(),
        required: spec.default.is_none() && !spec.optional,
        default: spec.default.clone(),
        from_claim: spec.from_claim.clone(),
        min_length: spec.min_length,
        max_length: spec.max_length,
        pattern: spec.pattern.clone(),
        minimum: spec.minimum,
        maximum: spec.maximum,
        values: spec.values.clone().unwrap_or_default(),
        items: spec.items,
        min_items: spec.min_items,
        max_items: spec.max_items,
    }
}

/// A parameter bound to a claim takes the claim's value as it is: the model has no way to give
/// it, so nothing that stands for a model's value (a default, optionality, limits) may come with
/// it, and the claim is a string.
fn check_bound<T>(
    loaded: &Loaded<T>,
    here: &str,
    name: &str,
    claim: &str,
    p: &ParamSpec,
    errors: &mut Vec<Diagnostic>,
) {
    let claim_ok = !claim.is_empty()
        && claim.len() <= 64
        && claim
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if !claim_ok {
        errors.push(
            loaded
                .error_at_value(
                    &format!("{here}/from_claim"),
                    format!("`{claim}` is not a claim name"),
                )
                .label("not a claim name")
                .help("name a claim of the session token, e.g. `sub` or `email`"),
        );
    }
    if p.ty != ParamType::String {
        errors.push(
            loaded
                .error_at_value(
                    &format!("{here}/type"),
                    format!("`{name}` is bound to a claim but is not a string"),
                )
                .label("must be `string`")
                .help("claims reach tools as strings"),
        );
    }
    for (key, present) in [
        ("default", p.default.is_some()),
        ("optional", p.optional),
        ("min_length", p.min_length.is_some()),
        ("max_length", p.max_length.is_some()),
        ("pattern", p.pattern.is_some()),
    ] {
        if present {
            errors.push(
                loaded
                    .error_at_key(
                        &format!("{here}/{key}"),
                        format!("`{name}` is set from the `{claim}` claim; `{key}` would stand for a value the model gives"),
                    )
                    .label("not with `from_claim`")
                    .help("remove it: the model cannot pass a bound parameter, and a call without the claim is refused"),
            );
        }
    }
}

fn check_one<T>(
    loaded: &Loaded<T>,
    here: &str,
    name: &str,
    p: &ParamSpec,
    errors: &mut Vec<Diagnostic>,
) {
    if let Some(claim) = &p.from_claim {
        check_bound(loaded, here, name, claim, p, errors);
        return;
    }
    let ty = p.ty;
    let mut misplaced = |key: &str, present: bool, applies: &[ParamType]| {
        if present && !applies.contains(&ty) {
            let names: Vec<&str> = applies.iter().map(|t| t.as_str()).collect();
            errors.push(
                loaded
                    .error_at_key(
                        &format!("{here}/{key}"),
                        format!(
                            "`{key}` does not apply to {} {} parameter",
                            if matches!(ty, ParamType::Integer | ParamType::Enum | ParamType::Array)
                            {
                                "an"
                            } else {
                                "a"
                            },
                            ty.as_str()
                        ),
                    )
                    .label(format!("only for {}", names.join(", ")))
                    .help(format!("remove `{key}` from `{name}` or change its type")),
            );
        }
    };
    use ParamType::*;
    misplaced("min_length", p.min_length.is_some(), &[String]);
    misplaced("max_length", p.max_length.is_some(), &[String]);
    misplaced("pattern", p.pattern.is_some(), &[String]);
    misplaced("minimum", p.minimum.is_some(), &[Integer, Number]);
    misplaced("maximum", p.maximum.is_some(), &[Integer, Number]);
    misplaced("values", p.values.is_some(), &[Enum]);
    misplaced("items", p.items.is_some(), &[Array]);
    misplaced("min_items", p.min_items.is_some(), &[Array]);
    misplaced("max_items", p.max_items.is_some(), &[Array]);

    if p.description.trim().is_empty() {
        errors.push(
            loaded
                .error_at_value(
                    &format!("{here}/description"),
                    format!("parameter `{name}` has an empty description"),
                )
                .label("say what the model should pass"),
        );
    }
    if let (Some(a), Some(b)) = (p.min_length, p.max_length)
        && a > b
    {
        errors.push(
            loaded
                .error_at_value(
                    &format!("{here}/min_length"),
                    format!("`min_length` {a} is greater than `max_length` {b}"),
                )
                .label("no string can satisfy both"),
        );
    }
    if let (Some(a), Some(b)) = (p.minimum, p.maximum)
        && a > b
    {
        errors.push(
            loaded
                .error_at_value(
                    &format!("{here}/minimum"),
                    format!("`minimum` {a} is greater than `maximum` {b}"),
                )
                .label("no value can satisfy both"),
        );
    }
    if let (Some(a), Some(b)) = (p.min_items, p.max_items)
        && a > b
    {
        errors.push(
            loaded
                .error_at_value(
                    &format!("{here}/min_items"),
                    format!("`min_items` {a} is greater than `max_items` {b}"),
                )
                .label("no list can satisfy both"),
        );
    }
    if ty == Integer {
        for (key, v) in [("minimum", p.minimum), ("maximum", p.maximum)] {
            if let Some(v) = v
                && v.fract() != 0.0
            {
                errors.push(
                    loaded
                        .error_at_value(
                            &format!("{here}/{key}"),
                            format!("`{key}` of an integer parameter must be a whole number"),
                        )
                        .label("not a whole number"),
                );
            }
        }
    }
    if let Some(pattern) = &p.pattern
        && let Err(e) =
            jsonschema::validator_for(&serde_json::json!({ "type": "string", "pattern": pattern }))
    {
        // The regex engine's own reason, on one line (it points into the pattern).
        let reason = regex_reason(pattern).unwrap_or_else(|| e.to_string());
        errors.push(
            loaded
                .error_at_value(
                    &format!("{here}/pattern"),
                    format!("`pattern` of `{name}` is not a valid regular expression"),
                )
                .label(reason),
        );
    }
    if ty == Enum {
        let values = p.values.as_deref().unwrap_or_default();
        if values.is_empty() {
            errors.push(
                loaded
                    .error_at_key(here, format!("enum parameter `{name}` lists no `values`"))
                    .label("needs `values: [..]`")
                    .help("list the accepted strings, e.g. `values: [asc, desc]`"),
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for v in values {
            if !seen.insert(v) {
                errors.push(
                    loaded
                        .error_at_value(
                            &format!("{here}/values"),
                            format!("enum value `{v}` is listed twice"),
                        )
                        .label("duplicate value"),
                );
            }
        }
    }
    if ty == Array {
        match p.items {
            None => errors.push(
                loaded
                    .error_at_key(
                        here,
                        format!("array parameter `{name}` does not say its `items` type"),
                    )
                    .label("needs `items`")
                    .help("add `items: string` (or integer, number, boolean)"),
            ),
            Some(Array | Enum) => errors.push(
                loaded
                    .error_at_value(
                        &format!("{here}/items"),
                        "array items must be a scalar type",
                    )
                    .label("use string, integer, number or boolean"),
            ),
            Some(_) => {}
        }
    }
    if p.default.is_some() && p.optional {
        errors.push(
            loaded
                .error_at_key(
                    &format!("{here}/optional"),
                    format!("`{name}` has a default and `optional: true`"),
                )
                .label("a parameter with a default is already optional")
                .help("remove `optional: true`"),
        );
    }
    if let Some(default) = &p.default {
        if let Some((is, want)) = default_type_mismatch(p, default) {
            let mut d = loaded
                .error_at_value(
                    &format!("{here}/default"),
                    format!("default of `{name}` is {is}, but `{name}` is {want}"),
                )
                .label(format!("not {want}"));
            if let Some(unquoted) = default.as_str().filter(|s| {
                matches!(p.ty, ParamType::Boolean) && (*s == "true" || *s == "false")
                    || matches!(p.ty, ParamType::Integer | ParamType::Number)
                        && s.parse::<f64>().is_ok()
            }) {
                d = d.help(format!("write `default: {unquoted}` without quotes"));
            }
            errors.push(d);
        } else if let Err(why) = default_fits(p, default) {
            errors.push(
                loaded
                    .error_at_value(
                        &format!("{here}/default"),
                        format!("default of `{name}` is outside its limits"),
                    )
                    .label(why),
            );
        }
    }
}

/// The regex engine's reason a pattern does not compile, condensed to one line.
fn regex_reason(pattern: &str) -> Option<String> {
    let e = regex::Regex::new(pattern).err()?;
    let text = e.to_string();
    let reason = text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or(text.lines().last().unwrap_or_default().trim());
    Some(reason.to_string())
}

/// `Some((what the default is, what the parameter is))` when the default has the wrong JSON type.
fn default_type_mismatch(p: &ParamSpec, v: &Value) -> Option<(&'static str, &'static str)> {
    let is = match v {
        Value::String(_) => "a string",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
        Value::Null => "null",
    };
    let (ok, want) = match p.ty {
        ParamType::String | ParamType::Enum => (v.is_string(), "a string"),
        ParamType::Integer => (v.is_i64() || v.is_u64(), "an integer"),
        ParamType::Number => (v.is_number(), "a number"),
        ParamType::Boolean => (v.is_boolean(), "a boolean"),
        ParamType::Array => (v.is_array(), "a list"),
    };
    (!ok).then_some((is, want))
}

/// Whether a default value satisfies the declared type and limits; the error says why not.
fn default_fits(p: &ParamSpec, v: &Value) -> Result<(), String> {
    let scalar_ok = |ty: ParamType, v: &Value| match ty {
        ParamType::String => v.is_string(),
        ParamType::Integer => v.is_i64() || v.is_u64(),
        ParamType::Number => v.is_number(),
        ParamType::Boolean => v.is_boolean(),
        _ => false,
    };
    match p.ty {
        ParamType::String => {
            let s = v.as_str().ok_or("expected a string")?;
            let n = s.chars().count() as u64;
            if p.min_length.is_some_and(|m| n < m) {
                return Err(format!(
                    "{n} characters, shorter than `min_length` {}",
                    p.min_length.unwrap_or_default()
                ));
            }
            if p.max_length.is_some_and(|m| n > m) {
                return Err(format!(
                    "{n} characters, longer than `max_length` {}",
                    p.max_length.unwrap_or_default()
                ));
            }
            if let Some(pattern) = &p.pattern
                && let Ok(val) = jsonschema::validator_for(
                    &serde_json::json!({ "type": "string", "pattern": pattern }),
                )
                && !val.is_valid(v)
            {
                return Err(format!("does not match `pattern` {pattern}"));
            }
            Ok(())
        }
        ParamType::Integer | ParamType::Number => {
            if !scalar_ok(p.ty, v) {
                return Err(format!(
                    "expected {}",
                    if p.ty == ParamType::Integer {
                        "a whole number"
                    } else {
                        "a number"
                    }
                ));
            }
            let x = v.as_f64().unwrap_or_default();
            if p.minimum.is_some_and(|m| x < m) {
                return Err(format!(
                    "{v} is below `minimum` {}",
                    p.minimum.unwrap_or_default()
                ));
            }
            if p.maximum.is_some_and(|m| x > m) {
                return Err(format!(
                    "{v} is above `maximum` {}",
                    p.maximum.unwrap_or_default()
                ));
            }
            Ok(())
        }
        ParamType::Boolean => v
            .is_boolean()
            .then_some(())
            .ok_or_else(|| "expected true or false".to_string()),
        ParamType::Enum => {
            let s = v.as_str().ok_or("expected one of the `values`")?;
            if p.values
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|x| x == s)
            {
                Ok(())
            } else {
                Err(format!("`{s}` is not one of the `values`"))
            }
        }
        ParamType::Array => {
            let items = v.as_array().ok_or("expected a list")?;
            let n = items.len() as u64;
            if p.min_items.is_some_and(|m| n < m) || p.max_items.is_some_and(|m| n > m) {
                return Err(format!("{n} items, outside `min_items`/`max_items`"));
            }
            match p.items {
                Some(ty) if items.iter().all(|i| scalar_ok(ty, i)) => Ok(()),
                Some(ty) => Err(format!("every item must be a {}", ty.as_str())),
                None => Ok(()),
            }
        }
    }
}
