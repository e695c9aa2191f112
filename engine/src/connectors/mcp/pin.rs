//! The pin of an upstream tool: `sha256:<hex>` of its canonical definition. One home, used by
//! the runtime's check and by `bulkhead mcp lock` / `bulkhead import mcp`, which write the lock.
//!
//! The definition is the fields that change what a model is told or what a call does (`name`,
//! `title`, `description`, `inputSchema`, `outputSchema`, `annotations`); icons and `_meta` are
//! display only and left out. Canonical text: object keys sorted at every depth, no whitespace.
//! The lock keeps the definition beside its pin, so a reviewer reads what changed and a drift
//! names the fields that did.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The fields of a definition, in lock order.
pub const FIELDS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// The definition of `tool` (an upstream's `tools/list` entry) as the lock keeps it.
pub fn definition(tool: &rmcp::model::Tool) -> Value {
    let v = serde_json::to_value(tool).unwrap_or(Value::Null);
    let mut picked = serde_json::Map::new();
    for key in FIELDS {
        if let Some(field) = v.get(key).filter(|f| !f.is_null()) {
            picked.insert(key.to_string(), sorted(field));
        }
    }
    Value::Object(picked)
}

/// The pin of a definition.
pub fn pin_of(definition: &Value) -> String {
    let digest = Sha256::digest(canonical(definition).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The fields in which `live` differs from `locked` (both definitions).
pub fn changed_fields(locked: &Value, live: &Value) -> Vec<&'static str> {
    FIELDS
        .into_iter()
        .filter(|f| {
            let a = locked.get(f).map(canonical);
            let b = live.get(f).map(canonical);
            a != b
        })
        .collect()
}

/// `v` with every object's keys sorted (serde_json here keeps insertion order).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The canonical text of `v`.
pub fn canonical(v: &Value) -> String {
    sorted(v).to_string()
}
