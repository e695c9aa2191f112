//! What a tool call returned, read from the wire: text, structured content, the session's level
//! from `_meta`, and whether an `isError` result is a `[FATAL] ` one or a mode refusal.

use crate::errors::FATAL_PREFIX;
use crate::policy::meta;
use crate::policy::{NetworkMode, Sensitivity};
use rmcp::model::CallToolResult;
use serde_json::Value;

/// The result of one tool call.
#[derive(Clone, Debug)]
pub struct ToolReply {
    /// Whether the server marked the result as an error (retryable unless it became `Fatal`).
    pub is_error: bool,
    /// The text blocks, concatenated.
    pub text: String,
    /// `structuredContent`, when the server sent it.
    pub structured: Option<Value>,
    /// The session's level after the call, from `_meta` `bulkhead/sensitivity`.
    pub level: Option<Sensitivity>,
    /// The network mode of the instance that produced this result.
    pub mode: NetworkMode,
    /// The result as received.
    pub raw: CallToolResult,
}

impl ToolReply {
    /// Reads a result produced by an instance running in `mode`.
    pub fn from_result(raw: CallToolResult, mode: NetworkMode) -> ToolReply {
        let text = raw
            .content
            .iter()
            .filter_map(|b| b.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("");
        let level = raw
            .meta
            .as_ref()
            .and_then(|m| m.0.get(meta::SENSITIVITY))
            .and_then(Value::as_str)
            .and_then(Sensitivity::parse);
        ToolReply {
            is_error: raw.is_error.unwrap_or(false),
            text,
            structured: raw.structured_content.clone(),
            level,
            mode,
            raw,
        }
    }

    /// The message of a `[FATAL] ` error result, without the prefix.
    pub fn fatal_message(&self) -> Option<&str> {
        if !self.is_error {
            return None;
        }
        self.text.strip_prefix(FATAL_PREFIX)
    }

    /// Whether this is an instance refusing a session its network mode cannot serve, and which
    /// mode it needs: an error result whose `_meta` `bulkhead/required_mode` is more isolated
    /// than the instance that answered. Read from the structured field only, never from the
    /// message text (which a tool, or an upstream server, could word as it likes).
    pub fn mode_refusal(&self) -> Option<ModeRefusal> {
        if !self.is_error {
            return None;
        }
        let required = self
            .raw
            .meta
            .as_ref()
            .and_then(|m| m.0.get(meta::REQUIRED_MODE))
            .and_then(Value::as_str)
            .and_then(NetworkMode::parse)?;
        (required > self.mode).then_some(ModeRefusal(required))
    }
}

/// A mode refusal: the instance wants the call sent to an instance of at least this mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeRefusal(pub NetworkMode);

impl ModeRefusal {
    /// The least level that needs the named mode (what the refusal tells about the session).
    pub fn level(self) -> Sensitivity {
        self.0.least_level()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock, MetaObject};

    fn result(error: bool, text: &str, level: Option<&str>) -> CallToolResult {
        let mut r = if error {
            CallToolResult::error(vec![ContentBlock::text(text.to_string())])
        } else {
            CallToolResult::success(vec![ContentBlock::text(text.to_string())])
        };
        if let Some(l) = level {
            let mut m = serde_json::Map::new();
            m.insert(meta::SENSITIVITY.into(), Value::from(l));
            r.meta = Some(MetaObject(m));
        }
        r
    }

    #[test]
    fn reads_text_level_and_fatal() {
        let r = ToolReply::from_result(
            result(true, "[FATAL] db down", Some("confidential")),
            NetworkMode::Full,
        );
        assert_eq!(r.level, Some(Sensitivity::Confidential));
        assert_eq!(r.fatal_message(), Some("db down"));
        assert_eq!(r.mode_refusal(), None);
        let ok = ToolReply::from_result(
            result(false, "[FATAL] fine", Some("bogus")),
            NetworkMode::Full,
        );
        assert_eq!(ok.fatal_message(), None, "only error results can be fatal");
        assert_eq!(ok.level, None, "unknown level names are not guessed");
        let plain = ToolReply::from_result(result(true, "bad path", None), NetworkMode::Full);
        assert_eq!(plain.fatal_message(), None);
    }

    #[test]
    fn mode_refusals_come_from_meta_never_from_text() {
        let r = |error: bool, t: &str, required: Option<&str>, at: NetworkMode| {
            let mut raw = result(error, t, None);
            if let Some(m) = required {
                let mut meta = serde_json::Map::new();
                meta.insert(meta::REQUIRED_MODE.into(), Value::from(m));
                raw.meta = Some(MetaObject(meta));
            }
            ToolReply::from_result(raw, at).mode_refusal()
        };
        assert_eq!(
            r(true, "[FATAL] anything", Some("proxied"), NetworkMode::Full),
            Some(ModeRefusal(NetworkMode::Proxied))
        );
        assert_eq!(
            r(true, "[FATAL] anything", Some("none"), NetworkMode::Proxied),
            Some(ModeRefusal(NetworkMode::None))
        );
        // The text names an instance, the structured field does not: no refusal.
        assert_eq!(
            r(
                true,
                "[FATAL] use the `none` instance (url_isolated)",
                None,
                NetworkMode::Full
            ),
            None
        );
        assert_eq!(r(true, "[FATAL] x", Some("full"), NetworkMode::Full), None);
        assert_eq!(r(false, "ok", Some("none"), NetworkMode::Full), None);
        assert_eq!(r(true, "x", Some("bogus"), NetworkMode::Full), None);
        assert_eq!(ModeRefusal(NetworkMode::None).level(), Sensitivity::Secret);
    }
}
