//! `bulkhead connect`'s calls for 2026-07-28 desktop clients, where a server sends no requests of
//! its own: a question an instance asks during a call (an approval) becomes an `input_required`
//! answer whose `requestState` names the waiting call, and the retry that carries the person's
//! answer resumes that call, which the instance then runs or refuses.
//!
//! One call with a person's question waits at a time; a new call (without that `requestState`)
//! ends the wait, and the instance is told nobody answered, so what was asked does not run.

use super::asks::Question;
use super::{AskRelay, McpClient};
use crate::errors::FATAL_PREFIX;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitResult, InputRequest, InputRequests, InputRequiredResult, ResultType,
};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;

/// The key of the one question in an `input_required` answer of the bridge.
const INPUT_KEY: &str = crate::approval::INPUT_KEY;

/// The call waiting for a person's answer, if any.
#[derive(Default)]
pub(crate) struct Rounds {
    waiting: Mutex<Option<Waiting>>,
}

/// A call the instance is holding until the person answers.
struct Waiting {
    /// The `requestState` handed to the desktop client (128 random bits).
    state: String,
    answer: tokio::sync::oneshot::Sender<ElicitResult>,
    call: JoinHandle<CallToolResult>,
    questions: mpsc::Receiver<Question>,
}

impl Rounds {
    /// Runs `request` on `client` for a 2026-07-28 desktop client: the call's result, or an
    /// `input_required` answer when the instance asks a person.
    pub(crate) async fn call(
        &self,
        client: &Arc<McpClient>,
        relay: &AskRelay,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut waiting = self.waiting.lock().await;
        let (mut call, mut questions) = match request.request_state.as_deref() {
            Some(state) => {
                if waiting.as_ref().is_none_or(|w| w.state != state) {
                    return Err(ErrorData::invalid_params(
                        "bulkhead connect: `requestState` names no question waiting here (answered already, or ended by a later call)",
                        None,
                    ));
                }
                let answer = answer_of(request.input_responses)?;
                let w = waiting.take().expect("checked above");
                // A dropped receiver means the instance stopped waiting; the call says why.
                let _ = w.answer.send(answer);
                (w.call, w.questions)
            }
            None => {
                // A question left unanswered ends here: the instance hears nobody answered.
                *waiting = None;
                let (ask, questions) = mpsc::channel(1);
                relay.set_rounds(ask);
                let (client, name) = (client.clone(), request.name.to_string());
                let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
                let call = tokio::spawn(async move {
                    match client.call_tool(&name, args).await {
                        Ok(reply) => reply.raw,
                        Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                            "{FATAL_PREFIX}bulkhead connect: {e}"
                        ))]),
                    }
                });
                (call, questions)
            }
        };
        tokio::select! {
            done = &mut call => {
                let mut result = done.unwrap_or_else(|e| {
                    CallToolResult::error(vec![ContentBlock::text(format!(
                        "{FATAL_PREFIX}bulkhead connect: the call failed: {e}"
                    ))])
                });
                result.result_type = Some(ResultType::COMPLETE);
                Ok(result.into())
            }
            Some(question) = questions.recv() => {
                let state = fresh_state();
                let asked = input_required(question.params, &state)?;
                *waiting = Some(Waiting { state, answer: question.answer, call, questions });
                Ok(asked.into())
            }
        }
    }
}

/// The person's answer in a retry's `inputResponses`.
fn answer_of(responses: Option<rmcp::model::InputResponses>) -> Result<ElicitResult, ErrorData> {
    let response = responses
        .and_then(|mut r| r.remove(INPUT_KEY))
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("bulkhead connect: `inputResponses` has no `{INPUT_KEY}` answer"),
                None,
            )
        })?;
    serde_json::from_value(response).map_err(|e| {
        ErrorData::invalid_params(
            format!(
                "bulkhead connect: `inputResponses.{INPUT_KEY}` is not an elicitation result: {e}"
            ),
            None,
        )
    })
}

/// The instance's question as an `input_required` answer, unchanged.
fn input_required(
    params: ElicitRequestParams,
    state: &str,
) -> Result<InputRequiredResult, ErrorData> {
    let request: InputRequest = serde_json::from_value(serde_json::json!({
        "method": "elicitation/create",
        "params": params,
    }))
    .map_err(|e| ErrorData::internal_error(format!("bulkhead connect: the question: {e}"), None))?;
    let mut requests = InputRequests::new();
    requests.insert(INPUT_KEY.to_owned(), request);
    Ok(InputRequiredResult::new(
        Some(requests),
        Some(state.to_owned()),
    ))
}

/// 128 random bits, base64url.
fn fresh_state() -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
