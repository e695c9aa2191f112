//! `http`: an HTTP API under a declared base URL (reaches the network).

use super::count::{Count, SettingError, count};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Settings of an `http` connector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// The service's base URL (`https://…`; `http://` only for loopback and tests).
    pub base_url: String,
    /// `host:port` pairs the connector may reach (default: the base URL's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_hosts: Option<Vec<String>>,
    /// Milliseconds before a request is abandoned (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<Count>,
    /// Largest response body read, in bytes (default 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<Count>,
    /// Headers sent with every request (use `${VAR}` for credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// PEM file of the certificate authorities trusted for `https://` (default: the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// A parameter (bound to the caller's token, e.g. `from_claim: "exchange:<audience>"`) whose
    /// value is sent as `Authorization: Bearer`, never in the path, query or body: the service
    /// sees the user, not a shared credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_param: Option<String>,
    /// Special-purpose ranges (CIDR) this connector may reach although they are not the internet
    /// (a service on a private network, a test listener on loopback). Without an entry, a
    /// destination whose name resolves (or whose address is) in any special-purpose range of the
    /// IANA registries is refused, on every instance. An entry that is a `${VAR}` expanding empty
    /// opens nothing. Review names every entry as `reach-widened`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach_private: Option<Vec<String>>,
}

impl HttpSettings {
    /// The ranges `reach_private` opens (empty entries left out), or the first that is not a
    /// CIDR range with its host bits clear.
    pub fn reach_private(&self) -> Result<Vec<crate::ranges::Cidr>, SettingError> {
        crate::ranges::opened(self.reach_private.as_deref().unwrap_or_default()).map_err(|reason| {
            SettingError {
                key: "reach_private",
                reason,
            }
        })
    }

    /// Milliseconds before a request is abandoned.
    pub fn timeout_ms(&self) -> Result<u64, SettingError> {
        count(&self.timeout_ms, "timeout_ms", 10_000)
    }

    /// Largest response body read, in bytes.
    pub fn max_response_bytes(&self) -> Result<u64, SettingError> {
        count(&self.max_response_bytes, "max_response_bytes", 1 << 20)
    }
}
