//! `specs/deployments/*.yaml`: which servers run where, and what they may reach.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A deployment: servers with ports and egress allowlists.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeploymentSpec {
    /// Deployment name (also the compose project name).
    pub name: String,
    /// Servers in this deployment, by server name.
    pub servers: BTreeMap<String, DeploymentServer>,
    /// What to generate (default: compose only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<DeployTarget>>,
    /// `development` (default) or `production`: a production deployment should pin its images by
    /// digest (`bulkhead check` warns otherwise), and its instances refuse development tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<DeployEnvironment>,
    /// The server image every instance runs (default `bulkhead:<crate version>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// The egress proxy image (default `bulkhead-egress-proxy:<crate version>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_image: Option<ImageSpec>,
}

/// Where a deployment runs.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DeployEnvironment {
    /// Development: dev tokens allowed, images by tag.
    #[default]
    Development,
    /// Production.
    Production,
}

/// A container image: repository, tag and an optional digest. Never `latest`: a manifest that
/// names a moving tag does not decide what runs, so reviewing it reviews nothing.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// Repository, e.g. `registry.example.com/platform/bulkhead`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Tag (default: the crate's version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// `sha256:<64 hex digits>`: what runs is exactly this image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// A kind of deployment output.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DeployTarget {
    /// `generated/compose/<deployment>.yaml` (and the proxy, config and client files).
    Compose,
    /// `generated/kubernetes/<deployment>/`: manifests and a `kustomization.yaml`.
    Kubernetes,
}

/// One server in a deployment.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeploymentServer {
    /// Port the instances listen on.
    pub port: u16,
    /// `host:port` the full-network instance is expected to reach (documentation for reviewers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
    /// `host:port` the proxied instance may reach through the egress proxy; nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxied_egress: Vec<String>,
    /// Private address ranges (CIDR) that an allowlisted name may resolve to. By default a name
    /// that resolves to a private, shared, link-local or loopback address is refused by the proxy
    /// (an internal host reached through a public name); a deployment that needs an internal host
    /// names its range here, and the policy table shows it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub internal_ranges: Vec<String>,
    /// The trust domain of this server's instances (default: the deployment's name). Servers of
    /// one domain keep one level per agent session; a server in a domain of its own is a separate
    /// trust boundary, named so in the policy table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_domain: Option<String>,
    /// Replicas of each instance on Kubernetes (default 1; more than 1 serves statelessly on the
    /// shared PostgreSQL store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u16>,
}
