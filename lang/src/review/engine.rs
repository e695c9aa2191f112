//! The `engine-changed` rule: what a revision builds its servers with — the engine crates as
//! `Cargo.lock` pins them, the code of those that live in the repository, the `[patch]` and
//! `[replace]` entries and engine dependency entries of `Cargo.toml`, `.cargo/config.toml` and
//! `build.rs` — compared between the base and the change. The policy comparison judges both
//! sides with this change's rules; this one says when those rules (or the runtime under them)
//! are not the base's.

use super::rule::Rule;
use super::rules::Weakening;
use std::collections::BTreeMap;

/// The engine's crates: what a project depends on (`bulkhead`), build-depends on
/// (`bulkhead-codegen`) and what those two are made of.
pub const ENGINE_CRATES: [&str; 4] = [
    "bulkhead",
    "bulkhead-codegen",
    "bulkhead-lang",
    "bulkhead-vocab",
];

/// What one revision builds its servers with, as its files say (read by the command, which has
/// git; see `bulkhead check --against`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineInputs {
    /// `Cargo.lock`, when the revision has one.
    pub lock: Option<String>,
    /// The root `Cargo.toml`.
    pub manifest: Option<String>,
    /// `.cargo/config.toml` (or `.cargo/config`), which can override any crate's source.
    pub cargo_config: Option<String>,
    /// `build.rs`, which runs the generator.
    pub build_script: Option<String>,
    /// Engine crates whose code is in the repository: package name → (folder, content id).
    pub in_tree: BTreeMap<String, (String, String)>,
}

/// The `[package] name` of a `Cargo.toml`, when it parses and has one.
pub fn package_name(manifest: &str) -> Option<String> {
    let t: toml::Table = manifest.parse().ok()?;
    t.get("package")?.get("name")?.as_str().map(str::to_string)
}

/// The engine crates `manifest` takes by path (`[dependencies]`, `[build-dependencies]`):
/// (package, path as written).
pub fn engine_paths(manifest: &str) -> Vec<(String, String)> {
    let Ok(t) = manifest.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for section in ["dependencies", "build-dependencies"] {
        for (name, v) in t
            .get(section)
            .and_then(|d| d.as_table())
            .into_iter()
            .flatten()
        {
            let package = v.get("package").and_then(|p| p.as_str()).unwrap_or(name);
            if let Some(path) = v.get("path").and_then(|p| p.as_str())
                && ENGINE_CRATES.contains(&package)
            {
                out.push((package.to_string(), path.to_string()));
            }
        }
    }
    out
}

/// The id of a file's bytes in the line a reviewer acknowledges: the first 16 hex digits of its
/// SHA-256 (the file is compared whole; the id keeps an acknowledgement of one change from
/// matching another).
fn short_id(text: Option<&str>) -> String {
    use sha2::Digest as _;
    match text {
        None => "none".to_string(),
        Some(t) => {
            let digest = sha2::Sha256::digest(t.as_bytes());
            digest[..8].iter().map(|b| format!("{b:02x}")).collect()
        }
    }
}

/// The engine crates `lock` pins: name → `version (source)`; a lock that does not parse is one
/// entry saying so (compared like any other, so it fails closed).
fn pinned(lock: Option<&str>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(lock) = lock else {
        return out;
    };
    let Ok(t) = lock.parse::<toml::Table>() else {
        out.insert(
            "Cargo.lock".to_string(),
            format!("unparsable ({})", short_id(Some(lock))),
        );
        return out;
    };
    let packages = t.get("package").and_then(|p| p.as_array());
    for p in packages.into_iter().flatten() {
        let field = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or_default();
        let name = field("name");
        if !ENGINE_CRATES.contains(&name) {
            continue;
        }
        let source = match field("source") {
            "" => "path".to_string(),
            s => s.to_string(),
        };
        let mut pin = format!("{} ({source})", field("version"));
        if let Some(sum) = p.get("checksum").and_then(|v| v.as_str()) {
            // By characters: a tampered lock's checksum need not be ASCII.
            let short: String = sum.chars().take(12).collect();
            pin.push_str(&format!(" sha256 {short}"));
        }
        // Two versions of one crate in a lock: both count.
        out.entry(name.to_string())
            .and_modify(|have: &mut String| {
                have.push_str(", ");
                have.push_str(&pin);
            })
            .or_insert(pin);
    }
    out
}

