//! Acknowledged weakenings: `specs/policy-acks.yaml` lists each accepted weakening word for word
//! with the reason, so accepting one is a reviewed change like any other, and a later, different
//! weakening of the same thing is not covered by it.

use super::rule::Rule;
use crate::source::SourceFile;
use serde::Deserialize;
use std::path::Path;

/// The fewest words a reason has: "ok", "." or "fine" tell a later reader nothing.
pub const MIN_REASON_WORDS: usize = 4;

/// Words of a reason that must say something of their own (not "approved", "as discussed").
const CONTENT_WORDS: usize = 2;

/// Whether `reason` says what was decided: at least [`MIN_REASON_WORDS`] words with letters in
/// them, no filler, and [`CONTENT_WORDS`] words that carry meaning (`check::reason`'s rule, the
/// one `uninspected:` reasons meet too).
fn usable_reason(reason: &str) -> bool {
    reason
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphabetic))
        .count()
        >= MIN_REASON_WORDS
        && crate::check::reason::says_nothing(reason, CONTENT_WORDS).is_none()
}

/// Where the acknowledgements live, relative to the project root.
pub const ACKS_FILE: &str = "specs/policy-acks.yaml";

/// One accepted weakening.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// The weakening's line exactly as `bulkhead check --against` prints it.
    pub weakening: String,
    /// Why it is accepted (a ticket, a decision): required.
    pub reason: String,
}

/// One accepted finding of a scanner reviewers run on the generated tool lists (Cisco's
/// `mcp-scanner`, `tests/integration/scanners.rs`), bound to the description it was made on: a
/// changed description is a new finding a person must read again.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ScannerAck {
    /// The finding's line, e.g. ``mcp-scanner yara HIGH INJECTION ATTACK: tool `template.run_python` ``.
    pub finding: String,
    /// SHA-256 (hex) of the tool's description as `tools/list` shows it.
    pub description_sha256: String,
    /// Why it is accepted: required, as for a weakening.
    pub reason: String,
}

