//! What a change weakens: the effective policies of two revisions compared rule by rule.
//! Everything that widens reach or lowers a level is a weakening; a rename is matched by what
//! the capability runs and reported with whatever it carries. Additions and tightenings are not
//! listed, except a new capability whose reach the base did not have.

use super::policy::{Capability, ConnectorPolicy, InstancePolicy, Policy};
use super::rule::Rule;
use bulkhead_vocab::NetworkMode;
use bulkhead_vocab::ranges::Cidr;
use std::collections::{BTreeMap, BTreeSet};

/// One weakening. [`line`](Weakening::line) is its identity: an acknowledgement names it
/// word for word, so a later, different widening of the same thing is not covered.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Weakening {
    /// The rule it falls under; its name starts the [`line`](Weakening::line).
    pub rule: Rule,
    /// What it concerns (`tool `template.read_file``).
    pub subject: String,
    /// The change, with the old and new values.
    pub change: String,
    /// The head-side file that carries it.
    pub file: String,
}

impl Weakening {
    /// `rule: subject: change`.
    pub fn line(&self) -> String {
        format!("{}: {}: {}", self.rule, self.subject, self.change)
    }
}

/// The result of comparing two policies.
#[derive(Clone, Debug, Default)]
pub struct Review {
    /// Every weakening, sorted.
    pub weakenings: Vec<Weakening>,
    /// Renames recognised by what runs (`tool `a.x` → `a.y``).
    pub renames: Vec<String>,
}

/// Compares `head` with `base`.
pub fn review(base: &Policy, head: &Policy) -> Review {
    let mut r = Review::default();
    capabilities(base, head, &mut r);
    connectors(base, head, &mut r);
    instances(base, head, &mut r);
    super::trust::trust(base, head, &mut r);
    super::settings::compare(&base.identity, &head.identity, &mut r);
    r.weakenings.sort();
    r.weakenings.dedup();
    r.renames.sort();
    r
}

pub(super) fn push(r: &mut Review, rule: Rule, subject: String, change: String, file: &str) {
    r.weakenings.push(Weakening {
        rule,
        subject,
        change,
        file: file.to_string(),
    });
}

/// The stricter of two capabilities (higher sensitivity, then narrower permission): the one a
/// change is compared with when several could be its origin, so the review fails closed.
fn stricter<'a>(a: &'a Capability, b: &'a Capability) -> &'a Capability {
    if (b.sensitivity, std::cmp::Reverse(b.permission))
        > (a.sensitivity, std::cmp::Reverse(a.permission))
    {
        b
    } else {
        a
    }
}

fn capabilities(base: &Policy, head: &Policy, r: &mut Review) {
    let key = |c: &Capability| (c.server.clone(), c.kind, c.name.clone());
    let mut left: Vec<&Capability> = base.capabilities.iter().collect();
    let mut unmatched = Vec::new();
    let mut pairs: Vec<(&Capability, &Capability, bool)> = Vec::new();
    for h in &head.capabilities {
        match left.iter().position(|b| key(b) == key(h)) {
            Some(i) => pairs.push((h, left.remove(i), false)),
            None => unmatched.push(h),
        }
    }
    let mut new = Vec::new();
    for h in unmatched {
        let best = left
            .iter()
            .enumerate()
            .filter(|(_, b)| b.kind == h.kind && b.key == h.key)
            .map(|(i, b)| (i, *b))
            .reduce(|x, y| {
                if std::ptr::eq(stricter(x.1, y.1), y.1) {
                    y
                } else {
                    x
                }
            });
        match best {
            Some((i, _)) => pairs.push((h, left.remove(i), true)),
            None => new.push(h),
        }
    }
    for (h, b, renamed) in pairs {
        let subject = if renamed {
            r.renames.push(if b.name == h.name {
                format!("{} moved from server `{}`", h.label(), b.server)
            } else {
                format!("{} renamed from {}", h.label(), b.label())
            });
            format!("{} (renamed from `{}.{}`)", h.label(), b.server, b.name)
        } else {
            h.label()
        };
        compare_capability(b, h, &subject, r);
    }
    for h in new {
        if h.kind == "prompt" {
            continue; // fixed text: reaches nothing
        }
        // Covered: an existing capability of the same server runs the same thing and the new
        // one is nowhere looser (level, permission, context, arguments), by the same rules as a
        // change. Another server's is no cover: a server may be reached by other clients and
        // deployed in another trust domain (its own ratchet).
        // A rate-limited operation is never covered: a copy counts its calls apart, so the
        // operation's budget per user grows by the copy's.
        let covered = !h.key.starts_with("handler ")
            && base.capabilities.iter().any(|b| {
                let mut probe = Review::default();
                b.kind == h.kind
                    && b.server == h.server
                    && b.key == h.key
                    && b.rate_limit.is_none()
                    && {
                        compare_capability(b, h, "", &mut probe);
                        probe.weakenings.is_empty()
                    }
            });
        if let Some(reason) = &h.uninspected {
            push(
                r,
                Rule::InspectionOff,
                h.label(),
                format!("new and uninspected ({reason:?})"),
                &h.source,
            );
        }
        if !covered {
            push(
                r,
                Rule::NewCapability,
                h.label(),
                format!(
                    "{} {}, runs {}",
                    h.permission.as_str(),
                    h.sensitivity.as_str(),
                    h.runs
                ),
                &h.source,
            );
        }
    }
}

