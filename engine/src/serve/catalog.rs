//! The MCP face of a server's resources and prompts: listings from the generated tables, a read
//! turned into resource contents (or a JSON-RPC error that says why it was refused), a prompt
//! rendered with its arguments.

use crate::call::CallOutcome;
use crate::policy::meta;
use crate::resourcedef::{PromptDef, PromptRole, ResourceDef};
use crate::serverdef::ServerDef;
use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, MetaObject, Prompt, PromptArgument, PromptMessage, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, Role,
};
use serde_json::{Map, Value};

/// The fixed resources and the URI templates of a server.
pub fn listings(def: &ServerDef) -> (Vec<Resource>, Vec<ResourceTemplate>) {
    let (mut fixed, mut templates) = (Vec::new(), Vec::new());
    for r in def.resources {
        let meta = sensitivity_meta(r);
        if r.template {
            let mut t = ResourceTemplate::new(r.uri, r.name);
            t.description = Some(r.description.to_string());
            t.mime_type = r.mime_type.map(str::to_string);
            t.meta = Some(meta);
            templates.push(t);
        } else {
            let mut res = Resource::new(r.uri, r.name)
                .with_description(r.description)
                .with_meta(meta);
            if let Some(m) = r.mime_type {
                res = res.with_mime_type(m);
            }
            fixed.push(res);
        }
    }
    (fixed, templates)
}

fn sensitivity_meta(r: &ResourceDef) -> MetaObject {
    let mut m = Map::new();
    m.insert(
        meta::SENSITIVITY.into(),
        Value::from(r.tool.sensitivity.as_str()),
    );
    MetaObject(m)
}

/// A read's outcome as resource contents; a refusal or failure becomes an error that carries the
/// text a tool call would have returned and, in `data`, the instance the session needs.
pub fn read_result(
    resource: &ResourceDef,
    uri: &str,
    out: CallOutcome,
) -> Result<ReadResourceResult, ErrorData> {
    let mut meta = Map::new();
    super::handler::result_meta(&mut meta, out.level, &out.found);
    meta.insert(
        meta::REQUIRED_MODE.into(),
        Value::from(out.required_mode.as_str()),
    );
    if out.is_error {
        return Err(ErrorData::invalid_request(
            out.text,
            Some(Value::Object(meta)),
        ));
    }
    if let Some(path) = &out.saved_to {
        meta.insert(meta::SAVED_TO.into(), Value::from(path.clone()));
    }
    let mut contents = ResourceContents::text(out.text, uri).with_meta(MetaObject(meta.clone()));
    if let Some(m) = resource.mime_type {
        contents = contents.with_mime_type(m);
    }
    let mut result = ReadResourceResult::new(vec![contents]);
    result.meta = Some(MetaObject(meta));
    Ok(result)
}

/// The prompts of a server.
pub fn prompts(def: &ServerDef) -> Vec<Prompt> {
    def.prompts
        .iter()
        .map(|p| {
            let args = p
                .arguments
                .iter()
                .map(|a| {
                    PromptArgument::new(a.name)
                        .with_description(a.description)
                        .with_required(a.required)
                })
                .collect();
            Prompt::new(p.name, Some(p.description), Some(args))
        })
        .collect()
}

/// A prompt rendered with `args`, credentials in it redacted with `rules` (into `found`); a
/// missing or unknown argument is an invalid-params error.
pub fn get_prompt(
    p: &PromptDef,
    args: Option<&Map<String, Value>>,
    rules: &crate::inspect::Rules,
    found: &mut Vec<crate::inspect::Finding>,
) -> Result<GetPromptResult, ErrorData> {
    let args: std::collections::BTreeMap<String, String> = args
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let s = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (k.clone(), s)
                })
                .collect()
        })
        .unwrap_or_default();
    let messages = p
        .render(&args)
        .map_err(|e| ErrorData::invalid_params(e, None))?
        .into_iter()
        .enumerate()
        .map(|(i, (role, mut text))| {
            crate::inspect::redact_text(rules, &mut text, &format!("message {}", i + 1), found);
            let role = match role {
                PromptRole::User => Role::User,
                PromptRole::Assistant => Role::Assistant,
            };
            PromptMessage::new_text(role, text)
        })
        .collect();
    let mut result = GetPromptResult::new(messages);
    result.description = Some(p.description.to_string());
    Ok(result)
}
