//! Semantic checks after the schema: names, references, limits, and the policy rules of the
//! promise. Every check reports at a position and all errors are collected.

mod connectors;
mod deployments;
mod own_secrets;
mod params;
pub(crate) mod reason;
mod resources;
mod returns;
mod secrets;
mod servers;
mod warnings;

pub use connectors::sql_named_params;

use crate::diag::Diagnostic;
use crate::model::Model;
use crate::source::{SourceFile, Span};
use crate::spec::{ConnectorSpec, DeploymentSpec, ServerSpec, SpecKind};
use crate::yaml::Node;
use std::collections::BTreeSet;

/// A parsed spec file with its tree (for positions) and its typed content.
pub struct Loaded<T> {
    /// The file.
    pub file: SourceFile,
    /// The position tree.
    pub root: Node,
    /// The typed spec.
    pub spec: T,
    /// Whether parts with schema errors were left out to check the rest (those errors are
    /// reported already; checks that would only repeat them stay quiet).
    pub partial: bool,
}

impl<T> Loaded<T> {
    /// Position of the key (or, failing that, the value) at a JSON pointer.
    pub fn key_at(&self, pointer: &str) -> Span {
        let (node, key) = self.root.locate(pointer);
        key.unwrap_or(node)
    }

    /// Position of the value at a JSON pointer.
    pub fn value_at(&self, pointer: &str) -> Span {
        self.root.locate(pointer).0
    }

    /// An error at the key of `pointer`.
    pub fn error_at_key(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(&self.file, self.key_at(pointer), message)
    }

    /// An error at the value of `pointer`.
    pub fn error_at_value(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(&self.file, self.value_at(pointer), message)
    }
}

/// Escapes a map key for use in a JSON pointer.
pub fn ptr(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Checks every loaded spec and builds the model (images tagged `default_tag` unless a
/// deployment names a tag), or returns every error found.
pub fn check(
    connectors: &[Loaded<ConnectorSpec>],
    servers: &[Loaded<ServerSpec>],
    deployments: &[Loaded<DeploymentSpec>],
    declared: &BTreeSet<(SpecKind, String)>,
    default_tag: &str,
    config: Option<&serde_json::Value>,
) -> Result<Model, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let connectors_model = connectors::check(connectors, &mut errors);
    own_secrets::check(connectors, config, &mut errors);
    let servers_model = servers::check(servers, &connectors_model, declared, &mut errors);
    let deployments_model = deployments::check(
        deployments,
        &servers_model,
        declared,
        default_tag,
        &mut errors,
    );
    secrets::check(
        connectors,
        &connectors_model,
        &servers_model,
        &deployments_model,
        &mut errors,
    );
    if errors.is_empty() {
        let mut warnings = warnings::results_unreadable(servers, &servers_model, &connectors_model);
        warnings.extend(warnings::unreachable_from_none(
            servers,
            &servers_model,
            &connectors_model,
        ));
        warnings.extend(warnings::production_without_digest(
            deployments,
            &deployments_model,
        ));
        warnings.extend(warnings::connect_reach_undeclared(
            deployments,
            &deployments_model,
            &servers_model,
            &connectors_model,
        ));
        Ok(Model {
            connectors: connectors_model,
            servers: servers_model,
            deployments: deployments_model,
            warnings,
            config: None,
            workspace: None,
            owners: Vec::new(),
        })
    } else {
        Err(errors)
    }
}

/// Whether `name` can name a trust domain: 1 to 64 lowercase letters, digits, `_` and `-` (it
/// becomes a file name and a database key). The runtime's configuration checks the same rule.
pub fn is_trust_domain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Whether `name` is a lowercase identifier usable as a Rust module/field name.
pub fn is_snake_ident(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 64
        && !is_rust_keyword(name)
}

/// Rust keywords that cannot be plain identifiers.
pub fn is_rust_keyword(name: &str) -> bool {
    matches!(
        name,
        "as" | "async"
            | "await"
            | "break"
            | "const"
            | "continue"
            | "crate"
            | "dyn"
            | "else"
            | "enum"
            | "extern"
            | "false"
            | "fn"
            | "for"
            | "gen"
            | "if"
            | "impl"
            | "in"
            | "let"
            | "loop"
            | "match"
            | "mod"
            | "move"
            | "mut"
            | "pub"
            | "ref"
            | "return"
            | "self"
            | "static"
            | "struct"
            | "super"
            | "trait"
            | "true"
            | "type"
            | "unsafe"
            | "use"
            | "where"
            | "while"
            | "abstract"
            | "become"
            | "box"
            | "do"
            | "final"
            | "macro"
            | "override"
            | "priv"
            | "try"
            | "typeof"
            | "unsized"
            | "virtual"
            | "yield"
    )
}

/// `{name}` placeholders in a template, in order.
pub fn placeholders(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                out.push(after[..close].to_string());
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
}
