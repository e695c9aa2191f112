//! Building a [`Runtime`] (presets, schemas and connectors checked up front), its limits, its
//! readiness report and its accessors.

use super::{ArgsSchema, Runtime};
use crate::audit::AuditLog;
use crate::auth::ScopeRequirements;
use crate::connectors::{ConnectorError, Connectors};
use crate::context::Presets;
use crate::identity::Identity;
use crate::metrics::Metrics;
use crate::policy::{NetworkMode, Sensitivity};
use crate::server::Server;
use crate::state::StateStore;
use crate::tooldef::Target;
use crate::workspace::WorkspaceRoot;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Limits of one runtime (`limits:` in config.yaml).
#[derive(Clone, Copy, Debug)]
pub struct CallLimits {
    /// Tool calls running at once; beyond it a call gets a retryable "busy".
    pub max_concurrent_calls: usize,
    /// Memory budget of one call's streamed result.
    pub stream: crate::connectors::StreamBudget,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            max_concurrent_calls: 64,
            stream: crate::connectors::StreamBudget::default(),
        }
    }
}

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A tool's context preset is unknown to the runtime (spec and config disagree).
    #[error("tool `{tool}` uses context preset `{preset}`, which is not configured")]
    UnknownPreset {
        /// Tool name.
        tool: &'static str,
        /// Preset name.
        preset: &'static str,
    },
    /// A generated input schema failed to compile (a generator bug).
    #[error("tool `{tool}`: {reason}")]
    Schema {
        /// Tool name.
        tool: &'static str,
        /// Why.
        reason: String,
    },
    /// A tool's `approval:` cannot be used (a pattern that does not compile).
    #[error("{0}")]
    Approval(String),
    /// A connector's settings are missing or malformed.
    #[error(transparent)]
    Connector(#[from] ConnectorError),
    /// The credential rules do not compile (a defect in the engine's rule files).
    #[error(transparent)]
    Inspection(#[from] crate::inspect::RulesError),
}

impl Runtime {
    /// Assembles a runtime; checks that every tool's preset exists and every schema compiles.
    pub fn new(
        server: Server,
        mode: NetworkMode,
        presets: Presets,
        workspaces: WorkspaceRoot,
        state: Arc<StateStore>,
        audit: AuditLog,
    ) -> Result<Runtime, RuntimeError> {
        let mut schemas = HashMap::new();
        let mut outputs = HashMap::new();
        for tool in server
            .def
            .tools
            .iter()
            .chain(server.def.resources.iter().map(|r| &r.tool))
        {
            if presets.get(tool.context).is_none() {
                return Err(RuntimeError::UnknownPreset {
                    tool: tool.name,
                    preset: tool.context,
                });
            }
            let schema =
                ArgsSchema::compile(tool.input_schema).map_err(|reason| RuntimeError::Schema {
                    tool: tool.name,
                    reason,
                })?;
            schemas.insert(tool.name, schema);
            if let Some(text) = tool.output_schema {
                let value: Value =
                    serde_json::from_str(text).map_err(|e| RuntimeError::Schema {
                        tool: tool.name,
                        reason: format!("output schema is not JSON: {e}"),
                    })?;
                let v = jsonschema::validator_for(&value).map_err(|e| RuntimeError::Schema {
                    tool: tool.name,
                    reason: format!("output schema does not compile: {e}"),
                })?;
                outputs.insert(tool.name, v);
            }
        }
        for var in crate::config::env::plain_secrets(
            used_connectors(&server).flat_map(|c| c.secrets.iter().copied()),
        ) {
            tracing::warn!(
                var,
                "a connector secret is set as a plain environment variable; pass it as a file ({var}_FILE), as every generated deployment does"
            );
        }
        let connectors = Connectors::from_env(used_connectors(&server))?
            .with_host_owner(workspaces.host_owner());
        let limits = CallLimits::default();
        let name = server.def.name;
        let metrics = Arc::new(Metrics::new());
        let approvals = crate::approval::Approvals::new(
            name,
            server.def.tools,
            None,
            None,
            std::time::Duration::from_secs(300),
            metrics.clone(),
        )
        .map_err(RuntimeError::Approval)?;
        Ok(Runtime {
            rules: crate::inspect::Rules::get()?,
            server,
            connectors,
            mode,
            presets,
            workspaces,
            state,
            audit,
            schemas,
            outputs,
            calls: tokio::sync::Semaphore::new(limits.max_concurrent_calls),
            max_calls: limits.max_concurrent_calls,
            metrics,
            approvals,
            scopes: ScopeRequirements::default(),
            isolation: Default::default(),
            rates: crate::ratelimit::RateLimiter::none(name),
            tokens: std::sync::OnceLock::new(),
        })
    }

    /// The credential rules this runtime inspects with.
    pub fn rules(&self) -> &'static crate::inspect::Rules {
        self.rules
    }

    /// Seals 2026-07-28 approval questions with `secret` and records used answers in `used`;
    /// a question stands for `expiry`.
    pub fn with_approvals(
        mut self,
        secret: Option<&[u8]>,
        used: Option<crate::approval::UsedIds>,
        expiry: std::time::Duration,
    ) -> Result<Runtime, RuntimeError> {
        self.approvals = crate::approval::Approvals::new(
            self.server.def.name,
            self.server.def.tools,
            secret,
            used,
            expiry,
            self.metrics.clone(),
        )
        .map_err(RuntimeError::Approval)?;
        Ok(self)
    }

    /// Counts calls against `rates` (`rate_limits:` and the tools' own limits).
    pub fn with_rate_limits(mut self, rates: crate::ratelimit::RateLimiter) -> Runtime {
        self.rates = rates;
        self
    }

    /// Rebuilds the connectors with their settings' `${VAR}`s expanded through `env` instead of
    /// the process environment (tests and embedders that run several configurations at once).
    pub fn with_connector_env(
        mut self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Runtime, RuntimeError> {
        self.connectors = Connectors::new(used_connectors(&self.server), env)?
            .with_host_owner(self.workspaces.host_owner())
            .with_budget(self.connectors.budget());
        Ok(self)
    }

    /// Requires token scopes per permission (`auth.scopes`).
    pub fn with_scopes(mut self, scopes: ScopeRequirements) -> Runtime {
        self.scopes = scopes;
        self
    }

    /// Readiness checks (`/readyz`): the compliance store answers and is the one opened, the
    /// audit log is writable, the process's network fits its mode, each probed connector is
    /// reachable. Each entry: what was checked
    /// and, when it failed, why (no host paths).
    pub async fn readiness(&self) -> Vec<(String, Result<(), String>)> {
        let mut out = vec![
            (
                "state".to_string(),
                self.state
                    .check()
                    .await
                    .map_err(|e| e.for_model().to_string()),
            ),
            (
                "audit".to_string(),
                self.audit.healthy().map_err(|e| e.for_model().to_string()),
            ),
        ];
        let isolation = if self.isolation.is_unchecked() && self.mode.is_isolated() {
            Err("started with --unisolated: its network is not checked".to_string())
        } else {
            crate::isolation::selfcheck::check(self.mode)
        };
        out.push((format!("mode {}", self.mode), isolation));
        for (name, result) in self.connectors.probe_in(self.mode).await {
            out.push((format!("connector {name}"), result));
        }
        out
    }

    /// Uses `tokens` for upstream tokens of parameters bound to `exchange:<audience>` (the first
    /// one given stays).
    pub fn use_token_service(&self, tokens: Arc<crate::sessions::TokenService>) {
        let _ = self.tokens.set(tokens);
    }

    /// The result of this instance's isolation self-check (see `isolation::selfcheck`).
    pub fn isolation(&self) -> &Arc<crate::isolation::selfcheck::IsolationStatus> {
        &self.isolation
    }

    /// This runtime's metrics (served at `/metrics`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Applies call limits (concurrency, memory per streamed result).
    pub fn with_limits(mut self, limits: CallLimits) -> Runtime {
        let n = limits.max_concurrent_calls.max(1);
        self.calls = tokio::sync::Semaphore::new(n);
        self.max_calls = n;
        self.connectors = self.connectors.with_budget(limits.stream);
        self
    }

    /// The files and folders this server's connectors read, by connector and setting.
    pub fn data_paths(&self) -> Vec<(&'static str, &'static str, &std::path::Path)> {
        self.connectors.data_paths()
    }

    /// The server this runtime serves.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The network mode this instance runs in.
    pub fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// The state store.
    pub fn state(&self) -> &StateStore {
        &self.state
    }

    /// The audit log.
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// The session's current level for reports, failing closed. Never used to admit a call.
    pub async fn level(&self, id: &Identity) -> Sensitivity {
        self.state.peek(id).await
    }
}

/// The connectors some tool of `server` uses (only those are built).
fn used_connectors(server: &Server) -> impl Iterator<Item = &'static crate::tooldef::ConnectorDef> {
    let tools = server.def.tools;
    server.connectors.iter().filter(move |c| {
        tools
            .iter()
            .any(|t| matches!(t.target, Target::Connector { connector, .. } if connector == c.name))
    })
}
