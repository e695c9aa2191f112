//! Shaping a tool's output for the model: the context preset decides what is returned, the full
//! result goes to `/workspace/results/…`, and the session's level rides along for `_meta`.

use crate::context::{self, ContentKind, Preset, StreamPreview};
use crate::errors::ToolError;
use crate::policy::{NetworkMode, Sensitivity};
use crate::server::{Chunk, ToolOutput};
use crate::tooldef::ToolDef;
use crate::workspace::LazyWorkspace;
use futures::StreamExt;
use serde_json::Value;

/// What one call produced, ready for the protocol layer.
#[derive(Clone, Debug, PartialEq)]
pub struct CallOutcome {
    /// Whether this is an error result (`isError`).
    pub is_error: bool,
    /// The text content.
    pub text: String,
    /// Structured content (possibly truncated), when the tool returned JSON.
    pub structured: Option<Value>,
    /// The session's level after the call (sent in `_meta`).
    pub level: Sensitivity,
    /// Where the full result was saved, when it was truncated.
    pub saved_to: Option<String>,
    /// The least isolated instance mode that can serve this session's next call of this tool
    /// (after a refusal: the instance the client must switch to).
    pub required_mode: NetworkMode,
}

impl CallOutcome {
    /// An error result; the tier decides the text (`[FATAL] ` prefix or not).
    pub fn error(err: ToolError, level: Sensitivity) -> CallOutcome {
        if let ToolError::Bug(detail) = &err {
            tracing::error!(%detail, "tool bug");
        }
        CallOutcome {
            is_error: true,
            text: err.wire_text(),
            structured: None,
            level,
            saved_to: None,
            required_mode: level.required_mode(),
        }
    }

    fn ok(
        text: String,
        structured: Option<Value>,
        level: Sensitivity,
        saved_to: Option<String>,
    ) -> CallOutcome {
        CallOutcome {
            is_error: false,
            text,
            structured,
            level,
            saved_to,
            required_mode: level.required_mode(),
        }
    }
}

fn extension(kind: ContentKind) -> &'static str {
    match kind {
        ContentKind::Json => "json",
        ContentKind::Table => "csv",
        ContentKind::Log => "log",
        ContentKind::Text => "txt",
    }
}

fn save_error(e: impl std::fmt::Display) -> ToolError {
    ToolError::fatal(format!("cannot save the full result in the workspace: {e}"))
}

/// What an empty streamed result says (a search that found nothing).
const NO_MATCHES: &str = "No matches.";
/// What an empty text result says.
const NOTHING: &str = "The tool returned an empty result.";

/// Applies the preset to a tool's output.
pub async fn shape(
    preset: &Preset,
    lazy: &LazyWorkspace<'_>,
    tool: &ToolDef,
    output: ToolOutput,
    level: Sensitivity,
) -> Result<CallOutcome, ToolError> {
    match output {
        ToolOutput::Text(text) if text.is_empty() => {
            Ok(CallOutcome::ok(NOTHING.into(), None, level, None))
        }
        ToolOutput::Text(text) => match context::truncate_text(preset, &text) {
            None => Ok(CallOutcome::ok(text, None, level, None)),
            Some(preview) => {
                let ws = lazy.get()?;
                let path = ws
                    .new_result_path(tool.name, extension(preview.kind))
                    .map_err(save_error)?;
                ws.write(&path, text.as_bytes()).map_err(save_error)?;
                Ok(CallOutcome::ok(
                    context::render_saved(&preview, &path),
                    None,
                    level,
                    Some(path),
                ))
            }
        },
        ToolOutput::Json(value) => match context::truncate_json(preset, &value) {
            None => {
                let text = serde_json::to_string(&value).unwrap_or_default();
                Ok(CallOutcome::ok(text, Some(value), level, None))
            }
            Some(jp) => {
                let ws = lazy.get()?;
                let path = ws.new_result_path(tool.name, "json").map_err(save_error)?;
                let full = serde_json::to_vec_pretty(&value).map_err(save_error)?;
                ws.write(&path, &full).map_err(save_error)?;
                Ok(CallOutcome::ok(
                    context::render_saved(&jp.preview, &path),
                    Some(jp.value),
                    level,
                    Some(path),
                ))
            }
        },
        ToolOutput::Stream(mut stream) => {
            let ws = lazy.get()?;
            let path = ws.new_result_path(tool.name, "txt").map_err(save_error)?;
            let file = ws.create(&path).map_err(save_error)?;
            let mut sp = StreamPreview::new(
                preset,
                None,
                std::io::BufWriter::with_capacity(1 << 16, file),
            );
            let mut failed = None;
            // What arrived, to say so plainly when nothing matched.
            let (mut rows, mut other) = (0usize, 0usize);
            let mut header: Option<Vec<String>> = None;
            while let Some(item) = stream.next().await {
                let pushed = match item {
                    Ok(Chunk::Line(l)) => {
                        other += 1;
                        sp.push_line(&l)
                    }
                    Ok(Chunk::Row(r)) => {
                        rows += 1;
                        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
                        let pushed = sp.push_row(&cells);
                        if header.is_none() {
                            header = Some(r);
                        }
                        pushed
                    }
                    Ok(Chunk::Bytes(b)) => {
                        other += usize::from(!b.is_empty());
                        sp.push_chunk(&b)
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                };
                if let Err(e) = pushed {
                    failed = Some(save_error(e));
                    break;
                }
            }
            let finished = sp.finish().map_err(save_error)?;
            if let Some(e) = failed {
                let _ = ws.remove(&path);
                return Err(e);
            }
            if other == 0 && rows <= 1 {
                let _ = ws.remove(&path);
                let text = match header {
                    Some(h) if rows == 1 => format!("No rows matched (columns: {}).", h.join(", ")),
                    _ => NO_MATCHES.to_string(),
                };
                return Ok(CallOutcome::ok(text, None, level, None));
            }
            match (finished.preview, finished.full_text_if_small) {
                (None, Some(small)) => {
                    let _ = ws.remove(&path);
                    Ok(CallOutcome::ok(small, None, level, None))
                }
                (Some(preview), _) => Ok(CallOutcome::ok(
                    context::render_saved(&preview, &path),
                    None,
                    level,
                    Some(path),
                )),
                (None, None) => {
                    let _ = ws.remove(&path);
                    Ok(CallOutcome::ok(NO_MATCHES.into(), None, level, None))
                }
            }
        }
    }
}
