//! Resources and prompts of a server: a resource is a read-only tool in disguise (a connector
//! operation or fixed text, with a declared sensitivity) reached by URI; a prompt is templated
//! text with declared arguments.

use super::{Loaded, ptr};
use crate::diag::Diagnostic;
use crate::model::{Connector, Prompt, PromptArg, Resource, Target, Tool};
use crate::spec::{Permission, ServerSpec, SpecKind, ToolSpec};
use crate::suggest::did_you_mean;
use std::collections::BTreeSet;

/// The `{name}` placeholders of a template, in order.
pub fn template_vars(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        out.push(after[..close].to_string());
        rest = &after[close + 1..];
    }
    out
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// Checks the resources of one server; each becomes a hidden read tool.
#[allow(clippy::too_many_arguments)]
pub fn resources(
    l: &Loaded<ServerSpec>,
    connectors: &[Connector],
    declared: &BTreeSet<(SpecKind, String)>,
    presets: &[&str],
    errors: &mut Vec<Diagnostic>,
    tool: impl Fn(&str, &str, &ToolSpec, &mut Vec<Diagnostic>) -> Tool,
) -> Vec<Resource> {
    let _ = (connectors, declared);
    let mut out = Vec::new();
    let mut uris = BTreeSet::new();
    for (name, r) in &l.spec.resources {
        let at = format!("/resources/{}", ptr(name));
        if !is_name(name) {
            errors.push(
                l.error_at_key(&at, format!("`{name}` is not a valid resource name"))
                    .label("use letters, digits, `_`, `-` and `.`"),
            );
        }
        let Some((scheme, _)) = r.uri.split_once("://").filter(|(s, _)| !s.is_empty()) else {
            errors.push(
                l.error_at_value(&format!("{at}/uri"), format!("`{}` is not a URI", r.uri))
                    .label("expected `scheme://…`, e.g. `records://{id}`"),
            );
            continue;
        };
        let _ = scheme;
        if !uris.insert(r.uri.clone()) {
            errors.push(
                l.error_at_value(
                    &format!("{at}/uri"),
                    format!("two resources have the URI `{}`", r.uri),
                )
                .label("URIs must be unique"),
            );
        }
        let vars = template_vars(&r.uri);
        let context = r.context.clone().unwrap_or_else(|| "default".into());
        let dataset = std::iter::once(format!("resource:{name}"))
            .chain(vars.iter().map(|v| format!("{{{v}}}")))
            .collect::<Vec<_>>()
            .join(":");
        let mut t = match (&r.uses, &r.text) {
            (Some(uses), None) => {
                let spec = ToolSpec {
                    title: None,
                    description: r.description.clone(),
                    permission: Permission::Read,
                    context,
                    sensitivity: r.sensitivity,
                    uses: Some(uses.clone()),
                    handler: None,
                    params: None,
                    dataset: Some(format!("resource:{name}")),
                    returns: None,
                    rate_limit: None,
                    approval: None,
                    uninspected: None,
                    undecided: None,
                };
                let mut t = tool(&at, name, &spec, errors);
                // The dataset names the record read: the template's variables that are arguments.
                t.dataset = std::iter::once(format!("resource:{name}"))
                    .chain(
                        vars.iter()
                            .filter(|v| t.params.iter().any(|p| &p.name == *v))
                            .map(|v| format!("{{{v}}}")),
                    )
                    .collect::<Vec<_>>()
                    .join(":");
                // A `uses` that did not resolve (its connector failed to load, already reported)
                // has no parameters to hold the template against: no follow-on errors.
                let resolved = matches!(t.target, crate::model::Target::Connector { .. });
                for v in vars.iter().filter(|_| resolved) {
                    if !t.params.iter().any(|p| &p.name == v) {
                        let mut d = l
                            .error_at_value(
                                &format!("{at}/uri"),
                                format!(
                                    "the URI template names `{{{v}}}`, which `{uses}` does not take"
                                ),
                            )
                            .label("unknown variable");
                        if let Some(h) = did_you_mean(v, t.params.iter().map(|p| p.name.as_str())) {
                            d = d.help(format!("did you mean `{{{h}}}`?"));
                        }
                        errors.push(d);
                    }
                }
                for p in t.params.iter().filter(|p| p.required) {
                    if !vars.contains(&p.name) {
                        errors.push(
                            l.error_at_value(
                                &format!("{at}/uri"),
                                format!(
                                    "`{uses}` needs `{}`, but the URI has no `{{{}}}`",
                                    p.name, p.name
                                ),
                            )
                            .label("missing template variable")
                            .help(format!("add `{{{}}}` to the URI", p.name)),
                        );
                    }
                }
                t
            }
            (None, Some(text)) => {
                if let Some(v) = vars.first() {
                    errors.push(
                        l.error_at_value(&format!("{at}/uri"), format!("a fixed-text resource has no arguments, but the URI names `{{{v}}}`"))
                            .label("use a fixed URI"),
                    );
                }
                if !presets.contains(&context.as_str()) {
                    errors.push(
                        l.error_at_value(
                            &format!("{at}/context"),
                            format!("unknown context preset `{context}`"),
                        )
                        .label(format!("known presets: {}", presets.join(", "))),
                    );
                }
                Tool {
                    name: String::new(),
                    ident: String::new(),
                    title: None,
                    description: r.description.trim().to_string(),
                    permission: Permission::Read,
                    context,
                    sensitivity: r.sensitivity,
                    params: Vec::new(),
                    target: Target::Static(text.clone()),
                    dataset,
                    returns: None,
                    rate_limit: None,
                    approval: None,
                    uninspected: None,
                }
            }
            _ => {
                errors.push(
                    l.error_at_key(&at, format!("resource `{name}` needs exactly one of `uses` and `text`"))
                        .label("what does reading it return?")
                        .help("`uses: connector.operation` (template variables are its arguments) or `text: …`"),
                );
                continue;
            }
        };
        t.name = format!("resource:{name}");
        t.ident = format!("resource_{}", name.replace(['-', '.'], "_"));
        out.push(Resource {
            name: name.clone(),
            uri: r.uri.clone(),
            description: r.description.trim().to_string(),
            mime_type: r.mime_type.clone(),
            template: !vars.is_empty(),
            tool: t,
        });
    }
    out
}

