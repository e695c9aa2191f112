//! A person approves a call before it runs, when its tool's `approval:` says so.
//!
//! The invariant kept here: a call of a tool whose approval condition holds runs only after an
//! answer `accept` with `approve: true`, given by a permitted approver for exactly this caller,
//! session, server, tool and arguments, before the answer expired — and each question is
//! answered once, across every instance and replica. Everything else (no way to ask, decline,
//! cancel, a late, replayed, edited or transplanted answer, a store that cannot record the
//! answer's use) refuses the call: never an approval by default.
//!
//! How the person is asked follows the client's protocol era ([`Asker`]): on a 2025-11-25
//! session, `elicitation/create` on the session while the call waits; on 2026-07-28, the call
//! answers `input_required` with the question and a sealed `requestState` ([`seal`]) and runs when
//! the client repeats it with the answer (consumed once in the store, [`used`]).
//!
//! Fault model: a client that edits, replays or moves `requestState`; two replicas handed one
//! answer at once; a process killed between consuming an answer and running the call (the answer
//! is spent, the call did not run: the client asks again — never a second run of one answer).

pub mod seal;
mod used;

use crate::identity::Identity;
use crate::policy::Sensitivity;
use crate::server::JsonObject;
use crate::tooldef::{Approval, ApprovalCondition, Approver, ToolDef};
use seal::{Asked, Sealer};
use serde_json::{Map, Value};
use sha2::Digest as _;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
pub use used::UsedIds;

/// The key of the one question in an `input_required` answer.
pub const INPUT_KEY: &str = "approval";
/// The field of the approval form.
pub const APPROVE_FIELD: &str = "approve";

/// How this call's caller can be asked.
#[derive(Clone, Default)]
pub enum Asker {
    /// No way: the client declared no form elicitation (or the path has no client to ask).
    #[default]
    None,
    /// A 2025-11-25 session whose client takes `elicitation/create`.
    Elicit(rmcp::Peer<rmcp::RoleServer>),
    /// A 2026-07-28 request: it may carry the answer to an earlier question.
    Rounds {
        /// The echoed `requestState`.
        state: Option<String>,
        /// The client's answers, by key.
        responses: Option<Map<String, Value>>,
    },
}

