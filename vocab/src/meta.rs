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
/// On a result: where the full output was saved when the preset truncated it.
pub const SAVED_TO: &str = "bulkhead/saved_to";
