//! Questions a server asks a person (`elicitation/create`, e.g. a tool's approval), relayed by
//! `bulkhead connect` to the desktop client it serves: as `elicitation/create` on a 2025 session,
//! or handed to the bridge, which answers the call `input_required` (2026-07-28, where a server
//! sends no requests of its own). Clients that serve nobody ([`AskRelay::none`]) declare no
//! elicitation, so a server refuses a call that needs a person instead of asking.

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    FormElicitationCapability,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer};
use std::sync::{Arc, RwLock};
use tokio::sync::{mpsc, oneshot};

/// A question for the person at a 2026-07-28 desktop client, and where its answer goes.
pub(crate) struct Question {
    /// The server's `elicitation/create` parameters, unchanged.
    pub(crate) params: ElicitRequestParams,
    /// The person's answer (dropped: nobody answered, which the server is told).
    pub(crate) answer: oneshot::Sender<ElicitResult>,
}

/// Where the desktop client's questions go.
#[derive(Clone)]
enum Desktop {
    /// A 2025 session: asked with `elicitation/create`.
    Session(Peer<RoleServer>),
    /// A 2026-07-28 client: the bridge turns the question into an `input_required` answer.
    Rounds(mpsc::Sender<Question>),
}

/// Where a server's questions go: nowhere, or the desktop client that made the call.
#[derive(Clone, Default)]
pub struct AskRelay {
    enabled: bool,
    desktop: Arc<RwLock<Option<Desktop>>>,
}

impl AskRelay {
    /// A client that cannot ask anyone (declares no elicitation).
    pub fn none() -> AskRelay {
        AskRelay::default()
    }

    /// A relay to the desktop client of `bulkhead connect` (declares form elicitation; the peer
    /// is set by the bridge when the desktop client calls).
    pub fn to_desktop() -> AskRelay {
        AskRelay {
            enabled: true,
            desktop: Arc::default(),
        }
    }

    /// The desktop client's session, to which questions go from now on.
    pub fn set(&self, peer: Peer<RoleServer>) {
        *self.desktop.write().unwrap_or_else(|p| p.into_inner()) = Some(Desktop::Session(peer));
    }

    /// A 2026-07-28 desktop client: questions go to `rounds` from now on.
    pub(crate) fn set_rounds(&self, rounds: mpsc::Sender<Question>) {
        *self.desktop.write().unwrap_or_else(|p| p.into_inner()) = Some(Desktop::Rounds(rounds));
    }
}

impl ClientHandler for AskRelay {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        if self.enabled {
            let mut elicitation = ElicitationCapability::new();
            elicitation.form = Some(FormElicitationCapability::new());
            caps.elicitation = Some(elicitation);
        }
        let mut config = ClientConfig::default();
        config.capabilities = caps;
        config
    }

    /// Asks the desktop client; a desktop client that declared no form elicitation (or none
    /// connected yet) gets nothing, and the server is told no one can be asked.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let desktop = self
            .desktop
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let desktop = match desktop {
            None => {
                return Err(ErrorData::invalid_request(
                    "bulkhead connect: no desktop client to ask",
                    None,
                ));
            }
            Some(Desktop::Rounds(rounds)) => {
                let (answer, answered) = oneshot::channel();
                let nobody = || {
                    ErrorData::invalid_request(
                        "bulkhead connect: nobody answered the question",
                        None,
                    )
                };
                rounds
                    .send(Question {
                        params: request,
                        answer,
                    })
                    .await
                    .map_err(|_| nobody())?;
                return answered.await.map_err(|_| nobody());
            }
            Some(Desktop::Session(peer)) => peer,
        };
        let can = desktop
            .peer_info()
            .is_some_and(|i| crate::approval::takes_forms(&i.capabilities));
        if !can {
            return Err(ErrorData::invalid_request(
                "bulkhead connect: the desktop client declared no elicitation",
                None,
            ));
        }
        desktop
            .create_elicitation(request)
            .await
            .map_err(|e| ErrorData::internal_error(format!("bulkhead connect: {e}"), None))
    }
}