fn compare_capability(b: &Capability, h: &Capability, subject: &str, r: &mut Review) {
    let s = || subject.to_string();
    if h.sensitivity < b.sensitivity {
        push(
            r,
            Rule::SensitivityLowered,
            s(),
            format!("{} → {}", b.sensitivity, h.sensitivity),
            &h.source,
        );
    }
    if h.permission > b.permission {
        push(
            r,
            Rule::PermissionWidened,
            s(),
            format!("{} → {}", b.permission, h.permission),
            &h.source,
        );
    }
    if h.key != b.key {
        push(
            r,
            Rule::RunsChanged,
            s(),
            format!("`{}` → `{}`", b.runs, h.runs),
            &h.source,
        );
    }
    // Effective budgets (own, else the configured per-user-tool one); a change of the
    // configured one alone is `config.yaml`'s line, not every tool's.
    let from = |c: &Capability| {
        if c.rate_limit_from_config {
            " (rate_limits.per_user_tool of config.yaml)"
        } else {
            ""
        }
    };
    if !(b.rate_limit_from_config && h.rate_limit_from_config) {
        match (&b.rate_limit, &h.rate_limit) {
            (Some(o), None) => push(
                r,
                Rule::RateLimitRaised,
                s(),
                format!("{o}{} → none", from(b)),
                &h.source,
            ),
            (Some(o), Some(n)) if n.is_looser_than(o) => push(
                r,
                Rule::RateLimitRaised,
                s(),
                format!("{o}{} → {n}{}", from(b), from(h)),
                &h.source,
            ),
            _ => {}
        }
    }
    if let (None, Some(reason)) = (&b.uninspected, &h.uninspected) {
        push(
            r,
            Rule::InspectionOff,
            s(),
            format!("inspected → uninspected ({reason:?})"),
            &h.source,
        );
    }
    match (&b.approval, &h.approval) {
        (Some(o), None) => push(
            r,
            Rule::ApprovalWeakened,
            s(),
            format!("{} → none (calls run without asking)", o.describe()),
            &h.source,
        ),
        (Some(o), Some(n)) if n.is_weaker_than(o) => push(
            r,
            Rule::ApprovalWeakened,
            s(),
            format!("{} → {}", o.describe(), n.describe()),
            &h.source,
        ),
        _ => {}
    }
    if h.context.0 != b.context.0 {
        push(
            r,
            Rule::ContextChanged,
            s(),
            format!("preset {} → {}", b.context.0, h.context.0),
            &h.source,
        );
    } else {
        numbers_loosened(
            &b.context.1,
            &h.context.1,
            &format!("preset {}", h.context.0),
            |c| push(r, Rule::ContextWidened, s(), c, &h.source),
        );
    }
    for (name, old) in &b.params {
        let Some(new) = h.params.get(name) else {
            continue;
        };
        // Limits loosen when they go away, or move the way that admits more: minimums down,
        // maximums up. Types, item types and defaults count when they change at all.
        for (limit, up_is_looser) in [
            ("min_length", false),
            ("minimum", false),
            ("min_items", false),
            ("max_length", true),
            ("maximum", true),
            ("max_items", true),
        ] {
            let (o, n) = (old.get(limit), new.get(limit));
            let looser = match (o, n) {
                (Some(_), None) => true,
                (Some(o), Some(n)) => {
                    let (o, n) = (o.parse::<f64>().ok(), n.parse::<f64>().ok());
                    if up_is_looser { n > o } else { n < o }
                }
                _ => false,
            };
            if looser {
                let (o, n) = (o.map_or("-", |v| v), n.map_or("none", |v| v));
                push(
                    r,
                    Rule::ArgumentLoosened,
                    s(),
                    format!("`{name}` {limit} {o} → {n}"),
                    &h.source,
                );
            }
        }
        // A parameter bound to a claim that becomes unbound (or bound to another claim) is one
        // the model may now set, or set from something else.
        if let Some(o) = old.get("from_claim")
            && new.get("from_claim") != Some(o)
        {
            let n = new.get("from_claim").map_or("the model", |v| v.as_str());
            push(
                r,
                Rule::ArgumentLoosened,
                s(),
                format!("`{name}` set from claim `{o}` → {n}"),
                &h.source,
            );
        }
        for what in ["type", "items", "default"] {
            let (o, n) = (old.get(what), new.get(what));
            if o != n {
                let (o, n) = (o.map_or("none", |v| v), n.map_or("none", |v| v));
                push(
                    r,
                    Rule::ArgumentLoosened,
                    s(),
                    format!("`{name}` {what} {o} → {n}"),
                    &h.source,
                );
            }
        }
        if let Some(p) = old.get("pattern")
            && new.get("pattern") != Some(p)
        {
            push(
                r,
                Rule::ArgumentLoosened,
                s(),
                format!(
                    "`{name}` pattern {p:?} → {}",
                    new.get("pattern")
                        .map_or("none".to_string(), |n| format!("{n:?}"))
                ),
                &h.source,
            );
        }
        if let Some(v) = old.get("values") {
            let old: BTreeSet<&str> = v.split('|').collect();
            let added: Vec<&str> = new
                .get("values")
                .map(|n| n.split('|').filter(|x| !old.contains(x)).collect())
                .unwrap_or_else(|| vec!["(any value)"]);
            if !added.is_empty() {
                push(
                    r,
                    Rule::ArgumentLoosened,
                    s(),
                    format!("`{name}` values + {}", added.join(", ")),
                    &h.source,
                );
            }
        }
    }
}

