//! The Rust emitter: one module per server (argument structs, tool table, handler trait and
//! dispatch) plus `mod.rs` (connector table and server registry). Thin: no policy in here.

use super::{
    Output, header,
    input_schema::{input_schema, output_schema},
};
use crate::model::{Connector, Model, Param, Server, Target, Tool};
use crate::spec::{ParamType, Permission, Sensitivity};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

/// Emits `rust/<server>.rs` for each server and `rust/mod.rs`.
pub fn emit(model: &Model, out: &mut Output) {
    for server in &model.servers {
        let tokens = server_module(server);
        out.add(
            format!("rust/{}.rs", server.name),
            render(&header("//", &[&server.source]), tokens),
        );
    }
    let mut sources: Vec<&str> = model
        .servers
        .iter()
        .map(|s| s.source.as_str())
        .chain(model.connectors.iter().map(|c| c.source.as_str()))
        .collect();
    sources.sort();
    sources.dedup();
    let sources = if sources.is_empty() {
        vec!["specs/"]
    } else {
        sources
    };
    out.add(
        "rust/mod.rs",
        render(&header("//", &sources), registry(model)),
    );
}

fn render(header: &str, tokens: TokenStream) -> String {
    let file: syn::File = syn::parse2(tokens).expect("emitted Rust parses");
    format!("{header}\n{}", space_items(&prettyplease::unparse(&file)))
}

/// Puts a blank line between top-level items, as a person would write them.
fn space_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + 256);
    let mut prev = "";
    for line in code.lines() {
        let starts_item = !line.starts_with([' ', '}', ')', ']']) && !line.is_empty();
        let prev_continues = prev.is_empty()
            || prev.starts_with("///")
            || prev.starts_with("#[")
            || prev.starts_with("use ");
        if starts_item && !prev_continues
            || (starts_item && prev.starts_with("use ") && !line.starts_with("use "))
        {
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
        prev = line;
    }
    out
}

/// A raw string literal (`r#"…"#`), so JSON reads as JSON in generated code.
fn raw_str(text: &str) -> TokenStream {
    let hashes = "#".repeat(
        (1..8)
            .find(|n| !text.contains(&format!("\"{}", "#".repeat(*n))))
            .unwrap_or(8),
    );
    format!("r{hashes}\"{text}\"{hashes}")
        .parse()
        .expect("raw string literal")
}

fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

