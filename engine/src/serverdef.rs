//! A server as generated code declares it: its tools, resources, prompts and presets.

use crate::policy::Sensitivity;
use crate::resourcedef::{PromptDef, ResourceDef};
use crate::tooldef::{PresetDef, ToolDef};

/// A server: what generated code declares about it.
#[derive(Debug)]
pub struct ServerDef {
    /// Server name.
    pub name: &'static str,
    /// Instructions sent at initialisation.
    pub instructions: &'static str,
    /// Context presets the server defines.
    pub presets: &'static [PresetDef],
    /// Tools, sorted by name.
    pub tools: &'static [ToolDef],
    /// Resources, sorted by name.
    pub resources: &'static [ResourceDef],
    /// Prompts, sorted by name.
    pub prompts: &'static [PromptDef],
}

impl ServerDef {
    /// A tool by name.
    pub fn tool(&self, name: &str) -> Option<&'static ToolDef> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The highest sensitivity any tool can raise a session to.
    pub fn max_sensitivity(&self) -> Sensitivity {
        self.tools
            .iter()
            .chain(self.resources.iter().map(|r| &r.tool))
            .map(|t| t.sensitivity)
            .max()
            .unwrap_or_default()
    }
}
