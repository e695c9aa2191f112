//! Shaping a tool's output for the model: credentials are redacted first ([`crate::inspect`]),
//! the context preset decides what is returned, the full result goes to `/workspace/results/…`,
//! and the session's level rides along for `_meta`.

use crate::context::{self, ContentKind, Preset, StreamPreview};
use crate::errors::ToolError;
use crate::inspect::{self, Finding, Rules, StreamRedactor};
use crate::policy::{NetworkMode, Sensitivity};
use crate::server::{Chunk, ToolOutput};
use crate::signals::CallSignals;
use crate::tooldef::ToolDef;
use crate::workspace::{LazyWorkspace, ResultFile, SavedResult, SessionWorkspace};
use futures::StreamExt;
use serde_json::Value;
use std::io::Write as _;

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
    /// A question for a person before the call runs (2026-07-28: sent as `input_required`).
    pub input_required: Option<crate::approval::Pending>,
    /// The rules whose credentials were redacted from this result (they raised the session).
    pub found: Vec<&'static str>,
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
            input_required: None,
            found: Vec::new(),
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
            input_required: None,
            found: Vec::new(),
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

/// Saves a whole result held in memory.
fn save_whole(
    ws: &SessionWorkspace,
    tool: &ToolDef,
    key: u64,
    bytes: &[u8],
    ext: &str,
) -> Result<SavedResult, ToolError> {
    let mut file = ws.save_result(tool.name, key).map_err(save_error)?;
    file.write_all(bytes).map_err(save_error)?;
    file.commit(ws, ext).map_err(save_error)
}

/// The preview text for a saved result, saying when the saved file was cut at its limit.
fn saved_text(preview: &context::Preview, saved: &SavedResult) -> String {
    let mut text = context::render_saved(preview, &saved.path);
    if saved.cut {
        text.push_str(&format!(
            "\n(The saved file holds the first {} bytes of the result: workspace.max_result_bytes.)",
            saved.bytes
        ));
    }
    text
}

/// What a call's result shaping needs besides the output.
pub(super) struct Shaping<'a> {
    pub(super) preset: &'a Preset,
    pub(super) level: Sensitivity,
    /// Identifies the query (the same query overwrites its earlier saved result).
    pub(super) key: u64,
    /// The rules to redact with; `None` when the tool is `uninspected:`.
    pub(super) rules: Option<&'static Rules>,
}

