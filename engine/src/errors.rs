//! Tool errors in three tiers: retryable (the model can fix it), fatal (`[FATAL] `), and bugs.

use std::fmt;

/// The prefix a strict client recognises as "abort the run".
pub const FATAL_PREFIX: &str = "[FATAL] ";

/// Why a tool call failed. The tier decides what the client does next.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// Bad input the model can correct: `isError` with a plain message.
    #[error("{0}")]
    Retryable(String),
    /// Infrastructure down or policy that will never allow it: `isError` with `[FATAL] `.
    #[error("{FATAL_PREFIX}{0}")]
    Fatal(String),
    /// A defect in tool code (a panic or an unexpected state): logged, `isError` without prefix.
    #[error("internal error in tool: {0}")]
    Bug(String),
}

impl ToolError {
    /// A retryable error with a message for the model.
    pub fn retry(msg: impl fmt::Display) -> Self {
        ToolError::Retryable(msg.to_string())
    }

    /// A fatal error; the message must not carry the prefix itself.
    pub fn fatal(msg: impl fmt::Display) -> Self {
        ToolError::Fatal(msg.to_string())
    }

    /// A defect in tool code.
    pub fn bug(msg: impl fmt::Display) -> Self {
        ToolError::Bug(msg.to_string())
    }

    /// The message without the tier's prefix.
    pub fn message(&self) -> &str {
        match self {
            ToolError::Retryable(m) | ToolError::Fatal(m) | ToolError::Bug(m) => m,
        }
    }

    /// Whether the client should abort the run.
    pub fn is_fatal(&self) -> bool {
        matches!(self, ToolError::Fatal(_))
    }

    /// The text sent to the client in the `isError` result.
    pub fn wire_text(&self) -> String {
        self.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_render_for_the_wire() {
        assert_eq!(
            ToolError::retry("query is empty").wire_text(),
            "query is empty"
        );
        assert_eq!(ToolError::fatal("db down").wire_text(), "[FATAL] db down");
        assert!(!ToolError::bug("oops").wire_text().starts_with(FATAL_PREFIX));
        assert!(ToolError::fatal("x").is_fatal());
    }
}
