//! Acknowledged weakenings: `specs/policy-acks.yaml` lists each accepted weakening word for word
//! with the reason, so accepting one is a reviewed change like any other, and a later, different
//! weakening of the same thing is not covered by it.

use crate::source::SourceFile;
use serde::Deserialize;
use std::path::Path;

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

/// The file's content.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acks {
    /// The accepted weakenings.
    #[serde(default)]
    pub acks: Vec<Ack>,
}

/// Why the acknowledgements could not be read (the review then fails: an unreadable list
/// accepts nothing).
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
        let node = crate::yaml::parse(&file).map_err(|d| {
            AckError(
                d.into_iter()
                    .map(|d| d.message)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        let acks: Acks =
            serde_json::from_value(node.to_json()).map_err(|e| AckError(e.to_string()))?;
        if let Some(a) = acks.acks.iter().find(|a| a.reason.trim().is_empty()) {
            return Err(AckError(format!(
                "the acknowledgement of `{}` gives no reason",
                a.weakening
            )));
        }
        Ok(acks)
    }

    /// The acknowledgement of `line`, if there is one.
    pub fn find(&self, line: &str) -> Option<&Ack> {
        self.acks.iter().find(|a| a.weakening.trim() == line)
    }
}