/// Checks the prompts of one server.
pub fn prompts(l: &Loaded<ServerSpec>, errors: &mut Vec<Diagnostic>) -> Vec<Prompt> {
    let mut out = Vec::new();
    for (name, p) in &l.spec.prompts {
        let at = format!("/prompts/{}", ptr(name));
        if !is_name(name) {
            errors.push(
                l.error_at_key(&at, format!("`{name}` is not a valid prompt name"))
                    .label("use letters, digits, `_`, `-` and `.`"),
            );
        }
        if p.messages.is_empty() {
            errors.push(
                l.error_at_key(
                    &format!("{at}/messages"),
                    format!("prompt `{name}` has no messages"),
                )
                .label("add at least one `{ role: user, text: … }`"),
            );
        }
        for (i, m) in p.messages.iter().enumerate() {
            for v in template_vars(&m.text) {
                if !p.arguments.contains_key(&v) {
                    let mut d = l
                        .error_at_value(
                            &format!("{at}/messages/{i}/text"),
                            format!(
                                "prompt `{name}` uses `{{{v}}}`, which is not one of its arguments"
                            ),
                        )
                        .label("unknown placeholder");
                    if let Some(h) = did_you_mean(&v, p.arguments.keys().map(String::as_str)) {
                        d = d.help(format!("did you mean `{{{h}}}`?"));
                    }
                    errors.push(d);
                }
            }
        }
        out.push(Prompt {
            name: name.clone(),
            description: p.description.trim().to_string(),
            arguments: p
                .arguments
                .iter()
                .map(|(n, a)| PromptArg {
                    name: n.clone(),
                    description: a.description.clone(),
                    required: a.required,
                })
                .collect(),
            messages: p
                .messages
                .iter()
                .map(|m| (m.role, m.text.clone()))
                .collect(),
        });
    }
    out
}
