//! Policy review: the effective policy of a project (its specs and `config.yaml` resolved to
//! what is enforced), the reviewer's table of it (`generated/POLICY.md`), and what a change
//! weakens (`bulkhead check --against REV`).
//!
//! A capability is known by what it runs (connector kind, where the connector points, the
//! operation's text; a handler and its parameters; a resource's text), not by its name, so a
//! rename is matched to what it was and cannot hide a weakening it carries.

mod ack;
mod config;
mod engine;
mod generated;
mod policy;
mod rule;
mod rules;
mod settings;
mod table;
mod trust;

pub use ack::{ACKS_FILE, Ack, AckError, Acks, ScannerAck, description_digest};
pub use config::{CONFIG_SCHEMA, Class, Identity, Setting, schema_settings};
pub use engine::{ENGINE_CRATES, EngineInputs, engine_changed, engine_paths, package_name};
pub use generated::rules_changed;
pub use policy::{Capability, ConnectorPolicy, InstancePolicy, Policy, resolve};
pub(crate) use policy::{NON_PUBLIC, connector_policy};
pub use rule::Rule;
pub use rules::{Review, Weakening, review};
pub use table::policy_table;
