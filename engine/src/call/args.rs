//! Tool arguments: defaults filled in, then validated against the tool's `inputSchema`; every
//! problem becomes one retryable message that names the field.

use crate::errors::ToolError;
use crate::server::JsonObject;
use serde_json::Value;

/// A tool's compiled input schema.
pub struct ArgsSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

impl ArgsSchema {
    /// Compiles a generated `inputSchema` (generated schemas always compile; a failure is a bug).
    pub fn compile(schema_text: &str) -> Result<ArgsSchema, String> {
        let schema: Value = serde_json::from_str(schema_text)
            .map_err(|e| format!("input schema is not JSON: {e}"))?;
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| format!("input schema does not compile: {e}"))?;
        Ok(ArgsSchema { schema, validator })
    }

    /// The declared JSON type of a property (`integer`, `string`, …), if the schema gives one.
    pub fn property_type(&self, name: &str) -> Option<String> {
        self.schema
            .get("properties")?
            .get(name)?
            .get("type")?
            .as_str()
            .map(str::to_owned)
    }

    /// Fills defaults and validates. `None` arguments count as `{}`.
    pub fn prepare(&self, args: Option<JsonObject>) -> Result<JsonObject, ToolError> {
        let mut args = args.unwrap_or_default();
        if let Some(props) = self.schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                if let Some(default) = prop.get("default")
                    && !args.contains_key(name)
                {
                    args.insert(name.clone(), default.clone());
                }
            }
        }
        let value = Value::Object(args);
        let problems: Vec<String> = self
            .validator
            .iter_errors(&value)
            .map(|e| describe(&e))
            .collect();
        if !problems.is_empty() {
            return Err(ToolError::retry(format!(
                "invalid arguments: {}",
                problems.join("; ")
            )));
        }
        match value {
            Value::Object(args) => Ok(args),
            _ => unreachable!("built from an object"),
        }
    }
}

fn describe(e: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind as K;
    let path = e.instance_path().to_string();
    let field = path.trim_start_matches('/').replace('/', ".");
    let value = short(e.instance());
    match e.kind() {
        K::Required { property } => format!("`{}` is required", property.as_str().unwrap_or("?")),
        K::AdditionalProperties { unexpected } => format!(
            "unknown argument{} {}",
            if unexpected.len() == 1 { "" } else { "s" },
            unexpected
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        K::MinLength { limit } => format!("`{field}` must be at least {limit} characters"),
        K::MaxLength { limit } => format!("`{field}` must be at most {limit} characters"),
        K::Minimum { limit } => format!("`{field}` must be ≥ {limit}, got {value}"),
        K::Maximum { limit } => format!("`{field}` must be ≤ {limit}, got {value}"),
        K::Pattern { pattern } => format!("`{field}` must match {pattern}, got {value}"),
        K::Enum { options } => format!("`{field}` must be one of {options}, got {value}"),
        K::Type { .. } => format!("`{field}` has the wrong type: {e}"),
        _ if field.is_empty() => e.to_string(),
        _ => format!("`{field}`: {e}"),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> ArgsSchema {
        ArgsSchema::compile(r#"{"type":"object","properties":{"query":{"type":"string","minLength":1,"pattern":"\\S"},"limit":{"type":"integer","minimum":1,"maximum":200,"default":20}},"required":["query"],"additionalProperties":false}"#).unwrap()
    }

    fn obj(v: Value) -> Option<JsonObject> {
        v.as_object().cloned()
    }

    #[test]
    fn fills_defaults() {
        let args = schema().prepare(obj(json!({"query": "acme"}))).unwrap();
        assert_eq!(args["limit"], json!(20));
    }

    #[test]
    fn errors_name_the_field_and_are_retryable() {
        let cases = [
            (json!({}), "`query` is required"),
            (
                json!({"query": ""}),
                "`query` must be at least 1 characters",
            ),
            (json!({"query": "   "}), "`query` must match"),
            (json!({"query": "a", "limit": 500}), "`limit` must be ≤ 200"),
            (
                json!({"query": "a", "limit": "ten"}),
                "`limit` has the wrong type",
            ),
            (json!({"query": "a", "lmit": 5}), "unknown argument `lmit`"),
        ];
        for (args, expect) in cases {
            match schema().prepare(obj(args.clone())) {
                Err(ToolError::Retryable(msg)) => assert!(msg.contains(expect), "{args}: {msg}"),
                other => panic!("{args}: expected a retryable error, got {other:?}"),
            }
        }
    }
}