/// Redacts credentials in a tool's output (into `found`), then applies the preset: what the
/// model sees and the saved full result both hold only the redacted text.
pub(super) async fn shape(
    how: Shaping<'_>,
    lazy: &LazyWorkspace<'_>,
    tool: &ToolDef,
    output: ToolOutput,
    signals: &CallSignals,
    found: &mut Vec<Finding>,
) -> Result<CallOutcome, ToolError> {
    let Shaping {
        preset,
        level,
        key,
        rules,
    } = how;
    let output = match (rules, output) {
        (Some(r), ToolOutput::Text(mut text)) => {
            inspect::redact_text(r, &mut text, "result", found);
            ToolOutput::Text(text)
        }
        (Some(r), ToolOutput::Json(mut value)) => {
            inspect::redact_json(r, &mut value, "result", found);
            ToolOutput::Json(value)
        }
        (_, output) => output,
    };
    match output {
        ToolOutput::Text(text) if text.is_empty() => {
            Ok(CallOutcome::ok(NOTHING.into(), None, level, None))
        }
        ToolOutput::Text(text) => match context::truncate_text(preset, &text) {
            None => Ok(CallOutcome::ok(text, None, level, None)),
            Some(preview) => {
                let ws = lazy.get()?;
                let saved = save_whole(ws, tool, key, text.as_bytes(), extension(preview.kind))?;
                Ok(CallOutcome::ok(
                    saved_text(&preview, &saved),
                    None,
                    level,
                    Some(saved.path),
                ))
            }
        },
        ToolOutput::Json(value) => match context::truncate_json(preset, &value) {
            None => {
                let text = serde_json::to_string(&value).unwrap_or_default();
                Ok(CallOutcome::ok(
                    text,
                    structured_content(value),
                    level,
                    None,
                ))
            }
            Some(jp) => {
                let ws = lazy.get()?;
                let full = serde_json::to_vec_pretty(&value).map_err(save_error)?;
                let saved = save_whole(ws, tool, key, &full, "json")?;
                // A declared result keeps its declared shape: it is sent whole as structured
                // content (the text is previewed and saved like any other).
                let structured = if tool.output_schema.is_some() {
                    value
                } else {
                    jp.value
                };
                Ok(CallOutcome::ok(
                    saved_text(&jp.preview, &saved),
                    structured_content(structured),
                    level,
                    Some(saved.path),
                ))
            }
        },
        ToolOutput::Stream(stream) => {
            let ws = lazy.get()?.clone();
            // Written to a temporary file, renamed into place only when complete: a cancelled
            // or failed call leaves nothing behind (the file removes itself when dropped).
            let file = ws.save_result(tool.name, key).map_err(save_error)?;
            // The preview and the file are built on a blocking thread at background priority, so
            // a huge result never holds up the request handlers; a dropped call stops it.
            let preset = preset.clone();
            let signals = signals.clone();
            let consumed = tokio::task::spawn_blocking(move || {
                consume(stream, file, &preset, &signals, rules)
            })
            .await
            .map_err(|_| ToolError::bug("the result consumer stopped unexpectedly"))??;
            let Consumed {
                finished,
                rows,
                other,
                header,
                file,
                set,
                found: in_stream,
            } = consumed;
            found.extend(in_stream);
            // A tool that declares a row set gets it as structuredContent, cut or not.
            let structured = |set: RowSet, saved: Option<&str>| {
                tool.output_schema
                    .is_some()
                    .then(|| set.value(header.as_deref().unwrap_or_default(), saved))
            };
            if other == 0 && rows <= 1 {
                let text = match &header {
                    Some(h) if rows == 1 => format!("No rows matched (columns: {}).", h.join(", ")),
                    _ => NO_MATCHES.to_string(),
                };
                return Ok(CallOutcome::ok(text, structured(set, None), level, None));
            }
            match (finished.preview, finished.full_text_if_small) {
                (None, Some(small)) => {
                    Ok(CallOutcome::ok(small, structured(set, None), level, None))
                }
                (Some(preview), _) => {
                    let saved = file
                        .commit(&ws, extension(preview.kind))
                        .map_err(save_error)?;
                    Ok(CallOutcome::ok(
                        saved_text(&preview, &saved),
                        structured(set, Some(&saved.path)),
                        level,
                        Some(saved.path),
                    ))
                }
                (None, None) => Ok(CallOutcome::ok(
                    NO_MATCHES.into(),
                    structured(set, None),
                    level,
                    None,
                )),
            }
        }
    }
}

/// What consuming a streamed result produced.
struct Consumed {
    finished: context::StreamOutcome,
    rows: usize,
    other: usize,
    header: Option<Vec<String>>,
    file: ResultFile,
    set: RowSet,
    found: Vec<Finding>,
}

