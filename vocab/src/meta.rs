//! The `_meta` keys Bulkhead puts on tools and results: the structured channel the client
//! reads (never the message text, which a tool or an upstream server words as it likes).

/// On a tool: its declared permission.
pub const PERMISSION: &str = "bulkhead/permission";
/// On a tool: its context preset.
pub const CONTEXT: &str = "bulkhead/context";
/// On a tool: its declared sensitivity. On a result: the session's level after the call.
pub const SENSITIVITY: &str = "bulkhead/sensitivity";
/// On a result: the least isolated mode that may serve the session now.
pub const REQUIRED_MODE: &str = "bulkhead/required_mode";
/// On a result: the trust-annotations extension (SEP-1913's draft): `sensitiveHint` (`low`,
/// `medium`, `high`) and `privateHint`, from the session's level after the call.
pub const TRUST_ANNOTATIONS: &str = "io.modelcontextprotocol/trust-annotations";
/// On a result: the rules whose credentials were redacted from it (they raised the session).
pub const REDACTED: &str = "bulkhead/redacted";
/// On a result: where the full output was saved when the preset truncated it.
pub const SAVED_TO: &str = "bulkhead/saved_to";
