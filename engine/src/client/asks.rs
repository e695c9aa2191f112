//! Questions a server asks a person (`elicitation/create`, e.g. a tool's approval), relayed by
//! `bulkhead connect` to the desktop client it serves. Clients that serve nobody ([`AskRelay::none`])
//! declare no elicitation, so a server refuses a call that needs a person instead of asking.

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    FormElicitationCapability,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer};
use std::sync::{Arc, RwLock};

/// Where a server's questions go: nowhere, or the peer of the desktop client's session.
#[derive(Clone, Default)]
pub struct AskRelay {
    enabled: bool,
    desktop: Arc<RwLock<Option<Peer<RoleServer>>>>,
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
        *self.desktop.write().unwrap_or_else(|p| p.into_inner()) = Some(peer);
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
        let Some(desktop) = desktop else {
            return Err(ErrorData::invalid_request(
                "bulkhead connect: no desktop client to ask",
                None,
            ));
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
