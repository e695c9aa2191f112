//! The review's rules: each kind of weakening `bulkhead check --against` reports, by the name its
//! lines (and the acknowledgements in `specs/policy-acks.yaml`) spell word for word.

use std::cmp::Ordering;
use std::fmt;

/// One kind of weakening. Its [`name`](Rule::name) starts every line the review prints
/// (`rule: subject: change`); [`describe`](Rule::describe) says what it flags and why.
///
/// Ordered by name (the order the review has always sorted its lines in), not by declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `new-capability`.
    NewCapability,
    /// `sensitivity-lowered`.
    SensitivityLowered,
    /// `permission-widened`.
    PermissionWidened,
    /// `runs-changed`.
    RunsChanged,
    /// `context-changed`.
    ContextChanged,
    /// `context-widened`.
    ContextWidened,
    /// `argument-loosened`.
    ArgumentLoosened,
    /// `rate-limit-raised`.
    RateLimitRaised,
    /// A tool's approval was removed or narrowed.
    ApprovalWeakened,
    /// `inspection-off`.
    InspectionOff,
    /// `location-changed`.
    LocationChanged,
    /// `reach-widened`.
    ReachWidened,
    /// `settings-changed`.
    SettingsChanged,
    /// `package-changed`.
    PackageChanged,
    /// `trust-changed`.
    TrustChanged,
    /// `secret-unprotected`.
    SecretUnprotected,
    /// `instance-removed`.
    InstanceRemoved,
    /// `seccomp-off`.
    SeccompOff,
    /// `egress-widened`.
    EgressWidened,
    /// `internal-range-widened`.
    InternalRangeWidened,
    /// `mount-added`.
    MountAdded,
    /// `trust-domain-changed`.
    TrustDomainChanged,
    /// `ratchet-split`.
    RatchetSplit,
    /// `trust-domain-added`.
    TrustDomainAdded,
    /// `environment-lowered`.
    EnvironmentLowered,
    /// `image-changed`.
    ImageChanged,
    /// `image-unpinned`.
    ImageUnpinned,
    /// `config-removed`.
    ConfigRemoved,
    /// `auth-changed`.
    AuthChanged,
    /// `scope-dropped`.
    ScopeDropped,
    /// `allowlist-widened`.
    AllowlistWidened,
    /// `config-changed`.
    ConfigChanged,
    /// `limit-raised`.
    LimitRaised,
    /// `secret-committed`.
    SecretCommitted,
    /// `rules-changed`.
    RulesChanged,
    /// `engine-changed`.
    EngineChanged,
    /// `code-changed`.
    CodeChanged,
    /// `owners-narrowed`.
    OwnersNarrowed,
}

impl Rule {
    /// Every rule in declaration order (`ALL[rule as usize] == rule`): capabilities, connectors,
    /// instances, then `config.yaml`, as the review checks them.
    pub const ALL: [Rule; 38] = [
        Rule::NewCapability,
        Rule::SensitivityLowered,
        Rule::PermissionWidened,
        Rule::RunsChanged,
        Rule::ContextChanged,
        Rule::ContextWidened,
        Rule::ArgumentLoosened,
        Rule::RateLimitRaised,
        Rule::ApprovalWeakened,
        Rule::InspectionOff,
        Rule::LocationChanged,
        Rule::ReachWidened,
        Rule::SettingsChanged,
        Rule::PackageChanged,
        Rule::TrustChanged,
        Rule::SecretUnprotected,
        Rule::InstanceRemoved,
        Rule::SeccompOff,
        Rule::EgressWidened,
        Rule::InternalRangeWidened,
        Rule::MountAdded,
        Rule::TrustDomainChanged,
        Rule::RatchetSplit,
        Rule::TrustDomainAdded,
        Rule::EnvironmentLowered,
        Rule::ImageChanged,
        Rule::ImageUnpinned,
        Rule::ConfigRemoved,
        Rule::AuthChanged,
        Rule::ScopeDropped,
        Rule::AllowlistWidened,
        Rule::ConfigChanged,
        Rule::LimitRaised,
        Rule::SecretCommitted,
        Rule::RulesChanged,
        Rule::EngineChanged,
        Rule::CodeChanged,
        Rule::OwnersNarrowed,
    ];

