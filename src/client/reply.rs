//! What a tool call returned, read from the wire: text, structured content, the session's level
//! from `_meta`, and whether an `isError` result is a `[FATAL] ` one or a mode refusal.

use crate::errors::FATAL_PREFIX;
use crate::policy::{NetworkMode, Sensitivity};
use crate::serve::handler::META_SENSITIVITY;
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
            .and_then(|m| m.0.get(META_SENSITIVITY))
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
    /// instance it names.
    pub fn mode_refusal(&self) -> Option<ModeRefusal> {
        let message = self.fatal_message()?;
        // Name the most isolated instance mentioned: a refusal never asks for less isolation.
        if message.contains("url_isolated") {
            Some(ModeRefusal(NetworkMode::None))
        } else if message.contains("url_proxied") {
            Some(ModeRefusal(NetworkMode::Proxied))
        } else {
            None
        }
    }
}

/// A mode refusal: the instance wants the call sent to an instance of at least this mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeRefusal(pub NetworkMode);

impl ModeRefusal {
    /// The least level that needs the named mode (what the refusal tells about the session).
    pub fn level(self) -> Sensitivity {
        match self.0 {
            NetworkMode::Full => Sensitivity::Public,
            NetworkMode::Proxied => Sensitivity::Confidential,
            NetworkMode::None => Sensitivity::Secret,
        }
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
            m.insert(META_SENSITIVITY.into(), Value::from(l));
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
    fn mode_refusals_name_the_instance() {
        let r = |t: &str| {
            ToolReply::from_result(result(true, t, None), NetworkMode::Full).mode_refusal()
        };
        assert_eq!(
            r("[FATAL] cannot serve confidential data; use the `proxied` instance (url_proxied)"),
            Some(ModeRefusal(NetworkMode::Proxied))
        );
        assert_eq!(
            r("[FATAL] use the `none` instance (url_isolated)"),
            Some(ModeRefusal(NetworkMode::None))
        );
        assert_eq!(r("url_proxied without prefix"), None);
        assert_eq!(ModeRefusal(NetworkMode::None).level(), Sensitivity::Secret);
    }
}
