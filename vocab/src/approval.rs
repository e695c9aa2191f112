//! A tool's `approval:`: when a person must approve a call before it runs, and who may. One type
//! for the spec, the generated code (static, through `Cow::Borrowed`), the runtime and review,
//! with the one rule review needs: whether one declaration asks less often than another.

use crate::Sensitivity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// When a call needs a person's approval, and who may give it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// A call needs approval when any of these holds.
    pub when: Cow<'static, [Condition]>,
    /// Who may approve (default: the caller).
    #[serde(default)]
    pub approver: Approver,
}

/// One condition under which a call needs approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// Every call.
    Always,
    /// The session already holds data of at least this level when the call starts.
    SessionAtLeast(Sensitivity),
    /// A string argument matches a regular expression (searched, not anchored: use `^…$`).
    Argument {
        /// The parameter.
        name: Cow<'static, str>,
        /// The pattern (Rust `regex` syntax).
        matches: Cow<'static, str>,
    },
    /// A path argument is not under `prefix` (compared after normalising `.` and `..`).
    PathOutside {
        /// The parameter.
        argument: Cow<'static, str>,
        /// The workspace path under which no approval is needed, e.g. `/workspace/drafts/`.
        prefix: Cow<'static, str>,
    },
}

/// Who may approve.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Approver {
    /// The person whose token made the call.
    #[default]
    Caller,
    /// A person whose own token carries `name` with `value` (equal, one of a list, or one word
    /// of a space-separated string such as `scope`).
    Claim {
        /// The claim.
        name: Cow<'static, str>,
        /// The value it must carry.
        value: Cow<'static, str>,
    },
}

impl Approval {
    /// `approval: always` (every call, approved by the caller).
    pub const ALWAYS: Approval = Approval {
        when: Cow::Borrowed(&[Condition::Always]),
        approver: Approver::Caller,
    };

    /// What is wrong with it, if anything (beyond what the parameters and regexes are, which
    /// the generator checks against the tool).
    pub fn problem(&self) -> Option<String> {
        if self.when.is_empty() {
            return Some(
                "`when` names no condition (for every call, write `approval: always`)".into(),
            );
        }
        for c in self.when.iter() {
            if let Condition::PathOutside { prefix, .. } = c
                && !prefix.starts_with("/workspace")
            {
                return Some(format!(
                    "`path_outside.prefix` `{prefix}` is not a workspace path (`/workspace/…`)"
                ));
            }
        }
        if let Approver::Claim { name, value } = &self.approver
            && (name.is_empty() || value.is_empty())
        {
            return Some("`approver.claim` needs a `name` and a `value`".into());
        }
        None
    }

    /// Whether `self` asks in fewer cases than `other`, or lets someone approve whom `other`
    /// did not: some condition of `other` is implied by none of `self`'s, or the approver
    /// changed other than from the caller to a claim holder.
    pub fn is_weaker_than(&self, other: &Approval) -> bool {
        let narrower = other
            .when
            .iter()
            .any(|o| !self.when.iter().any(|s| s.covers(o)));
        let approver = match (&self.approver, &other.approver) {
            (a, b) if a == b => false,
            (Approver::Claim { .. }, Approver::Caller) => false,
            _ => true,
        };
        narrower || approver
    }

    /// A one-line description (the policy table, review).
    pub fn describe(&self) -> String {
        let when: Vec<String> = self.when.iter().map(Condition::describe).collect();
        let who = match &self.approver {
            Approver::Caller => String::new(),
            Approver::Claim { name, value } => format!(", by `{name}: {value}`"),
        };
        format!("{}{who}", when.join(" or "))
    }
}

impl Condition {
    /// Whether this condition holds whenever `other` does (so asking on `self` asks at least
    /// as often as on `other`).
    pub fn covers(&self, other: &Condition) -> bool {
        match (self, other) {
            (Condition::Always, _) => true,
            (Condition::SessionAtLeast(a), Condition::SessionAtLeast(b)) => a <= b,
            // Outside a longer prefix holds for every path outside a shorter one it extends.
            (
                Condition::PathOutside {
                    argument: a,
                    prefix: p,
                },
                Condition::PathOutside {
                    argument: b,
                    prefix: q,
                },
            ) => {
                // Inside `p` must lie inside `q`: compared as normalised paths (`..` resolved),
                // so `/workspace/drafts/../` is the whole workspace, not a narrower folder.
                a == b
                    && match (normalized(p), normalized(q)) {
                        (None, _) => true, // nothing is inside `p`: it always asks
                        (Some(_), None) => false,
                        (Some(p), Some(q)) => p.len() >= q.len() && p[..q.len()] == q[..],
                    }
            }
            (a, b) => a == b,
        }
    }