    /// The kebab-case name that starts the review's lines and their acknowledgements.
    pub fn name(self) -> &'static str {
        match self {
            Rule::NewCapability => "new-capability",
            Rule::SensitivityLowered => "sensitivity-lowered",
            Rule::PermissionWidened => "permission-widened",
            Rule::RunsChanged => "runs-changed",
            Rule::ContextChanged => "context-changed",
            Rule::ContextWidened => "context-widened",
            Rule::ArgumentLoosened => "argument-loosened",
            Rule::RateLimitRaised => "rate-limit-raised",
            Rule::ApprovalWeakened => "approval-weakened",
            Rule::InspectionOff => "inspection-off",
            Rule::LocationChanged => "location-changed",
            Rule::ReachWidened => "reach-widened",
            Rule::SettingsChanged => "settings-changed",
            Rule::PackageChanged => "package-changed",
            Rule::TrustChanged => "trust-changed",
            Rule::SecretUnprotected => "secret-unprotected",
            Rule::InstanceRemoved => "instance-removed",
            Rule::SeccompOff => "seccomp-off",
            Rule::EgressWidened => "egress-widened",
            Rule::InternalRangeWidened => "internal-range-widened",
            Rule::MountAdded => "mount-added",
            Rule::TrustDomainChanged => "trust-domain-changed",
            Rule::RatchetSplit => "ratchet-split",
            Rule::TrustDomainAdded => "trust-domain-added",
            Rule::EnvironmentLowered => "environment-lowered",
            Rule::ImageChanged => "image-changed",
            Rule::ImageUnpinned => "image-unpinned",
            Rule::ConfigRemoved => "config-removed",
            Rule::AuthChanged => "auth-changed",
            Rule::ScopeDropped => "scope-dropped",
            Rule::AllowlistWidened => "allowlist-widened",
            Rule::ConfigChanged => "config-changed",
            Rule::LimitRaised => "limit-raised",
            Rule::RulesChanged => "rules-changed",
            Rule::EngineChanged => "engine-changed",
            Rule::CodeChanged => "code-changed",
            Rule::OwnersNarrowed => "owners-narrowed",
            Rule::SecretCommitted => "secret-committed",
        }
    }

    /// One sentence: the change the rule flags and why it weakens the policy.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::NewCapability => {
                "A tool or resource the base did not have and no existing capability covers (one of the same kind and server running the same thing, nowhere looser; another server's is no cover, nor is a handler), so clients can reach something they could not."
            }
            Rule::SensitivityLowered => {
                "A tool, resource or connector is declared less sensitive than before, so its data may be served by a less isolated instance and raises a session's level less (which may leave `connect` tools open to a session that read it)."
            }
            Rule::PermissionWidened => {
                "A capability declares a wider permission than before (`read` < `write` < `connect`), so it may change data or reach outside the deployment where it could not."
            }
            Rule::RunsChanged => {
                "A capability of the same name runs something else (another operation text, handler, parameters or connector target), so the name reviewers approved no longer stands for what runs."
            }
            Rule::ContextChanged => {
                "A capability uses another context preset, so other limits decide how much of its results reaches the client."
            }
            Rule::ContextWidened => {
                "A number the server's spec overrides in a capability's context preset is raised, or set or unset where the other revision leaves the default, so more of its results may reach the client."
            }
            Rule::ArgumentLoosened => {
                "An argument admits more than before (a minimum lowered, a maximum raised or removed, a pattern changed or removed, allowed values added), its type, item type or default changed, or it is no longer set from the claim the base bound it to (`from_claim`), so callers can pass values the base refused."
            }
            Rule::RateLimitRaised => {
                "A tool's per-user budget (its own `rate_limit:`, else `config.yaml`'s `rate_limits.per_user_tool`) admits more calls than before (a higher rate, a larger burst) or none applies any more, so one user can call it faster than was reviewed; a new copy of a rate-limited tool is never covered by it, since its calls count apart."
            }
            Rule::ApprovalWeakened => {
                "A tool's `approval:` is removed, asks in fewer cases (a condition dropped, a level raised, a path prefix shortened, a pattern changed) or lets someone else approve, so calls run without the person the base required."
            }
            Rule::InspectionOff => {
                "A capability's results (and a `connect` tool's arguments) are no longer read for credentials (`uninspected:` on the tool or its connector), so a credential it returns reaches the model unredacted without raising the session, and one the model sends through it leaves."
            }
            Rule::LocationChanged => {
                "A connector points somewhere else (another path, folder, URL or base URL), so its capabilities read or write data nobody reviewed."
            }
            Rule::ReachWidened => {
                "A connector may reach a `host:port` it could not before (HTTP `allowed_hosts` or base URL, a database host, a sandbox's or upstream MCP server's egress), so its capabilities can send data there or fetch it from there."
            }
            Rule::SettingsChanged => {
                "A connector setting changed as written, the variable behind a `${VAR}` included (`${APP_LOG_DIR:-data/logs}` → `${SECURITY_LOG_DIR:-data/logs}` mounts what an operator set for another connector), or a limit, bind or environment of a sandbox or upstream, so what runs or what it reads is no longer what was reviewed."
            }
            Rule::PackageChanged => {
                "The package an upstream's lock names changed (another version, or another name that looks alike), so the image installs code nobody reviewed under a pin that still matches."
            }
            Rule::TrustChanged => {
                "A connector trusts another CA bundle (`ca_file`, or the system's instead), so certificates from other authorities are accepted for the hosts it reaches."
            }
            Rule::SecretUnprotected => {
                "A variable a connector received as a secret (a file) is no longer passed as one, so its value may travel as plain environment, readable by the instance's processes and by anyone inspecting its container."
            }
            Rule::InstanceRemoved => {
                "A deployed server no longer runs an instance in a network mode it ran before (its `proxied` or `none` instance) while a capability that needed that mode is still there, so the isolation that instance gave the sessions routed to it is gone."
            }
            Rule::SeccompOff => {
                "An instance's container now runs without the container engine's system-call filter (it runs jails, which install their own), so more of the kernel is exposed outside the jails."
            }
            Rule::EgressWidened => {
                "An instance may reach a `host:port` no instance it is compared with could (or a new instance reaches anything at all), so data can leave the deployment to more places."
            }
            Rule::InternalRangeWidened => {
                "An instance's allowlisted names may resolve into a private range not within one the base allowed, so it can reach more of the internal network."
            }
            Rule::MountAdded => {
                "An instance mounts connector data (a file or folder, read-only or read-write) the instance it is compared with did not, so that data is within reach of an instance, possibly a less isolated one, that could not read it before."
            }
            Rule::TrustDomainChanged => {
                "An instance moved to another trust domain (the instances whose sessions share one level), so the level a session reached elsewhere no longer follows it and its sessions start over at public."
            }
            Rule::RatchetSplit => {
                "A tool that reads private data (confidential or secret) and a `connect` tool of one deployment are in different trust domains where the base had them (matched by what they run) in one, or not at all, so an agent can read through one and send through the other while the sending session is still public."
            }
            Rule::TrustDomainAdded => {
                "A deployment has a trust domain the base did not (a new or renamed server given a domain of its own, or a domain split off), so sessions there keep a level of their own: every new domain is a boundary of the ratchet a person must accept."
            }
            Rule::EnvironmentLowered => {
                "A deployment's instance, or `config.yaml`'s `environment`, was `production` and no longer is, so the safeguards kept for production stop applying (a warning for each image without a digest, `bulkhead token` refusing to mint development tokens)."
            }
            Rule::ImageChanged => {
                "An instance runs from an image of a repository the base did not run (another registry, or a look-alike name), or from another digest, so the code it runs is not the code that was reviewed; a new tag of the same repository is not named."
            }
            Rule::ImageUnpinned => {
                "An instance's image lost its digest, so what runs can change without any change to the specs."
            }
            Rule::ConfigRemoved => {
                "`config.yaml` existed in the base and is gone, so auth, scopes, allowlists and limits all fall back to the runtime's defaults."
            }
            Rule::AuthChanged => {
                "A setting of `config.yaml`'s `auth` or `token_service` whose every change counts (issuer, audience, keys, JWKS, discovery, the session claim, the signing key file, the provider, login and introspection clients, copied claims) changed, so tokens from another issuer, signed with other keys or carrying other claims may be accepted or minted."
            }
            Rule::ScopeDropped => {
                "A scope `config.yaml` required for a permission (`auth.scopes.<permission>`) changed or is gone, so tokens without the reviewed scope may call capabilities of that permission."
            }
            Rule::AllowlistWidened => {
                "An allowlist of `config.yaml` (`http.allowed_hosts`, `http.allowed_origins`, the login's `redirect_origins`, introspection `clients`) gained entries, holds a wildcard (`*`, `*:port`, `null`), became empty where that admits every value, or was unset, so requests naming more hosts, coming from more origins or redirecting elsewhere are accepted."
            }
            Rule::ConfigChanged => {
                "A setting of `config.yaml` whose every change counts changed (the engine's schema classes it: where the session levels live and their trust domain, where traces go, the clients' servers and their trust, the audit log's key, approvals' key file, `audit.chain` turned off, …), a policy setting is written differently (another `${VAR}`, or a literal where the deployment's variable used to decide), or a key the review has no class for changed, so data or trust may now go elsewhere."
            }
            Rule::RulesChanged => {
                "A file of `generated/` differs from what the base revision's generator and vocabulary make of this change's specs (`scripts/review` builds the base's `bulkhead-check` and passes its output as `--base-generated`), so a change to `vocab`, the generator or the review itself changed what deploys without a spec saying so, and the policy comparison, which judges both sides by this change's rules, cannot see it."
            }
            Rule::EngineChanged => {
                "The engine that runs the specs changed: the version or source `Cargo.lock` pins for an engine crate (`bulkhead`, `bulkhead-codegen`, `bulkhead-lang`, `bulkhead-vocab`), the code of one that lives in the repository, a `[patch]`, `[replace]` or dependency entry of one in `Cargo.toml`, `.cargo/config.toml`, or `build.rs`, so the judge, the generator or the runtime of these specs is no longer the one reviewed."
            }
            Rule::SecretCommitted => {
                "A file this change adds or edits holds key material: a private key or key file by its name (`*.key`, `*.pem` with a private key, `id_rsa`, …) or a value one of inspection's credential rules finds (gitleaks' shapes), so a credential would live in the repository's history for everyone who can read it."
            }
            Rule::CodeChanged => {
                "Code that runs a tool or admits a call changed (a project's handler modules under `src/handlers/`, or code of its own that the generated servers call), which the policy does not describe, so a person must read it before it runs."
            }
            Rule::OwnersNarrowed => {
                "`owners:` of the acknowledgements file lost an owner (or all of them), so the generated CODEOWNERS asks fewer people, possibly only the author, to approve the next weakening."
            }
            Rule::LimitRaised => {
                "A number of `config.yaml` moved the way its class in the engine's schema calls looser, compared with the runtime's default where a file is silent (a size, count, lifetime or context limit up; a free-space reserve or the evidence kept down; a rate limit admitting more calls per second, a larger burst, or removed), so more requests, calls, data or time are allowed than were reviewed."
            }
        }
    }

    /// The rule named `name`, exactly as [`name`](Rule::name) spells it.
    pub fn parse(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialOrd for Rule {
    fn partial_cmp(&self, other: &Rule) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Rule {
    /// By name: the review's lines sort as text.
    fn cmp(&self, other: &Rule) -> Ordering {
        self.name().cmp(other.name())
    }
}

/// `rule == "seccomp-off"`: compares the name.
impl PartialEq<&str> for Rule {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn all_is_every_rule_in_order_with_distinct_names() {
        for (i, r) in Rule::ALL.into_iter().enumerate() {
            assert_eq!(r as usize, i, "{r} is out of place in Rule::ALL");
            assert_eq!(Rule::parse(r.name()), Some(r));
            assert_eq!(r.to_string(), r.name());
            assert!(r == r.name());
        }
        let names: BTreeSet<&str> = Rule::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), Rule::ALL.len());
        assert_eq!(Rule::parse("Seccomp-Off"), None);
        assert_eq!(Rule::parse("seccomp-off "), None);
    }

    #[test]
    fn names_are_kebab_case_and_descriptions_one_sentence() {
        for r in Rule::ALL {
            let n = r.name();
            assert!(
                !n.starts_with('-')
                    && !n.ends_with('-')
                    && n.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{n}"
            );
            let d = r.describe();
            assert!(d.ends_with('.') && d.matches(". ").count() == 0, "{n}: {d}");
            assert!(!d.contains('\n') && !d.contains('|'), "{n}: {d}");
        }
    }

    #[test]
    fn order_is_by_name() {
        let mut sorted = Rule::ALL;
        sorted.sort();
        let names: Vec<&str> = sorted.iter().map(|r| r.name()).collect();
        let mut expected = names.clone();
        expected.sort();
        assert_eq!(names, expected);
        assert!(Rule::AllowlistWidened < Rule::NewCapability);
    }
}
