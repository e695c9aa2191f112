//! `${VAR}` expansion inside the strings of a parsed configuration, with shell-style defaults
//! and required-variable messages. Values are substituted as data, so they cannot inject YAML.

use super::ConfigError;
use serde_json::Value;
use std::fmt::Write;

/// Expands variables in every string at any depth (object values and list items; keys are
/// left as written):
///
/// - `${VAR}`: the value; an error naming `VAR` when unset
/// - `${VAR:-default}`: `default` when unset or empty; `${VAR-default}`: only when unset
/// - `${VAR:?message}`: an error with `message` when unset or empty; `${VAR?message}`: when unset
/// - `$$`: a literal `$`; any other `$` is kept as written
///
/// Defaults are literal text up to the first `}`. Errors name the variable and the JSON path
/// of the string (e.g. `mcp_servers.template.url`, `servers[2]`).
pub fn expand(
    value: &mut Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    walk(value, &mut String::new(), lookup)
}

fn walk(
    value: &mut Value,
    path: &mut String,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let len = path.len();
    match value {
        Value::String(s) if s.contains('$') => *s = expand_str(s, path, lookup)?,
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let _ = write!(path, "[{i}]");
                walk(item, path, lookup)?;
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                walk(item, path, lookup)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

fn shown(path: &str) -> String {
    if path.is_empty() {
        "(root)".to_owned()
    } else {
        path.to_owned()
    }
}

fn expand_str(
    s: &str,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body.find('}').ok_or_else(|| ConfigError::Syntax {
                path: shown(path),
                message: "unterminated `${` (write `$$` for a literal `$`)".into(),
            })?;
            out.push_str(&resolve(&body[..end], path, lookup)?);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn resolve(
    body: &str,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let name_len = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let (name, op) = body.split_at(name_len);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(ConfigError::Syntax {
            path: shown(path),
            message: format!("invalid variable name in `${{{body}}}`"),
        });
    }
    let value = lookup(name);
    let set_nonempty = value.clone().filter(|v| !v.is_empty());
    let required = |message: &str| ConfigError::Required {
        var: name.to_owned(),
        path: shown(path),
        message: if message.is_empty() {
            "required".to_owned()
        } else {
            message.to_owned()
        },
    };
    if op.is_empty() {
        value.ok_or_else(|| ConfigError::Unset {
            var: name.to_owned(),
            path: shown(path),
        })
    } else if let Some(default) = op.strip_prefix(":-") {
        Ok(set_nonempty.unwrap_or_else(|| default.to_owned()))
    } else if let Some(default) = op.strip_prefix('-') {
        Ok(value.unwrap_or_else(|| default.to_owned()))
    } else if let Some(message) = op.strip_prefix(":?") {
        set_nonempty.ok_or_else(|| required(message))
    } else if let Some(message) = op.strip_prefix('?') {
        value.ok_or_else(|| required(message))
    } else {
        Err(ConfigError::Syntax {
            path: shown(path),
            message: format!("unsupported expression `${{{body}}}` for {name}"),
        })
    }
}
