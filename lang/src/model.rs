//! The one model every emitter reads: validated, resolved, sorted. No YAML in here.

use crate::spec::{ConnectorKind, ParamType, Permission, Sensitivity};
use bulkhead_vocab::HostPort;
pub use bulkhead_vocab::connector::OperationBody;
use serde_json::Value;

/// Everything the specs describe, after validation.
#[derive(Clone, Debug, Default)]
pub struct Model {
    /// Connectors, sorted by name.
    pub connectors: Vec<Connector>,
    /// Servers, sorted by name.
    pub servers: Vec<Server>,
    /// Deployments, sorted by name.
    pub deployments: Vec<Deployment>,
    /// Warnings: worth fixing, not stopping the build.
    pub warnings: Vec<crate::diag::Diagnostic>,
    /// The project's `config.yaml` as JSON (`${VAR}` unexpanded), when it has one: the policy
    /// review reads its identity rules and limits.
    pub config: Option<Value>,
    /// The Cargo workspace the image is built from, when it could be read: the Dockerfile's
    /// dependency layer and the build context's `.dockerignore` follow it.
    pub workspace: Option<crate::workspace::Workspace>,
    /// Who must approve a change to the review (`owners:` in `specs/policy-acks.yaml`): the
    /// generated `.github/CODEOWNERS` names them for the acknowledgements and the policy.
    pub owners: Vec<String>,
}

impl Model {
    /// A server by name.
    pub fn server(&self, name: &str) -> Option<&Server> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// A connector by name.
    pub fn connector(&self, name: &str) -> Option<&Connector> {
        self.connectors.iter().find(|c| c.name == name)
    }
}

/// An MCP server.
#[derive(Clone, Debug)]
pub struct Server {
    /// Server name (a Rust identifier).
    pub name: String,
    /// Spec file it came from, as shown in headers.
    pub source: String,
    /// Instructions for the model.
    pub instructions: String,
    /// Presets the server defines, sorted by name.
    pub presets: Vec<Preset>,
    /// Tools, sorted by name.
    pub tools: Vec<Tool>,
    /// Where the first `handler: rust` tool says so (for a diagnostic when its module is missing).
    pub handler_site: Option<crate::diag::Diagnostic>,
    /// Resources, sorted by name.
    pub resources: Vec<Resource>,
    /// Prompts, sorted by name.
    pub prompts: Vec<Prompt>,
}

/// A resource: a hidden read tool reached by URI.
#[derive(Clone, Debug)]
pub struct Resource {
    /// Name.
    pub name: String,
    /// URI or URI template.
    pub uri: String,
    /// Description.
    pub description: String,
    /// Media type of the contents.
    pub mime_type: Option<String>,
    /// Whether the URI is a template (`{variable}` parts).
    pub template: bool,
    /// The read it performs (named `resource:<name>`, never listed as a tool).
    pub tool: Tool,
}

/// A prompt.
#[derive(Clone, Debug)]
pub struct Prompt {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Arguments, sorted by name.
    pub arguments: Vec<PromptArg>,
    /// Messages, in order: role and text with `{argument}` placeholders.
    pub messages: Vec<(crate::spec::PromptRole, String)>,
}

/// One prompt argument.
#[derive(Clone, Debug)]
pub struct PromptArg {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Whether callers must give it.
    pub required: bool,
}

impl Server {
    /// The highest sensitivity any tool of this server can raise a session to.
    pub fn max_sensitivity(&self) -> Sensitivity {
        self.tools
            .iter()
            .chain(self.resources.iter().map(|r| &r.tool))
            .map(|t| t.sensitivity)
            .max()
            .unwrap_or(Sensitivity::Public)
    }

    /// Whether any tool is implemented by a Rust handler.
    pub fn has_handlers(&self) -> bool {
        self.tools
            .iter()
            .any(|t| matches!(t.target, Target::Handler))
    }
}

/// A context preset declared by a server.
#[derive(Clone, Debug)]
pub struct Preset {
    /// Preset name.
    pub name: String,
    /// The preset it starts from.
    pub based_on: String,
    /// Overridden numbers, sorted by field name.
    pub overrides: Vec<(String, u64)>,
}

/// A tool, fully resolved.
#[derive(Clone, Debug)]
pub struct Tool {
    /// MCP tool name.
    pub name: String,
    /// Rust identifier derived from the name.
    pub ident: String,
    /// Optional title.
    pub title: Option<String>,
    /// Description for the model.
    pub description: String,
    /// Declared permission.
    pub permission: Permission,
    /// Context preset name.
    pub context: String,
    /// Declared sensitivity.
    pub sensitivity: Sensitivity,
    /// Parameters, sorted by name (own, or the operation's).
    pub params: Vec<Param>,
    /// What runs.
    pub target: Target,
    /// Dataset name template recorded when the call raises the session.
    pub dataset: String,
    /// What the tool declares it returns (`outputSchema`), if anything.
    pub returns: Option<Returns>,
    /// Its own per-user rate limit (replaces `rate_limits.per_user_tool`).
    pub rate_limit: Option<bulkhead_vocab::RateLimit>,
    /// When a person approves a call first, and who.
    pub approval: Option<bulkhead_vocab::Approval>,
    /// Why its data is not read for credentials (its own `uninspected:` or its connector's);
    /// `None`: inspected.
    pub uninspected: Option<String>,
}

