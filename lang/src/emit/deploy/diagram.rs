//! `compose/<deployment>.md`: what a reviewer approves. Which tool runs on which instance (with
//! its permission, sensitivity and connector), which instance can reach which data and which
//! network, and a Mermaid flowchart of instances, networks, egress proxies and volumes.

use super::compose::{AGENTS_NET, COMPLIANCE_VOLUME, EGRESS_NET, workspace_volume};
use super::{NetworkMode, STATE_DIR, ServerPlan, WORKSPACES_DIR, plan};
use crate::emit::{Output, header};
use crate::model::{Deployment, Model};
use bulkhead_vocab::workspace_layer;
use std::fmt::Write;

fn id(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Adds `compose/<deployment>.md`.
pub fn emit(model: &Model, d: &Deployment, out: &mut Output) {
    let plans = plan(model, d);
    let mut m = String::new();
    let _ = writeln!(m, "flowchart LR");
    let _ = writeln!(m, "  agent([\"agent\"])");
    let _ = writeln!(m, "  internet((\"internet\"))");
    let _ = writeln!(
        m,
        "  subgraph net_{}[\"network {AGENTS_NET} (internal)\"]",
        id(AGENTS_NET)
    );
    for p in &plans {
        for i in &p.instances {
            match p.relay_service(i.mode) {
                None => {
                    let _ = writeln!(
                        m,
                        "    {}[\"{}<br/>--mode {} :{}\"]",
                        id(&i.service),
                        i.service,
                        i.mode.as_str(),
                        p.server.port
                    );
                }
                Some(relay) => {
                    let _ = writeln!(
                        m,
                        "    {}[\"{relay}<br/>as {} :{}\"]",
                        id(&relay),
                        i.service,
                        p.server.port
                    );
                }
            }
        }
    }
    let _ = writeln!(m, "  end");
    for p in &plans {
        for i in p.instances.iter().filter(|i| i.mode.is_isolated()) {
            let _ = writeln!(
                m,
                "  {}[\"{}<br/>--mode {}, network_mode none\"]",
                id(&i.service),
                i.service,
                i.mode.as_str()
            );
        }
    }
    let _ = writeln!(
        m,
        "  vol_{}[(\"volume {COMPLIANCE_VOLUME}<br/>{STATE_DIR}\")]",
        id(COMPLIANCE_VOLUME)
    );
    for p in &plans {
        for i in &p.instances {
            let vol = workspace_volume(&p.server.name, i.mode);
            let _ = writeln!(
                m,
                "  vol_{}[(\"volume {vol}<br/>{WORKSPACES_DIR}/{}\")]",
                id(&vol),
                workspace_layer(&p.server.name, i.mode)
            );
        }
    }
    for p in &plans {
        for i in &p.instances {
            let node = id(&i.service);
            match p.relay_service(i.mode) {
                None => {
                    let _ = writeln!(m, "  agent --> {node}");
                }
                Some(relay) => {
                    let _ = writeln!(m, "  agent --> {}", id(&relay));
                    let _ = writeln!(m, "  {} -->|\"unix socket\"| {node}", id(&relay));
                }
            }
            match i.mode {
                NetworkMode::Full => {
                    let _ = writeln!(m, "  {node} -->|\"network {EGRESS_NET}\"| internet");
                }
                NetworkMode::Proxied => {
                    let proxy = p.proxy_service().unwrap_or_default();
                    let _ = writeln!(
                        m,
                        "  {}{{{{\"{proxy}<br/>squid, deny by default\"}}}}",
                        id(&proxy)
                    );
                    let relay = p.relay_service(i.mode).unwrap_or_default();
                    let _ = writeln!(
                        m,
                        "  {node} -->|\"127.0.0.1:3128, egress socket\"| {}",
                        id(&relay)
                    );
                    let _ = writeln!(m, "  {} -->|\"only to\"| {}", id(&relay), id(&proxy));
                    for a in &p.allowed {
                        let _ = writeln!(
                            m,
                            "  {} -->|\"allow {}\"| internet",
                            id(&proxy),
                            a.authority()
                        );
                    }
                }
                NetworkMode::None => {} // no edge out: the node's label says `--mode none`
            }
            for lower in p.instances.iter().filter(|l| l.mode <= i.mode) {
                let vol = id(&workspace_volume(&p.server.name, lower.mode));
                if lower.mode == i.mode {
                    let _ = writeln!(m, "  {node} ---|rw| vol_{vol}");
                } else {
                    let _ = writeln!(m, "  {node} -.-|ro| vol_{vol}");
                }
            }
            let _ = writeln!(m, "  {node} --- vol_{}", id(COMPLIANCE_VOLUME));
        }
    }
    let mut text = String::from("<!--\n");
    for line in header("", &[&d.source]).lines() {
        text.push_str(line.trim_start());
        text.push('\n');
    }
    text.push_str("-->\n");
    let _ = write!(
        text,
        "# Deployment `{}`\n\n\
         Instances per server by the highest sensitivity its tools reach: full always, proxied from\n\
         `confidential`, isolated (`--mode none`) from `secret`, which has no route out. Proxied and\n\
         isolated instances run with `network_mode: none` and are reached through their relay.\n\n\
         Trust domains (`BULKHEAD_TRUST_DOMAIN`): {}. The servers of one domain keep one level per\n\
         agent session: data that raised a session on one of them blocks `connect` tools on all of\n\
         them, and clients move all of the session's servers to the instance that level needs.\n\n\
         ```mermaid\n{m}```\n",
        d.name,
        trust_domains(d)
    );
    for p in &plans {
        text.push_str(&tables(p));
    }
    out.add(format!("compose/{}.md", d.name), text);
}

/// `` `domain` (server, server) `` for each trust domain of `d`, sorted.
fn trust_domains(d: &Deployment) -> String {
    let mut by: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for s in &d.servers {
        by.entry(s.trust_domain.as_str()).or_default().push(&s.name);
    }
    by.iter()
        .map(|(t, servers)| format!("`{t}` ({})", servers.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The instances of `p` that run what is first allowed in `from`, as `a`, `b`.
fn instances_from(p: &ServerPlan, from: NetworkMode) -> String {
    let names: Vec<String> = p
        .instances
        .iter()
        .filter(|i| ServerPlan::reaches(i.mode, from))
        .map(|i| format!("`{}`", i.service))
        .collect();
    if names.is_empty() {
        "none (no instance is isolated enough)".to_string()
    } else {
        names.join(", ")
    }
}

/// The tool, data and network tables of one server.
pub(super) fn tables(p: &ServerPlan) -> String {
    let mut t = String::new();
    let name = &p.server.name;
    let _ = write!(
        t,
        "\n## Server `{name}`\n\n\
         Tools run on every instance from the least isolated one their sensitivity allows \
         (`confidential` needs `proxied`, `secret` needs `none`); a session only moves up.\n\n\
         | tool | permission | sensitivity | runs | instances |\n|---|---|---|---|---|\n"
    );
    for tool in &p.tools {
        let _ = writeln!(
            t,
            "| `{}` | {} | {} | `{}` | {} |",
            tool.tool,
            tool.permission,
            tool.sensitivity.as_str(),
            tool.runs,
            instances_from(p, tool.from)
        );
    }
    let _ = write!(
        t,
        "\n| data | mounted at | read-write | read-only |\n|---|---|---|---|\n"
    );
    for i in &p.instances {
        let vol = workspace_volume(name, i.mode);
        let ro: Vec<String> = p
            .instances
            .iter()
            .filter(|o| o.mode > i.mode)
            .map(|o| format!("`{}`", o.service))
            .collect();
        let _ = writeln!(
            t,
            "| workspaces written by `{}` (volume `{vol}`) | `{WORKSPACES_DIR}/{}` | `{}` | {} |",
            i.service,
            workspace_layer(name, i.mode),
            i.service,
            if ro.is_empty() {
                "—".to_string()
            } else {
                ro.join(", ")
            }
        );
    }
    let all: Vec<String> = p
        .instances
        .iter()
        .map(|i| format!("`{}`", i.service))
        .collect();
    let _ = writeln!(
        t,
        "| compliance state and audit (volume `{COMPLIANCE_VOLUME}`: levels, dataset names, no results) | `{STATE_DIR}` | {} | — |",
        all.join(", ")
    );
    for m in &p.data {
        let who = instances_from(p, m.from);
        let (rw, ro) = if m.read_only {
            ("—".to_string(), who)
        } else {
            (who, "—".to_string())
        };
        let _ = writeln!(
            t,
            "| connector `{}` `{}`: `{}` | `{}` | {rw} | {ro} |",
            m.connector, m.setting, m.source, m.target
        );
    }
    for s in &p.secrets {
        let _ = writeln!(
            t,
            "| secret `{}` (file `{}`) | `/run/secrets/{}` | — | {} |",
            s.var,
            s.name,
            s.name,
            instances_from(p, s.from)
        );
    }
    let _ = write!(t, "\n| instance | network out |\n|---|---|\n");
    for i in &p.instances {
        let out = match i.mode {
            // The same words as POLICY.md's reach: a full instance may reach any host; what the
            // deployment declares is informational there.
            NetworkMode::Full => format!(
                "network `{EGRESS_NET}`: any host (declared: {})",
                if p.server.egress.is_empty() {
                    "none".to_string()
                } else {
                    p.server
                        .egress
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            NetworkMode::Proxied => format!(
                "only through `{}`: {}; allowlisted names may resolve to {}",
                p.proxy_service().unwrap_or_default(),
                if p.allowed.is_empty() {
                    "nothing allowed".to_string()
                } else {
                    p.allowed
                        .iter()
                        .map(|a| format!("`{}`", a.authority()))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                if p.server.internal_ranges.is_empty() {
                    "public addresses only".to_string()
                } else {
                    format!(
                        "public addresses and the internal ranges {}",
                        p.server
                            .internal_ranges
                            .iter()
                            .map(|r| format!("`{r}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
            NetworkMode::None => "none".to_string(),
        };
        let _ = writeln!(t, "| `{}` | {out} |", i.service);
    }
    t
}
