//! `bulkhead check`: the build's spec diagnostics, on demand.

use super::git::git;
use std::path::Path;
use std::process::ExitCode;

/// Exit code of `check --against` when the change weakens policy without acknowledgement.
pub const WEAKENED: u8 = 3;
/// Exit code of `check --against` when no base revision could be loaded to compare with.
pub const BASE_UNRESOLVED: u8 = 4;
/// How far back along first parents `check --against` looks for a base that loads.
const WALK_BACK: usize = 20;

/// Loads and checks `root/specs` and the configuration (`config`, given by `--config`, else
/// `root/config.yaml`); prints a summary or every diagnostic. With `against`, also reviews the
/// effective policy against that git revision and fails closed: any weakening not
/// acknowledged, or a base that cannot be resolved, is a distinct non-zero exit.
pub fn run(
    root: &Path,
    config: Option<&Path>,
    against: Option<&str>,
    base_generated: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let config_path = config.map_or_else(|| root.join("config.yaml"), Path::to_path_buf);
    let given = config.is_some();
    let config_ok = check_config(&config_path, given);
    let specs = check_specs(root)?;
    let data_ok = specs != ExitCode::SUCCESS || check_data(root, &config_path);
    if !(config_ok && data_ok) || specs != ExitCode::SUCCESS {
        return Ok(ExitCode::FAILURE);
    }
    match against {
        Some(rev) => compare(root, rev, base_generated),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Connector data (a sqlite file, a log folder) must not overlap the workspaces or the state
/// directory of `config.yaml` (or the embedded defaults): the same rule `serve` enforces at
/// start ([`bulkhead::config::StateConfig::refuse_data_overlap`]), with each path as this
/// environment sets it or, unset, its spec default.
fn check_data(root: &Path, path: &Path) -> bool {
    let config = bulkhead::config::Config::load(path.exists().then_some(path));
    let (Ok(config), Ok(model)) = (config, bulkhead_lang::load(&root.join("specs"), root)) else {
        return true; // reported by the other checks
    };
    let mut ok = true;
    for c in &model.connectors {
        for path in c.settings.data_paths().into_iter().filter(|p| p.holds_data) {
            let (setting, written) = (path.setting, path.written);
            let refs = bulkhead_lang::vars::references(&serde_json::json!(written));
            let value = match refs.first() {
                None => written.to_string(),
                Some(r) if r.whole => bulkhead::config::env_lookup(&r.name)
                    .unwrap_or_else(|| r.default().unwrap_or_default().to_string()),
                Some(_) => continue,
            };
            if value.is_empty() {
                continue;
            }
            if let Err(e) =
                config
                    .state
                    .refuse_data_overlap(&c.name, setting, Path::new(&value), root)
            {
                eprintln!(
                    "error: {e}
"
                );
                ok = false;
            }
        }
    }
    ok
}

/// Writes `specs/` and `config.yaml` of `commit` under `into`, from the object database (not
/// `git archive`, which a base's `.gitattributes` could tell to leave files out).
fn materialize(root: &Path, commit: &str, into: &Path) -> anyhow::Result<()> {
    let prefix = String::from_utf8(git(root, &["rev-parse", "--show-prefix"])?)?
        .trim()
        .to_string();
    let specs = format!("{prefix}specs");
    let config = format!("{prefix}config.yaml");
    let listing = git(
        root,
        &[
            "ls-tree",
            "-r",
            "-z",
            "--full-tree",
            commit,
            "--",
            &specs,
            &config,
        ],
    )?;
    for entry in listing.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = std::str::from_utf8(entry)?;
        let (meta, path) = entry
            .split_once('\t')
            .ok_or_else(|| anyhow::anyhow!("unexpected ls-tree line `{entry}`"))?;
        let mut fields = meta.split(' ');
        let (kind, oid) = (fields.nth(1), fields.next());
        let (Some("blob"), Some(oid)) = (kind, oid) else {
            continue;
        };
        let rel = path.strip_prefix(&prefix).unwrap_or(path);
        if rel.split('/').any(|part| part == ".." || part.is_empty()) {
            anyhow::bail!("refusing path `{path}` in `{commit}`");
        }
        let dest = into.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&dest, git(root, &["cat-file", "blob", oid])?)?;
    }
    Ok(())
}