/// The entries of `manifest` that choose the engine's code: every `[patch.*]` and `[replace]`
/// entry (of any crate: a patched dependency is code the engine runs) and every dependency
/// entry naming an engine crate; key → the entry as TOML.
fn overrides(manifest: Option<&str>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(manifest) = manifest else {
        return out;
    };
    let Ok(t) = manifest.parse::<toml::Table>() else {
        out.insert(
            "Cargo.toml".to_string(),
            format!("unparsable ({})", short_id(Some(manifest))),
        );
        return out;
    };
    let mut put = |key: String, v: &toml::Value| {
        out.insert(key, v.to_string());
    };
    if let Some(patch) = t.get("patch").and_then(|p| p.as_table()) {
        for (registry, crates) in patch {
            for (name, v) in crates.as_table().into_iter().flatten() {
                put(format!("[patch.{registry}] {name}"), v);
            }
        }
    }
    if let Some(replace) = t.get("replace").and_then(|p| p.as_table()) {
        for (name, v) in replace {
            put(format!("[replace] {name}"), v);
        }
    }
    let mut tables: Vec<(String, &toml::Table)> = Vec::new();
    for section in ["dependencies", "build-dependencies"] {
        if let Some(d) = t.get(section).and_then(|d| d.as_table()) {
            tables.push((section.to_string(), d));
        }
    }
    if let Some(d) = t
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(|d| d.as_table())
    {
        tables.push(("workspace.dependencies".to_string(), d));
    }
    if let Some(targets) = t.get("target").and_then(|d| d.as_table()) {
        for (cfg, tt) in targets {
            for section in ["dependencies", "build-dependencies"] {
                if let Some(d) = tt.get(section).and_then(|d| d.as_table()) {
                    tables.push((format!("target.{cfg}.{section}"), d));
                }
            }
        }
    }
    for (section, deps) in tables {
        for (name, v) in deps {
            let package = v.get("package").and_then(|p| p.as_str()).unwrap_or(name);
            if ENGINE_CRATES.contains(&package) {
                put(format!("[{section}] {name}"), v);
            }
        }
    }
    out
}

/// One `engine-changed` weakening per difference of two maps (added, removed or changed keys).
fn differences(
    base: &BTreeMap<String, String>,
    head: &BTreeMap<String, String>,
    subject: impl Fn(&str) -> String,
    file: impl Fn(&str) -> String,
    out: &mut Vec<Weakening>,
) {
    let keys: std::collections::BTreeSet<&String> = base.keys().chain(head.keys()).collect();
    for k in keys {
        let (b, h) = (base.get(k), head.get(k));
        if b == h {
            continue;
        }
        out.push(Weakening {
            rule: Rule::EngineChanged,
            subject: subject(k),
            change: format!(
                "{} → {}",
                b.map_or("none", String::as_str),
                h.map_or("none", String::as_str)
            ),
            file: file(k),
        });
    }
}

