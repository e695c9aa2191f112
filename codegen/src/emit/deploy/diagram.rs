//! `compose/<deployment>.md`: a Mermaid flowchart of the deployment for reviewers: instances,
//! networks, egress proxies, volumes and the allowed egress.

use super::compose::{AGENTS_NET, COMPLIANCE_VOLUME, EGRESS_NET, WORKSPACES_VOLUME};
use super::{Mode, STATE_DIR, WORKSPACES_DIR, plan};
use crate::emit::{Output, header};
use crate::model::Deployment;
use std::fmt::Write;

fn id(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Adds `compose/<deployment>.md`.
pub fn emit(d: &Deployment, out: &mut Output) {
    let plans = plan(d);
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
            let _ = writeln!(
                m,
                "    {}[\"{}<br/>--mode {} :{}\"]",
                id(&i.service),
                i.service,
                i.mode.as_str(),
                p.server.port
            );
        }
    }
    let _ = writeln!(m, "  end");
    let _ = writeln!(
        m,
        "  vol_{}[(\"volume {WORKSPACES_VOLUME}<br/>{WORKSPACES_DIR}\")]",
        id(WORKSPACES_VOLUME)
    );
    let _ = writeln!(
        m,
        "  vol_{}[(\"volume {COMPLIANCE_VOLUME}<br/>{STATE_DIR}\")]",
        id(COMPLIANCE_VOLUME)
    );
    for p in &plans {
        for i in &p.instances {
            let node = id(&i.service);
            let _ = writeln!(m, "  agent --> {node}");
            match i.mode {
                Mode::Full => {
                    let _ = writeln!(m, "  {node} -->|\"network {EGRESS_NET}\"| internet");
                }
                Mode::Proxied => {
                    let proxy = p.proxy_service().unwrap_or_default();
                    let _ = writeln!(
                        m,
                        "  {}{{{{\"{proxy}<br/>envoy, deny by default\"}}}}",
                        id(&proxy)
                    );
                    let _ = writeln!(
                        m,
                        "  {node} -->|\"network {} (internal)\"| {}",
                        p.proxied_net(),
                        id(&proxy)
                    );
                    for a in &p.allowed {
                        let _ = writeln!(
                            m,
                            "  {} -->|\"allow {}\"| internet",
                            id(&proxy),
                            a.authority()
                        );
                    }
                }
                Mode::None => {} // no edge out: the node's label says `--mode none`
            }
            let _ = writeln!(m, "  {node} --- vol_{}", id(WORKSPACES_VOLUME));
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
         `confidential`, isolated (`--mode none`) from `secret`, which has no route out.\n\n\
         ```mermaid\n{m}```\n",
        d.name
    );
    out.add(format!("compose/{}.md", d.name), text);
}
