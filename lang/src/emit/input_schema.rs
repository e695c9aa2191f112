//! The JSON Schema (`inputSchema`) of a tool, from its parameters.

use crate::model::{Param, Returns};
use crate::spec::ParamType;
use serde_json::{Map, Value, json};

/// The `inputSchema` object for a parameter list. Parameters bound to a claim are left out: the
/// model neither sees them nor may pass them (`additionalProperties: false`).
pub fn input_schema(params: &[Param]) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for p in params.iter().filter(|p| p.from_claim.is_none()) {
        properties.insert(p.name.clone(), param_schema(p));
        if p.required {
            required.push(Value::String(p.name.clone()));
        }
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    Value::Object(schema)
}

fn scalar_type(ty: ParamType) -> &'static str {
    match ty {
        ParamType::String | ParamType::Enum => "string",
        ParamType::Integer => "integer",
        ParamType::Number => "number",
        ParamType::Boolean => "boolean",
        ParamType::Array => "array",
    }
}

fn number(v: f64, ty: ParamType) -> Value {
    if ty == ParamType::Integer && v.fract() == 0.0 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

fn param_schema(p: &Param) -> Value {
    let mut s = Map::new();
    s.insert("type".into(), json!(scalar_type(p.ty)));
    s.insert("description".into(), json!(p.description));
    if p.ty == ParamType::Enum {
        s.insert("enum".into(), json!(p.values));
    }
    if let Some(v) = p.min_length {
        s.insert("minLength".into(), json!(v));
    }
    if let Some(v) = p.max_length {
        s.insert("maxLength".into(), json!(v));
    }
    if let Some(v) = &p.pattern {
        s.insert("pattern".into(), json!(v));
    }
    if let Some(v) = p.minimum {
        s.insert("minimum".into(), number(v, p.ty));
    }
    if let Some(v) = p.maximum {
        s.insert("maximum".into(), number(v, p.ty));
    }
    if let Some(items) = p.items {
        s.insert("items".into(), json!({ "type": scalar_type(items) }));
    }
    if let Some(v) = p.min_items {
        s.insert("minItems".into(), json!(v));
    }
    if let Some(v) = p.max_items {
        s.insert("maxItems".into(), json!(v));
    }
    if let Some(d) = &p.default {
        s.insert("default".into(), d.clone());
    }
    Value::Object(s)
}

/// The `outputSchema` of a declared result: an object of the declared fields, or a row set (the
/// columns, head and tail rows as objects of text (SQL NULL is empty text, as in the saved CSV), the total, the rows left out, and where
/// the whole result was saved when it was cut).
pub fn output_schema(returns: &Returns) -> Value {
    match returns {
        Returns::Fields(fields) => input_schema(fields),
        Returns::Schema(schema) => schema.clone(),
        Returns::Rows(columns) => {
            let props: Map<String, Value> = columns
                .iter()
                .map(|c| (c.clone(), json!({ "type": "string" })))
                .collect();
            json!({
                "type": "object",
                "properties": {
                    "columns": { "type": "array", "items": { "type": "string" } },
                    "rows": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": props,
                            "required": columns,
                            "additionalProperties": false
                        }
                    },
                    "total_rows": { "type": "integer", "minimum": 0 },
                    "omitted_rows": { "type": "integer", "minimum": 0 },
                    "saved_to": { "type": "string" }
                },
                "required": ["columns", "rows", "total_rows", "omitted_rows"],
                "additionalProperties": false
            })
        }
    }
}