/// Whether a client with `caps` takes form elicitation (`elicitation: {}`, naming neither mode,
/// means forms). The one test of it, for the server side and for `bulkhead connect`'s relay.
pub fn takes_forms(caps: &rmcp::model::ClientCapabilities) -> bool {
    caps.elicitation
        .as_ref()
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// What the caller's token says beyond its identity (the approver rule reads it).
#[derive(Clone, Debug, Default)]
pub struct TokenClaims(pub Arc<Map<String, Value>>);

/// What became of asking.
pub enum Asking {
    /// Approved: what the audit records before the call runs.
    Approved(String),
    /// A 2026-07-28 question to send back (`input_required`): the form and the sealed state.
    Pending(Pending),
    /// Refused: why (a short label for the audit) and what the caller is told.
    Refused(&'static str, crate::errors::ToolError),
}

/// An `input_required` answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    /// The question (an `elicitation/create` form request's params).
    pub question: Value,
    /// The sealed `requestState`.
    pub state: String,
}

/// The approvals of one server's tools.
pub struct Approvals {
    server: &'static str,
    /// Compiled `argument` patterns, by (tool, condition index).
    patterns: HashMap<(&'static str, usize), regex::Regex>,
    sealer: Option<Sealer>,
    used: Option<UsedIds>,
    expiry: Duration,
    metrics: Arc<crate::metrics::Metrics>,
}

impl Approvals {
    /// The approvals of `tools`; `secret` keys the sealed states (None: 2026-07-28 clients are
    /// refused with the reason), `used` records answers (None: likewise).
    pub fn new(
        server: &'static str,
        tools: &'static [ToolDef],
        secret: Option<&[u8]>,
        used: Option<UsedIds>,
        expiry: Duration,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Result<Approvals, String> {
        let mut patterns = HashMap::new();
        for t in tools {
            for (i, c) in t.approval.iter().flat_map(|a| a.when.iter()).enumerate() {
                if let ApprovalCondition::Argument { matches, .. } = c {
                    let re = regex::Regex::new(matches)
                        .map_err(|e| format!("approval of `{}`: {e}", t.name))?;
                    patterns.insert((t.name, i), re);
                }
            }
        }
        Ok(Approvals {
            server,
            patterns,
            sealer: secret.map(Sealer::from_secret),
            used,
            expiry,
            metrics,
        })
    }

    /// The approval `tool` needs for this call with the session at `level`, if any.
    pub fn needed<'t>(
        &self,
        tool: &'t ToolDef,
        args: &JsonObject,
        level: Sensitivity,
    ) -> Option<&'t Approval> {
        let a = tool.approval.as_ref()?;
        let holds = |(i, c): (usize, &ApprovalCondition)| match c {
            ApprovalCondition::Always => true,
            ApprovalCondition::SessionAtLeast(s) => level >= *s,
            ApprovalCondition::Argument { name, .. } => {
                // An absent argument matches no pattern; a value that cannot be tested (not a
                // string, or no compiled pattern) asks: fail closed.
                match (args.get(name.as_ref()), self.patterns.get(&(tool.name, i))) {
                    (Some(Value::String(v)), Some(re)) => re.is_match(v),
                    (None, _) => false,
                    _ => true,
                }
            }
            ApprovalCondition::PathOutside { argument, prefix } => {
                match args.get(argument.as_ref()) {
                    Some(Value::String(p)) => !under(p, prefix),
                    Some(_) => true,
                    None => false,
                }
            }
        };
        a.when.iter().enumerate().any(holds).then_some(a)
    }

    /// Asks for (or checks the answer to) approval of one call. `claims` are the caller's token's.
    #[allow(clippy::too_many_arguments)]
    pub async fn ask(
        &self,
        asker: &Asker,
        approval: &Approval,
        id: &Identity,
        claims: Option<&TokenClaims>,
        tool: &ToolDef,
        args: &JsonObject,
        shown_args: &str,
        level: Sensitivity,
        mode: crate::policy::NetworkMode,
    ) -> Asking {
        if let Approver::Claim { name, value } = &approval.approver
            && !holds_claim(claims, name, value)
        {
            self.metrics.approval("refused");
            return Asking::Refused(
                "not_approver",
                fatal(format!(
                    "`{}` needs approval by a holder of `{name}: {value}`, and the token of this call does not carry it; ask such a person to make the call",
                    tool.name
                )),
            );
        }
        let question = question(self.server, tool, shown_args, level, mode);
        match asker {
            Asker::None => {
                self.metrics.approval("refused");
                Asking::Refused(
                    "cannot_ask",
                    fatal(format!(
                        "`{}` needs a person's approval, and this client cannot be asked (it declared no form elicitation); use a client that supports elicitation",
                        tool.name
                    )),
                )
            }
            Asker::Elicit(peer) => self.elicit(peer, tool, question).await,
            Asker::Rounds { state: None, .. } => self.pend(id, tool, args, question),
            Asker::Rounds {
                state: Some(state),
                responses,
            } => self.check(id, tool, args, state, responses.as_ref()).await,
        }
    }

    /// 2025-11-25: asks on the session and waits (at most the expiry).
    async fn elicit(
        &self,
        peer: &rmcp::Peer<rmcp::RoleServer>,
        tool: &ToolDef,
        question: Value,
    ) -> Asking {
        let params: rmcp::model::ElicitRequestParams = match serde_json::from_value(question) {
            Ok(p) => p,
            Err(e) => {
                return Asking::Refused("cannot_ask", fatal(format!("approval question: {e}")));
            }
        };
        self.metrics.approval("asked");
        let asked_at = now_rfc3339();
        match peer
            .create_elicitation_with_timeout(params, Some(self.expiry))
            .await
        {
            Ok(answer) => {
                let content = answer.content.unwrap_or(Value::Null);
                self.decide(
                    tool,
                    &format!("{:?}", answer.action).to_lowercase(),
                    &content,
                    &format!("elicitation/create at {asked_at}"),
                )
            }
            Err(rmcp::service::ServiceError::Timeout { .. }) => {
                self.metrics.approval("expired");
                Asking::Refused(
                    "expired",
                    retry(format!(
                        "no answer to the approval of `{}` within {} s; call again to ask again",
                        tool.name,
                        self.expiry.as_secs()
                    )),
                )
            }
            Err(e) => {
                self.metrics.approval("refused");
                Asking::Refused(
                    "cannot_ask",
                    fatal(format!(
                        "the approval of `{}` could not be asked: {e}",
                        tool.name
                    )),
                )
            }
        }
    }

    /// 2026-07-28, first round: the question and its sealed state.
    fn pend(&self, id: &Identity, tool: &ToolDef, args: &JsonObject, question: Value) -> Asking {
        let Some(sealer) = &self.sealer else {
            return self.no_key(tool);
        };
        let mut rid = [0u8; 16];
        getrandom::fill(&mut rid).expect("the OS random source works");
        let asked = Asked {
            id: rid.iter().map(|b| format!("{b:02x}")).collect(),
            user: id.user().to_owned(),
            session: id.session().to_owned(),
            server: self.server.to_owned(),
            tool: tool.name.to_owned(),
            args: args_digest(args),
            exp: unix_now() + self.expiry.as_secs().max(1),
        };
        self.metrics.approval("asked");
        Asking::Pending(Pending {
            question,
            state: sealer.seal(&asked),
        })
    }

    fn no_key(&self, tool: &ToolDef) -> Asking {
        self.metrics.approval("refused");
        Asking::Refused(
            "cannot_ask",
            fatal(format!(
                "`{}` needs a person's approval, and this server has no approvals key (approvals.key_file) to seal the question with",
                tool.name
            )),
        )
    }

    /// 2026-07-28, the answer: the seal, the binding, the expiry, single use, then the answer.
    async fn check(
        &self,
        id: &Identity,
        tool: &ToolDef,
        args: &JsonObject,
        state: &str,
        responses: Option<&Map<String, Value>>,
    ) -> Asking {
        let (Some(sealer), Some(used)) = (&self.sealer, &self.used) else {
            return self.no_key(tool);
        };
        // A stale or foreign state: the caller may simply call again and be asked again.
        let refused = |label: &'static str, why: String| {
            self.metrics.approval(if label == "expired" {
                "expired"
            } else {
                "refused"
            });
            Asking::Refused(label, retry(why))
        };
        let asked = match sealer.open(state) {
            Ok(a) => a,
            Err(why) => return refused("bad_state", format!("approval refused: {why}")),
        };
        if asked.user != id.user() || asked.session != id.session() {
            return refused(
                "bad_state",
                "approval refused: the requestState was issued to another caller or session".into(),
            );
        }
        if asked.server != self.server || asked.tool != tool.name {
            return refused(
                "bad_state",
                format!(
                    "approval refused: the requestState approves `{}.{}`, not `{}.{}`",
                    asked.server, asked.tool, self.server, tool.name
                ),
            );
        }
        if asked.args != args_digest(args) {
            return refused(
                "bad_state",
                "approval refused: the arguments differ from the ones the person was asked about; call again to ask again".into(),
            );
        }
        if unix_now() > asked.exp {
            return refused(
                "expired",
                format!(
                    "approval refused: the answer came after the question expired ({} s); call again to ask again",
                    self.expiry.as_secs()
                ),
            );
        }
        match used.consume(&asked.id, asked.exp).await {
            Ok(true) => {}
            Ok(false) => {
                return refused(
                    "replayed",
                    "approval refused: this answer was already used; call again to ask again"
                        .into(),
                );
            }
            Err(e) => {
                tracing::error!(error = %e, "approvals cannot be recorded; call refused");
                return refused(
                    "store",
                    "approval refused: the state store cannot record the answer's use, so it is not taken".into(),
                );
            }
        }
        let answer = responses.and_then(|r| r.get(INPUT_KEY));
        let Some(Value::Object(answer)) = answer else {
            return refused(
                "declined",
                format!(
                    "approval refused: the request carries no answer under `inputResponses.{INPUT_KEY}`"
                ),
            );
        };
        let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
        let content = answer.get("content").cloned().unwrap_or(Value::Null);
        self.decide(tool, action, &content, "input_required")
    }

    /// The person's answer: `accept` with `approve: true` approves; anything else is final.
    fn decide(&self, tool: &ToolDef, action: &str, content: &Value, how: &str) -> Asking {
        let approve = content.get(APPROVE_FIELD).and_then(Value::as_bool) == Some(true);
        if action == "accept" && approve {
            self.metrics.approval("given");
            return Asking::Approved(format!("approved ({how}, answered {})", now_rfc3339()));
        }
        self.metrics.approval("declined");
        let said = match action {
            "accept" => "accepted without approving",
            "decline" => "declined",
            "cancel" => "cancelled",
            _ => "answered with no decision",
        };
        Asking::Refused(
            "declined",
            fatal(format!(
                "the person {said} `{}`; it did not run (do not retry unless they ask you to)",
                tool.name
            )),
        )
    }
}

