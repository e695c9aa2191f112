//! One connection to one instance. `[FATAL] ` results become [`ClientError::Fatal`] only when
//! the server entry is `trusted`; every request is bounded by the entry's `read_timeout`.

use super::{ClientError, ToolReply};
use crate::policy::NetworkMode;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, GetPromptResult, Prompt,
    ReadResourceRequestParams, ReadResourceResult, Resource, ResourceTemplate, Tool,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use std::future::Future;
use std::time::Duration;
use tokio::sync::RwLock;

/// A client of one instance of a server.
pub struct StrictClient {
    url: String,
    mode: NetworkMode,
    trusted: bool,
    read_timeout: u64,
    service: RwLock<Option<RunningService<RoleClient, super::AskRelay>>>,
    /// The listed tools' `outputSchema`s, compiled on the first call.
    outputs: tokio::sync::OnceCell<std::collections::HashMap<String, jsonschema::Validator>>,
}

impl StrictClient {
    /// Connects to the instance at `url` (running in `mode`) with a bearer `token` (without the
    /// `Bearer ` prefix). `read_timeout` (seconds) bounds the connection and every request.
    pub async fn connect(
        url: &str,
        token: &str,
        mode: NetworkMode,
        read_timeout: u64,
        trusted: bool,
    ) -> Result<StrictClient, ClientError> {
        Self::connect_asking(
            url,
            token,
            mode,
            read_timeout,
            trusted,
            super::AskRelay::none(),
        )
        .await
    }

