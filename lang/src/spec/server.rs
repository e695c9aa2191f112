//! `specs/servers/*.yaml`: an MCP server and its tools.

use super::{ParamSpec, Permission, Sensitivity};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An MCP server: its name, instructions for the model, and tools.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Server name: lowercase letters, digits and `_`; also the Rust module name.
    pub name: String,
    /// Instructions sent to the client at initialisation.
    pub instructions: String,
    /// Context presets this server defines beyond `default`, `sql_query` and `log_search`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub context_presets: BTreeMap<String, PresetSpec>,
    /// The tools, by MCP tool name.
    pub tools: BTreeMap<String, ToolSpec>,
    /// Resources the server offers (`resources/list`, `resources/templates/list`,
    /// `resources/read`): each read goes through the same wrapper as a tool call.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, ResourceSpec>,
    /// Prompts the server offers (`prompts/list`, `prompts/get`): templated messages.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, PromptSpec>,
}

/// A resource: a fixed URI (`docs://guide`) or a URI template (`records://{id}`) whose variables
/// are the arguments of a connector operation. Reading it raises the session to its sensitivity
/// and is audited, like a tool call with permission `read`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    /// The URI, or a URI template with `{variable}` parts.
    pub uri: String,
    /// What the resource holds, for the model.
    pub description: String,
    /// The contents' media type (e.g. `application/json`, `text/plain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// `public | internal | confidential | secret`: required, no default.
    pub sensitivity: Sensitivity,
    /// Context preset of the contents (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// `connector.operation` producing the contents; template variables are its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<String>,
    /// Fixed contents (instead of `uses`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A prompt: messages with `{argument}` placeholders filled from the caller's arguments.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    /// What the prompt is for.
    pub description: String,
    /// Its arguments, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub arguments: BTreeMap<String, PromptArgSpec>,
    /// The messages, in order.
    pub messages: Vec<PromptMessageSpec>,
}

/// One prompt argument.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptArgSpec {
    /// What it means.
    pub description: String,
    /// Whether the caller must give it (default true).
    #[serde(default = "yes")]
    pub required: bool,
}

fn yes() -> bool {
    true
}

/// One prompt message.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptMessageSpec {
    /// `user` or `assistant`.
    pub role: PromptRole,
    /// The text, with `{argument}` placeholders.
    pub text: String,
}

/// Who says a prompt message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PromptRole {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

/// A tool. `permission`, `context` and `sensitivity` are required: there are no defaults.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// A human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model.
    pub description: String,
    /// What the tool may do: `read`, `write` or `connect`.
    pub permission: Permission,
    /// The context preset that bounds what the result may put into the model's context.
    pub context: String,
    /// How sensitive what the tool returns is; calling it raises the session to at least this.
    pub sensitivity: Sensitivity,
    /// `connector.operation` this tool wraps (its parameters come from the operation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<String>,
    /// `rust`: the tool is implemented by a handler trait method the user writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<HandlerKind>,
    /// Parameters (only for `handler: rust` tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<BTreeMap<String, ParamSpec>>,
    /// The dataset name recorded when the call raises the session, e.g. `dataset:{dataset_name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// What a `handler: rust` tool returns: named fields like `params` (each required unless
    /// `optional: true`). Sent as `structuredContent` and declared as `outputSchema`; the
    /// handler returns a generated struct. Tools over a SQL `SELECT` declare their rows by
    /// themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<BTreeMap<String, ParamSpec>>,
    /// Calls per period for each user of this tool, across every instance and replica: replaces
    /// `rate_limits.per_user_tool` of `config.yaml` for this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<bulkhead_vocab::RateLimit>,
    /// A person approves a call before it runs: `always`, or `when:` conditions (the session's
    /// level, an argument matching a pattern, a path outside a prefix) and `approver:` (the
    /// caller, or a holder of a claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalSpec>,
    /// Turns off reading this tool's results (and a `connect` tool's arguments) for
    /// credentials, for the reason given: what was decided and why it is safe. The review
    /// names it as a weakening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninspected: Option<String>,
    /// Written by `bulkhead import` (OpenAPI, Toolbox): what it proposed for this tool and why.
    /// The build refuses the tool while this is present; a person confirms or changes
    /// `permission`, `sensitivity` and `approval`, then deletes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undecided: Option<String>,
}

/// `approval: always`, or the whole declaration.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ApprovalSpec {
    /// `always`: every call, approved by the caller.
    Word(ApprovalWord),
    /// `when:` and `approver:`.
    Full(bulkhead_vocab::Approval),
}

/// The one word `approval:` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalWord {
    /// Every call.
    Always,
}

impl ApprovalSpec {
    /// The declaration it stands for.
    pub fn approval(&self) -> bulkhead_vocab::Approval {
        match self {
            ApprovalSpec::Word(ApprovalWord::Always) => bulkhead_vocab::Approval::ALWAYS,
            ApprovalSpec::Full(a) => a.clone(),
        }
    }
}

/// How a tool is implemented when it does not use a connector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HandlerKind {
    /// A Rust trait method generated per server and implemented in `src/handlers/`.
    Rust,
}

/// A context preset defined by a server: starts from `based_on` and overrides numbers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PresetSpec {
    /// The preset this one starts from (default: `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub based_on: Option<String>,
    /// Results longer than this many characters are truncated and saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold_chars: Option<u64>,
    /// Table rows kept from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_head: Option<u64>,
    /// Table rows kept from the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_tail: Option<u64>,
    /// Lines kept from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_head: Option<u64>,
    /// Lines kept from the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_tail: Option<u64>,
    /// Hard cap on any preview, in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_preview_chars: Option<u64>,
}
