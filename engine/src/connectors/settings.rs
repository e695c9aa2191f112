//! Connector settings: the declared JSON with `${VAR}` expanded, then read into the kind's
//! typed settings (`bulkhead_vocab::connector`, the same types the generator checked).

use bulkhead_vocab::connector::{SettingError, Settings};
use serde_json::Value;

use super::ConnectorError;
use crate::tooldef::ConnectorDef;

/// The connector's settings with every `${VAR}` expanded through `env`, typed by its kind.
pub fn typed(
    def: &'static ConnectorDef,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ConnectorError> {
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
    def.kind
        .settings(value)
        .map_err(|e| err(format!("settings: {e}")))
}

/// A setting that does not hold what its key needs, as the connector's error.
pub fn invalid(def: &'static ConnectorDef) -> impl Fn(SettingError) -> ConnectorError {
    move |e| ConnectorError::Settings {
        connector: def.name,
        reason: e.to_string(),
    }
}