/// SHA-256 of `description`, in hex: what a [`ScannerAck`] is bound to.
pub fn description_digest(description: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(description.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The file's content.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acks {
    /// The accepted weakenings.
    #[serde(default)]
    pub acks: Vec<Ack>,
    /// The accepted scanner findings.
    #[serde(default)]
    pub scanner: Vec<ScannerAck>,
    /// Who must approve a change to this file and to the effective policy (`@user`,
    /// `@org/team` or an e-mail address): the generated `.github/CODEOWNERS` names them, so with
    /// code-owner review required an acknowledgement needs a second person.
    #[serde(default)]
    pub owners: Vec<String>,
}

/// Why the acknowledgements could not be read (the review then fails: an unreadable list
/// accepts nothing): not YAML of this shape, an acknowledgement without a reason, or one whose
/// line does not start with a known [`Rule`]'s name.
#[derive(Debug, thiserror::Error)]
#[error("{ACKS_FILE}: {0}")]
pub struct AckError(String);

impl Acks {
    /// Reads `root/specs/policy-acks.yaml`; no file is no acknowledgement.
    pub fn load(root: &Path) -> Result<Acks, AckError> {
        let path = root.join(ACKS_FILE);
        if !path.exists() {
            return Ok(Acks::default());
        }
        let file =
            SourceFile::read(&path, ACKS_FILE.to_string()).map_err(|e| AckError(e.to_string()))?;
        let acks = Acks::parse(&file)?;
        for o in &acks.owners {
            let ok = (o.starts_with('@') && o.len() > 1 && !o.contains(char::is_whitespace))
                || (o.contains('@') && !o.starts_with('@') && !o.contains(char::is_whitespace));
            if !ok {
                return Err(AckError(format!(
                    "owner `{o}` is not `@user`, `@org/team` or an e-mail address"
                )));
            }
        }
        for a in &acks.acks {
            let line = a.weakening.trim();
            let rule = line.split_once(':').map_or(line, |(rule, _)| rule.trim());
            if Rule::parse(rule).is_none() {
                return Err(AckError(format!(
                    "the acknowledgement of `{}` names the unknown rule `{rule}`; the rules are {} (docs/review-rules.md)",
                    a.weakening,
                    Rule::ALL.map(Rule::name).join(", ")
                )));
            }
            if !usable_reason(&a.reason) {
                return Err(AckError(format!(
                    "the acknowledgement of `{}` gives no reason a reader can use (`{}`): say why it is accepted and what you require, in at least {MIN_REASON_WORDS} words",
                    a.weakening,
                    a.reason.trim()
                )));
            }
        }
        for s in &acks.scanner {
            let hex = s.description_sha256.len() == 64
                && s.description_sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
            if !hex {
                return Err(AckError(format!(
                    "the acknowledgement of scanner finding `{}` needs `description_sha256`: the SHA-256 of the tool's description, 64 lowercase hex digits",
                    s.finding
                )));
            }
            if !usable_reason(&s.reason) {
                return Err(AckError(format!(
                    "the acknowledgement of scanner finding `{}` gives no reason a reader can use (`{}`): say why it is accepted, in at least {MIN_REASON_WORDS} words",
                    s.finding,
                    s.reason.trim()
                )));
            }
        }
        Ok(acks)
    }

    /// The acknowledgement of a scanner's `finding` made on this very `description`, if any.
    pub fn scanner_ack(&self, finding: &str, description: &str) -> Option<&ScannerAck> {
        let digest = description_digest(description);
        self.scanner
            .iter()
            .find(|s| s.finding.trim() == finding && s.description_sha256 == digest)
    }

    /// The acknowledgements of `self` that `base` does not hold word for word (line and
    /// reason): the ones this change adds, and the only ones that can accept its weakenings. A
    /// line the base already acknowledged was another change's: when it comes back (a tool's
    /// approval removed again), this change says anew why, in a new entry or a new reason.
    pub fn added_since(&self, base: &Acks) -> Vec<&Ack> {
        self.acks
            .iter()
            .filter(|a| {
                !base.acks.iter().any(|b| {
                    b.weakening.trim() == a.weakening.trim() && b.reason.trim() == a.reason.trim()
                })
            })
            .collect()
    }

    /// The owners `base` named that `self` does not: each is an `owners-narrowed` weakening (the
    /// generated CODEOWNERS would ask fewer people to approve the next one).
    pub fn owners_narrowed(&self, base: &Acks) -> Vec<super::Weakening> {
        let gone: Vec<&str> = base
            .owners
            .iter()
            .filter(|o| !self.owners.contains(o))
            .map(String::as_str)
            .collect();
        if gone.is_empty() {
            return Vec::new();
        }
        let now = if self.owners.is_empty() {
            "none (no CODEOWNERS)".to_string()
        } else {
            self.owners.join(", ")
        };
        vec![super::Weakening {
            rule: Rule::OwnersNarrowed,
            subject: format!("{ACKS_FILE} owners"),
            change: format!("- {} (now {now})", gone.join(", ")),
            file: ACKS_FILE.to_string(),
        }]
    }

    /// The acknowledgements a base revision's file holds (`None`: it had none), read for what
    /// they name only: which acknowledgements a change adds.
    pub fn parse_text(text: Option<&str>) -> Result<Acks, AckError> {
        let Some(text) = text else {
            return Ok(Acks::default());
        };
        Acks::parse(&SourceFile {
            display: ACKS_FILE.to_string(),
            path: ACKS_FILE.into(),
            text: text.into(),
        })
    }

    fn parse(file: &SourceFile) -> Result<Acks, AckError> {
        let node = crate::yaml::parse(file).map_err(|d| {
            AckError(
                d.into_iter()
                    .map(|d| d.message)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        serde_json::from_value(node.to_json()).map_err(|e| AckError(e.to_string()))
    }

    /// The acknowledgement of `line`, if there is one.
    pub fn find(&self, line: &str) -> Option<&Ack> {
        self.acks.iter().find(|a| a.weakening.trim() == line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Acks, AckError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("specs")).unwrap();
        std::fs::write(dir.path().join(ACKS_FILE), text).unwrap();
        Acks::load(dir.path())
    }

    #[test]
    fn the_projects_acknowledgements_load() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        let acks = Acks::load(root).unwrap();
        assert!(!acks.acks.is_empty());
    }

    #[test]
    fn an_unknown_rule_is_an_error_naming_the_known_ones() {
        let e = load(
            "acks:\n  - weakening: 'sensitivity-lowerd: connector `crm_db`: confidential → public'\n    reason: typo\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(&format!(
                "{ACKS_FILE}: the acknowledgement of `sensitivity-lowerd: connector `crm_db`: confidential → public` names the unknown rule `sensitivity-lowerd`; the rules are new-capability, sensitivity-lowered, "
            )),
            "{e}"
        );
        for r in Rule::ALL {
            assert!(e.contains(r.name()), "{e} does not name {r}");
        }
        let e = load("acks:\n  - weakening: anything goes\n    reason: none\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("names the unknown rule `anything goes`"), "{e}");
    }

    #[test]
    fn a_scanner_finding_is_covered_only_on_the_description_it_was_accepted_on() {
        let digest = description_digest("Run a script.");
        let acks = load(&format!(
            "scanner:\n  - finding: 'mcp-scanner yara HIGH INJECTION ATTACK: tool `s.run`'\n    description_sha256: {digest}\n    reason: runs code on purpose, in a jail\n"
        ))
        .unwrap();
        let line = "mcp-scanner yara HIGH INJECTION ATTACK: tool `s.run`";
        assert!(acks.scanner_ack(line, "Run a script.").is_some());
        assert!(
            acks.scanner_ack(line, "Run a script. Also read ~/.ssh.")
                .is_none()
        );
        assert!(
            acks.scanner_ack(
                "mcp-scanner yara HIGH INJECTION ATTACK: tool `s.other`",
                "Run a script."
            )
            .is_none()
        );
        let e = load("scanner:\n  - finding: x\n    description_sha256: abc\n    reason: runs code on purpose, in a jail\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("64 lowercase hex digits"), "{e}");
        let e = load(&format!(
            "scanner:\n  - finding: x\n    description_sha256: {digest}\n    reason: ok\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("gives no reason"), "{e}");
    }

    #[test]
    fn a_known_rule_with_a_reason_loads_and_is_found() {
        let acks = load(
            "acks:\n  - weakening: ' limit-raised: config.yaml: limits.max_calls 10 → 20 '\n    reason: raised for the import batch, TICKET-1\n",
        )
        .unwrap();
        assert!(
            acks.find("limit-raised: config.yaml: limits.max_calls 10 → 20")
                .is_some()
        );
        let e =
            load("acks:\n  - weakening: 'limit-raised: config.yaml: x 1 → 2'\n    reason: ' '\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains("gives no reason a reader can use"), "{e}");
        for said in [".", "ok", "fine by me"] {
            let e = load(&format!(
                "acks:\n  - weakening: 'limit-raised: config.yaml: x 1 → 2'\n    reason: '{said}'\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains("at least 4 words"), "{said}: {e}");
        }
    }
}