/// Calls `report` for each number of `new` above the same number of `old`, and for each number
/// set or unset on one side only (the other side is a default this review cannot see: fails
/// closed).
fn numbers_loosened<T: PartialOrd + std::fmt::Display>(
    old: &BTreeMap<String, T>,
    new: &BTreeMap<String, T>,
    what: &str,
    mut report: impl FnMut(String),
) {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for k in keys {
        match (old.get(k), new.get(k)) {
            (Some(o), Some(n)) if n > o => report(format!("{what} {k} {o} → {n}")),
            (Some(o), None) => report(format!("{what} {k} {o} → unset (the runtime default)")),
            (None, Some(n)) => report(format!("{what} {k} default → {n}")),
            _ => {}
        }
    }
}

fn connectors(base: &Policy, head: &Policy, r: &mut Review) {
    let mut left: Vec<&ConnectorPolicy> = base.connectors.iter().collect();
    // Counterparts, in passes over every head connector: the same name; else the same kind at
    // the same place (a rename; names first, so a new connector at an existing one's place is
    // not taken for its rename); else, so that a connector renamed *and* moved in one change is
    // still compared with what it was, a base connector of the same kind that is gone (fails
    // closed: an unrelated pair reports more).
    let mut pairs: Vec<(&ConnectorPolicy, &ConnectorPolicy)> = Vec::new();
    let mut unmatched: Vec<&ConnectorPolicy> = Vec::new();
    for h in &head.connectors {
        match left.iter().position(|b| b.name == h.name) {
            Some(i) => pairs.push((h, left.remove(i))),
            None => unmatched.push(h),
        }
    }
    let same_place = |b: &ConnectorPolicy, h: &ConnectorPolicy| {
        b.kind == h.kind && b.location == h.location && b.kind != crate::spec::ConnectorKind::Files
    };
    let mut still = Vec::new();
    for h in unmatched {
        match left.iter().position(|b| same_place(b, h)) {
            Some(i) => pairs.push((h, left.remove(i))),
            None => still.push(h),
        }
    }
    for h in still {
        if let Some(i) = left.iter().position(|b| b.kind == h.kind) {
            pairs.push((h, left.remove(i)));
        }
    }
    for (h, b) in pairs {
        let subject = if b.name == h.name {
            format!("connector `{}`", h.name)
        } else {
            r.renames
                .push(format!("connector `{}` renamed from `{}`", h.name, b.name));
            format!("connector `{}` (renamed from `{}`)", h.name, b.name)
        };
        if h.sensitivity < b.sensitivity {
            push(
                r,
                Rule::SensitivityLowered,
                subject.clone(),
                format!("{} → {}", b.sensitivity, h.sensitivity),
                &h.source,
            );
        }
        if h.location != b.location {
            push(
                r,
                Rule::LocationChanged,
                subject.clone(),
                format!("{} → {}", b.location, h.location),
                &h.source,
            );
        }
        let added: Vec<&String> = h.reach.difference(&b.reach).collect();
        if !added.is_empty() {
            push(
                r,
                Rule::ReachWidened,
                subject.clone(),
                format!(
                    "+ {}",
                    added
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &h.source,
            );
        }
        if h.trust != b.trust {
            push(
                r,
                Rule::TrustChanged,
                subject.clone(),
                format!(
                    "CA bundle {} → {}",
                    if b.trust.is_empty() {
                        "(system)"
                    } else {
                        &b.trust
                    },
                    if h.trust.is_empty() {
                        "(system)"
                    } else {
                        &h.trust
                    }
                ),
                &h.source,
            );
        }
        for var in b.secrets.difference(&h.secrets) {
            push(
                r,
                Rule::SecretUnprotected,
                subject.clone(),
                format!("`{var}` no longer passed as a secret"),
                &h.source,
            );
        }
        let keys: BTreeSet<&String> = b.settings.keys().chain(h.settings.keys()).collect();
        for key in keys {
            let (old, new) = (b.settings.get(key), h.settings.get(key));
            if old != new {
                push(
                    r,
                    Rule::SettingsChanged,
                    subject.clone(),
                    format!(
                        "settings.{key}: {} → {}",
                        old.map_or("(unset)", String::as_str),
                        new.map_or("(unset)", String::as_str)
                    ),
                    &h.source,
                );
            }
        }
        if b.package != h.package {
            push(
                r,
                Rule::PackageChanged,
                subject.clone(),
                format!(
                    "{} → {}",
                    if b.package.is_empty() {
                        "(none)"
                    } else {
                        &b.package
                    },
                    if h.package.is_empty() {
                        "(none)"
                    } else {
                        &h.package
                    }
                ),
                &h.source,
            );
        }
    }
}

/// The base deployment a head deployment is compared with: the one of the same name, else (a
/// rename) the base deployments that are gone from the head and deployed one of its servers,
/// else every base deployment (a new deployment may not reach more than any did).
fn counterparts<'a>(base: &'a Policy, head: &Policy, deployment: &str) -> Vec<&'a str> {
    let names = |p: &'a Policy| -> BTreeSet<&'a str> {
        p.instances.iter().map(|i| i.deployment.as_str()).collect()
    };
    let (base_names, head_names): (BTreeSet<&str>, BTreeSet<&str>) = (
        names(base),
        head.instances
            .iter()
            .map(|i| i.deployment.as_str())
            .collect(),
    );
    if base_names.contains(deployment) {
        return vec![
            base_names
                .into_iter()
                .find(|n| *n == deployment)
                .unwrap_or_default(),
        ];
    }
    let servers: BTreeSet<&str> = head
        .instances
        .iter()
        .filter(|i| i.deployment == deployment)
        .map(|i| i.server.as_str())
        .collect();
    let gone: Vec<&str> = base_names
        .iter()
        .copied()
        .filter(|n| !head_names.contains(n))
        .filter(|n| {
            base.instances
                .iter()
                .any(|i| i.deployment == *n && servers.contains(i.server.as_str()))
        })
        .collect();
    if gone.is_empty() {
        base_names.into_iter().collect()
    } else {
        gone
    }
}

