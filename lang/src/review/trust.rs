//! The trust relation: which tools share a session level. The ratchet holds only inside a trust
//! domain, so a tool that reads private data and a `connect` tool in different domains of one
//! deployment let an agent read through one and send through the other while the sending session
//! is still public. Such a pair is a weakening unless the base already split it (matched by what
//! the tools run, so a rename or a move to a new server changes nothing), and so is every new
//! trust domain.

use super::policy::{Capability, Policy};
use super::rule::Rule;
use super::rules::{Review, push};
use bulkhead_vocab::Permission;
use std::collections::{BTreeMap, BTreeSet};

/// Per deployment: each server's trust domain (its instances share one).
fn domains(p: &Policy) -> BTreeMap<&str, BTreeMap<&str, &str>> {
    let mut out: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
    for i in &p.instances {
        out.entry(i.deployment.as_str())
            .or_default()
            .insert(i.server.as_str(), i.trust_domain.as_str());
    }
    out
}

/// A tool that could carry private data out of a session: one that reads confidential or secret.
fn carries(c: &Capability) -> bool {
    c.sensitivity.is_private()
}

/// A tool that sends: `connect`.
fn sends(c: &Capability) -> bool {
    c.permission == Permission::Connect
}

/// One split: (deployment, carrier, sender), each tool as the reviewer reads it.
struct Split<'a> {
    deployment: &'a str,
    carrier: &'a Capability,
    sender: &'a Capability,
    domains: (&'a str, &'a str),
}

/// Every (carrier, sender) pair of a deployment whose servers are in different trust domains.
fn splits(p: &Policy) -> Vec<Split<'_>> {
    let mut out = Vec::new();
    for (deployment, by_server) in domains(p) {
        let deployed = |c: &&Capability| by_server.contains_key(c.server.as_str());
        let carriers: Vec<&Capability> = p
            .capabilities
            .iter()
            .filter(deployed)
            .filter(|c| carries(c))
            .collect();
        let senders: Vec<&Capability> = p
            .capabilities
            .iter()
            .filter(deployed)
            .filter(|c| sends(c))
            .collect();
        for carrier in &carriers {
            for sender in &senders {
                let a = by_server[carrier.server.as_str()];
                let b = by_server[sender.server.as_str()];
                if a != b {
                    out.push(Split {
                        deployment,
                        carrier,
                        sender,
                        domains: (a, b),
                    });
                }
            }
        }
    }
    out
}

/// Reports each split of `head` that `base` did not have (by what the tools run) and each trust
/// domain `head` has that `base` did not.
pub fn trust(base: &Policy, head: &Policy, r: &mut Review) {
    let base_splits: BTreeSet<(&str, &str, &str)> = splits(base)
        .iter()
        .map(|s| (s.deployment, s.carrier.key.as_str(), s.sender.key.as_str()))
        .collect();
    for s in splits(head) {
        if base_splits.contains(&(s.deployment, s.carrier.key.as_str(), s.sender.key.as_str())) {
            continue;
        }
        push(
            r,
            Rule::RatchetSplit,
            format!("deployment `{}`", s.deployment),
            format!(
                "{} ({}) and {} (connect) do not share a session level: trust domains `{}` and `{}`",
                s.carrier.label(),
                s.carrier.sensitivity,
                s.sender.label(),
                s.domains.0,
                s.domains.1
            ),
            &s.sender.source,
        );
    }
    let base_domains = domains(base);
    for (deployment, by_server) in domains(head) {
        let known: BTreeSet<&str> = base_domains
            .get(deployment)
            .map(|m| m.values().copied().collect())
            .unwrap_or_default();
        let mut new: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (server, domain) in &by_server {
            if !known.contains(domain) {
                new.entry(domain).or_default().push(server);
            }
        }
        for (domain, servers) in new {
            let file = head
                .instances
                .iter()
                .find(|i| i.deployment == deployment)
                .map(|i| i.source.clone())
                .unwrap_or_default();
            push(
                r,
                Rule::TrustDomainAdded,
                format!("deployment `{deployment}`"),
                format!("trust domain `{domain}` (servers {})", servers.join(", ")),
                &file,
            );
        }
    }
}