/// Every way the engine of `head` is not the engine of `base`.
pub fn engine_changed(base: &EngineInputs, head: &EngineInputs) -> Vec<Weakening> {
    let mut out = Vec::new();
    differences(
        &pinned(base.lock.as_deref()),
        &pinned(head.lock.as_deref()),
        |k| format!("crate `{k}` in Cargo.lock"),
        |_| "Cargo.lock".to_string(),
        &mut out,
    );
    let code = |i: &EngineInputs| -> BTreeMap<String, String> {
        i.in_tree
            .iter()
            .map(|(name, (folder, id))| (name.clone(), format!("{folder}/ at {id}")))
            .collect()
    };
    differences(
        &code(base),
        &code(head),
        |k| format!("crate `{k}`'s code"),
        |k| {
            head.in_tree
                .get(k)
                .or_else(|| base.in_tree.get(k))
                .map_or_else(String::new, |(folder, _)| format!("{folder}/"))
        },
        &mut out,
    );
    differences(
        &overrides(base.manifest.as_deref()),
        &overrides(head.manifest.as_deref()),
        |k| format!("Cargo.toml {k}"),
        |_| "Cargo.toml".to_string(),
        &mut out,
    );
    for (name, b, h) in [
        (".cargo/config.toml", &base.cargo_config, &head.cargo_config),
        ("build.rs", &base.build_script, &head.build_script),
    ] {
        if b != h {
            out.push(Weakening {
                rule: Rule::EngineChanged,
                subject: name.to_string(),
                change: format!("{} → {}", short_id(b.as_deref()), short_id(h.as_deref())),
                file: name.to_string(),
            });
        }
    }
    out.sort_by_key(Weakening::line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"
version = 4

[[package]]
name = "bulkhead"
version = "0.1.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

[[package]]
name = "serde"
version = "1.0.0"
"#;

    fn inputs() -> EngineInputs {
        EngineInputs {
            lock: Some(LOCK.to_string()),
            manifest: Some("[package]\nname = \"acme\"\n\n[dependencies]\nbulkhead = \"0.1.0\"\nserde = \"1\"\n".to_string()),
            cargo_config: None,
            build_script: Some("fn main() { bulkhead_codegen::build(); }\n".to_string()),
            in_tree: BTreeMap::new(),
        }
    }

    #[test]
    fn a_tampered_checksum_that_is_not_ascii_is_named_not_a_panic() {
        // Byte 12 falls inside a character.
        let lock = LOCK.replace("0123456789ab", "aééééééééééé");
        let pins = pinned(Some(&lock));
        assert!(pins["bulkhead"].contains("sha256 aééééééééééé"), "{pins:?}");
    }

    fn lines(base: &EngineInputs, head: &EngineInputs) -> Vec<String> {
        engine_changed(base, head)
            .iter()
            .map(Weakening::line)
            .collect()
    }

    #[test]
    fn the_same_engine_is_no_change() {
        assert!(lines(&inputs(), &inputs()).is_empty());
    }

    #[test]
    fn another_engine_version_in_the_lock_is_named() {
        let mut head = inputs();
        head.lock = Some(LOCK.replace("version = \"0.1.0\"", "version = \"0.2.0\""));
        let l = lines(&inputs(), &head);
        assert_eq!(l.len(), 1, "{l:?}");
        assert!(
            l[0].starts_with("engine-changed: crate `bulkhead` in Cargo.lock: 0.1.0 ("),
            "{l:?}"
        );
        assert!(l[0].contains("→ 0.2.0 ("), "{l:?}");
    }

    #[test]
    fn a_patch_of_any_crate_and_a_path_override_of_the_engine_are_named() {
        let mut head = inputs();
        head.manifest = Some(format!(
            "{}\n[patch.crates-io]\nbulkhead = {{ path = \"../my-bulkhead/engine\" }}\nrmcp = {{ path = \"../rmcp\" }}\n",
            head.manifest.unwrap()
        ));
        let l = lines(&inputs(), &head);
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(
            l.iter()
                .any(|l| l.contains("Cargo.toml [patch.crates-io] bulkhead: none → ")),
            "{l:?}"
        );
        assert!(
            l.iter().any(|l| l.contains("[patch.crates-io] rmcp")),
            "{l:?}"
        );
        // A dependency entry of an engine crate, renamed or not, counts; another crate's does not.
        let mut head = inputs();
        head.manifest = Some("[package]\nname = \"acme\"\n\n[dependencies]\nengine = { package = \"bulkhead\", path = \"../fork\" }\nserde = \"1.0.200\"\n".to_string());
        let l = lines(&inputs(), &head);
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(
            l.iter()
                .all(|l| l.contains("bulkhead") || l.contains("engine")),
            "{l:?}"
        );
    }

    #[test]
    fn build_script_cargo_config_and_in_tree_code_are_named() {
        let mut head = inputs();
        head.build_script = Some("fn main() {}\n".to_string());
        head.cargo_config = Some("paths = [\"../fork/engine\"]\n".to_string());
        let mut base = inputs();
        base.in_tree
            .insert("bulkhead".into(), ("engine".into(), "1111".into()));
        head.in_tree
            .insert("bulkhead".into(), ("engine".into(), "2222".into()));
        let l = lines(&base, &head);
        assert_eq!(l.len(), 3, "{l:?}");
        assert!(
            l.iter().any(|l| l
                == "engine-changed: crate `bulkhead`'s code: engine/ at 1111 → engine/ at 2222"),
            "{l:?}"
        );
        assert!(
            l.iter()
                .any(|l| l.starts_with("engine-changed: build.rs: ")),
            "{l:?}"
        );
        assert!(
            l.iter()
                .any(|l| l.starts_with("engine-changed: .cargo/config.toml: none → ")),
            "{l:?}"
        );
    }

    #[test]
    fn an_unparsable_lock_fails_closed() {
        let mut head = inputs();
        head.lock = Some("[[package]\nname = ".to_string());
        assert_eq!(
            lines(&inputs(), &head).len(),
            2,
            "the crate disappears and the lock is named"
        );
    }
}