/// The base's name of head server `name`: its own, or, for a server the base did not deploy,
/// a base server that is gone from the head and had exactly its capabilities (a rename).
fn server_counterpart<'a>(base: &'a Policy, head: &Policy, name: &'a str) -> &'a str {
    if base.instances.iter().any(|b| b.server == name) {
        return name;
    }
    let caps = |p: &Policy, server: &str| -> BTreeSet<(&'static str, String)> {
        p.capabilities
            .iter()
            .filter(|c| c.server == server)
            .map(|c| (c.kind, c.name.clone()))
            .collect()
    };
    let mine = caps(head, name);
    let gone: BTreeSet<&str> = base
        .instances
        .iter()
        .map(|b| b.server.as_str())
        .filter(|s| !head.instances.iter().any(|h| h.server == *s))
        .collect();
    let mut renamed = gone
        .into_iter()
        .filter(|s| !mine.is_empty() && caps(base, s) == mine);
    match (renamed.next(), renamed.next()) {
        (Some(s), None) => s,
        _ => name,
    }
}

fn instances(base: &Policy, head: &Policy, r: &mut Review) {
    let deployed: BTreeSet<&str> = head.instances.iter().map(|i| i.server.as_str()).collect();
    let mut modes: BTreeMap<(&str, NetworkMode), Vec<&InstancePolicy>> = BTreeMap::new();
    for b in &base.instances {
        modes
            .entry((b.server.as_str(), b.mode))
            .or_default()
            .push(b);
    }
    for ((server, mode), bs) in &modes {
        // What the instance was there for: the base's capabilities of the server that need its
        // mode. Only when one of them is still here (now served less isolated) is its removal a
        // weakening; when every one of them is gone, nothing runs less isolated.
        let needed_here = base.capabilities.iter().any(|c| {
            c.server == *server
                && c.sensitivity.required_mode() >= *mode
                && head
                    .capabilities
                    .iter()
                    .any(|h| h.server == c.server && h.kind == c.kind && h.name == c.name)
        });
        if deployed.contains(server)
            && needed_here
            && !head
                .instances
                .iter()
                .any(|h| h.server == *server && h.mode == *mode)
        {
            let file = head
                .instances
                .iter()
                .find(|h| h.server == *server)
                .map_or("", |h| h.source.as_str());
            push(
                r,
                Rule::InstanceRemoved,
                format!("server `{server}`"),
                format!(
                    "no `{mode}` instance any more (was {})",
                    bs.iter()
                        .map(|b| format!("`{}` in `{}`", b.service, b.deployment))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                file,
            );
        }
    }
    for h in &head.instances {
        let subject = format!(
            "deployment `{}` instance `{}` ({})",
            h.deployment, h.service, h.mode
        );
        let from = counterparts(base, head, &h.deployment);
        let renamed = from.len() == 1 && from[0] != h.deployment;
        let server = server_counterpart(base, head, &h.server);
        let bs: Vec<&InstancePolicy> = base
            .instances
            .iter()
            .filter(|b| {
                from.contains(&b.deployment.as_str()) && b.server == server && b.mode == h.mode
            })
            .collect();
        let subject = if renamed {
            format!("{subject} (deployment renamed from `{}`)", from[0])
        } else {
            subject
        };
        if (bs.is_empty() || bs.iter().all(|b| !b.unconfined)) && h.unconfined {
            push(
                r,
                Rule::SeccompOff,
                subject.clone(),
                "its container runs without the engine's system-call filter (it runs jails, which install their own)".into(),
                &h.source,
            );
        }
        // A server or mode never deployed so before has no counterpart: everything it reaches,
        // mounts and runs is new, compared with nothing (its trust domain is judged in `trust`).
        let fresh = bs.is_empty();
        let egress: BTreeSet<_> = bs.iter().flat_map(|b| b.egress.iter()).collect();
        let added: BTreeSet<_> = h
            .egress
            .iter()
            .filter(|e| !egress.contains(e))
            .cloned()
            .collect();
        if fresh && !h.egress.is_empty() {
            push(
                r,
                Rule::EgressWidened,
                subject.clone(),
                format!("new instance reaches {}", list(&h.egress)),
                &h.source,
            );
        } else if !added.is_empty() {
            push(
                r,
                Rule::EgressWidened,
                subject.clone(),
                format!("+ {}", list(&added)),
                &h.source,
            );
        }
        let ranges: Vec<&String> = bs.iter().flat_map(|b| b.internal_ranges.iter()).collect();
        for range in &h.internal_ranges {
            if !ranges.iter().any(|o| matches!((Cidr::parse(range), Cidr::parse(o)), (Some(r), Some(o)) if r.within(o))) {
                push(
                    r,
                    Rule::InternalRangeWidened,
                    subject.clone(),
                    format!("+ {range}"),
                    &h.source,
                );
            }
        }
        let mounts: BTreeSet<&String> = bs.iter().flat_map(|b| b.mounts.iter()).collect();
        for m in &h.mounts {
            if !mounts.contains(m) {
                push(
                    r,
                    Rule::MountAdded,
                    subject.clone(),
                    format!("+ {m}"),
                    &h.source,
                );
            }
        }
        let domains: BTreeSet<&str> = bs.iter().map(|b| b.trust_domain.as_str()).collect();
        if !fresh && !domains.contains(h.trust_domain.as_str()) {
            push(
                r,
                Rule::TrustDomainChanged,
                subject.clone(),
                format!(
                    "{} → {} (its sessions start over at public)",
                    domains.into_iter().collect::<Vec<_>>().join(", "),
                    h.trust_domain
                ),
                &h.source,
            );
        }
        if !fresh
            && bs.iter().all(|b| b.environment == "production")
            && h.environment != "production"
        {
            push(
                r,
                Rule::EnvironmentLowered,
                subject.clone(),
                format!("production → {}", h.environment),
                &h.source,
            );
        }
        // Another repository (a registry or a look-alike name) or another digest runs code
        // nobody reviewed; a new tag of the same repository (each release) is not named here.
        let repo_and_digest = |image: &str| -> (String, Option<String>) {
            let (name, digest) = match image.split_once('@') {
                Some((n, d)) => (n, Some(d.to_string())),
                None => (image, None),
            };
            let repo = name
                .rsplit_once(':')
                .map_or(name, |(r, tag)| if tag.contains('/') { name } else { r });
            (repo.to_string(), digest)
        };
        // A new instance is compared with every image the base ran.
        let compared: Vec<&InstancePolicy> = if fresh {
            base.instances.iter().collect()
        } else {
            bs.clone()
        };
        let base_images: BTreeSet<(String, Option<String>)> = compared
            .iter()
            .flat_map(|b| b.images.iter().map(|i| repo_and_digest(i)))
            .collect();
        for image in &h.images {
            let (repo, digest) = repo_and_digest(image);
            let same_repo: Vec<&Option<String>> = base_images
                .iter()
                .filter(|(r, _)| *r == repo)
                .map(|(_, d)| d)
                .collect();
            // A digest the base pinned, gone (the server's image or the proxy's).
            if !fresh && digest.is_none() && same_repo.iter().any(|d| d.is_some()) {
                let was: Vec<&str> = same_repo.iter().filter_map(|d| d.as_deref()).collect();
                push(
                    r,
                    Rule::ImageUnpinned,
                    subject.clone(),
                    format!("{image}: the digest was removed (was {})", was.join(", ")),
                    &h.source,
                );
            }
            let changed = if same_repo.is_empty() {
                Some(format!("+ {image} (a repository the base did not run)"))
            } else if digest.is_some() && !same_repo.iter().any(|d| **d == digest) {
                let was: Vec<&str> = same_repo.iter().filter_map(|d| d.as_deref()).collect();
                Some(format!(
                    "{image} (digest was {})",
                    if was.is_empty() {
                        "none".to_string()
                    } else {
                        was.join(", ")
                    }
                ))
            } else {
                None
            };
            if let Some(change) = changed {
                push(r, Rule::ImageChanged, subject.clone(), change, &h.source);
            }
        }
    }
}

fn list<T: std::fmt::Display>(items: &BTreeSet<T>) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkhead_vocab::Sensitivity;

    #[test]
    fn stricter_prefers_higher_levels_then_narrower_permissions() {
        let cap = |s, p| Capability {
            server: "s".into(),
            kind: "tool",
            name: "t".into(),
            source: String::new(),
            runs: String::new(),
            key: String::new(),
            connector: None,
            permission: p,
            sensitivity: s,
            context: ("default".into(), BTreeMap::new()),
            params: BTreeMap::new(),
            rate_limit: None,
            rate_limit_from_config: false,
            approval: None,
            uninspected: None,
        };
        use bulkhead_vocab::Permission::*;
        let a = cap(Sensitivity::Public, Read);
        let b = cap(Sensitivity::Secret, Connect);
        assert!(std::ptr::eq(stricter(&a, &b), &b));
        let c = cap(Sensitivity::Secret, Read);
        assert!(std::ptr::eq(stricter(&b, &c), &c));
    }
}
