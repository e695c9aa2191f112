//! Handlers for the snapshot fixtures' Rust tools (`crate::handlers` of this test binary, where
//! the generated registries look for `handlers::<server>::handlers()`); implementing each trait
//! proves it can be.

use bulkhead::codegen::{ToolContext, ToolOutput, ToolResult};

fn echo<T: std::fmt::Debug>(tool: &str, cx: &ToolContext, args: &T) -> ToolResult {
    Ok(ToolOutput::Text(format!(
        "{tool} at {}: {args:?}",
        cx.level()
    )))
}

pub mod kitchen {
    use super::echo;
    use crate::snapshots::kitchen::kitchen::{EchoAllArgs, FetchPageV2Args, Handlers, ResetArgs};
    use bulkhead::codegen::{ToolContext, ToolResult};

    pub struct Kitchen;

    pub fn handlers() -> Kitchen {
        Kitchen
    }

    impl Handlers for Kitchen {
        async fn echo_all(&self, cx: ToolContext, args: EchoAllArgs) -> ToolResult {
            echo("echo_all", &cx, &args)
        }
        async fn fetch_page_v2(&self, cx: ToolContext, args: FetchPageV2Args) -> ToolResult {
            echo("fetch-page.v2", &cx, &args)
        }
        async fn reset(&self, cx: ToolContext, args: ResetArgs) -> ToolResult {
            echo("reset", &cx, &args)
        }
    }
}

pub mod notes {
    use super::echo;
    use crate::snapshots::deploy::notes::{Handlers, ListNotesArgs};
    use bulkhead::codegen::{ToolContext, ToolResult};

    pub struct Notes;

    pub fn handlers() -> Notes {
        Notes
    }

    impl Handlers for Notes {
        async fn list_notes(&self, cx: ToolContext, args: ListNotesArgs) -> ToolResult {
            echo("list_notes", &cx, &args)
        }
    }
}

pub mod vault {
    use super::echo;
    use crate::snapshots::deploy::vault::{Handlers, LookupCustomerArgs, ReadSecretArgs};
    use bulkhead::codegen::{ToolContext, ToolResult};

    pub struct Vault;

    pub fn handlers() -> Vault {
        Vault
    }

    impl Handlers for Vault {
        async fn lookup_customer(&self, cx: ToolContext, args: LookupCustomerArgs) -> ToolResult {
            echo("lookup_customer", &cx, &args)
        }
        async fn read_secret(&self, cx: ToolContext, args: ReadSecretArgs) -> ToolResult {
            echo("read_secret", &cx, &args)
        }
    }
}
