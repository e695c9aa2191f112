//! `mcp`: an MCP server nobody here wrote, launched over stdio in a jail or reached over
//! Streamable HTTP.

use super::count::{Count, Flag, SettingError, count, flag};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Settings of an `mcp` connector: how the upstream is reached, and its bounds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// Launch over stdio: the program and its arguments (run by the instance that runs the
    /// tools, in a jail of its own inside the instance's network; relative paths start at
    /// `/tmp`, or `/workspace` for an upstream of one session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Variables the launched program gets (nothing else of the server's environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Reach over Streamable HTTP instead (`https://…`; `http://` only for loopback and tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with every request to `url` (use `${VAR}` for credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Milliseconds the upstream may take to start and answer `initialize` (default 20000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timeout_ms: Option<Count>,
    /// Milliseconds one call may take (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_ms: Option<Count>,
    /// Largest message the upstream may send, in bytes (default 4 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<Count>,
    /// Most tools the upstream may list (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tools: Option<Count>,
    /// For an upstream that cannot tell of list changes: milliseconds a list read vouches for
    /// the calls sent after it (default 100). A call sent later has the list read again beside
    /// it, and its answer is withheld if the list no longer matches the pin; 0: beside every
    /// call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_max_age_ms: Option<Count>,
    /// Host folders a launched upstream reads (absolute; visible read-only at the same path in
    /// its jail, besides the system and its own install folder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<String>,
    /// Host folders a launched upstream may write (absolute; same path in its jail).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_write: Vec<String>,
    /// Whether a launched upstream gets a `/proc` (of its own jail: its processes only), for
    /// programs that need one, such as a browser. Its mount table then names the host folders
    /// its jail binds (the session's folder among them). Default: no `/proc`, as in a container
    /// engine, which masks it anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proc: Option<Flag>,
    /// One upstream per session, with that session's folder at `/workspace` (for upstreams
    /// that take a root folder, such as the filesystem server); default: one per instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_workspace: Option<Flag>,
    /// Upstreams of sessions running at once (default 16); the least recently used idle one is
    /// stopped to make room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<Count>,
    /// Seconds a session's upstream may sit without a call before it is stopped (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<Count>,
    /// Memory one launched upstream with everything it starts may use, in MiB (default 1024;
    /// where the server can make cgroups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<Count>,
    /// `host:port` entries a launched upstream may reach, through the instance's egress (on
    /// `full` and `proxied`); without it the upstream has no network at all. Every tool over a
    /// connector with `egress` must be `permission: connect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
    /// Processes one launched upstream may run at once (default 256; where the server can make
    /// cgroups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Count>,
    /// For a `url` upstream: special-purpose ranges (CIDR) the server may reach it at although
    /// they are not the internet (an MCP server on a private network, a test one on loopback).
    /// Without an entry, a `url` whose host resolves into (or is) any special-purpose address is
    /// refused. Review names every entry as `reach-widened`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach_private: Option<Vec<String>>,
}

impl McpSettings {
    /// The ranges `reach_private` opens, or the first entry that is not a CIDR range.
    pub fn reach_private(&self) -> Result<Vec<crate::ranges::Cidr>, SettingError> {
        crate::ranges::opened(self.reach_private.as_deref().unwrap_or_default()).map_err(|reason| {
            SettingError {
                key: "reach_private",
                reason,
            }
        })
    }

    /// The program a launched upstream starts (`None` for a `url` upstream).
    pub fn program(&self) -> Option<&str> {
        self.command
            .as_ref()
            .and_then(|c| c.first())
            .map(String::as_str)
    }

    /// One upstream per session rather than per instance.
    pub fn session_workspace(&self) -> Result<bool, SettingError> {
        flag(&self.session_workspace, "session_workspace", false)
    }

    /// Whether a launched upstream's jail has a `/proc`.
    pub fn proc(&self) -> Result<bool, SettingError> {
        flag(&self.proc, "proc", false)
    }

    /// Milliseconds to start and answer `initialize`.
    pub fn start_timeout_ms(&self) -> Result<u64, SettingError> {
        count(&self.start_timeout_ms, "start_timeout_ms", 20_000)
    }

    /// Milliseconds one call may take.
    pub fn call_timeout_ms(&self) -> Result<u64, SettingError> {
        count(&self.call_timeout_ms, "call_timeout_ms", 30_000)
    }

    /// Largest message from the upstream, in bytes.
    pub fn max_message_bytes(&self) -> Result<u64, SettingError> {
        count(&self.max_message_bytes, "max_message_bytes", 4 << 20)
    }

    /// Most tools the upstream may list.
    pub fn max_tools(&self) -> Result<u64, SettingError> {
        count(&self.max_tools, "max_tools", 1000)
    }

    /// Milliseconds a list read of an unwatched upstream vouches for later calls.
    pub fn pin_max_age_ms(&self) -> Result<u64, SettingError> {
        count(&self.pin_max_age_ms, "pin_max_age_ms", 100)
    }

    /// Upstreams of sessions at once.
    pub fn max_sessions(&self) -> Result<u64, SettingError> {
        count(&self.max_sessions, "max_sessions", 16)
    }

    /// Seconds an idle session's upstream lives.
    pub fn idle_seconds(&self) -> Result<u64, SettingError> {
        count(&self.idle_seconds, "idle_seconds", 300)
    }

    /// Memory of one launched upstream, in MiB (at least 1).
    pub fn memory_mb(&self) -> Result<u64, SettingError> {
        Ok(count(&self.memory_mb, "memory_mb", 1024)?.max(1))
    }

    /// Processes of one launched upstream at once (at least 1).
    pub fn processes(&self) -> Result<u64, SettingError> {
        Ok(count(&self.processes, "processes", 256)?.max(1))
    }
}
