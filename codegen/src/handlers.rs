//! The user's handler modules (`src/handlers/<server>.rs`) against the specs: a server with
//! `handler: rust` tools has its module, and a module implements no tool the spec no longer
//! has. Both are reported at a file and line, like spec errors, before rustc sees the
//! generated code (whose errors would point into `OUT_DIR`).

use crate::BuildError;
use crate::diag::{Diagnostic, Diagnostics};
use crate::model::{Model, Server, Target};
use crate::source::{SourceFile, Span};
use std::path::Path;

/// In a project with `src/handlers/mod.rs`, every server with `handler: rust` tools needs its
/// module (`src/handlers/<server>.rs`, declared with `pub mod <server>;`): reported here, at the
/// spec, rather than by rustc inside `OUT_DIR`.
pub fn check_handler_modules(root: &Path, model: &Model) -> Result<(), BuildError> {
    let registry = root.join("src/handlers/mod.rs");
    let Ok(mods) = std::fs::read_to_string(&registry) else {
        return Ok(());
    };
    let mut errors = Vec::new();
    for s in &model.servers {
        let Some(site) = &s.handler_site else {
            // No tool is a handler any more: a module left behind would fail inside rustc.
            let file = root.join("src/handlers").join(format!("{}.rs", s.name));
            if file.exists() {
                errors.extend(leftover_methods(root, &file, s));
            }
            continue;
        };
        let file = root.join("src/handlers").join(format!("{}.rs", s.name));
        let declared = mods
            .lines()
            .any(|l| l.trim() == format!("pub mod {};", s.name));
        let missing = match (file.exists(), declared) {
            (true, true) => {
                errors.extend(leftover_methods(root, &file, s));
                continue;
            }
            (false, _) => format!("src/handlers/{}.rs does not exist", s.name),
            (true, false) => format!("src/handlers/mod.rs does not declare `pub mod {};`", s.name),
        };
        let mut d = site.clone();
        d.message = format!(
            "server `{}` has `handler: rust` tools, but {missing}",
            s.name
        );
        d.label = "implemented in Rust".into();
        d.help = Some(format!(
            "create src/handlers/{}.rs with `pub fn handlers()` and `impl Handlers for …` (like src/handlers/template.rs) and add `pub mod {};` to src/handlers/mod.rs; `bulkhead new server|tool` writes both for you",
            s.name, s.name
        ));
        errors.push(d);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(BuildError::Specs(Diagnostics(errors).sorted()))
    }
}

/// Each method of the module's `impl Handlers for …` that handles no `handler: rust` tool of
/// `server` (the tool was removed or renamed in its spec), as an error at the method.
fn leftover_methods(root: &Path, file: &Path, server: &Server) -> Vec<Diagnostic> {
    let display = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let Ok(source) = SourceFile::read(file, display) else {
        return Vec::new();
    };
    // A module that does not parse is rustc's to report.
    let Ok(parsed) = syn::parse_file(&source.text) else {
        return Vec::new();
    };
    let handled: Vec<&str> = server
        .tools
        .iter()
        .filter(|t| matches!(t.target, Target::Handler))
        .map(|t| t.ident.as_str())
        .collect();
    let mut out = Vec::new();
    for item in &parsed.items {
        let syn::Item::Impl(imp) = item else { continue };
        let is_handlers = imp
            .trait_
            .as_ref()
            .is_some_and(|(path, _)| path.segments.last().is_some_and(|s| s.ident == "Handlers"));
        if !is_handlers {
            continue;
        }
        for member in &imp.items {
            let syn::ImplItem::Fn(f) = member else {
                continue;
            };
            let name = f.sig.ident.to_string();
            if handled.contains(&name.as_str()) {
                continue;
            }
            let span = fn_span(&source.text, &name);
            out.push(
                Diagnostic::error(
                    &source,
                    span,
                    format!(
                        "`{name}` handles no tool of server `{}`",
                        server.name
                    ),
                )
                .label(format!("no `handler: rust` tool `{name}` in specs/servers/{}.yaml", server.name))
                .help(format!(
                    "the tool was removed or renamed in its spec: delete this method (and the `{}Args`/`{}Result` types it imports), or declare the tool again",
                    pascal(&name),
                    pascal(&name)
                )),
            );
        }
    }
    out
}

/// Where `fn <name>` is written in `text` (the name itself), or the file's start.
fn fn_span(text: &str, name: &str) -> Span {
    let needle = format!("fn {name}");
    let start = text
        .match_indices(&needle)
        .map(|(i, _)| i + 3)
        .find(|&i| !text[i + name.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        .unwrap_or(0);
    let end = if start == 0 { 0 } else { start + name.len() };
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Span {
        line,
        col,
        start,
        end,
    }
}

/// `snake_case` → `PascalCase` (the generated argument and result types' names).
fn pascal(name: &str) -> String {
    name.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}