    /// A short description: `always`, `session ≥ internal`, `path outside /workspace/x/`.
    pub fn describe(&self) -> String {
        match self {
            Condition::Always => "always".into(),
            Condition::SessionAtLeast(s) => format!("session at least {s}"),
            Condition::Argument { name, matches } => format!("`{name}` matches `{matches}`"),
            Condition::PathOutside { argument, prefix } => {
                format!("`{argument}` outside {prefix}")
            }
        }
    }
}

/// A `/`-separated path as its components, `.` and empty parts dropped and `..` resolved;
/// None when `..` climbs above the start (no path is under it).
pub(crate) fn normalized(p: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            x => out.push(x),
        }
    }
    Some(out)
}

/// Whether path `p` lies strictly inside `prefix`, both normalised (`path_outside`'s test).
pub fn path_under(p: &str, prefix: &str) -> bool {
    match (normalized(p), normalized(prefix)) {
        (Some(p), Some(pre)) => p.len() > pre.len() && p[..pre.len()] == pre[..],
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outside(p: &'static str) -> Condition {
        Condition::PathOutside {
            argument: Cow::Borrowed("path"),
            prefix: Cow::Borrowed(p),
        }
    }

    fn when(c: Vec<Condition>) -> Approval {
        Approval {
            when: Cow::Owned(c),
            approver: Approver::Caller,
        }
    }

    #[test]
    fn removing_or_narrowing_a_condition_is_weaker() {
        let always = Approval::ALWAYS;
        let internal = when(vec![Condition::SessionAtLeast(Sensitivity::Internal)]);
        let conf = when(vec![Condition::SessionAtLeast(Sensitivity::Confidential)]);
        assert!(internal.is_weaker_than(&always));
        assert!(!always.is_weaker_than(&internal));
        assert!(conf.is_weaker_than(&internal));
        assert!(!internal.is_weaker_than(&conf));
        let drafts = when(vec![outside("/workspace/drafts/")]);
        let deeper = when(vec![outside("/workspace/drafts/mine/")]);
        let shallower = when(vec![outside("/workspace/")]);
        assert!(!deeper.is_weaker_than(&drafts));
        assert!(shallower.is_weaker_than(&drafts));
        let both = when(vec![
            outside("/workspace/drafts/"),
            Condition::SessionAtLeast(Sensitivity::Internal),
        ]);
        assert!(drafts.is_weaker_than(&both));
        assert!(!both.is_weaker_than(&drafts));
    }

    /// Prefixes are compared as the runtime reads them, `..` resolved: one that climbs back
    /// out is not narrower, whatever its text starts with.
    #[test]
    fn a_prefix_is_compared_after_normalisation() {
        let drafts = when(vec![outside("/workspace/drafts/")]);
        for wider in [
            "/workspace/drafts/../",
            "/workspace/drafts/mine/../../",
            "/workspace//drafts/x/../..",
        ] {
            assert!(
                when(vec![outside(wider)]).is_weaker_than(&drafts),
                "{wider}"
            );
        }
        for same_or_deeper in [
            "/workspace/./drafts",
            "/workspace/drafts//mine/",
            "/workspace/x/../drafts/mine",
        ] {
            assert!(
                !when(vec![outside(same_or_deeper)]).is_weaker_than(&drafts),
                "{same_or_deeper}"
            );
        }
        // Above the root nothing is inside: it asks on every path.
        assert!(!when(vec![outside("/../..")]).is_weaker_than(&drafts));
        assert!(path_under("/workspace/drafts/a", "/workspace/x/../drafts"));
        assert!(!path_under(
            "/workspace/drafts/../secrets/a",
            "/workspace/drafts/"
        ));
    }

    #[test]
    fn only_caller_to_claim_is_not_a_weaker_approver() {
        let caller = Approval::ALWAYS;
        let claim = |v: &'static str| Approval {
            approver: Approver::Claim {
                name: Cow::Borrowed("roles"),
                value: Cow::Borrowed(v),
            },
            ..Approval::ALWAYS
        };
        assert!(!claim("approver").is_weaker_than(&caller));
        assert!(caller.is_weaker_than(&claim("approver")));
        assert!(claim("reader").is_weaker_than(&claim("approver")));
    }

    #[test]
    fn the_spec_forms_parse() {
        let a: Approval = serde_json::from_value(serde_json::json!({
            "when": ["always", {"session_at_least": "internal"},
                     {"argument": {"name": "channel", "matches": "^all$"}},
                     {"path_outside": {"argument": "path", "prefix": "/workspace/drafts/"}}],
            "approver": {"claim": {"name": "roles", "value": "approver"}}
        }))
        .unwrap();
        assert_eq!(a.when.len(), 4);
        assert!(a.problem().is_none());
        let bad: Approval = serde_json::from_value(serde_json::json!({"when": []})).unwrap();
        assert!(bad.problem().unwrap().contains("no condition"));
    }
}