fn fatal(why: String) -> crate::errors::ToolError {
    crate::errors::ToolError::fatal(why)
}

fn retry(why: String) -> crate::errors::ToolError {
    crate::errors::ToolError::retry(why)
}

/// The question: an `elicitation/create` form request's params, saying what will run.
fn question(
    server: &str,
    tool: &ToolDef,
    shown_args: &str,
    level: Sensitivity,
    mode: crate::policy::NetworkMode,
) -> Value {
    let message = format!(
        "Approve `{}` on `{server}`?\nArguments: {shown_args}\nPermission: {}; the session holds {level} data; it runs on the `{mode}` instance.",
        tool.name,
        tool.permission.as_str(),
    );
    serde_json::json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                APPROVE_FIELD: {
                    "type": "boolean",
                    "title": "Run this call",
                    "description": "true runs it once; false refuses it",
                    "default": false
                }
            },
            "required": [APPROVE_FIELD]
        }
    })
}

/// Whether `claims` carry `name` with `value`: equal, in a list, or a word of a string.
fn holds_claim(claims: Option<&TokenClaims>, name: &str, value: &str) -> bool {
    match claims.and_then(|c| c.0.get(name)) {
        Some(Value::String(s)) => s == value || s.split_whitespace().any(|w| w == value),
        Some(Value::Array(items)) => items.iter().any(|i| i.as_str() == Some(value)),
        _ => false,
    }
}