fn pascal(name: &str) -> String {
    name.split(['_', '-', '.'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn permission(p: Permission) -> TokenStream {
    match p {
        Permission::Read => quote!(bh::Permission::Read),
        Permission::Write => quote!(bh::Permission::Write),
        Permission::Connect => quote!(bh::Permission::Connect),
    }
}

fn sensitivity(s: Sensitivity) -> TokenStream {
    match s {
        Sensitivity::Public => quote!(bh::Sensitivity::Public),
        Sensitivity::Internal => quote!(bh::Sensitivity::Internal),
        Sensitivity::Confidential => quote!(bh::Sensitivity::Confidential),
        Sensitivity::Secret => quote!(bh::Sensitivity::Secret),
    }
}

/// Tool annotations derived from the permission, never more permissive than it.
fn annotations(p: Permission) -> TokenStream {
    let (read_only, destructive, idempotent, open_world) = match p {
        Permission::Read => (true, false, true, false),
        Permission::Write => (false, true, false, false),
        Permission::Connect => (false, true, false, true),
    };
    quote!(bh::Annotations { read_only: #read_only, destructive: #destructive, idempotent: #idempotent, open_world: #open_world })
}

fn option_str(v: &Option<String>) -> TokenStream {
    match v {
        Some(s) => quote!(::std::option::Option::Some(#s)),
        None => quote!(::std::option::Option::None),
    }
}

fn rust_type(ty: ParamType, items: Option<ParamType>) -> TokenStream {
    match ty {
        ParamType::String | ParamType::Enum => quote!(::std::string::String),
        ParamType::Integer => quote!(i64),
        ParamType::Number => quote!(f64),
        ParamType::Boolean => quote!(bool),
        ParamType::Array => {
            let inner = rust_type(items.unwrap_or(ParamType::String), None);
            quote!(::std::vec::Vec<#inner>)
        }
    }
}

fn param_doc(p: &Param) -> String {
    let mut doc = format!(" {}", p.description);
    if p.ty == ParamType::Enum {
        if !doc.ends_with('.') {
            doc.push('.');
        }
        doc.push_str(&format!(" One of: {}.", p.values.join(", ")));
    }
    doc
}

fn args_struct(tool: &Tool) -> TokenStream {
    let name = format_ident!("{}Args", pascal(&tool.ident));
    let doc = format!(
        " Arguments of tool `{}` (defaults are filled in before parsing).",
        tool.name
    );
    let fields = tool.params.iter().map(|p| {
        let field = ident(&p.name);
        let ty = rust_type(p.ty, p.items);
        let ty = if p.required || p.default.is_some() {
            ty
        } else {
            quote!(::std::option::Option<#ty>)
        };
        let doc = param_doc(p);
        quote! {
            #[doc = #doc]
            pub #field: #ty,
        }
    });
    quote! {
        #[doc = #doc]
        #[derive(Debug, Clone, bh::Deserialize)]
        #[serde(crate = "bh::serde", deny_unknown_fields)]
        pub struct #name {
            #(#fields)*
        }
    }
}

fn tool_def(tool: &Tool) -> TokenStream {
    let name = &tool.name;
    let title = option_str(&tool.title);
    let description = &tool.description;
    let permission = permission(tool.permission);
    let context = &tool.context;
    let sensitivity = sensitivity(tool.sensitivity);
    let annotations = annotations(tool.permission);
    let schema = raw_str(&input_schema(&tool.params).to_string());
    let dataset = &tool.dataset;
    let output = match &tool.returns {
        Some(r) => {
            let text = raw_str(&output_schema(r).to_string());
            quote!(::std::option::Option::Some(#text))
        }
        None => quote!(::std::option::Option::None),
    };
    let rate_limit = match &tool.rate_limit {
        Some(r) => {
            let (calls, per_seconds) = (r.calls, r.per_seconds);
            let burst = match r.burst {
                Some(b) => quote!(::std::option::Option::Some(#b)),
                None => quote!(::std::option::Option::None),
            };
            quote!(::std::option::Option::Some(bh::RateLimit { calls: #calls, per_seconds: #per_seconds, burst: #burst }))
        }
        None => quote!(::std::option::Option::None),
    };
    let approval = match &tool.approval {
        Some(a) => {
            let a = approval(a);
            quote!(::std::option::Option::Some(#a))
        }
        None => quote!(::std::option::Option::None),
    };
    let inspection = match &tool.uninspected {
        Some(reason) => quote!(bh::Inspection::Off { reason: #reason }),
        None => quote!(bh::Inspection::On),
    };
    let bound: Vec<TokenStream> = tool
        .params
        .iter()
        .filter_map(|p| {
            let claim = p.from_claim.as_ref()?;
            let param = &p.name;
            Some(quote!(bh::Bound { param: #param, claim: #claim }))
        })
        .collect();
    let target = match &tool.target {
        Target::Connector {
            connector,
            operation,
        } => quote!(bh::Target::Connector { connector: #connector, operation: #operation }),
        Target::Handler => quote!(bh::Target::Handler),
        Target::Static(text) => quote!(bh::Target::Static(#text)),
    };
    quote! {
        bh::ToolDef {
            name: #name,
            title: #title,
            description: #description,
            permission: #permission,
            context: #context,
            sensitivity: #sensitivity,
            annotations: #annotations,
            input_schema: #schema,
            output_schema: #output,
            dataset: #dataset,
            rate_limit: #rate_limit,
            approval: #approval,
            inspection: #inspection,
            bound: &[#(#bound),*],
            target: #target,
        }
    }
}

fn server_module(server: &Server) -> TokenStream {
    let handler_tools: Vec<&Tool> = server
        .tools
        .iter()
        .filter(|t| t.target == Target::Handler)
        .collect();
    let structs = handler_tools.iter().map(|t| {
        let args = args_struct(t);
        let result = result_struct(t);
        quote!(#args #result)
    });
    let tools = server.tools.iter().map(tool_def);
    let presets = server.presets.iter().map(|p| {
        let (name, based_on) = (&p.name, &p.based_on);
        let overrides = p.overrides.iter().map(|(k, v)| quote!((#k, #v)));
        quote!(bh::PresetDef { name: #name, based_on: #based_on, overrides: &[#(#overrides),*] })
    });
    let resources = server.resources.iter().map(|r| {
        let (name, uri, description) = (&r.name, &r.uri, &r.description);
        let mime_type = option_str(&r.mime_type);
        let template = r.template;
        let tool = tool_def(&r.tool);
        quote!(bh::ResourceDef { name: #name, uri: #uri, description: #description, mime_type: #mime_type, template: #template, tool: #tool })
    });
    let prompts = server.prompts.iter().map(|p| {
        let (name, description) = (&p.name, &p.description);
        let args = p.arguments.iter().map(|a| {
            let (n, d, r) = (&a.name, &a.description, a.required);
            quote!(bh::PromptArgDef { name: #n, description: #d, required: #r })
        });
        let messages = p.messages.iter().map(|(role, text)| {
            let role = match role {
                crate::spec::PromptRole::User => quote!(bh::PromptRole::User),
                crate::spec::PromptRole::Assistant => quote!(bh::PromptRole::Assistant),
            };
            quote!(bh::PromptMessageDef { role: #role, text: #text })
        });
        quote!(bh::PromptDef { name: #name, description: #description, arguments: &[#(#args),*], messages: &[#(#messages),*] })
    });
    let name = &server.name;
    let instructions = &server.instructions;
    let server_doc = format!(
        " Server `{}` as declared in {}.",
        server.name, server.source
    );
    let handlers = if handler_tools.is_empty() {
        quote!()
    } else {
        handlers(server, &handler_tools)
    };
    quote! {
        use ::bulkhead::codegen as bh;

        #(#structs)*

        #[doc = #server_doc]
        pub static SERVER: bh::ServerDef = bh::ServerDef {
            name: #name,
            instructions: #instructions,
            presets: &[#(#presets),*],
            tools: &[#(#tools),*],
            resources: &[#(#resources),*],
            prompts: &[#(#prompts),*],
        };

        #handlers
    }
}

/// The struct a handler with `returns:` gives back (its fields, serialised as structuredContent).
fn result_struct(tool: &Tool) -> TokenStream {
    let Some(crate::model::Returns::Fields(fields)) = &tool.returns else {
        return quote!();
    };
    let name = format_ident!("{}Result", pascal(&tool.ident));
    let doc = format!(" What tool `{}` returns (its `outputSchema`).", tool.name);
    let fields = fields.iter().map(|p| {
        let field = ident(&p.name);
        let ty = rust_type(p.ty, p.items);
        let doc = param_doc(p);
        if p.required {
            quote! {
                #[doc = #doc]
                pub #field: #ty,
            }
        } else {
            quote! {
                #[doc = #doc]
                #[serde(skip_serializing_if = "::std::option::Option::is_none")]
                pub #field: ::std::option::Option<#ty>,
            }
        }
    });
    quote! {
        #[doc = #doc]
        #[derive(Debug, Clone, bh::Serialize)]
        #[serde(crate = "bh::serde")]
        pub struct #name {
            #(#fields)*
        }
    }
}

fn handlers(server: &Server, tools: &[&Tool]) -> TokenStream {
    let returns_struct = |t: &Tool| matches!(t.returns, Some(crate::model::Returns::Fields(_)));
    let methods = tools.iter().map(|t| {
        let method = ident(&t.ident);
        let args = format_ident!("{}Args", pascal(&t.ident));
        let doc = format!(" `{}`: {}", t.name, t.description);
        let out = if returns_struct(t) {
            let result = format_ident!("{}Result", pascal(&t.ident));
            quote!(::std::result::Result<#result, bh::ToolError>)
        } else {
            quote!(bh::ToolResult)
        };
        quote! {
            #[doc = #doc]
            fn #method(&self, cx: bh::ToolContext, args: #args) -> impl ::std::future::Future<Output = #out> + ::std::marker::Send;
        }
    });
    let arms = tools.iter().map(|t| {
        let name = &t.name;
        let method = ident(&t.ident);
        if returns_struct(t) {
            quote!(#name => ::std::boxed::Box::pin(async move { bh::to_output(&self.0.#method(cx, bh::parse_args(args)?).await?) }),)
        } else {
            quote!(#name => ::std::boxed::Box::pin(async move { self.0.#method(cx, bh::parse_args(args)?).await }),)
        }
    });
    let trait_doc = format!(
        " The tools of `{}` written in Rust: implement this in `src/handlers/{}.rs`.",
        server.name, server.name
    );
    quote! {
        #[doc = #trait_doc]
        pub trait Handlers: ::std::marker::Send + ::std::marker::Sync + 'static {
            #(#methods)*
        }

        /// Routes handler tools to their [`Handlers`] method; the runtime wrapper calls it after every check.
        pub struct Dispatch<H>(pub H);

        impl<H: Handlers> bh::HandlerSet for Dispatch<H> {
            fn call<'a>(&'a self, tool: &'a str, cx: bh::ToolContext, args: bh::JsonObject) -> bh::BoxFuture<'a, bh::ToolResult> {
                match tool {
                    #(#arms)*
                    _ => bh::unknown_handler(tool),
                }
            }
        }
    }
}

fn connector_def(c: &Connector) -> TokenStream {
    let name = &c.name;
    let kind = format_ident!("{}", format!("{:?}", c.kind));
    let sens = sensitivity(c.sensitivity);
    let settings = raw_str(&c.settings_json().to_string());
    let secrets = &c.secrets;
    let ops = c.operations.iter().map(|op| {
        let oname = &op.name;
        let schema = raw_str(&input_schema(&op.params).to_string());
        // The body as JSON (the vocabulary's `OperationBody`), read back once at start.
        let body = raw_str(&serde_json::to_string(&op.body).expect("an operation body is JSON"));
        quote!(bh::OperationDef { name: #oname, params_schema: #schema, body: #body })
    });
    quote! {
        bh::ConnectorDef {
            name: #name,
            kind: bh::ConnectorKind::#kind,
            sensitivity: #sens,
            settings: #settings,
            secrets: &[#(#secrets),*],
            operations: &[#(#ops),*],
        }
    }
}

fn deployment_def(d: &crate::model::Deployment) -> TokenStream {
    let name = &d.name;
    let servers = d.servers.iter().map(|s| {
        let (server, port) = (&s.name, proc_macro2::Literal::u16_unsuffixed(s.port));
        let egress: Vec<String> = s.egress.iter().map(ToString::to_string).collect();
        let proxied: Vec<String> = s.proxied_egress.iter().map(ToString::to_string).collect();
        let internal = &s.internal_ranges;
        let max = sensitivity(s.max_sensitivity);
        quote!(bh::DeployedServerDef { name: #server, port: #port, egress: &[#(#egress),*], proxied_egress: &[#(#proxied),*], internal_ranges: &[#(#internal),*], max_sensitivity: #max })
    });
    quote!(bh::DeploymentDef { name: #name, servers: &[#(#servers),*] })
}

fn registry(model: &Model) -> TokenStream {
    let deployments = model.deployments.iter().map(deployment_def);
    let mods = model.servers.iter().map(|s| {
        let m = ident(&s.name);
        let file = format!("/rust/{}.rs", s.name);
        let doc = format!(" Server `{}` ({}).", s.name, s.source);
        quote! {
            #[doc = #doc]
            #[allow(clippy::all, missing_docs)] // generated: lints belong to the spec, not to this code
            pub mod #m {
                include!(concat!(env!("OUT_DIR"), #file));
            }
        }
    });
    let connectors = model.connectors.iter().map(connector_def);
    let servers = model.servers.iter().map(|s| {
        let m = ident(&s.name);
        quote!(&#m::SERVER)
    });
    let arms = model.servers.iter().map(|s| {
        let m = ident(&s.name);
        let name = &s.name;
        if s.has_handlers() {
            quote!(#name => ::std::option::Option::Some(bh::Server::new(&#m::SERVER, CONNECTORS, #m::Dispatch(crate::handlers::#m::handlers()))),)
        } else {
            quote!(#name => ::std::option::Option::Some(bh::Server::new(&#m::SERVER, CONNECTORS, bh::NoHandlers)),)
        }
    });
    // The project's own `config.yaml`, embedded as it is when the binary is built.
    let config = if model.config.is_some() {
        quote!(::std::option::Option::Some(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config.yaml"
        ))))
    } else {
        quote!(::std::option::Option::None)
    };
    quote! {
        use ::bulkhead::codegen as bh;

        #(#mods)*

        /// Every connector in `specs/connectors/`.
        pub static CONNECTORS: &[bh::ConnectorDef] = &[#(#connectors),*];

        /// Every server in `specs/servers/`, sorted by name.
        pub static SERVERS: &[&bh::ServerDef] = &[#(#servers),*];

        /// Every deployment in `specs/deployments/`, sorted by name.
        pub static DEPLOYMENTS: &[bh::DeploymentDef] = &[#(#deployments),*];

        /// The runnable server `name`, wired to its handlers in `src/handlers/`.
        pub fn server(name: &str) -> ::std::option::Option<bh::Server> {
            match name {
                #(#arms)*
                _ => ::std::option::Option::None,
            }
        }

        /// This project as the engine runs it (`bulkhead::cli::main(&servers::PROJECT)`).
        pub static PROJECT: bh::Project = bh::Project {
            servers: SERVERS,
            connectors: CONNECTORS,
            deployments: DEPLOYMENTS,
            server,
            config: #config,
        };
    }
}

/// A tool's `approval:` as a constant (`Cow::Borrowed` throughout).
fn approval(a: &bulkhead_vocab::Approval) -> TokenStream {
    use bulkhead_vocab::{ApprovalCondition as C, Approver};
    let when = a.when.iter().map(|c| match c {
        C::Always => quote!(bh::ApprovalCondition::Always),
        C::SessionAtLeast(s) => {
            let s = sensitivity(*s);
            quote!(bh::ApprovalCondition::SessionAtLeast(#s))
        }
        C::Argument { name, matches } => {
            let (name, matches) = (name.as_ref(), matches.as_ref());
            quote!(bh::ApprovalCondition::Argument {
                name: ::std::borrow::Cow::Borrowed(#name),
                matches: ::std::borrow::Cow::Borrowed(#matches),
            })
        }
        C::PathOutside { argument, prefix } => {
            let (argument, prefix) = (argument.as_ref(), prefix.as_ref());
            quote!(bh::ApprovalCondition::PathOutside {
                argument: ::std::borrow::Cow::Borrowed(#argument),
                prefix: ::std::borrow::Cow::Borrowed(#prefix),
            })
        }
    });
    let approver = match &a.approver {
        Approver::Caller => quote!(bh::Approver::Caller),
        Approver::Claim { name, value } => {
            let (name, value) = (name.as_ref(), value.as_ref());
            quote!(bh::Approver::Claim {
                name: ::std::borrow::Cow::Borrowed(#name),
                value: ::std::borrow::Cow::Borrowed(#value),
            })
        }
    };
    quote!(bh::Approval { when: ::std::borrow::Cow::Borrowed(&[#(#when),*]), approver: #approver })
}