    /// [`connect`](StrictClient::connect) with the server's questions to a person going to `relay`.
    pub async fn connect_asking(
        url: &str,
        token: impl Into<super::Credential>,
        mode: NetworkMode,
        read_timeout: u64,
        trusted: bool,
        relay: super::AskRelay,
    ) -> Result<StrictClient, ClientError> {
        // The bearer is read from the credential on every request, so a renewed session token
        // is used as soon as it is there.
        let transport = StreamableHttpClientTransport::with_client(
            super::renewing::BearerClient::new(token.into()),
            StreamableHttpClientTransportConfig::with_uri(url.to_string()),
        );
        let connect_error = |reason: String| ClientError::Connect {
            url: url.to_string(),
            reason,
        };
        let service =
            match tokio::time::timeout(Duration::from_secs(read_timeout), relay.serve(transport))
                .await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(connect_error(e.to_string())),
                Err(_) => return Err(connect_error(format!("no answer within {read_timeout} s"))),
            };
        Ok(StrictClient {
            url: url.to_string(),
            mode,
            trusted,
            read_timeout,
            service: RwLock::new(Some(service)),
            outputs: tokio::sync::OnceCell::new(),
        })
    }

    /// The instance URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The network mode of the instance.
    pub fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// Whether `[FATAL] ` results from this server abort the run.
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }

    /// Calls `name` with `args` (a JSON object, or `null` for none). A tool's error result is
    /// an `Ok` reply with `is_error` unless it is a `[FATAL] ` one from a trusted server, which
    /// is [`ClientError::Fatal`].
    pub async fn call_tool(&self, name: &str, args: Value) -> Result<ToolReply, ClientError> {
        let reply = self.call_raw(name, args).await?;
        classify(reply, self.trusted)
    }

    /// Calls a tool without classifying `[FATAL] ` results.
    pub(crate) async fn call_raw(&self, name: &str, args: Value) -> Result<ToolReply, ClientError> {
        let mut params = CallToolRequestParams::new(name.to_string());
        match args {
            Value::Object(m) => params = params.with_arguments(m),
            Value::Null => {}
            other => {
                return Err(ClientError::Protocol(format!(
                    "tool arguments must be a JSON object, not {other}"
                )));
            }
        }
        let outputs = self
            .outputs
            .get_or_try_init(|| async {
                let tools = self.list_tools().await?;
                Ok::<_, ClientError>(
                    tools
                        .into_iter()
                        .filter_map(|t| {
                            let schema = Value::Object((*t.output_schema?).clone());
                            jsonschema::validator_for(&schema)
                                .ok()
                                .map(|v| (t.name.to_string(), v))
                        })
                        .collect(),
                )
            })
            .await?;
        let guard = self.service.read().await;
        let service = guard.as_ref().ok_or(ClientError::Closed)?;
        let result = self.bounded(service.call_tool(params)).await?;
        let reply = ToolReply::from_result(result, self.mode);
        // A result that contradicts the tool's declared output schema is not evidence.
        if !reply.is_error
            && let Some(validator) = outputs.get(name)
        {
            let problem = match &reply.structured {
                None => Some("no structuredContent".to_string()),
                Some(v) => validator
                    .iter_errors(v)
                    .next()
                    .map(|e| format!("{e} at `{}`", e.instance_path())),
            };
            if let Some(problem) = problem {
                return Err(ClientError::Schema {
                    tool: name.to_string(),
                    problem,
                });
            }
        }
        Ok(reply)
    }

    /// The server's fixed resources.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, ClientError> {
        let guard = self.service.read().await;
        let service = guard.as_ref().ok_or(ClientError::Closed)?;
        self.bounded(service.list_all_resources()).await
    }

    /// The server's resource templates.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, ClientError> {
        let guard = self.service.read().await;
        let service = guard.as_ref().ok_or(ClientError::Closed)?;
        self.bounded(service.list_all_resource_templates()).await
    }

    /// Reads `uri`. The server's refusal (a JSON-RPC error, with the mode the session needs in
    /// its `data`) is the inner `Err`; the outer one is this client's own failure.
    pub async fn read_resource(
        &self,
        uri: &str,
    ) -> Result<Result<ReadResourceResult, ErrorData>, ClientError> {
        let guard = self.service.read().await;
        let service = guard.as_ref().ok_or(ClientError::Closed)?;
        let read = service.read_resource(ReadResourceRequestParams::new(uri));
        match self.bounded_raw(read).await? {
            Ok(r) => Ok(Ok(r)),
            Err(ServiceError::McpError(e)) => Ok(Err(e)),
            Err(e) => Err(ClientError::Protocol(format!("{}: {e}", self.url))),
        }
    }

    /// The server's prompts.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, ClientError> {
        let guard = self.service.read().await;
        let service = guard.as_ref().ok_or(ClientError::Closed)?;
        self.bounded(service.list_all_prompts()).await
    }

    /// Renders prompt `name` with `args`; the server's refusal is the inner `Err`.
    pub async fn get_prompt(
        &self,
        name: &str,
        args: Option<serde_json::Map<String, Value>>,
    ) -> Result<Result<GetPromptResult, ErrorData>, ClientError> {
        let guard = self.service.read().await;
        let service = guard.as_ref().ok_or(ClientError::Closed)?;
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = args;
        match self.bounded_raw(service.get_prompt(params)).await? {
            Ok(r) => Ok(Ok(r)),
            Err(ServiceError::McpError(e)) => Ok(Err(e)),
            Err(e) => Err(ClientError::Protocol(format!("{}: {e}", self.url))),
        }
    }

    /// The server's tools.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        let guard = self.service.read().await;
        let service = guard.as_ref().ok_or(ClientError::Closed)?;
        self.bounded(service.list_all_tools()).await
    }

    /// Closes the connection and deletes the transport session on the server; waits for
    /// calls in flight. Later calls fail with [`ClientError::Closed`].
    pub async fn close(&self) {
        let taken = self.service.write().await.take();
        if let Some(mut service) = taken
            && let Err(e) = service.close().await
        {
            tracing::warn!(url = %self.url, error = %e, "client task ended abnormally");
        }
    }

    /// Bounds `request` by the read timeout, leaving its own result as it is.
    async fn bounded_raw<T>(&self, request: impl Future<Output = T>) -> Result<T, ClientError> {
        tokio::time::timeout(Duration::from_secs(self.read_timeout), request)
            .await
            .map_err(|_| ClientError::Timeout {
                url: self.url.clone(),
                seconds: self.read_timeout,
            })
    }

    async fn bounded<T>(
        &self,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, ClientError> {
        match tokio::time::timeout(Duration::from_secs(self.read_timeout), request).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(ClientError::Protocol(format!("{}: {e}", self.url))),
            Err(_) => Err(ClientError::Timeout {
                url: self.url.clone(),
                seconds: self.read_timeout,
            }),
        }
    }
}

/// A `[FATAL] ` error result becomes [`ClientError::Fatal`] when the server is trusted; from an
/// untrusted server it stays an ordinary (retryable) error result.
pub(crate) fn classify(reply: ToolReply, trusted: bool) -> Result<ToolReply, ClientError> {
    match reply.fatal_message() {
        Some(message) if trusted => Err(ClientError::Fatal(message.to_string())),
        _ => Ok(reply),
    }
}
