//! What the protocol version a request names implies, read from rmcp's list of versions (the
//! one source: no version string is written anywhere else in `serve`).

use http::HeaderValue;
use rmcp::model::ProtocolVersion;

/// The known version named by an `MCP-Protocol-Version` header value, if any.
fn known(value: &HeaderValue) -> Option<&'static ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .find(|k| k.as_str().as_bytes() == value.as_bytes())
}

/// Whether a request with this `MCP-Protocol-Version` (absent: a client from before the
/// header) speaks a version that opens transport sessions with `initialize`.
pub fn has_handshake(header: Option<&HeaderValue>) -> bool {
    header.is_none_or(|v| known(v).is_some_and(ProtocolVersion::has_initialize))
}

/// Whether a request with this `MCP-Protocol-Version` speaks a known version without transport
/// sessions (2026-07-28 and later): it never creates one.
pub fn is_sessionless(header: Option<&HeaderValue>) -> bool {
    header.and_then(known).is_some_and(|k| !k.has_initialize())
}
