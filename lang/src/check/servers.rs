//! Server and tool rules: the promise (permission, context, sensitivity), references to
//! connectors, MCP tool names, datasets and presets.

use super::{Loaded, is_snake_ident, params, placeholders, ptr};
use crate::diag::Diagnostic;
use crate::model::{Connector, OperationBody, Preset, Server, Target, Tool};
use crate::spec::{HandlerKind, Permission, Sensitivity, ServerSpec, SpecKind, ToolSpec};
use crate::suggest::did_you_mean;
use std::collections::{BTreeMap, BTreeSet};

/// Presets every server has.
pub const BUILTIN_PRESETS: [&str; 3] = ["default", "log_search", "sql_query"];

/// Checks every server spec against the connectors; returns model servers (sorted by name).
pub fn check(
    specs: &[Loaded<ServerSpec>],
    connectors: &[Connector],
    declared: &BTreeSet<(SpecKind, String)>,
    errors: &mut Vec<Diagnostic>,
) -> Vec<Server> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for l in specs {
        let s = &l.spec;
        if !is_snake_ident(&s.name) {
            errors.push(
                l.error_at_value(
                    "/name",
                    format!("server name `{}` is not a lowercase identifier", s.name),
                )
                .label("use lowercase letters, digits and `_`")
                .help("the name is also the generated Rust module name"),
            );
        }
        if let Some(first) = seen.insert(&s.name, &l.file.display) {
            errors.push(
                l.error_at_value("/name", format!("server `{}` is defined twice", s.name))
                    .label("second definition")
                    .help(format!("the first is in {first}")),
            );
            continue;
        }
        let presets = presets(l, errors);
        let preset_names: Vec<&str> = BUILTIN_PRESETS
            .iter()
            .copied()
            .chain(presets.iter().map(|p| p.name.as_str()))
            .collect();
        let mut idents: BTreeMap<String, &str> = BTreeMap::new();
        let mut tools = Vec::new();
        for (name, spec) in &s.tools {
            let at = format!("/tools/{}", ptr(name));
            let tool = tool(
                l,
                "tool",
                &at,
                name,
                spec,
                connectors,
                declared,
                &preset_names,
                errors,
            );
            if let Some(other) = idents.insert(tool.ident.clone(), name) {
                errors.push(
                    l.error_at_key(
                        &format!("/tools/{}", ptr(name)),
                        format!(
                            "tools `{other}` and `{name}` map to the same Rust name `{}`",
                            tool.ident
                        ),
                    )
                    .label("rename one of them"),
                );
            }
            tools.push(tool);
        }
        if s.tools.is_empty() && !l.partial {
            errors.push(
                l.error_at_key("/tools", format!("server `{}` has no tools", s.name))
                    .label("declare at least one tool"),
            );
        }
        let resources = super::resources::resources(
            l,
            connectors,
            declared,
            &preset_names,
            errors,
            |at, name, spec, errors| {
                tool(
                    l,
                    "resource",
                    at,
                    name,
                    spec,
                    connectors,
                    declared,
                    &preset_names,
                    errors,
                )
            },
        );
        let prompts = super::resources::prompts(l, errors);
        let handler_site = s
            .tools
            .iter()
            .find(|(_, t)| t.handler.is_some() && t.uses.is_none())
            .map(|(name, _)| {
                l.error_at_key(&format!("/tools/{}/handler", ptr(name)), String::new())
            });
        out.push(Server {
            name: s.name.clone(),
            source: l.file.display.clone(),
            instructions: s.instructions.trim().to_string(),
            presets,
            tools,
            handler_site,
            resources,
            prompts,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn presets(l: &Loaded<ServerSpec>, errors: &mut Vec<Diagnostic>) -> Vec<Preset> {
    let declared: Vec<&str> = l.spec.context_presets.keys().map(String::as_str).collect();
    let mut out = Vec::new();
    for (name, p) in &l.spec.context_presets {
        let at = format!("/context_presets/{}", ptr(name));
        if !is_snake_ident(name) {
            errors.push(
                l.error_at_key(
                    &at,
                    format!("preset name `{name}` is not a lowercase identifier"),
                )
                .label("use lowercase letters, digits and `_`"),
            );
        }
        if BUILTIN_PRESETS.contains(&name.as_str()) {
            errors.push(
                l.error_at_key(&at, format!("preset `{name}` is built in"))
                    .label("choose another name")
                    .help("override built-in numbers in config.yaml under `context.presets`"),
            );
        }
        let based_on = p.based_on.clone().unwrap_or_else(|| "default".to_string());
        if !BUILTIN_PRESETS.contains(&based_on.as_str()) {
            let hint = did_you_mean(&based_on, BUILTIN_PRESETS);
            let mut d = l
                .error_at_value(
                    &format!("{at}/based_on"),
                    format!("unknown preset `{based_on}` in `based_on`"),
                )
                .label("a preset can only start from a built-in one");
            if let Some(h) = hint {
                d = d.help(format!("did you mean `{h}`?"));
            }
            errors.push(d);
        }
        let fields = [
            ("lines_head", p.lines_head),
            ("lines_tail", p.lines_tail),
            ("max_preview_chars", p.max_preview_chars),
            ("rows_head", p.rows_head),
            ("rows_tail", p.rows_tail),
            ("threshold_chars", p.threshold_chars),
        ];
        let overrides = fields
            .iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect();
        let _ = &declared;
        out.push(Preset {
            name: name.clone(),
            based_on,
            overrides,
        });
    }
    out
}

#[allow(clippy::too_many_arguments)] // tools and resources share it
fn tool(
    l: &Loaded<ServerSpec>,
    what: &str,
    at: &str,
    name: &str,
    spec: &ToolSpec,
    connectors: &[Connector],
    declared: &BTreeSet<(SpecKind, String)>,
    presets: &[&str],
    errors: &mut Vec<Diagnostic>,
) -> Tool {
    let at = at.to_string();
    if what == "tool" && !is_mcp_tool_name(name) {
        errors.push(
            l.error_at_key(&at, format!("`{name}` is not a valid MCP tool name"))
                .label("invalid tool name")
                .help(
                    "tool names are 1 to 64 characters of ASCII letters, digits, `_`, `-` and `.`",
                ),
        );
    }
    if spec.description.trim().is_empty() {
        errors.push(
            l.error_at_value(
                &format!("{at}/description"),
                format!("{what} `{name}` has an empty description"),
            )
            .label("the model chooses tools by their description"),
        );
    }
    if !presets.contains(&spec.context.as_str()) {
        let mut d = l
            .error_at_value(
                &format!("{at}/context"),
                format!("unknown context preset `{}`", spec.context),
            )
            .label(format!("known presets: {}", presets.join(", ")));
        if let Some(h) = did_you_mean(&spec.context, presets.iter().copied()) {
            d = d.help(format!("did you mean `{h}`?"));
        }
        errors.push(d);
    }
    let (target, params, default_dataset) = match (&spec.uses, spec.handler) {
        (Some(_), Some(_)) => {
            errors.push(l.error_at_key(&format!("{at}/handler"), format!("{what} `{name}` has both `uses` and `handler`")).label("choose one").help("`uses: connector.operation` wraps a connector; `handler: rust` calls your code"));
            (Target::Handler, Vec::new(), format!("tool:{name}"))
        }
        (None, None) => {
            errors.push(
                l.error_at_key(
                    &at,
                    format!("{what} `{name}` says neither `uses` nor `handler`"),
                )
                .label("what does this tool run?")
                .help("add `uses: connector.operation` or `handler: rust`"),
            );
            (Target::Handler, Vec::new(), format!("tool:{name}"))
        }
        (None, Some(HandlerKind::Rust)) => {
            let params = spec
                .params
                .as_ref()
                .map(|p| params::check(l, &format!("{at}/params"), p, errors))
                .unwrap_or_default();
            params::check_exchange(l, &format!("{at}/params"), &params, None, errors);
            (Target::Handler, params, format!("tool:{name}"))
        }
        (Some(uses), None) => {
            if spec.params.is_some() {
                errors.push(
                    l.error_at_key(
                        &format!("{at}/params"),
                        format!("{what} `{name}` uses `{uses}` and also declares `params`"),
                    )
                    .label("parameters come from the connector operation")
                    .help("remove `params` here or change the operation's parameters"),
                );
            }
            resolve_uses(l, what, &at, name, spec, uses, connectors, declared, errors)
        }
    };
    let dataset = spec.dataset.clone().unwrap_or(default_dataset);
    for p in placeholders(&dataset) {
        if !params.iter().any(|x| x.name == p) {
            let span = l.value_at(&format!("{at}/dataset")).find(
                &l.file.text,
                &format!("{{{p}}}"),
                dataset.len() * 2 + 16,
                |_| true,
            );
            let mut d = Diagnostic::error(
                &l.file,
                span,
                format!("dataset template names `{{{p}}}`, which is not a parameter of `{name}`"),
            )
            .label("unknown placeholder");
            d = match did_you_mean(&p, params.iter().map(|x| x.name.as_str())) {
                Some(h) => d.help(format!("did you mean `{{{h}}}`?")),
                None if params.is_empty() => d.help(format!("`{name}` has no parameters")),
                None => d.help(format!(
                    "its parameters: {}",
                    params
                        .iter()
                        .map(|x| x.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            };
            errors.push(d);
        }
    }
    if let Some(problem) = spec.rate_limit.as_ref().and_then(|r| r.problem()) {
        errors.push(
            l.error_at_value(
                &format!("{at}/rate_limit"),
                format!("{what} `{name}`: {problem}"),
            )
            .label("not a rate a call can meet"),
        );
    }
    let approval = spec.approval.as_ref().map(|a| {
        approval(
            l,
            &format!("{at}/approval"),
            what,
            name,
            &a.approval(),
            &params,
            errors,
        )
    });
    if let Some(reason) = &spec.uninspected {
        super::reason::check(l, &format!("{at}/uninspected"), reason, errors);
    }
    // An imported tool whose proposal no person has confirmed yet.
    if let Some(proposal) = &spec.undecided {
        errors.push(
            l.error_at_key(
                &format!("{at}/undecided"),
                format!("{what} `{name}` was imported and is not decided yet: {proposal}"),
            )
            .label("a person decides")
            .help("confirm or change `permission`, `sensitivity` and `approval`, then delete `undecided:`"),
        );
    }
    // The tool's own reason, or its connector's.
    let uninspected = spec
        .uninspected
        .as_ref()
        .map(|r| r.trim().to_string())
        .or_else(|| match &target {
            Target::Connector { connector, .. } => connectors
                .iter()
                .find(|c| &c.name == connector)
                .and_then(|c| c.uninspected.clone()),
            _ => None,
        });
    Tool {
        rate_limit: spec.rate_limit,
        approval,
        uninspected,
        name: name.to_string(),
        ident: name.replace(['-', '.'], "_").to_ascii_lowercase(),
        title: spec.title.clone(),
        description: spec.description.trim().to_string(),
        permission: spec.permission,
        context: spec.context.clone(),
        sensitivity: spec.sensitivity,
        params,
        returns: super::returns::returns(l, &at, what, name, spec, &target, connectors, errors),
        target,
        dataset,
    }
}

#[allow(clippy::too_many_arguments)] // one call site; a context struct would only rename them
fn resolve_uses(
    l: &Loaded<ServerSpec>,
    what: &str,
    at: &str,
    name: &str,
    spec: &ToolSpec,
    uses: &str,
    connectors: &[Connector],
    declared: &BTreeSet<(SpecKind, String)>,
    errors: &mut Vec<Diagnostic>,
) -> (Target, Vec<crate::model::Param>, String) {
    let uses_at = format!("{at}/uses");
    let fallback = (Target::Handler, Vec::new(), format!("tool:{name}"));
    let Some((cname, oname)) = uses.split_once('.') else {
        errors.push(
            l.error_at_value(&uses_at, format!("`{uses}` is not `connector.operation`"))
                .label("expected `connector.operation`"),
        );
        return fallback;
    };
    let Some(connector) = connectors.iter().find(|c| c.name == cname) else {
        if declared.contains(&(SpecKind::Connector, cname.to_string())) {
            return fallback; // the connector's own file has errors, reported there
        }
        let mut d = l
            .error_at_value(&uses_at, format!("no connector named `{cname}`"))
            .label("dangling reference");
        d = match did_you_mean(cname, connectors.iter().map(|c| c.name.as_str())) {
            Some(h) => d.help(format!("did you mean `{h}`?")),
            None => d.help("connectors live in specs/connectors/*.yaml"),
        };
        errors.push(d);
        return fallback;
    };
    let Some(op) = connector.operations.iter().find(|o| o.name == oname) else {
        let mut d = l
            .error_at_value(
                &uses_at,
                format!("connector `{cname}` has no operation `{oname}`"),
            )
            .label("dangling reference");
        let names: Vec<&str> = connector
            .operations
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        d = match did_you_mean(oname, names.iter().copied()) {
            Some(h) => d.help(format!("did you mean `{h}`?")),
            None => d.help(format!("its operations: {}", names.join(", "))),
        };
        errors.push(d);
        return fallback;
    };
    if spec.sensitivity < connector.sensitivity {
        errors.push(
            l.error_at_value(
                &format!("{at}/sensitivity"),
                format!(
                    "{what} `{name}` understates its sensitivity: `{}` over a `{}` connector",
                    spec.sensitivity.as_str(),
                    connector.sensitivity.as_str()
                ),
            )
            .label(format!(
                "must be at least `{}`",
                connector.sensitivity.as_str()
            ))
            .help(format!(
                "connector `{cname}` ({}) reads data that is at least {}",
                connector.source,
                connector.sensitivity.as_str()
            )),
        );
    }
    if !connector.egress.is_empty() && spec.permission != Permission::Connect {
        let hosts: Vec<String> = connector.egress.iter().map(|h| h.to_string()).collect();
        errors.push(
            l.error_at_value(
                &format!("{at}/permission"),
                format!(
                    "{what} `{name}` runs `{uses}` in a jail that reaches the network ({}) but is not `connect`",
                    hosts.join(", ")
                ),
            )
            .label("must be `permission: connect`")
            .help(format!(
                "connector `{cname}` ({}) declares `egress`: whatever runs there can send the session's data out, so the tool is refused without the connect scope and once the session holds private data, like every `connect` tool; or remove `egress`",
                connector.source
            )),
        );
    } else if op.body.reaches_network() && spec.permission != Permission::Connect {
        errors.push(
            l.error_at_value(
                &format!("{at}/permission"),
                format!(
                    "{what} `{name}` reaches the network through `{uses}` but is not `connect`"
                ),
            )
            .label("must be `permission: connect`")
            .help(
                "connect tools are refused once a session holds private data; this one must be too",
            ),
        );
    } else if matches!(op.body, OperationBody::Mcp { remote: true, .. })
        && spec.sensitivity == Sensitivity::Secret
    {
        errors.push(
            l.error_at_value(
                &format!("{at}/sensitivity"),
                format!(
                    "{what} `{name}` is secret, so it runs only on `none` instances, which cannot reach the URL upstream of `{uses}`"
                ),
            )
            .label("every call would fail there")
            .help("declare it at most `confidential` (a proxied instance reaches the upstream through its egress proxy), or launch the upstream over stdio (`command`) so it runs inside the isolated instance"),
        );
    } else if op.body.writes() && spec.permission == Permission::Read {
        errors.push(
            l.error_at_value(
                &format!("{at}/permission"),
                format!("{what} `{name}` writes through `{uses}` but declares `read`"),
            )
            .label("must be `permission: write`"),
        );
    }
    (
        Target::Connector {
            connector: cname.to_string(),
            operation: oname.to_string(),
        },
        op.params.clone(),
        format!("{cname}:{oname}"),
    )
}

/// MCP tool names: 1 to 64 of `[A-Za-z0-9_.-]`.
pub fn is_mcp_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Checks a tool's `approval:` against the tool: a condition names one of its parameters (a
/// string, for a pattern or a path), a pattern compiles, and [`bulkhead_vocab::Approval::problem`].
fn approval(
    l: &Loaded<ServerSpec>,
    at: &str,
    what: &str,
    name: &str,
    approval: &bulkhead_vocab::Approval,
    params: &[crate::model::Param],
    errors: &mut Vec<Diagnostic>,
) -> bulkhead_vocab::Approval {
    use bulkhead_vocab::ApprovalCondition as C;
    if let Some(problem) = approval.problem() {
        errors.push(
            l.error_at_value(at, format!("{what} `{name}`: {problem}"))
                .label("not an approval rule"),
        );
    }
    for (i, c) in approval.when.iter().enumerate() {
        let (arg, pattern) = match c {
            C::Argument { name, matches } => (name.as_ref(), Some(matches.as_ref())),
            C::PathOutside { argument, .. } => (argument.as_ref(), None),
            C::Always | C::SessionAtLeast(_) => continue,
        };
        let here = format!("{at}/when/{i}");
        match params.iter().find(|p| p.name == arg) {
            None => {
                let mut d = l
                    .error_at_value(
                        &here,
                        format!("approval of `{name}` names `{arg}`, which is not a parameter of `{name}`"),
                    )
                    .label("unknown parameter");
                if let Some(h) = did_you_mean(arg, params.iter().map(|p| p.name.as_str())) {
                    d = d.help(format!("did you mean `{h}`?"));
                }
                errors.push(d);
            }
            Some(p)
                if !matches!(
                    p.ty,
                    crate::spec::ParamType::String | crate::spec::ParamType::Enum
                ) =>
            {
                errors.push(
                    l.error_at_value(
                        &here,
                        format!("approval of `{name}` tests `{arg}`, which is not a string"),
                    )
                    .label("patterns and paths apply to string parameters"),
                )
            }
            Some(_) => {}
        }
        if let Some(pattern) = pattern
            && let Err(e) = regex::Regex::new(pattern)
        {
            errors.push(
                l.error_at_value(
                    &here,
                    format!("approval of `{name}`: the pattern does not compile: {e}"),
                )
                .label("not a regular expression"),
            );
        }
    }
    approval.clone()
}