/// Whether workspace path `p` is under `prefix`, after `.` and `..` are resolved (a path that
/// climbs above the root is never under anything).
fn under(p: &str, prefix: &str) -> bool {
    bulkhead_vocab::path_under(p, prefix)
}

/// The arguments as a person is shown them: the canonical JSON the approval is bound to (keys
/// sorted, as [`args_digest`] hashes it), with every character a display could hide or reorder
/// (controls, bidi and other format characters, separators, private-use and unassigned code
/// points, by Unicode general category) escaped as `\uXXXX`, so the person reads what runs. Past
/// [`SHOWN_MAX`] characters it is cut, and says so with the digest of the whole.
pub fn shown_args(args: &JsonObject) -> String {
    let text = escape_hidden(&canonical(&Value::Object(args.clone())));
    let n = text.chars().count();
    if n > SHOWN_MAX {
        format!(
            "{}… ({n} characters in all; the approval is bound to every one: SHA-256 {})",
            text.chars().take(SHOWN_MAX).collect::<String>(),
            args_digest(args)
        )
    } else {
        text
    }
}

/// Most characters of arguments shown to a person.
pub const SHOWN_MAX: usize = 2000;

/// `text` with every character that does not show as itself escaped (`\u202e`, `\u{e0041}`).
fn escape_hidden(text: &str) -> String {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let hidden = matches!(
            get_general_category(c),
            G::Control
                | G::Format
                | G::LineSeparator
                | G::ParagraphSeparator
                | G::PrivateUse
                | G::Surrogate
                | G::Unassigned
        );
        if !hidden {
            out.push(c);
        } else if (c as u32) <= 0xffff {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    out
}

/// SHA-256 of the arguments' JSON (validated arguments keep their order: the schema's).
fn args_digest(args: &JsonObject) -> String {
    let canonical = canonical(&Value::Object(args.clone()));
    let d = sha2::Sha256::digest(canonical.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// JSON with object keys sorted (so the digest does not depend on the client's key order).
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(canonical).collect::<Vec<_>>().join(",")
            )
        }
        other => other.to_string(),
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_compared_after_dots_are_resolved() {
        assert!(under("/workspace/drafts/a.txt", "/workspace/drafts/"));
        assert!(!under(
            "/workspace/drafts/../secrets/a",
            "/workspace/drafts/"
        ));
        assert!(!under("/workspace/drafts", "/workspace/drafts/"));
        assert!(!under("/workspace/draftsX/a", "/workspace/drafts"));
        assert!(!under("/../../workspace/drafts/a", "/workspace/drafts/"));
        assert!(under("/workspace/./drafts//x", "/workspace/drafts"));
    }

    #[test]
    fn the_digest_ignores_key_order_and_sees_any_change() {
        let a: JsonObject = serde_json::from_str(r#"{"path":"/workspace/a","n":1}"#).unwrap();
        let b: JsonObject = serde_json::from_str(r#"{"n":1,"path":"/workspace/a"}"#).unwrap();
        let c: JsonObject = serde_json::from_str(r#"{"n":1,"path":"/workspace/b"}"#).unwrap();
        assert_eq!(args_digest(&a), args_digest(&b));
        assert_ne!(args_digest(&a), args_digest(&c));
    }

    #[test]
    fn a_claim_is_held_equal_in_a_list_or_as_a_word() {
        let c = TokenClaims(Arc::new(
            serde_json::from_str(
                r#"{"roles":["x","approver"],"scope":"a approve b","r":"approver"}"#,
            )
            .unwrap(),
        ));
        assert!(holds_claim(Some(&c), "roles", "approver"));
        assert!(holds_claim(Some(&c), "scope", "approve"));
        assert!(holds_claim(Some(&c), "r", "approver"));
        assert!(!holds_claim(Some(&c), "roles", "approve"));
        assert!(!holds_claim(None, "roles", "approver"));
    }
}

#[cfg(test)]
mod shown_tests {
    use super::*;

    #[test]
    fn a_person_sees_bidi_and_invisible_characters_escaped_in_canonical_order() {
        let args: JsonObject = serde_json::from_value(serde_json::json!({
            "path": "/workspace/report\u{202e}fdp.exe",
            "content": "a\u{200b}b\u{2066}c\u{e0041}\nd",
        }))
        .unwrap();
        let shown = shown_args(&args);
        assert_eq!(
            shown,
            r#"{"content":"a\u200bb\u2066c\u{e0041}\nd","path":"/workspace/report\u202efdp.exe"}"#
        );
        assert!(!shown.contains('\u{202e}') && !shown.contains('\u{200b}'));
        let long: JsonObject =
            serde_json::from_value(serde_json::json!({ "text": "x".repeat(3000) })).unwrap();
        let shown = shown_args(&long);
        assert!(shown.contains("characters in all; the approval is bound to every one: SHA-256 "));
        assert!(shown.ends_with(&format!("{})", args_digest(&long))));
    }
}
