//! Connector settings: the declared JSON with `${VAR}` expanded, then read into typed fields.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ConnectorError;
use crate::tooldef::ConnectorDef;

/// The connector's settings with every `${VAR}` expanded through `env`.
pub fn expanded(
    def: &'static ConnectorDef,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Value, ConnectorError> {
    let err = |reason: String| ConnectorError::Settings {
        connector: def.name,
        reason,
    };
    let text = if def.settings.trim().is_empty() {
        "{}"
    } else {
        def.settings
    };
    let mut value: Value =
        serde_json::from_str(text).map_err(|e| err(format!("settings are not JSON: {e}")))?;
    crate::config::expand(&mut value, env).map_err(|e| err(format!("settings.{e}")))?;
    Ok(value)
}

/// Reads expanded settings into `T`. Numbers may also be written as strings (they often come
/// from `${VAR:-5000}`), so `T` should read them with [`number`].
pub fn parse<T: DeserializeOwned>(
    def: &'static ConnectorDef,
    value: Value,
) -> Result<T, ConnectorError> {
    serde_json::from_value(value).map_err(|e| ConnectorError::Settings {
        connector: def.name,
        reason: format!("settings: {e}"),
    })
}

/// Deserializes an optional `u64` written as a number or as a decimal string.
pub fn number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum NumOrText {
        Num(u64),
        Text(String),
    }
    match Option::<NumOrText>::deserialize(d)? {
        None => Ok(None),
        Some(NumOrText::Num(n)) => Ok(Some(n)),
        Some(NumOrText::Text(t)) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("`{t}` is not a whole number"))),
    }
}

/// Deserializes an optional `bool` written as a boolean or as `true`/`false` text.
pub fn boolean<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum BoolOrText {
        Bool(bool),
        Text(String),
    }
    match Option::<BoolOrText>::deserialize(d)? {
        None => Ok(None),
        Some(BoolOrText::Bool(b)) => Ok(Some(b)),
        Some(BoolOrText::Text(t)) => match t.trim() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(serde::de::Error::custom(format!(
                "`{t}` is not `true` or `false`"
            ))),
        },
    }
}

use serde::Deserialize as _;