/// Reads the stream to its end on a blocking thread (at nice 10), writing it to `file` and
/// building the preview; stops early (and the file removes itself) when the call is cancelled,
/// including when the producer ended its stream because of it.
fn consume(
    mut stream: futures::stream::BoxStream<'static, Result<Chunk, ToolError>>,
    mut file: ResultFile,
    preset: &Preset,
    signals: &CallSignals,
    rules: Option<&'static Rules>,
) -> Result<Consumed, ToolError> {
    let mut found = Vec::new();
    let mut bytes = rules.map(|r| StreamRedactor::new(r, inspect::STREAM_WINDOW));
    let cancelled = || ToolError::retry("the call was cancelled");
    let _ = rustix::process::setpriority_process(None, 10);
    let mut sp = StreamPreview::new(
        preset,
        None,
        std::io::BufWriter::with_capacity(1 << 16, &mut file),
    );
    // What arrived, to say so plainly when nothing matched.
    let (mut rows, mut other) = (0usize, 0usize);
    let mut header: Option<Vec<String>> = None;
    let mut set = RowSet::new(preset);
    while let Some(item) = futures::executor::block_on(stream.next()) {
        if signals.is_stopped() {
            return Err(cancelled());
        }
        let pushed = match item? {
            Chunk::Line(mut l) => {
                other += 1;
                if let Some(r) = rules {
                    inspect::redact_text(r, &mut l, &format!("result line {other}"), &mut found);
                }
                sp.push_line(&l)
            }
            Chunk::Row(mut r) => {
                rows += 1;
                if let Some(rules) = rules {
                    for (i, cell) in r.iter_mut().enumerate() {
                        let at = format!("result row {rows} column {}", i + 1);
                        inspect::redact_text(rules, cell, &at, &mut found);
                    }
                }
                let cells: Vec<&str> = r.iter().map(String::as_str).collect();
                let pushed = sp.push_row(&cells);
                if header.is_none() {
                    header = Some(r);
                } else {
                    set.push(r);
                }
                pushed
            }
            Chunk::Bytes(b) => {
                other += usize::from(!b.is_empty());
                match &mut bytes {
                    Some(red) => {
                        let ready = red.push(&b);
                        if ready.is_empty() {
                            Ok(())
                        } else {
                            sp.push_chunk(&ready)
                        }
                    }
                    None => sp.push_chunk(&b),
                }
            }
        };
        pushed.map_err(save_error)?;
    }
    if signals.is_stopped() {
        return Err(cancelled());
    }
    if let Some(red) = &mut bytes {
        let rest = red.finish();
        if !rest.is_empty() {
            sp.push_chunk(&rest).map_err(save_error)?;
        }
        found.extend(red.found().iter().map(|rule| Finding {
            rule,
            at: "result".into(),
        }));
    }
    let finished = sp.finish().map_err(save_error)?;
    Ok(Consumed {
        finished,
        rows,
        other,
        header,
        file,
        set,
        found,
    })
}

/// The rows of a streamed row set kept for `structuredContent`: the preset's head and tail rows
/// and the total, so a cut result keeps the declared shape (`omitted_rows` says how many are left
/// out, `saved_to` where all of them are).
struct RowSet {
    head: Vec<Vec<String>>,
    tail: std::collections::VecDeque<Vec<String>>,
    head_max: usize,
    tail_max: usize,
    total: u64,
}

impl RowSet {
    fn new(preset: &Preset) -> RowSet {
        RowSet {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            head_max: preset.rows_head,
            tail_max: preset.rows_tail,
            total: 0,
        }
    }

    fn push(&mut self, row: Vec<String>) {
        self.total += 1;
        if self.head.len() < self.head_max {
            self.head.push(row);
        } else if self.tail_max > 0 {
            if self.tail.len() == self.tail_max {
                self.tail.pop_front();
            }
            self.tail.push_back(row);
        }
    }

    fn value(self, columns: &[String], saved_to: Option<&str>) -> Value {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let rows: Vec<Value> = self
            .head
            .into_iter()
            .chain(self.tail)
            .map(|r| {
                Value::Object(
                    columns
                        .iter()
                        .cloned()
                        .zip(
                            r.into_iter()
                                .map(Value::String)
                                .chain(std::iter::repeat(Value::from(""))),
                        )
                        .collect(),
                )
            })
            .collect();
        let mut v = serde_json::json!({
            "columns": columns,
            "rows": rows,
            "total_rows": self.total,
            "omitted_rows": self.total - kept,
        });
        if let Some(p) = saved_to {
            v["saved_to"] = Value::from(p);
        }
        v
    }
}

/// A JSON result as `structuredContent`, which MCP defines as an object: a list, string or number
/// reaches the client as text only (clients refuse a result whose `structuredContent` is not an
/// object, as the official Python SDK does).
fn structured_content(value: Value) -> Option<Value> {
    value.is_object().then_some(value)
}
