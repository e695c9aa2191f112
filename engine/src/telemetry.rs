//! OpenTelemetry traces over OTLP/HTTP (protobuf): one span per tool call, `tools/call`, with the
//! tool, its permission, the outcome, the session's level before and after, and the call id that
//! the audit record and the server's log lines carry too (one correlation id for all three).
//! Never an argument value, an identity or a path. Off unless `telemetry.otlp_endpoint` is set;
//! when off, recording a call costs one atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{BatchConfigBuilder, Sampler, SdkTracer, SdkTracerProvider};

use crate::config::TelemetryConfig;

static ENABLED: AtomicBool = AtomicBool::new(false);
static TRACER: std::sync::OnceLock<SdkTracer> = std::sync::OnceLock::new();

/// A running exporter; [`shutdown`](Telemetry::shutdown) flushes what is queued.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

/// Why tracing could not start.
#[derive(Debug, thiserror::Error)]
#[error("telemetry: {0}")]
pub struct TelemetryError(String);

/// Starts exporting when an endpoint is configured (call inside the tokio runtime).
pub fn start(config: &TelemetryConfig) -> Result<Option<Telemetry>, TelemetryError> {
    let Some(endpoint) = &config.otlp_endpoint else {
        return Ok(None);
    };
    if !(0.0..=1.0).contains(&config.sample_ratio) {
        return Err(TelemetryError(
            "sample_ratio must be between 0.0 and 1.0".into(),
        ));
    }
    let timeout = Duration::from_millis(config.export_timeout_ms.max(1));
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| TelemetryError(e.to_string()))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .with_timeout(timeout)
        .with_http_client(http)
        .build()
        .map_err(|e| TelemetryError(e.to_string()))?;
    let processor = BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(4096)
                .with_scheduled_delay(Duration::from_millis(config.batch_delay_ms.max(10)))
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::TraceIdRatioBased(config.sample_ratio))
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("bulkhead")
                .build(),
        )
        .build();
    let _ = TRACER.set(provider.tracer("bulkhead"));
    ENABLED.store(true, Ordering::Release);
    Ok(Some(Telemetry { provider }))
}

impl Telemetry {
    /// Stops recording and exports what is queued (bounded by the export timeout).
    pub async fn shutdown(self) {
        ENABLED.store(false, Ordering::Release);
        let provider = self.provider;
        // The processor's shutdown blocks on a channel: never on a runtime worker thread.
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
}

/// One finished call, as recorded in its span.
pub struct CallSpan<'a> {
    /// The call id (also in the audit record and log lines).
    pub call_id: &'a str,
    /// The server.
    pub server: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// Its permission, when the tool is known.
    pub permission: Option<&'static str>,
    /// `allowed`, `escalated`, `blocked`, `error`, `cancelled`.
    pub outcome: &'static str,
    /// The session's level before and after.
    pub levels: (&'static str, &'static str),
    /// When the call started.
    pub started: SystemTime,
}

/// Records a finished call as a span (nothing when tracing is off).
pub fn record(call: CallSpan<'_>) {
    if !ENABLED.load(Ordering::Acquire) {
        return;
    }
    let Some(tracer) = TRACER.get() else { return };
    let mut attributes = vec![
        KeyValue::new("bulkhead.call_id", call.call_id.to_owned()),
        KeyValue::new("bulkhead.server", call.server.to_owned()),
        KeyValue::new("mcp.tool.name", call.tool.to_owned()),
        KeyValue::new("bulkhead.outcome", call.outcome),
        KeyValue::new("bulkhead.level_before", call.levels.0),
        KeyValue::new("bulkhead.level_after", call.levels.1),
    ];
    if let Some(p) = call.permission {
        attributes.push(KeyValue::new("bulkhead.permission", p));
    }
    let mut span = tracer
        .span_builder("tools/call")
        .with_kind(SpanKind::Server)
        .with_start_time(call.started)
        .with_attributes(attributes)
        .start(tracer);
    if matches!(call.outcome, "error" | "blocked") {
        span.set_status(Status::error(call.outcome));
    }
    span.end();
}
