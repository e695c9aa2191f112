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

/// Checks the reason at `pointer`.
pub(crate) fn check<T>(l: &Loaded<T>, pointer: &str, reason: &str, errors: &mut Vec<Diagnostic>) {
    let said = reason.trim();
    let bare = said
        .trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace())
        .to_lowercase();
    let filler = FILLER.contains(&bare.as_str());
    if filler || said.chars().count() < MIN_LEN {
        errors.push(
            l.error_at_value(pointer, "this reason does not say what was decided")
                .label(if filler { "a word that fills the field" } else { "too short to say why" })
                .help(format!(
                    "write, in at least {MIN_LEN} characters, what this tool returns or sends and why reading it for credentials is not needed (e.g. \"returns signed download URLs by design; the bucket is public\")"
                )),
        );
    }
}
