//! The `mcp` connector: an MCP server nobody here wrote, behind the same wrapper as every other
//! tool. Only operations a spec declares exist (an undeclared upstream tool, resource or prompt
//! is never listed and never callable: nothing here even names it), the description the model
//! sees is the spec's, and each declared upstream tool is pinned by the hash of its definition
//! in the connector's reviewed lock ([`pin`]).
//!
//! # Pinning (the invariant, enforced here)
//!
//! No answer of an upstream tool whose live definition differs from its pinned one reaches the
//! model. An upstream that tells of list changes has its list read when it starts and again
//! after every `notifications/tools/list_changed` (before the next call), so no call reaches a
//! drifted tool. An upstream that cannot tell (protocol 2026-07-28 without a tools subscription)
//! has its list read beside a call, unless a read *sent* at most `pin_max_age_ms` (default 100)
//! before the call vouches for it; the answer of a call with a read beside it is withheld when
//! that list no longer matches the pin. What is guaranteed: every answer released was preceded
//! by a list read sent no more than `pin_max_age_ms` before its call (or beside it) that
//! matched the pin, and a tool whose definition changed silently is refused at every call sent
//! `pin_max_age_ms` or more after the change at the latest (`0` restores a read beside every
//! call: refused at the first call whose read shows it). A call in that window may reach a tool
//! that drifted silently, as any call beside which the list is read may (the upstream is jailed
//! with no way out but its declared `egress`, so what the call hands it stays there). A
//! declared tool whose definition drifted (or that is no longer listed) is refused with a
//! `[FATAL]` error naming the fields that changed, until the lock is updated and reviewed. Other
//! tools keep working.
//!
//! # Lifecycle (decided here)
//!
//! An upstream over stdio is launched by the instance that runs its tools (so inside its
//! network namespace), in a jail of its own ([`confine`]): one process per instance, started on
//! the first call or readiness probe and shared by every session of the instance; or, with
//! `session_workspace: true` (an upstream that takes a root folder, such as the filesystem
//! server), one process per session, with that session's folder at `/workspace` as the only
//! folder it can write, at most `max_sessions` at once (the least recently used idle one is
//! stopped to make room; when all are busy the call is refused naming the limit) and each
//! stopped after `idle_seconds` without a call (checked on every call). The process gets only
//! the variables the spec declares (plus `PATH`, `HOME` and `LANG`, and on a proxied instance
//! the instance's proxy variables). Bounded: start time, time
//! per call, message size, tools listed, stderr lines logged; a crashed or closed upstream
//! answers the call in flight with a retryable error and is started again on a later call, no
//! sooner than a backoff that doubles from 0.5 s to 30 s while it keeps failing. A session's
//! upstream takes no call while the session's files are over its disk limits.

mod capped;
mod confine;
pub mod lockfile;
pub mod pin;
mod upstream;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bulkhead_vocab::connector::{McpSettings, SettingError};
use serde_json::Value;

use super::{ConnectorError, settings};
use crate::errors::ToolError;
use crate::policy::NetworkMode;
use crate::server::{JsonObject, ToolOutput, ToolResult};
use crate::signals::CallSignals;
use crate::tooldef::ConnectorDef;
use crate::workspace::SessionWorkspace;
use bulkhead_vocab::connector::OperationBody;

/// An `mcp` connector's settings (the vocabulary's type, expanded) with each bound read once.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    given: McpSettings,
    bounds: Bounds,
    per_session: bool,
    max_sessions: usize,
    idle: Duration,
    pin_max_age: Duration,
    limits: (u64, u64),
    proc: bool,
}

impl std::ops::Deref for Settings {
    type Target = McpSettings;

    fn deref(&self) -> &McpSettings {
        &self.given
    }
}

/// The bounds of one upstream.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    pub start: Duration,
    pub call: Duration,
    pub message_bytes: u64,
    pub tools: usize,
}

impl Settings {
    /// Reads every bound of `given` (defaults from the vocabulary).
    pub(crate) fn read(given: McpSettings) -> Result<Settings, SettingError> {
        Ok(Settings {
            bounds: Bounds {
                start: Duration::from_millis(given.start_timeout_ms()?),
                call: Duration::from_millis(given.call_timeout_ms()?),
                message_bytes: given.max_message_bytes()?,
                tools: usize::try_from(given.max_tools()?).unwrap_or(usize::MAX),
            },
            per_session: given.session_workspace()?,
            max_sessions: usize::try_from(given.max_sessions()?).unwrap_or(usize::MAX),
            idle: Duration::from_secs(given.idle_seconds()?),
            pin_max_age: Duration::from_millis(given.pin_max_age_ms()?),
            limits: (
                given.processes()?,
                given.memory_mb()?.saturating_mul(1 << 20),
            ),
            proc: given.proc()?,
            given,
        })
    }

