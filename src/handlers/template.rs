//! Handlers of the `template` server's Rust tools.

use crate::servers::template::{Handlers, LoadSensitiveDatasetArgs, LoadSensitiveDatasetResult};
use bulkhead::codegen::{ToolContext, ToolError};

/// The template server's handlers.
#[derive(Debug, Default)]
pub struct Template;

/// Constructs the handlers (called by the generated registry).
pub fn handlers() -> Template {
    Template
}

impl Handlers for Template {
    async fn load_sensitive_dataset(
        &self,
        cx: ToolContext,
        args: LoadSensitiveDatasetArgs,
    ) -> Result<LoadSensitiveDatasetResult, ToolError> {
        // The wrapper has already raised the session to this tool's level and recorded the dataset
        // before this runs; here we only produce the data.
        Ok(LoadSensitiveDatasetResult {
            note: format!(
                "Loaded dataset `{}` for session {}. The session now holds {} data: connect tools are refused from here on.",
                args.dataset_name,
                cx.session_id(),
                cx.level()
            ),
            dataset: args.dataset_name,
            level: cx.level().to_string(),
        })
    }
}
