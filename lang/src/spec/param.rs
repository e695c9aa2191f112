//! Tool and operation parameters: one flat shape, with per-type rules checked semantically.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The type of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    /// A UTF-8 string.
    String,
    /// A 64-bit signed integer.
    Integer,
    /// A 64-bit float.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A list of scalar items (`items` says their type).
    Array,
    /// One of the listed string `values`.
    Enum,
}

impl ParamType {
    /// The spec spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
            ParamType::Enum => "enum",
        }
    }
}

/// A parameter of a tool or connector operation. A parameter is required unless it has a
/// `default` or says `optional: true`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    /// The parameter type.
    #[serde(rename = "type")]
    pub ty: ParamType,
    /// What the parameter means, for the model.
    pub description: String,
    /// The name the other side knows this parameter by, when it is not a spec name: an upstream
    /// MCP tool's (e.g. `messageType` behind `message_type`; checked against the pinned schema),
    /// or an `http` operation's query key, JSON body field or header (e.g. `X-Request-ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Value used when the caller omits the parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The parameter is set from a claim of the caller's token (`sub`, or a claim the token
    /// service copies, e.g. `email`): left out of `inputSchema`, so the model neither sees nor
    /// sets it, and a call whose token lacks the claim is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_claim: Option<String>,
    /// The parameter may be omitted and has no default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// Strings: shortest accepted length in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// Strings: longest accepted length in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// Strings: a regular expression the value must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Numbers: smallest accepted value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    /// Numbers: largest accepted value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<f64>,
    /// Enums: the accepted values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// Arrays: the item type (a scalar type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<ParamType>,
    /// Arrays: fewest items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Arrays: most items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
}