/// A declared result.
#[derive(Clone, Debug)]
pub enum Returns {
    /// Named fields (a handler's `returns:`): a generated struct.
    Fields(Vec<Param>),
    /// A row set of these columns (a SQL `SELECT`): head and tail rows, the count left out.
    Rows(Vec<String>),
    /// The JSON Schema an `http` operation declares for its answer (`result_schema`).
    Schema(serde_json::Value),
}

/// What a tool runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A connector operation.
    Connector {
        /// Connector name.
        connector: String,
        /// Operation name.
        operation: String,
    },
    /// A user-written Rust handler.
    Handler,
    /// Fixed text (a resource's `text:`).
    Static(String),
}

/// A parameter.
#[derive(Clone, Debug)]
pub struct Param {
    /// Name (a Rust identifier).
    pub name: String,
    /// Type.
    pub ty: ParamType,
    /// Description.
    pub description: String,
    /// Whether callers must give it.
    pub required: bool,
    /// Default value.
    pub default: Option<Value>,
    /// The token claim the parameter is set from (never by the model).
    pub from_claim: Option<String>,
    /// String length limits.
    pub min_length: Option<u64>,
    /// String length limits.
    pub max_length: Option<u64>,
    /// String pattern.
    pub pattern: Option<String>,
    /// Numeric limits.
    pub minimum: Option<f64>,
    /// Numeric limits.
    pub maximum: Option<f64>,
    /// Enum values.
    pub values: Vec<String>,
    /// Array item type.
    pub items: Option<ParamType>,
    /// Array length limits.
    pub min_items: Option<u64>,
    /// Array length limits.
    pub max_items: Option<u64>,
}

/// A connector.
#[derive(Clone, Debug)]
pub struct Connector {
    /// Name.
    pub name: String,
    /// Spec file it came from.
    pub source: String,
    /// Kind.
    pub kind: ConnectorKind,
    /// Least sensitivity of what it reads.
    pub sensitivity: Sensitivity,
    /// Settings as written, typed by the kind (strings may hold `${VAR}`; expanded at run time).
    pub settings: bulkhead_vocab::connector::Settings,
    /// Variables of `settings` that carry credentials (passed as files, never inline).
    pub secrets: Vec<String>,
    /// Operations, sorted by name.
    pub operations: Vec<Operation>,
    /// The package an `mcp` connector's upstream comes from (its lock's `package`).
    pub package: Option<Package>,
    /// Where a jail of this connector (a `sandbox` run, a launched `mcp` upstream) may go, with
    /// variables at their defaults; empty: no network at all.
    pub egress: Vec<HostPort>,
    /// Why the tools over it are not read for credentials (`uninspected:`), if they are not.
    pub uninspected: Option<String>,
}

impl Connector {
    /// The settings as JSON, as written (what `${VAR}` references are read from).
    pub fn settings_json(&self) -> Value {
        serde_json::to_value(&self.settings).unwrap_or(Value::Null)
    }
}

/// Where an upstream MCP server's package is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Registry {
    /// PyPI, installed with pip into a virtualenv of its own.
    Pypi,
    /// The npm registry, installed with npm into a folder of its own.
    Npm,
}

/// A package at one exact version, as an `mcp` connector's lock names it:
/// `pypi:NAME==VERSION` or `npm:NAME@VERSION` (NAME may be `@scope/name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// Its registry.
    pub registry: Registry,
    /// Its name.
    pub name: String,
    /// Its exact version.
    pub version: String,
}

impl Package {
    /// Reads `pypi:NAME==VERSION` or `npm:NAME@VERSION`; a range, a tag or a character a
    /// shell would read is refused (the name and version go into the image's build commands).
    pub fn parse(text: &str) -> Result<Package, String> {
        // Starts with a letter or digit (never `-`, which pip or npm would read as an option).
        let plain = |s: &str, extra: &str| {
            s.starts_with(|c: char| c.is_ascii_alphanumeric())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(c))
        };
        let (registry, name, version) = if let Some(rest) = text.strip_prefix("pypi:") {
            let (name, version) = rest
                .split_once("==")
                .ok_or("a PyPI package is `pypi:NAME==VERSION`")?;
            (Registry::Pypi, name, version)
        } else if let Some(rest) = text.strip_prefix("npm:") {
            let at = rest.get(1..).and_then(|r| r.find('@')).map(|i| i + 1);
            let (name, version) = at
                .map(|i| (&rest[..i], &rest[i + 1..]))
                .ok_or("an npm package is `npm:NAME@VERSION`")?;
            (Registry::Npm, name, version)
        } else {
            return Err("a package is `pypi:NAME==VERSION` or `npm:NAME@VERSION`".into());
        };
        let name_ok = match registry {
            Registry::Pypi => plain(name, ""),
            Registry::Npm => match name.strip_prefix('@') {
                Some(scoped) => scoped
                    .split_once('/')
                    .is_some_and(|(scope, n)| plain(scope, "") && plain(n, "")),
                None => plain(name, ""),
            },
        };
        if !name_ok {
            return Err(format!("`{name}` is not a package name"));
        }
        if !plain(version, "+!") || !version.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "`{version}` is not one exact version (no range, tag or wildcard)"
            ));
        }
        Ok(Package {
            registry,
            name: name.to_string(),
            version: version.to_string(),
        })
    }
}