    /// The program a launched upstream starts (empty for a `url` upstream).
    pub(crate) fn program(&self) -> String {
        self.given.program().unwrap_or_default().to_string()
    }

    pub(crate) fn per_session(&self) -> bool {
        self.per_session
    }

    pub(crate) fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// Processes and bytes of memory of one upstream.
    pub(crate) fn limits(&self) -> (u64, u64) {
        self.limits
    }

    /// Whether a launched upstream's jail has a `/proc`.
    pub(crate) fn proc(&self) -> bool {
        self.proc
    }

    pub(crate) fn idle(&self) -> Duration {
        self.idle
    }

    pub(crate) fn bounds(&self) -> Bounds {
        self.bounds
    }
}

/// A pinned upstream tool, as the generated code declares it.
struct Pinned {
    pin: String,
    definition: Value,
}

/// A built `mcp` connector.
pub struct Mcp {
    name: &'static str,
    settings: Settings,
    server: String,
    pinned: HashMap<String, Pinned>,
    /// The jail of a stdio upstream (none for a URL).
    confine: Option<confine::Confine>,
    /// The shared upstream (key `None`) or one per session (key `user/session`).
    upstreams: std::sync::Mutex<HashMap<Option<String>, Arc<Slot>>>,
}

/// One upstream and when it last took a call.
struct Slot {
    state: tokio::sync::Mutex<State>,
    used: std::sync::Mutex<Instant>,
}

#[derive(Default)]
struct State {
    live: Option<upstream::Live>,
    not_before: Option<Instant>,
    backoff: Duration,
}

const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The arguments as the upstream names them: each (spec name, upstream name) of `renames`
/// renamed; everything else as given (the wrapper validated them against the spec's schema).
pub fn upstream_args(mut args: JsonObject, renames: &[(String, String)]) -> JsonObject {
    for (ours, theirs) in renames {
        if let Some(v) = args.remove(ours) {
            args.insert(theirs.clone(), v);
        }
    }
    args
}

/// Where one call's upstream runs, and where its progress goes.
#[derive(Clone, Copy)]
pub struct Place<'a> {
    /// The instance's network mode.
    pub mode: NetworkMode,
    /// The calling session's workspace.
    pub workspace: &'a Arc<SessionWorkspace>,
    /// The call's signals (the upstream's progress lands here).
    pub signals: &'a CallSignals,
}

/// A request the upstream is told to stop (`notifications/cancelled`) when this is dropped
/// while `id` is set: the call ended before its answer.
struct Abandon {
    peer: rmcp::service::Peer<rmcp::RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(id) = self.id.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let peer = self.peer.clone();
            rt.spawn(async move {
                let _ = peer
                    .notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                        Some(id),
                        Some("the call ended before its answer".into()),
                    ))
                    .await;
            });
        }
    }
}

impl Mcp {
    /// Under a root server, the owner a launched upstream writes its `read_write` folders as.
    pub(crate) fn set_host_owner(&mut self, owner: Option<Arc<crate::workspace::HostOwner>>) {
        if let Some(c) = &mut self.confine {
            c.set_host_owner(owner);
        }
    }

