//! `generated/POLICY.md`: the effective policy as one table a reviewer reads to see who can reach
//! what. Rendered from the same [`Policy`] the review compares, so the diff of this file in a
//! pull request is the policy diff. Its last section is the legend of the review's [`Rule`]s.

use super::config::Identity;
use super::policy::Policy;
use super::rule::Rule;
use crate::emit::header;
use std::fmt::Write as _;

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The table's Markdown, its header naming `sources`.
pub fn policy_table(p: &Policy, sources: &[&str]) -> String {
    let mut t = String::from("<!--\n");
    for line in header("", sources).lines() {
        t.push_str(line.trim_start());
        t.push('\n');
    }
    t.push_str("-->\n# Effective policy\n\n");
    t.push_str(
        "What clients can reach, resolved from `specs/` and `config.yaml` (`${VAR:-default}` as its \
         default). `bulkhead check --against REV` compares this model between revisions and fails on \
         any weakening not acknowledged in `specs/policy-acks.yaml`.\n\n## Capabilities\n\n\
         A tool runs on every instance from the one its sensitivity needs (`full` for public and \
         internal, `proxied` for confidential, `none` for secret); `connect` tools are refused once \
         a session holds confidential data.\n\n\
         A tool's own rate limit (per user, shared by every instance and replica) replaces \
         `rate_limits.per_user_tool` of `config.yaml` for that tool.\n\n\
         A tool with an approval runs only after a person approves the call (the caller, or a \
         holder of the named claim), asked through the client the way its protocol era expects.\n\n\
         Every result, resource read and prompt is read for credentials (gitleaks' rules, \
         `engine/src/inspect/rules/`) unless the capability is `uninspected` with a reason: a value \
         found is replaced by `[redacted: <rule>]` in what the model sees and in the saved full \
         result, the session rises to `secret` (`connect` blocked, the `none` instance from then \
         on) and the audit names the rule and where, never the value; a `connect` call whose \
         arguments hold one is refused, naming the argument and the rule, before anything leaves.\n\n\
         | server | kind | name | permission | sensitivity | from instance | context | rate limit | approval | inspected | runs |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in &p.capabilities {
        let context = if c.context.1.is_empty() {
            c.context.0.clone()
        } else {
            let o: Vec<String> = c
                .context
                .1
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{} ({})", c.context.0, o.join(", "))
        };
        let _ = writeln!(
            t,
            "| {} | {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.server,
            c.kind,
            cell(&c.name),
            c.permission,
            c.sensitivity,
            c.from_mode(),
            cell(&context),
            c.rate_limit
                .map_or_else(|| "-".to_string(), |r| r.to_string()),
            c.approval
                .as_ref()
                .map_or_else(|| "-".to_string(), |a| cell(&a.describe())),
            c.uninspected
                .as_ref()
                .map_or_else(|| "yes".to_string(), |r| cell(&format!("no: {r}"))),
            cell(&c.runs)
        );
    }
    t.push_str("\n## Connectors\n\n| connector | kind | sensitivity | points at | may reach | secrets | package | settings as written |\n|---|---|---|---|---|---|---|---|\n");
    for c in &p.connectors {
        let join = |s: &std::collections::BTreeSet<String>| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        };
        let settings = if c.settings.is_empty() {
            "-".to_string()
        } else {
            c.settings
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let _ = writeln!(
            t,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} |",
            c.name,
            c.kind.as_str(),
            c.sensitivity,
            cell(&c.location),
            join(&c.reach),
            join(&c.secrets),
            if c.package.is_empty() {
                "-"
            } else {
                &c.package
            },
            cell(&settings)
        );
    }
    t.push_str("\n## Instances\n\n| deployment | instance | mode | trust domain | may reach | internal ranges | mounts | secrets | images |\n|---|---|---|---|---|---|---|---|---|\n");
    for i in &p.instances {
        let join = |s: Vec<String>| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.join(", ")
            }
        };
        let reach = match i.mode {
            bulkhead_vocab::NetworkMode::Full => format!(
                "any (declared: {})",
                join(i.egress.iter().map(ToString::to_string).collect())
            ),
            bulkhead_vocab::NetworkMode::Proxied => {
                join(i.egress.iter().map(ToString::to_string).collect())
            }
            bulkhead_vocab::NetworkMode::None => "nothing".to_string(),
        };
        let _ = writeln!(
            t,
            "| {} ({}{}) | `{}` | {} | {} | {} | {} | {} | {} | {} |",
            i.deployment,
            i.environment,
            if i.pinned { ", pinned" } else { "" },
            i.service,
            i.mode,
            i.trust_domain,
            reach,
            join(i.internal_ranges.iter().cloned().collect()),
            join(i.mounts.iter().cloned().collect()),
            join(i.secrets.iter().cloned().collect()),
            join(i.images.iter().cloned().collect())
        );
    }
    t.push_str("\n## Identity (`config.yaml`)\n\n");
    identity(&mut t, &p.identity);
    legend(&mut t);
    t
}

/// The review's rules, one row each, in [`Rule::ALL`]'s order.
fn legend(t: &mut String) {
    t.push_str(
        "\n## Review rules\n\n\
         `bulkhead check --against REV` prints each weakening as `rule: subject: change`, under one \
         of these rules (examples in `docs/review-rules.md`).\n\n\
         | rule | flags |\n|---|---|\n",
    );
    for r in Rule::ALL {
        let _ = writeln!(t, "| `{}` | {} |", r.name(), cell(r.describe()));
    }
}

/// The identity section's body: every setting the file sets, with the value in effect.
fn identity(t: &mut String, id: &Identity) {
    if !id.present {
        t.push_str("No `config.yaml`: the runtime's defaults apply.\n");
        return;
    }
    let _ = writeln!(t, "| setting | value |\n|---|---|");
    for (k, s) in id.settings.iter().filter(|(_, s)| s.set) {
        let value = match &s.value {
            serde_json::Value::String(v) => v.clone(),
            v => v.to_string(),
        };
        let _ = match &s.written {
            Some(w) if *w != value => writeln!(
                t,
                "| {k} | `{}` (as written: `{}`) |",
                cell(&value),
                cell(w)
            ),
            _ => writeln!(t, "| {k} | `{}` |", cell(&value)),
        };
    }
    for (k, v) in &id.unclassified {
        let _ = writeln!(
            t,
            "| {k} | `{}` (not a setting the review knows) |",
            cell(&v.to_string())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_lists_every_rule_in_order_last() {
        for p in [Policy::default(), {
            let mut p = Policy::default();
            p.identity.present = true;
            p
        }] {
            let t = policy_table(&p, &[]);
            let legend = &t[t.find("\n## Review rules\n").expect("a legend")..];
            let rows: Vec<&str> = legend.lines().filter(|l| l.starts_with("| `")).collect();
            let expected: Vec<String> = Rule::ALL
                .iter()
                .map(|r| format!("| `{}` | {} |", r.name(), r.describe()))
                .collect();
            assert_eq!(rows, expected);
            assert!(t.ends_with(&format!("{} |\n", Rule::OwnersNarrowed.describe())));
        }
    }
}
