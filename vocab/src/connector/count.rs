//! Numbers and switches in settings, written as values or as text (settings often come from
//! `${VAR:-5000}`, which is text until the runtime expands it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A count written as a number or as text (settings often come from `${VAR:-5000}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Count {
    /// A whole number.
    Number(u64),
    /// Text holding a whole number, or a `${VAR}` expression that expands to one.
    Text(String),
}

/// A switch written as a boolean or as `true`/`false` text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Flag {
    /// `true` or `false`.
    Bool(bool),
    /// Text holding `true` or `false`, or a `${VAR}` expression that expands to one.
    Text(String),
}

/// A setting that does not hold what its key needs (after `${VAR}` expansion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingError {
    /// The key under `settings`.
    pub key: &'static str,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "settings.{}: {}", self.key, self.reason)
    }
}

impl std::error::Error for SettingError {}

/// `value` read as a whole number, `default` when unset.
pub(crate) fn count(
    value: &Option<Count>,
    key: &'static str,
    default: u64,
) -> Result<u64, SettingError> {
    match value {
        None => Ok(default),
        Some(Count::Number(n)) => Ok(*n),
        Some(Count::Text(t)) => t.trim().parse().map_err(|_| SettingError {
            key,
            reason: format!("`{t}` is not a whole number"),
        }),
    }
}

/// [`count`], refusing 0 (a limit of nothing would refuse every run).
pub(crate) fn positive(
    value: &Option<Count>,
    key: &'static str,
    default: u64,
) -> Result<u64, SettingError> {
    match count(value, key, default)? {
        0 => Err(SettingError {
            key,
            reason: "must be at least 1".into(),
        }),
        n => Ok(n),
    }
}

/// `value` read as a switch, `default` when unset.
pub(crate) fn flag(
    value: &Option<Flag>,
    key: &'static str,
    default: bool,
) -> Result<bool, SettingError> {
    match value {
        None => Ok(default),
        Some(Flag::Bool(b)) => Ok(*b),
        Some(Flag::Text(t)) => match t.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(SettingError {
                key,
                reason: format!("`{t}` is not `true` or `false`"),
            }),
        },
    }
}