/// A connector operation.
#[derive(Clone, Debug)]
pub struct Operation {
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Parameters, sorted by name.
    pub params: Vec<Param>,
    /// Kind-specific body.
    pub body: OperationBody,
    /// `http`: the declared JSON Schema of the answer (checked to compile, type `object`).
    pub result_schema: Option<serde_json::Value>,
}

/// A deployment.
#[derive(Clone, Debug)]
pub struct Deployment {
    /// Name.
    pub name: String,
    /// Spec file it came from.
    pub source: String,
    /// Servers, sorted by name.
    pub servers: Vec<DeployedServer>,
    /// What to generate for it.
    pub targets: Vec<crate::spec::DeployTarget>,
    /// Development or production.
    pub environment: crate::spec::DeployEnvironment,
    /// The server image.
    pub image: Image,
    /// The egress proxy image.
    pub proxy_image: Image,
}

/// The trust domain of a deployment's servers unless the spec splits one off: the deployment's
/// name as a DNS label (`_` → `-`). Compose, Kubernetes and the runtime config all default to it.
pub fn default_trust_domain(deployment: &str) -> String {
    deployment.replace('_', "-")
}

/// A resolved image reference: never `latest`, the crate's version unless the spec names a tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Repository.
    pub repository: String,
    /// Tag.
    pub tag: String,
    /// `sha256:…`, when pinned.
    pub digest: Option<String>,
}

impl Image {
    /// `repository:tag`, then `@digest` when pinned: what compose and Kubernetes run.
    pub fn reference(&self) -> String {
        match &self.digest {
            Some(d) => format!("{}:{}@{d}", self.repository, self.tag),
            None => format!("{}:{}", self.repository, self.tag),
        }
    }

    /// `repository:tag`: what `docker build -t` names.
    pub fn tagged(&self) -> String {
        format!("{}:{}", self.repository, self.tag)
    }
}

/// A server in a deployment.
#[derive(Clone, Debug)]
pub struct DeployedServer {
    /// Server name.
    pub name: String,
    /// Port.
    pub port: u16,
    /// Egress of the full instance (informational), as written.
    pub egress: Vec<HostPort>,
    /// Allowlist of the proxied instance, as written.
    pub proxied_egress: Vec<HostPort>,
    /// Private ranges allowlisted names may resolve to (CIDR, checked).
    pub internal_ranges: Vec<String>,
    /// Its trust domain (the deployment's name unless the spec splits it off).
    pub trust_domain: String,
    /// Highest sensitivity any of its tools reaches.
    pub max_sensitivity: Sensitivity,
    /// Replicas of each instance on Kubernetes.
    pub replicas: u16,
}

#[cfg(test)]
mod tests {
    use super::{Package, Registry};

    #[test]
    fn packages_are_one_exact_version_with_no_shell_characters() {
        let p = Package::parse("pypi:mcp-server-time==2026.10.19").unwrap();
        assert_eq!(
            (p.registry, p.name.as_str(), p.version.as_str()),
            (Registry::Pypi, "mcp-server-time", "2026.10.19")
        );
        let p = Package::parse("npm:@modelcontextprotocol/server-filesystem@2026.8.31").unwrap();
        assert_eq!(
            (p.registry, p.name.as_str(), p.version.as_str()),
            (
                Registry::Npm,
                "@modelcontextprotocol/server-filesystem",
                "2026.8.31"
            )
        );
        for bad in [
            "mcp-server-time==1.0",
            "pypi:mcp-server-time>=1.0",
            "pypi:mcp-server-time",
            "npm:@scope/name@^1.2.0",
            "npm:name@latest",
            "npm:@scope/name",
            "pypi:x==1.0;rm -rf /",
            "pypi:x'y==1.0",
            "npm:@scope/na me@1.0.0",
            "npm:",
            "npm:é@1",
            "npm:-x@1.0.0",
            "pypi:-x==1.0",
        ] {
            assert!(Package::parse(bad).is_err(), "{bad}");
        }
    }
}
