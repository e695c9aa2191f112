//! One audit record: who called what, at which levels, with which outcome; bounded in size
//! (arguments are summarised, never copied; the detail is cut).

use crate::identity::Identity;
use crate::policy::{Permission, Sensitivity};
use serde::{Deserialize, Serialize};

/// Most argument names listed in a record.
const MAX_ARG_KEYS: usize = 16;
/// Longest argument or tool name kept in a record.
const MAX_NAME: usize = 64;

/// Which half of a call a record describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Written and made durable before a `connect` or escalating call runs; no intent, no call.
    Intent,
    /// What happened. An intent without an outcome means the process died during the call.
    Outcome,
    /// A person's approval of the call (who answered, how, when), durable before it runs.
    Approval,
}

/// What the runtime decided for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The call ran and the session's level did not change.
    Allowed,
    /// The call was refused by policy.
    Blocked,
    /// The call ran and raised the session's level.
    Escalated,
    /// The call failed (bad arguments, tool error, state unavailable).
    Error,
    /// The caller cancelled the call before it finished.
    Cancelled,
    /// The call waits for a person's approval (a 2026-07-28 `input_required` answer); it runs
    /// when the client repeats it with the answer, as a call of its own.
    AwaitingApproval,
}

impl Outcome {
    /// The lowercase name, as in the audit record.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Blocked => "blocked",
            Outcome::Escalated => "escalated",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::AwaitingApproval => "awaiting_approval",
        }
    }
}

/// The shape of a call's arguments, never their values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgsSummary {
    /// Size of the arguments as JSON, in bytes.
    pub bytes: usize,
    /// Argument names (the first 16, each cut to 64 bytes).
    pub keys: Vec<String>,
    /// How many names were left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_keys: usize,
    /// Parameters set from the caller's token (`from_claim`), with their values: they come from
    /// the verified token, not the model (a database role, the user's email), and say on whose
    /// behalf the call ran. Each value is cut to 64 bytes.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub bound: std::collections::BTreeMap<String, String>,
}

/// Counts what is written, keeping nothing.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl ArgsSummary {
    /// Summarises an argument object.
    pub fn of(args: Option<&serde_json::Map<String, serde_json::Value>>) -> ArgsSummary {
        let Some(args) = args else {
            return ArgsSummary::default();
        };
        let mut counter = ByteCount(0);
        let bytes = serde_json::to_writer(&mut counter, args).map_or(0, |()| counter.0);
        let keys: Vec<String> = args
            .keys()
            .take(MAX_ARG_KEYS)
            .map(|k| cut(k, MAX_NAME))
            .collect();
        ArgsSummary {
            bytes,
            more_keys: args.len() - keys.len(),
            keys,
            bound: Default::default(),
        }
    }
}

/// One line of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When, RFC 3339 UTC.
    pub ts: String,
    /// The call's correlation id (shared by its intent and outcome, the log line and the span).
    pub call: String,
    /// Intent or outcome.
    pub phase: Phase,
    /// The caller's user id.
    pub user: String,
    /// The caller's session id.
    pub session: String,
    /// The tool's name (cut to 64 bytes: an unknown tool's name comes from the client).
    pub tool: String,
    /// The tool's declared permission (absent for an unknown tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<Permission>,
    /// The session's level before the call.
    pub level_before: Sensitivity,
    /// The session's level after the call (for an intent: the level it will run at).
    pub level_after: Sensitivity,
    /// The decision (absent in an intent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The arguments' shape.
    #[serde(default)]
    pub args: ArgsSummary,
    /// Why, when there is more to say (the block reason, the error), cut to fit the record limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl AuditRecord {
    /// A record stamped with the current time.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        call: &str,
        phase: Phase,
        id: &Identity,
        tool: &str,
        permission: Option<Permission>,
        levels: (Sensitivity, Sensitivity),
        outcome: Option<Outcome>,
        args: ArgsSummary,
        detail: Option<String>,
    ) -> AuditRecord {
        AuditRecord {
            ts: crate::clock::now_rfc3339(),
            call: call.to_owned(),
            phase,
            user: id.user().to_owned(),
            session: id.session().to_owned(),
            tool: cut(tool, MAX_NAME),
            permission,
            level_before: levels.0,
            level_after: levels.1,
            outcome,
            args,
            detail,
        }
    }

    /// The record as one JSON line of at most `max` bytes (the detail is cut to fit).
    pub fn to_line(&self, max: usize) -> Result<Vec<u8>, serde_json::Error> {
        let mut line = serde_json::to_vec(self)?;
        if line.len() + 1 > max
            && let Some(detail) = &self.detail
        {
            let over = line.len() + 1 - max;
            let keep = detail.len().saturating_sub(over + 40);
            let mut cut_rec = self.clone();
            cut_rec.detail = Some(format!(
                "{}… ({} bytes cut)",
                cut(detail, keep),
                detail.len() - cut(detail, keep).len()
            ));
            line = serde_json::to_vec(&cut_rec)?;
        }
        line.push(b'\n');
        Ok(line)
    }
}

/// `s` cut to at most `max` bytes on a character boundary.
/// `s` cut to the longest name kept in a record.
pub(crate) fn cut_name(s: &str) -> String {
    cut(s, MAX_NAME)
}

pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}