    /// Reads the settings and the pins of the declared operations.
    pub fn new(
        def: &'static ConnectorDef,
        given: McpSettings,
        ops: &[crate::connectors::Operation],
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Mcp, ConnectorError> {
        let settings = Settings::read(given).map_err(settings::invalid(def))?;
        let bad = |reason: &str| ConnectorError::Settings {
            connector: def.name,
            reason: reason.into(),
        };
        let egress = crate::jail::egress::Egress::new(def.name, &settings.egress, lookup)
            .map_err(|e| bad(&e))?;
        let confine = match (&settings.command, &settings.url) {
            (Some(c), None) if !c.is_empty() && !c[0].is_empty() => Some(
                confine::Confine::new(
                    def.name,
                    c,
                    &settings,
                    egress,
                    crate::jail::helper_path(lookup),
                )
                .map_err(|e| bad(&e))?,
            ),
            (None, Some(_)) if !settings.egress.is_empty() => {
                return Err(bad(
                    "`egress` is for a launched upstream (`command`), not a `url`",
                ));
            }
            (None, Some(u)) if !u.is_empty() => None,
            _ => return Err(bad("set `command` (launch over stdio) or `url`, not both")),
        };
        if confine.is_none() && settings.per_session() {
            return Err(bad(
                "`session_workspace` needs an upstream launched over stdio",
            ));
        }
        let mut pinned = HashMap::new();
        let mut server = String::new();
        for op in ops {
            if let OperationBody::Mcp {
                tool,
                pin,
                definition,
                server: s,
                ..
            } = &op.body
            {
                let definition = serde_json::from_str(definition)
                    .map_err(|e| bad(&format!("the pinned definition of `{tool}`: {e}")))?;
                pinned.insert(
                    tool.clone(),
                    Pinned {
                        pin: pin.clone(),
                        definition,
                    },
                );
                server.clone_from(s);
            }
        }
        Ok(Mcp {
            name: def.name,
            settings,
            server,
            pinned,
            confine,
            upstreams: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// Readiness: the upstream starts, and no declared tool drifted from its pin. An upstream
    /// of one session starts with its session: readiness checks that its jail starts here.
    pub async fn probe(&self, mode: NetworkMode) -> Result<(), String> {
        if self.settings.per_session() {
            return match &self.confine {
                Some(c) => c.host().await.map(|_| ()),
                None => Ok(()),
            };
        }
        let slot = self.slot(None).map_err(|e| e.message().to_string())?;
        let mut state = slot.state.lock().await;
        self.ensure(&mut state, mode, None)
            .await
            .map_err(|e| e.message().to_string())?;
        let live = state.live.as_ref().expect("ensured");
        let mut drifted = Vec::new();
        for tool in self.sorted_tools() {
            if let Err(e) = self.check_pin(live, tool) {
                drifted.push(e.message().to_string());
            }
        }
        if drifted.is_empty() {
            Ok(())
        } else {
            Err(drifted.join("; "))
        }
    }

    fn sorted_tools(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.pinned.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// The upstream slot of `key`, made when missing: stops upstreams idle for longer than
    /// `idle_seconds`, and the least recently used idle one when `max_sessions` are running.
    fn slot(&self, key: Option<String>) -> Result<Arc<Slot>, ToolError> {
        let now = Instant::now();
        let idle = self.settings.idle();
        let mut map = self.upstreams.lock().expect("upstreams lock");
        // Stop idle upstreams of sessions (dropping a slot kills its process).
        map.retain(|k, slot| {
            k.is_none()
                || Arc::strong_count(slot) > 1
                || now.duration_since(*slot.used.lock().expect("used lock")) < idle
        });
        if let Some(slot) = map.get(&key) {
            *slot.used.lock().expect("used lock") = now;
            return Ok(slot.clone());
        }
        let max = self.settings.max_sessions();
        if key.is_some() && map.keys().filter(|k| k.is_some()).count() >= max {
            let lru = map
                .iter()
                .filter(|(k, slot)| k.is_some() && Arc::strong_count(slot) == 1)
                .min_by_key(|(_, slot)| *slot.used.lock().expect("used lock"))
                .map(|(k, _)| k.clone());
            match lru {
                Some(k) => {
                    map.remove(&k);
                }
                None => {
                    return Err(ToolError::retry(format!(
                        "limit `{}.max_sessions` ({max}) reached: that many sessions are using their own upstream right now; try again shortly",
                        self.name
                    )));
                }
            }
        }
        let slot = Arc::new(Slot {
            state: tokio::sync::Mutex::new(State::default()),
            used: std::sync::Mutex::new(now),
        });
        map.insert(key, slot.clone());
        Ok(slot)
    }

    /// Calls the upstream tool `tool` with validated `args`, from a call at `place`.
    pub async fn run(&self, tool: &str, args: JsonObject, place: Place<'_>) -> ToolResult {
        let session = self.settings.per_session().then_some(place.workspace);
        if let Some(ws) = session {
            ws.admit_nothing_more().map_err(|e| {
                if e.is_retryable() {
                    ToolError::retry(e)
                } else {
                    ToolError::fatal(e)
                }
            })?;
        }
        let key = session.map(|ws| {
            let id = ws.identity();
            format!("{}/{}", id.user(), id.session())
        });
        let slot = self.slot(key)?;
        let (peer, progress, vouched, _egress) = {
            let mut state = slot.state.lock().await;
            self.ensure(&mut state, place.mode, session.map(|w| &**w))
                .await?;
            let live = state.live.as_ref().expect("ensured");
            self.check_pin(live, tool)?;
            let vouched = live.watched() || live.listed_within(self.settings.pin_max_age);
            // The upstream may reach out (its gate is open) until this call returns: a call of
            // a `connect` tool, whose scope and level were checked before it got here.
            (live.peer(), live.progress(), vouched, live.during_call())
        };
        let bounds = self.settings.bounds();
        let params = rmcp::model::CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let request =
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        // One deadline over sending and answering (a send waits when the upstream stops reading
        // and its pipe fills). Until the answer comes, the call may end early (the limit, or the
        // caller went away): the upstream is then told to stop (`notifications/cancelled`).
        let exchange = async {
            let handle = peer
                .send_request_with_option(request, rmcp::service::PeerRequestOptions::no_options())
                .await?;
            let mut abandon = Abandon {
                peer: peer.clone(),
                id: Some(handle.id.clone()),
            };
            let _route = progress.route(handle.progress_token.clone(), place.signals);
            let answer = handle.await_response().await;
            abandon.id = None;
            answer
        };
        // An upstream that cannot tell of a changed list (2026-07-28 without a subscription) has
        // it read beside a call unless a read sent at most `pin_max_age_ms` before vouches for
        // it, and the answer is given only if that list still matches the pin (see the module
        // documentation for what that guarantees).
        let (answer, listed) = if vouched {
            (tokio::time::timeout(bounds.call, exchange).await, None)
        } else {
            let sent = Instant::now();
            let list = tokio::time::timeout(bounds.call, upstream::list_tools(&peer, bounds));
            let (answer, listed) = tokio::join!(tokio::time::timeout(bounds.call, exchange), list);
            (answer, Some((listed, sent)))
        };
        if let Some((listed, sent)) = listed {
            let mut state = slot.state.lock().await;
            match (listed, state.live.as_mut()) {
                (Ok(Ok(tools)), Some(live)) => {
                    live.set_tools_listed(tools, sent);
                    self.check_pin(live, tool)?;
                }
                (Ok(Err(e)), _) => {
                    return Err(ToolError::retry(format!(
                        "the upstream of `{}` could not be listed again: {e}",
                        self.name
                    )));
                }
                (Err(_), _) => {
                    return Err(ToolError::retry(format!(
                        "limit `{}.call_timeout_ms` ({} ms) reached: the upstream did not list its tools in time",
                        self.name,
                        bounds.call.as_millis()
                    )));
                }
                (Ok(Ok(_)), None) => {}
            }
        }
        let result = match answer {
            Err(_) => {
                return Err(ToolError::retry(format!(
                    "limit `{}.call_timeout_ms` ({} ms) reached: the upstream did not answer `{tool}` in time",
                    self.name,
                    bounds.call.as_millis()
                )));
            }
            Ok(Err(e)) => {
                // A closed transport is a crash: the next call starts the upstream again.
                let mut state = slot.state.lock().await;
                if state.live.as_ref().is_some_and(upstream::Live::is_closed) {
                    self.crashed(&mut state, &e.to_string());
                }
                return Err(ToolError::retry(format!(
                    "the upstream of `{}` failed during `{tool}` ({e}); try again",
                    self.name
                )));
            }
            Ok(Ok(rmcp::model::ServerResult::CallToolResult(r))) => r,
            Ok(Ok(_)) => {
                return Err(ToolError::retry(format!(
                    "the upstream of `{}` answered `{tool}` with something other than a tool result",
                    self.name
                )));
            }
        };
        *slot.used.lock().expect("used lock") = Instant::now();
        let text = upstream::text_of(&result);
        if result.is_error.unwrap_or(false) {
            return Err(ToolError::retry(format!(
                "`{tool}` answered an error: {text}"
            )));
        }
        Ok(ToolOutput::Text(text))
    }
    /// A drifted or vanished declared tool is refused, naming what changed.
    fn check_pin(&self, live: &upstream::Live, tool: &str) -> Result<(), ToolError> {
        let Some(pinned) = self.pinned.get(tool) else {
            return Err(ToolError::bug(format!(
                "upstream tool `{tool}` is not declared"
            )));
        };
        let Some((now, now_pin)) = live.definition(tool) else {
            return Err(ToolError::fatal(format!(
                "upstream tool `{tool}` of `{}` is no longer listed by the upstream ({}); refused until the lock is updated and reviewed",
                self.name,
                live.server()
            )));
        };
        if now_pin == pinned.pin {
            return Ok(());
        }
        let fields = pin::changed_fields(&pinned.definition, now);
        Err(ToolError::fatal(format!(
            "upstream tool `{tool}` of `{}` drifted from its pinned definition ({} changed; pinned {}, now {}); refused until `bulkhead mcp lock {}` is run and the lock reviewed",
            self.name,
            if fields.is_empty() {
                "its definition".to_string()
            } else {
                fields.join(", ")
            },
            pinned.pin,
            now_pin,
            self.name,
        )))
    }

    /// A live, listed upstream in `state`: started (no sooner than the backoff allows) and
    /// listed again after a `tools/list_changed`.
    async fn ensure(
        &self,
        state: &mut State,
        mode: NetworkMode,
        session: Option<&SessionWorkspace>,
    ) -> Result<(), ToolError> {
        if state.live.as_ref().is_some_and(upstream::Live::is_closed) {
            self.crashed(state, "the upstream closed its connection");
        }
        if let Some(live) = state.live.as_mut() {
            if live.take_changed()
                && let Err(e) = live.relist(self.settings.bounds()).await
            {
                let msg = e.to_string();
                self.crashed(state, &msg);
                return Err(ToolError::retry(format!(
                    "the upstream of `{}` could not be listed again: {msg}",
                    self.name
                )));
            }
            return Ok(());
        }
        if let Some(at) = state.not_before
            && Instant::now() < at
        {
            return Err(ToolError::retry(format!(
                "the upstream of `{}` is restarting after a failure; try again in {:.1} s",
                self.name,
                (at - Instant::now()).as_secs_f64()
            )));
        }
        match start(
            self.name,
            &self.settings,
            self.confine.as_ref(),
            mode,
            session,
        )
        .await
        {
            Ok(live) => {
                if !self.server.is_empty() && live.server() != self.server {
                    tracing::warn!(
                        connector = self.name,
                        pinned = self.server,
                        live = live.server(),
                        "the upstream's name or version differs from the lock"
                    );
                }
                state.live = Some(live);
                state.backoff = Duration::ZERO;
                state.not_before = None;
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                self.crashed(state, &msg);
                Err(ToolError::retry(format!(
                    "the upstream of `{}` did not start: {msg}",
                    self.name
                )))
            }
        }
    }

    fn crashed(&self, state: &mut State, why: &str) {
        tracing::warn!(
            connector = self.name,
            why,
            "upstream down; it starts again on a later call"
        );
        state.live = None;
        state.backoff = if state.backoff.is_zero() {
            BACKOFF_FIRST
        } else {
            (state.backoff * 2).min(BACKOFF_MAX)
        };
        state.not_before = Some(Instant::now() + state.backoff);
    }
}

/// Starts the upstream of `s`: a stdio one in its jail (`confine`) on an instance in `mode`,
/// with `session`'s folder at `/workspace` when given (copied up from lower layers first).
pub(crate) async fn start(
    connector: &'static str,
    s: &Settings,
    confine: Option<&confine::Confine>,
    mode: NetworkMode,
    session: Option<&SessionWorkspace>,
) -> anyhow::Result<upstream::Live> {
    let launch = match (confine, &s.command) {
        (Some(confine), Some(argv)) => {
            if let Some(ws) = session {
                ws.copy_up()
                    .map_err(|e| anyhow::anyhow!("the session's folder: {e}"))?;
            }
            let home = if session.is_some() {
                "/workspace"
            } else {
                "/tmp"
            };
            let mut env: Vec<(String, String)> = vec![
                ("HOME".into(), home.into()),
                ("LANG".into(), "C.UTF-8".into()),
            ];
            if let Ok(path) = std::env::var("PATH") {
                env.push(("PATH".into(), path));
            }
            for (k, v) in s.env.iter().flatten() {
                env.retain(|(key, _)| key != k);
                env.push((k.clone(), v.clone()));
            }
            Some(
                confine
                    .launch(argv, mode, session, &env)
                    .await
                    .map_err(|e| anyhow::anyhow!("`{connector}` cannot start: {e}"))?,
            )
        }
        _ => None,
    };
    upstream::Live::start(connector, s, launch).await
}
