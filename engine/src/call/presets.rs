//! The presets a server runs with: built-ins, then the server's own (declared in its spec), then
//! `config.yaml` overrides (`context.presets`), each layer changing only the fields it names.

use crate::context::{PresetError, PresetOverride, Presets};
use crate::serverdef::ServerDef;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Why presets could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum PresetsError {
    /// A preset value is out of range.
    #[error(transparent)]
    Invalid(#[from] PresetError),
    /// A config override is not a preset override.
    #[error("context preset `{name}`: {reason}")]
    Shape {
        /// Preset name.
        name: String,
        /// Why.
        reason: String,
    },
}

/// Built-ins + the server's spec presets + config overrides (a JSON object of name → fields).
pub fn server_presets(def: &ServerDef, config: Option<&Value>) -> Result<Presets, PresetsError> {
    let builtin = Presets::builtin();
    let mut layers: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for p in def.presets {
        let base = builtin.get(p.based_on).ok_or_else(|| PresetsError::Shape {
            name: p.name.into(),
            reason: format!("unknown base preset `{}`", p.based_on),
        })?;
        let mut fields = match serde_json::to_value(base) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        fields.remove("name");
        for (k, v) in p.overrides {
            fields.insert((*k).to_string(), Value::from(*v));
        }
        layers.insert(p.name.to_string(), fields);
    }
    if let Some(config) = config {
        let obj = config.as_object().ok_or_else(|| PresetsError::Shape {
            name: "context.presets".into(),
            reason: "expected a mapping of preset names".into(),
        })?;
        for (name, fields) in obj {
            let fields = fields.as_object().ok_or_else(|| PresetsError::Shape {
                name: name.clone(),
                reason: "expected a mapping of fields".into(),
            })?;
            layers
                .entry(name.clone())
                .or_default()
                .extend(fields.clone());
        }
    }
    let mut overrides = BTreeMap::new();
    for (name, fields) in layers {
        let o: PresetOverride =
            serde_json::from_value(Value::Object(fields)).map_err(|e| PresetsError::Shape {
                name: name.clone(),
                reason: e.to_string(),
            })?;
        overrides.insert(name, o);
    }
    Ok(Presets::with_overrides(&overrides)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tooldef::PresetDef;
    use serde_json::json;

    static DEF: ServerDef = ServerDef {
        name: "t",
        instructions: "",
        presets: &[PresetDef {
            name: "wide_logs",
            based_on: "log_search",
            overrides: &[("lines_head", 200)],
        }],
        tools: &[],
        resources: &[],
        prompts: &[],
    };

    #[test]
    fn layers_apply_in_order() {
        let p = server_presets(
            &DEF,
            Some(&json!({"wide_logs": {"lines_tail": 7}, "sql_query": {"threshold_chars": 3000}})),
        )
        .unwrap();
        let wide = p.get("wide_logs").unwrap();
        let logs = p.get("log_search").unwrap();
        assert_eq!(
            (wide.lines_head, wide.lines_tail, wide.threshold_chars),
            (200, 7, logs.threshold_chars)
        );
        assert_eq!(p.get("sql_query").unwrap().threshold_chars, 3000);
        assert_eq!(p.get("default").unwrap().threshold_chars, 5000);
    }

    #[test]
    fn bad_overrides_are_errors() {
        assert!(server_presets(&DEF, Some(&json!({"default": {"treshold_chars": 1}}))).is_err());
        assert!(server_presets(&DEF, Some(&json!({"default": {"threshold_chars": 0}}))).is_err());
        assert!(server_presets(&DEF, Some(&json!(["x"]))).is_err());
    }
}
