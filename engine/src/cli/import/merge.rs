//! Writing an import, and importing again as a diff: operations the document added, removed or
//! changed are reported; every decision a person made in the server spec is kept, and a tool
//! whose operation changed gets `undecided:` again, naming what changed. Files this command did
//! not write are never overwritten, and nothing is written unless every file is ready.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bulkhead_lang::spec::{OperationSpec, ServerSpec};
use serde_json::{Map, Value, json};

use super::emit::{self, MARK, Tool};
use super::{Imported, Operation, Proposal, connector_path, server_path};

/// What changed between the last import and this one.
#[derive(Debug, Default)]
struct Changes {
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<(String, String)>,
    unchanged: usize,
}

/// Writes the import's files under `root` and prints what changed.
pub(crate) fn write(root: &Path, imp: Imported) -> anyhow::Result<ExitCode> {
    let specs = root.join("specs");
    let (set, _) = if specs.is_dir() {
        bulkhead_lang::load::load_dir(&specs, root)?
    } else {
        Default::default()
    };
    let ours = |text: &str| text.lines().take(3).any(|l| l.starts_with(MARK));
    // Files to write: (path, text).
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    let mut old_ops: BTreeMap<String, Value> = BTreeMap::new();
    for c in &imp.connectors {
        let path = connector_path(root, &c.name);
        let existing = set.connectors.iter().find(|l| l.spec.name == c.name);
        if let Some(l) = existing {
            if !ours(&l.file.text) {
                anyhow::bail!(
                    "connector `{}` exists ({}) and was not written by an import: choose another --server",
                    c.name,
                    l.file.display
                );
            }
            for (name, op) in &l.spec.operations {
                old_ops.insert(format!("{}.{name}", c.name), serde_json::to_value(op)?);
            }
        } else if path.exists() {
            anyhow::bail!("{} exists: choose another --server", path.display());
        }
        let text = emit::connector(&imp, c);
        parses_as::<bulkhead_lang::spec::ConnectorSpec>(&text, &path)?;
        files.push((existing.map_or(path, |l| l.file.path.clone()), text));
    }
    let mut new_ops: BTreeMap<String, &Operation> = BTreeMap::new();
    for c in &imp.connectors {
        for op in &c.operations {
            new_ops.insert(format!("{}.{}", c.name, op.name), op);
        }
    }
    let mut changes = Changes::default();
    for (uses, op) in &new_ops {
        let now: OperationSpec = serde_json::from_value(op.to_json())
            .map_err(|e| anyhow::anyhow!("bug: operation {uses} is not a spec operation: {e}"))?;
        let now = serde_json::to_value(now)?;
        match old_ops.get(uses) {
            None => changes.added.push(uses.clone()),
            Some(was) if *was == now => changes.unchanged += 1,
            Some(was) => changes.changed.push((uses.clone(), difference(was, &now))),
        }
    }
    for uses in old_ops.keys() {
        if !new_ops.contains_key(uses) {
            changes.removed.push(uses.clone());
        }
    }

    let server_file = server_path(root, &imp.server);
    let existing = set.servers.iter().find(|l| l.spec.name == imp.server);
    if let Some(l) = existing
        && !ours(&l.file.text)
    {
        anyhow::bail!(
            "server `{}` exists ({}) and was not written by an import: choose another --server",
            imp.server,
            l.file.display
        );
    }
    if existing.is_none() && server_file.exists() {
        anyhow::bail!("{} exists: choose another --server", server_file.display());
    }
    let old: Option<&ServerSpec> = existing.map(|l| &l.spec);
    let (tools, gone) = tools(&imp.tools, old, &changes)?;
    let mut other = Map::new();
    if let Some(old) = old {
        for (key, present) in [
            ("context_presets", !old.context_presets.is_empty()),
            ("resources", !old.resources.is_empty()),
            ("prompts", !old.prompts.is_empty()),
        ] {
            if present {
                let v = serde_json::to_value(old)?;
                other.insert(key.into(), v[key].clone());
            }
        }
    }
    let instructions = old.map_or(imp.instructions.clone(), |o| o.instructions.clone());
    let text = emit::server(&imp, &instructions, &tools, &other);
    parses_as::<ServerSpec>(&text, &server_file)?;
    files.push((existing.map_or(server_file, |l| l.file.path.clone()), text));

    // Every file is ready: write them (each replaced whole, never half-written).
    for (path, text) in &files {
        std::fs::create_dir_all(path.parent().expect("a spec file has a folder"))?;
        let tmp = path.with_extension("yaml.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)?;
    }
    report(&imp, &changes, &gone, &tools, &files);
    Ok(ExitCode::SUCCESS)
}

/// Whether `text` reads as a `T` (a spec the build can load); a bug otherwise, and nothing is
/// written.
fn parses_as<T: serde::de::DeserializeOwned>(text: &str, path: &Path) -> anyhow::Result<()> {
    let value = bulkhead::config::load_yaml(text, &path.display().to_string())
        .map_err(|e| anyhow::anyhow!("bug: the text for {} is not YAML: {e}", path.display()))?;
    serde_json::from_value::<T>(value)
        .map_err(|e| anyhow::anyhow!("bug: the text for {} is not a spec: {e}", path.display()))?;
    Ok(())
}

/// What differs between two operations, in a few words.
fn difference(was: &Value, now: &Value) -> String {
    let mut said = Vec::new();
    for key in [
        "method",
        "path",
        "sql",
        "query",
        "body",
        "headers",
        "description",
    ] {
        if was.get(key) != now.get(key) {
            said.push(format!("its {key}"));
        }
    }
    let (a, b) = (
        was.get("params").and_then(Value::as_object),
        now.get("params").and_then(Value::as_object),
    );
    let names = |m: Option<&Map<String, Value>>| -> BTreeSet<String> {
        m.map(|m| m.keys().cloned().collect()).unwrap_or_default()
    };
    let (na, nb) = (names(a), names(b));
    for n in nb.difference(&na) {
        said.push(format!("parameter `{n}` added"));
    }
    for n in na.difference(&nb) {
        said.push(format!("parameter `{n}` removed"));
    }
    for n in na.intersection(&nb) {
        if a.and_then(|m| m.get(n)) != b.and_then(|m| m.get(n)) {
            said.push(format!("parameter `{n}` changed"));
        }
    }
    if said.is_empty() {
        "its definition".into()
    } else {
        said.join(", ")
    }
}

/// The server's tools: a person's decisions kept, new operations proposed, changed ones asked
/// again; tools of removed operations dropped (returned). Tools that use nothing this import
/// writes stay as they are.
fn tools(
    proposals: &[Proposal],
    old: Option<&ServerSpec>,
    changes: &Changes,
) -> anyhow::Result<(Vec<Tool>, Vec<String>)> {
    let mut out: Vec<Tool> = Vec::new();
    let mut gone = Vec::new();
    let old_tools: Vec<(String, Map<String, Value>, Option<String>)> = old
        .map(|o| {
            o.tools
                .iter()
                .map(|(n, t)| {
                    let v = serde_json::to_value(t).unwrap_or_default();
                    (
                        n.clone(),
                        v.as_object().cloned().unwrap_or_default(),
                        t.uses.clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut placed = BTreeSet::new();
    for p in proposals {
        let kept = old_tools
            .iter()
            .find(|(_, _, uses)| uses.as_deref() == Some(p.uses.as_str()));
        let changed = changes.changed.iter().find(|(u, _)| *u == p.uses);
        let entry = match (kept, changed) {
            (Some((name, fields, _)), None) => (name.clone(), fields.clone()),
            (Some((name, fields, _)), Some((_, what))) => {
                let mut fields = fields.clone();
                fields.insert(
                    "undecided".into(),
                    json!(format!(
                        "{} changed in the document ({what}); decide again (it was {} / {})",
                        p.what,
                        fields
                            .get("permission")
                            .and_then(Value::as_str)
                            .unwrap_or("?"),
                        fields
                            .get("sensitivity")
                            .and_then(Value::as_str)
                            .unwrap_or("?"),
                    )),
                );
                (name.clone(), fields)
            }
            (None, _) if old.is_some() && !changes.added.contains(&p.uses) && changed.is_none() => {
                // The operation was there before and its tool was removed by a person: not
                // offered again.
                continue;
            }
            (None, _) => (p.name.clone(), proposed(p)),
        };
        placed.insert(entry.0.clone());
        out.push(entry);
    }
    for (name, fields, uses) in &old_tools {
        if placed.contains(name) {
            continue;
        }
        match uses {
            Some(u) if changes.removed.contains(u) => gone.push(format!("{name} ({u})")),
            _ => out.push((name.clone(), fields.clone())),
        }
    }
    let mut seen = BTreeSet::new();
    for (name, _) in &out {
        if !seen.insert(name.clone()) {
            anyhow::bail!("two tools would be named `{name}`: rename one in the server spec");
        }
    }
    Ok((out, gone))
}

fn proposed(p: &Proposal) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("description".into(), json!(p.description));
    m.insert("permission".into(), json!(p.permission));
    m.insert("sensitivity".into(), json!(p.sensitivity));
    if p.approval {
        m.insert("approval".into(), json!("always"));
    }
    m.insert("context".into(), json!(p.context));
    m.insert("uses".into(), json!(p.uses));
    m.insert("undecided".into(), json!(p.why));
    m
}

fn report(
    imp: &Imported,
    c: &Changes,
    gone: &[String],
    tools: &[Tool],
    files: &[(PathBuf, String)],
) {
    for a in &c.added {
        println!("added: {a}");
    }
    for (u, what) in &c.changed {
        println!("changed: {u}: {what} (its tool is asked again)");
    }
    for r in &c.removed {
        println!("removed: {r}");
    }
    for g in gone {
        println!("removed tool: {g}");
    }
    if c.unchanged > 0 {
        println!(
            "unchanged: {} operation(s), their decisions kept",
            c.unchanged
        );
    }
    for d in &imp.skipped {
        println!("not imported: {}: {}", d.at, d.message);
    }
    for n in &imp.notes {
        println!("note: {n}");
    }
    let undecided = tools
        .iter()
        .filter(|(_, f)| f.contains_key("undecided"))
        .count();
    let written: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
    println!(
        "wrote {}: {undecided} tool(s) to decide (`bulkhead check` names each; delete `undecided:` once decided)",
        written.join(", ")
    );
}