/// The base to compare with: `rev` itself when its specs load, else the nearest first-parent
/// ancestor (within [`WALK_BACK`]) that loads, said out loud. `None` when none loads.
fn resolve_base(
    root: &Path,
    rev: &str,
) -> anyhow::Result<Option<(String, bulkhead_lang::model::Model)>> {
    // REV is resolved on its own first, as a revision and never as an option; only the
    // commit's hex id reaches the other git commands.
    let resolved = String::from_utf8(git(
        root,
        &[
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ],
    )?)?;
    let resolved = resolved.trim();
    anyhow::ensure!(
        !resolved.is_empty() && resolved.bytes().all(|b| b.is_ascii_hexdigit()),
        "`{rev}` is not a commit"
    );
    let commits = String::from_utf8(git(
        root,
        &[
            "rev-list",
            "--first-parent",
            &format!("--max-count={WALK_BACK}"),
            resolved,
        ],
    )?)?;
    let mut first_error = None;
    for (back, commit) in commits.lines().enumerate() {
        let dir = tempfile::tempdir()?;
        materialize(root, commit, dir.path())?;
        match bulkhead_lang::load(&dir.path().join("specs"), dir.path()) {
            Ok(model) => {
                if back > 0 {
                    let subject =
                        String::from_utf8(git(root, &["log", "-1", "--format=%h %s", commit])?)?;
                    println!(
                        "note: specs/ at `{rev}` do not load ({}); compared with {} back along first parents: {}",
                        first_error.unwrap_or_default(),
                        back,
                        subject.trim()
                    );
                }
                return Ok(Some((commit.to_string(), model)));
            }
            Err(e) => {
                if first_error.is_none() {
                    let text = e.to_string();
                    let line = text
                        .lines()
                        .find(|l| l.starts_with("error"))
                        .unwrap_or("errors")
                        .to_string();
                    first_error = Some(line);
                }
            }
        }
    }
    Ok(None)
}

