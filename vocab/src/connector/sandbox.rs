//! `sandbox`: a program run in a per-session jail (bubblewrap) over the session's workspace.

use super::count::{Count, SettingError, positive};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Settings of a `sandbox` connector: the limits of one run (each has a safe default).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// CPU seconds one run may use (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<Count>,
    /// Seconds one run may take, start to end (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<Count>,
    /// Memory one run may use, in MiB (default 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<Count>,
    /// Processes (and threads) one run may have at once (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Count>,
    /// Bytes of output (stdout and stderr together) one run may print (default 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<Count>,
    /// Largest file one run may write, in bytes (default 64 MiB; the workspace quota also applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_bytes: Option<Count>,
    /// Runs of this connector at once in one instance (default 8); more wait for a slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<Count>,
    /// `host:port` entries a run may reach, through the instance's egress (on `full` and
    /// `proxied`); without it a run has no network at all. Every tool over a connector with
    /// `egress` must be `permission: connect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
}

impl SandboxSettings {
    /// CPU seconds of one run.
    pub fn cpu_seconds(&self) -> Result<u64, SettingError> {
        positive(&self.cpu_seconds, "cpu_seconds", 10)
    }

    /// Seconds one run may take.
    pub fn wall_seconds(&self) -> Result<u64, SettingError> {
        positive(&self.wall_seconds, "wall_seconds", 30)
    }

    /// Memory of one run, in MiB.
    pub fn memory_mb(&self) -> Result<u64, SettingError> {
        positive(&self.memory_mb, "memory_mb", 512)
    }

    /// Processes and threads of one run at once.
    pub fn processes(&self) -> Result<u64, SettingError> {
        positive(&self.processes, "processes", 64)
    }

    /// Output bytes of one run.
    pub fn output_bytes(&self) -> Result<u64, SettingError> {
        positive(&self.output_bytes, "output_bytes", 1 << 20)
    }

    /// Largest file one run may write.
    pub fn file_bytes(&self) -> Result<u64, SettingError> {
        positive(&self.file_bytes, "file_bytes", 64 << 20)
    }

    /// Runs at once in one instance.
    pub fn max_runs(&self) -> Result<u64, SettingError> {
        positive(&self.max_runs, "max_runs", 8)
    }
}
