//! (a) Bulkhead: a hand-built one-tool server (`echo`, permission read, sensitivity public,
//! context default, a handler tool) served by the real runtime and HTTP stack.

use bulkhead::call::{Runtime, server_presets};
use bulkhead::codegen::*;
use bulkhead::policy::NetworkMode;
use bulkhead::workspace::WorkspaceRoot;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

static BENCH_TOOLS: &[ToolDef] = &[ToolDef {
    name: "echo",
    title: None,
    description: "Echo the text back.",
    permission: Permission::Read,
    context: "default",
    sensitivity: Sensitivity::Public,
    annotations: Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    },
    input_schema: r#"{"type":"object","properties":{"text":{"type":"string","maxLength":100000}},"required":["text"],"additionalProperties":false}"#,
    output_schema: None,
    dataset: "bench:echo",
    rate_limit: None,
    approval: None,
    inspection: Inspection::On,
    bound: &[],
    target: Target::Handler,
}];

static BENCH: ServerDef = ServerDef {
    name: "bench",
    instructions: "Benchmark server with one echo tool.",
    presets: &[],
    tools: BENCH_TOOLS,
    resources: &[],
    prompts: &[],
};

#[derive(Deserialize)]
#[serde(crate = "bulkhead::codegen::serde")]
struct EchoArgs {
    text: String,
}

struct EchoHandlers;

impl HandlerSet for EchoHandlers {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        _cx: ToolContext,
        args: JsonObject,
    ) -> BoxFuture<'a, ToolResult> {
        match tool {
            "echo" => Box::pin(async move {
                let a: EchoArgs = parse_args(args)?;
                Ok(ToolOutput::Text(a.text))
            }),
            other => unknown_handler(other),
        }
    }
}

/// The Bulkhead router for the bench server, with state under `state`.
pub async fn router(
    secret: &str,
    stateful: bool,
    state: &Path,
    store: &str,
    extra: &str,
    cancel: CancellationToken,
) -> anyhow::Result<axum::Router> {
    let config = crate::template::config(secret, stateful, state, store, extra)?;
    let presets = server_presets(&BENCH, config.context.presets.as_ref())?;
    let workspaces = WorkspaceRoot::new(&config.state.workspaces)?;
    let store = bulkhead::serve::open_state(
        &config,
        "bench",
        bulkhead::policy::NetworkMode::Full,
        bulkhead::state::InitPolicy::FirstStart,
    )
    .await?;
    let audit = bulkhead::serve::open_audit(&config, "bench", &store)?;
    let rates = bulkhead::ratelimit::RateLimiter::open(&config.rate_limits, "bench", &store, false)
        .map_err(anyhow::Error::msg)?;
    let rt = Runtime::new(
        Server::new(&BENCH, &[], EchoHandlers),
        NetworkMode::Full,
        presets,
        workspaces,
        Arc::new(store),
        audit,
    )?
    .with_rate_limits(rates);
    crate::template::serve(rt, &config, cancel)
}