/// Reviews the effective policy of `root` against `rev`: every weakening is listed; each one
/// not acknowledged in `specs/policy-acks.yaml` fails the check ([`WEAKENED`]), as does a base
/// that cannot be resolved ([`BASE_UNRESOLVED`]).
fn compare(root: &Path, rev: &str, base_generated: Option<&Path>) -> anyhow::Result<ExitCode> {
    use bulkhead_lang::review;
    let head = bulkhead_lang::load(&root.join("specs"), root)?;
    let acks = match review::Acks::load(root) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}; no weakening can be accepted until it is fixed");
            return Ok(ExitCode::FAILURE);
        }
    };
    let Some((commit, base)) = resolve_base(root, rev)? else {
        eprintln!(
            "error: neither `{rev}` nor its {} nearest first-parent ancestors have specs that load; the policy cannot be reviewed",
            WALK_BACK - 1
        );
        return Ok(ExitCode::from(BASE_UNRESOLVED));
    };
    let short = &commit[..commit.len().min(12)];
    // What the base revision already acknowledged is not this change's to judge: only the
    // acknowledgements this change adds are checked against its weakenings (an added one that
    // matches none fails), and nothing is said of the others.
    let base_text = git(root, &["show", &format!("{commit}:{}", review::ACKS_FILE)])
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    let base_acks = review::Acks::parse_text(base_text.as_deref()).unwrap_or_default();
    let mut r = review::review(&review::resolve(&base), &review::resolve(&head));
    if let Some(dir) = base_generated {
        r.weakenings
            .extend(review::rules_changed(&root.join("generated"), dir));
    }
    // The engine is part of the effective policy: another version, an override of it, its
    // code in this repository or the build script that runs the generator.
    let head_engine = super::engine_inputs::working_tree(root)?;
    r.weakenings.extend(review::engine_changed(
        &super::engine_inputs::at_commit(root, &commit)?,
        &head_engine,
    ));
    // Key material in any file the change adds or edits.
    r.weakenings
        .extend(super::committed::secrets_committed(root, &commit)?);
    for dep in super::engine_inputs::outside_paths(root, &head_engine) {
        println!(
            "note: {dep} is outside this repository: its code is no part of a revision and the review cannot see it change; pin the engine by version or git revision to have it judged"
        );
    }
    // Matched by what runs: said once, as information (a rename or move is no weakening).
    for rename in &r.renames {
        println!("matched: {rename}");
    }
    // The project's own code runs inside the policy but is not described by it: each changed
    // file is a weakening a person reads and accepts (the review cannot judge Rust).
    r.weakenings
        .extend(super::code_changed::code_changed(root, &commit)?);
    // Fewer owners: the next weakening would need fewer people.
    r.weakenings.extend(acks.owners_narrowed(&base_acks));
    // Only what this change adds can accept its weakenings (an entry the base holds word for
    // word accepted another change's).
    let added = acks.added_since(&base_acks);
    let mut unacked = 0;
    let mut used = Vec::new();
    for w in &r.weakenings {
        let line = w.line();
        match added.iter().find(|a| a.weakening.trim() == line) {
            Some(a) => {
                used.push(line.clone());
                println!("acknowledged: {line} ({}) — {}", w.file, a.reason.trim());
            }
            None => {
                unacked += 1;
                println!("weakened: {line} ({})", w.file);
            }
        }
    }
    let mut stale = 0;
    for a in added {
        if !used.iter().any(|u| u == a.weakening.trim()) {
            stale += 1;
            println!(
                "stale: {} adds an acknowledgement of `{}`, which this change does not make: remove it (or fix its line to the one printed above)",
                review::ACKS_FILE,
                a.weakening.trim()
            );
        }
    }
    if unacked == 0 && stale > 0 {
        println!("policy: {stale} acknowledgement(s) this change adds match no weakening of it");
        return Ok(ExitCode::from(WEAKENED));
    }
    if unacked == 0 {
        println!(
            "policy: nothing weakened against `{rev}` ({short}){}",
            if r.weakenings.is_empty() {
                ""
            } else {
                " that is not acknowledged"
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "policy: {unacked} weakening(s) against `{rev}` ({short}) not acknowledged. Review each; to accept one, add it word for word to {} with a reason:\n  acks:\n    - weakening: \"<the line after `weakened: `, without the file>\"\n      reason: \"<why>\"",
        review::ACKS_FILE
    );
    Ok(ExitCode::from(WEAKENED))
}

/// `config.yaml` at the root, when there is one: shape, keys, `${VAR}` expansion (with this
/// process's environment), key material. Prints the diagnostic; `true` when it is fine.
/// Checks the configuration at `path`; a missing file is the embedded defaults unless it was
/// named (`given`), then it is an error.
fn check_config(path: &Path, given: bool) -> bool {
    if !given && !path.exists() {
        return true;
    }
    let checked = bulkhead::config::Config::load(Some(path))
        .map_err(|e| e.to_string())
        .and_then(|c| {
            bulkhead::auth::Verifier::new(&c.auth)
                .map(|_| ())
                .map_err(|e| format!("{}: {e}", path.display()))
        });
    match checked {
        Ok(()) => {
            println!("config ok: {}", path.display());
            true
        }
        Err(e) => {
            eprintln!(
                "{e}
"
            );
            false
        }
    }
}

fn check_specs(root: &Path) -> anyhow::Result<ExitCode> {
    match bulkhead_lang::load(&root.join("specs"), root) {
        Ok(model) => {
            for w in &model.warnings {
                eprintln!("{}\n", w.render());
            }
            println!("{}", bulkhead_lang::summary(&model));
            Ok(ExitCode::SUCCESS)
        }
        Err(bulkhead_lang::BuildError::Specs(d)) => {
            eprint!("{d}");
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e.into()),
    }
}
