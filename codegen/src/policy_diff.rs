//! What a change to the specs weakens, for reviewers: a tool's or connector's sensitivity
//! lowered, a tool's permission widened, a new tool that reaches the network, an isolated
//! instance removed from a deployment, egress widened. Compares two checked models; additions
//! and tightenings are not listed.

use crate::emit::deploy::plan;
use crate::model::Model;
use crate::spec::Permission;
use bulkhead_vocab::{HostPort, NetworkMode};
use std::collections::BTreeSet;

/// One weakening, as a line for the warning block.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Weakening {
    /// The spec file of the head side that carries it.
    pub file: String,
    /// What changed.
    pub what: String,
}

/// Every way `head` weakens the policy of `base`, sorted by file.
pub fn weakenings(base: &Model, head: &Model) -> Vec<Weakening> {
    let mut out = Vec::new();
    for s in &head.servers {
        let old = base.servers.iter().find(|b| b.name == s.name);
        let tools = s.tools.iter().chain(s.resources.iter().map(|r| &r.tool));
        for t in tools {
            let before = old.and_then(|o| {
                o.tools
                    .iter()
                    .chain(o.resources.iter().map(|r| &r.tool))
                    .find(|b| b.name == t.name)
            });
            let at = |what: String| Weakening {
                file: s.source.clone(),
                what: format!("tool `{}.{}`: {what}", s.name, t.name),
            };
            match before {
                Some(b) => {
                    if t.sensitivity < b.sensitivity {
                        out.push(at(format!(
                            "sensitivity lowered from {} to {}",
                            b.sensitivity.as_str(),
                            t.sensitivity.as_str()
                        )));
                    }
                    if t.permission > b.permission {
                        out.push(at(format!(
                            "permission widened from {} to {}",
                            b.permission.as_str(),
                            t.permission.as_str()
                        )));
                    }
                }
                None if t.permission == Permission::Connect => {
                    out.push(at("new tool that reaches the network (connect)".into()));
                }
                None => {}
            }
        }
    }
    for c in &head.connectors {
        if let Some(b) = base.connectors.iter().find(|b| b.name == c.name)
            && c.sensitivity < b.sensitivity
        {
            out.push(Weakening {
                file: c.source.clone(),
                what: format!(
                    "connector `{}`: sensitivity lowered from {} to {}",
                    c.name,
                    b.sensitivity.as_str(),
                    c.sensitivity.as_str()
                ),
            });
        }
    }
    for d in &head.deployments {
        let Some(bd) = base.deployments.iter().find(|b| b.name == d.name) else {
            continue;
        };
        let (new_plans, old_plans) = (plan(head, d), plan(base, bd));
        for p in &new_plans {
            let Some(o) = old_plans.iter().find(|o| o.server.name == p.server.name) else {
                continue;
            };
            let at = |what: String| Weakening {
                file: d.source.clone(),
                what: format!(
                    "deployment `{}`, server `{}`: {what}",
                    d.name, p.server.name
                ),
            };
            for inst in &o.instances {
                if p.instance(inst.mode).is_none() {
                    out.push(at(format!(
                        "instance `{}` (--mode {}) removed",
                        inst.service,
                        inst.mode.as_str()
                    )));
                }
            }
            let widened = |new: &[HostPort], old: &[HostPort]| -> Vec<String> {
                let old: BTreeSet<&HostPort> = old.iter().collect();
                new.iter()
                    .filter(|e| !old.contains(e))
                    .map(ToString::to_string)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect()
            };
            if p.instance(NetworkMode::Proxied).is_some() {
                let added = widened(&p.server.proxied_egress, &o.server.proxied_egress);
                if !added.is_empty() {
                    out.push(at(format!(
                        "proxied egress widened: + {}",
                        added.join(", ")
                    )));
                }
            }
            let added = widened(&p.server.egress, &o.server.egress);
            if !added.is_empty() {
                out.push(at(format!("egress widened: + {}", added.join(", "))));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}
