//! A reason a spec gives for turning a protection off (`uninspected:`): it must say what was
//! decided, so a reviewer reads a decision, not a word that fills the field.

use super::Loaded;
use crate::diag::Diagnostic;

/// Words that fill a reason without saying anything (compared without case or punctuation).
const FILLER: &[&str] = &[
    "n/a",
    "na",
    "none",
    "no",
    "yes",
    "ok",
    "okay",
    "fine",
    "todo",
    "tbd",
    "fixme",
    "wip",
    "test",
    "testing",
    "needed",
    "required",
    "necessary",
    "because",
    "reason",
    "no reason",
    "safe",
    "trusted",
    "it is fine",
    "not needed",
    "off",
    "disabled",
    "x",
    "-",
    ".",
];

/// The fewest characters a reason has (a short sentence).
const MIN_LEN: usize = 20;

/// Words that say nothing of what was decided (an acknowledgement's reason needs two others).
const EMPTY_WORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "this",
    "that",
    "it",
    "is",
    "was",
    "be",
    "been",
    "are",
    "and",
    "or",
    "to",
    "of",
    "for",
    "by",
    "with",
    "as",
    "per",
    "on",
    "in",
    "we",
    "i",
    "me",
    "us",
    "our",
    "my",
    "ok",
    "okay",
    "fine",
    "good",
    "lgtm",
    "yes",
    "approved",
    "approve",
    "accepted",
    "accept",
    "acknowledged",
    "ack",
    "agreed",
    "discussed",
    "reviewed",
    "review",
    "reviewer",
    "team",
    "needed",
    "need",
    "needs",
    "required",
    "necessary",
    "requested",
    "request",
    "see",
    "ticket",
    "change",
    "changes",
    "changed",
    "weakening",
    "because",
    "reason",
    "todo",
    "tbd",
    "wip",
    "temporary",
    "temp",
    "later",
    "fix",
    "fixed",
    "done",
    "safe",
    "trusted",
    "intended",
    "intentional",
    "expected",
    "known",
    "issue",
    "pr",
    "mr",
    "commit",
    "so",
    "just",
    "now",
];

/// Whether `reason` fills the field instead of saying what was decided: a filler phrase, fewer
/// than [`MIN_LEN`] characters, or (`content_words`) fewer than that many words outside
/// [`EMPTY_WORDS`] (\"approved as discussed with the team\" says nothing). `Some` names why.
pub(crate) fn says_nothing(reason: &str, content_words: usize) -> Option<&'static str> {
    let said = reason.trim();
    let bare = said
        .trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace())
        .to_lowercase();
    if FILLER.contains(&bare.as_str()) {
        return Some("a word that fills the field");
    }
    if said.chars().count() < MIN_LEN {
        return Some("too short to say why");
    }
    let content = bare
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '.' | '(' | ')'))
        .filter(|w| w.chars().filter(|c| c.is_alphanumeric()).count() >= 2)
        .filter(|w| !EMPTY_WORDS.contains(w))
        .count();
    (content < content_words).then_some("words that say nothing of what was decided")
}

/// Checks the reason at `pointer`.
pub(crate) fn check<T>(l: &Loaded<T>, pointer: &str, reason: &str, errors: &mut Vec<Diagnostic>) {
    if let Some(why) = says_nothing(reason, 0) {
        errors.push(
            l.error_at_value(pointer, "this reason does not say what was decided")
                .label(why)
                .help(format!(
                    "write, in at least {MIN_LEN} characters, what this tool returns or sends and why reading it for credentials is not needed (e.g. \"returns signed download URLs by design; the bucket is public\")"
                )),
        );
    }
}
