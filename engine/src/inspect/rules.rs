//! The credential rules, compiled once per process: gitleaks' rule set and Bulkhead's additions
//! (`rules/`), each rule's regex with its secret group, entropy floor and allowlist, and one
//! Aho-Corasick automaton over every rule's keywords that decides which regexes run at all — and,
//! for a rule whose every match starts with one of its keywords (found from the regex's prefix
//! literals), where: such a rule is tried only anchored at its keywords' places.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;
use std::sync::OnceLock;

/// gitleaks' default rule set (see `rules/README.md` for its version and source).
const GITLEAKS: &str = include_str!("rules/gitleaks.toml");
/// Bulkhead's additions and replacements, in the same format.
const BULKHEAD: &str = include_str!("rules/bulkhead.toml");

/// Why the rule set could not be compiled (a defect in `rules/`, found by the corpus test).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RulesError {
    /// A rule file is not valid TOML of the gitleaks format.
    #[error("inspection rules `{file}`: {message}")]
    File {
        /// Which file.
        file: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A rule's regex does not compile.
    #[error("inspection rule `{rule}`: {message}")]
    Rule {
        /// The rule's id.
        rule: String,
        /// The regex error.
        message: String,
    },
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    allowlist: Option<AllowSpec>,
    #[serde(default)]
    rules: Vec<RuleSpec>,
    /// More allowlist entries for a rule of the other file, by id (Bulkhead's file only).
    #[serde(default)]
    extend: Vec<ExtendSpec>,
}

#[derive(Deserialize)]
struct ExtendSpec {
    id: String,
    allowlist: AllowSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleSpec {
    id: String,
    regex: Option<String>,
    #[serde(default)]
    secret_group: usize,
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    allowlist: Option<AllowSpec>,
}

#[derive(Deserialize, Default)]
struct AllowSpec {
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
}

/// Values a rule (or every rule) does not report: matching a regex, or holding a stopword.
#[derive(Default)]
pub(crate) struct Allow {
    regexes: Vec<Regex>,
    stopwords: Vec<String>,
}

impl Allow {
    fn compile(spec: AllowSpec, rule: &str) -> Result<Allow, RulesError> {
        let regexes = spec
            .regexes
            .iter()
            .map(|r| compile(r, rule))
            .collect::<Result<_, _>>()?;
        let stopwords = spec.stopwords.iter().map(|s| s.to_lowercase()).collect();
        Ok(Allow { regexes, stopwords })
    }

    fn extend(&mut self, other: Allow) {
        self.regexes.extend(other.regexes);
        self.stopwords.extend(other.stopwords);
    }

    /// Whether `secret` is allowed (not a finding).
    pub(crate) fn allows(&self, secret: &[u8]) -> bool {
        if self.regexes.iter().any(|r| r.is_match(secret)) {
            return true;
        }
        if self.stopwords.is_empty() {
            return false;
        }
        let lower = String::from_utf8_lossy(secret).to_lowercase();
        self.stopwords.iter().any(|w| lower.contains(w.as_str()))
    }
}

/// One compiled rule.
pub(crate) struct Rule {
    /// The rule's id (what findings, refusals and the audit name).
    pub(crate) id: &'static str,
    pub(crate) regex: regex_automata::meta::Regex,
    /// Every match starts where one of the rule's keywords occurs.
    pub(crate) anchored: bool,
    /// The capture group that holds the secret (0: the whole match).
    pub(crate) group: usize,
    pub(crate) entropy: Option<f64>,
    pub(crate) allow: Allow,
}

/// The compiled rule set.
pub struct Rules {
    pub(crate) rules: Vec<Rule>,
    /// Every rule's keywords, ASCII case-insensitive.
    keywords: AhoCorasick,
    /// For each keyword pattern, the rules it enables.
    keyword_rules: Vec<Vec<usize>>,
    /// Rules without keywords (run on every input).
    always: Vec<usize>,
    pub(crate) global: Allow,
}

/// Each regex may grow to this many bytes compiled (gitleaks' bounded repetitions are large).
const REGEX_SIZE_LIMIT: usize = 64 << 20;

/// An allowlist's regex: ASCII like the rules (`\b`, `\s`, `(?i)` on ASCII only).
fn compile(pattern: &str, rule: &str) -> Result<Regex, RulesError> {
    RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| RulesError::Rule {
            rule: rule.to_string(),
            message: e.to_string(),
        })
}

/// A rule's regex as the scan runs it: on bytes, without Unicode (rules are ASCII shapes, and
/// so every regex stays on the lazy DFA whatever bytes a result holds), anchored or not per
/// search.
fn compile_rule(pattern: &str, rule: &str) -> Result<regex_automata::meta::Regex, RulesError> {
    regex_automata::meta::Builder::new()
        .syntax(
            regex_automata::util::syntax::Config::new()
                .unicode(false)
                .utf8(false),
        )
        .configure(
            regex_automata::meta::Config::new()
                .utf8_empty(false)
                .nfa_size_limit(Some(REGEX_SIZE_LIMIT)),
        )
        .build(pattern)
        .map_err(|e| RulesError::Rule {
            rule: rule.to_string(),
            message: e.to_string(),
        })
}

/// Whether every match of `pattern` starts with one of `keywords` (ASCII case aside): its
/// prefix literals are finite and each begins with a keyword.
fn starts_with_keyword(pattern: &str, keywords: &[String]) -> bool {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let Ok(hir) = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
    else {
        return false;
    };
    let mut ex = Extractor::new();
    ex.kind(ExtractKind::Prefix)
        .limit_total(4096)
        .limit_class(8)
        .limit_repeat(4)
        .limit_literal_len(64);
    let seq = ex.extract(&hir);
    let Some(lits) = seq.literals() else {
        return false;
    };
    !lits.is_empty()
        && lits.iter().all(|l| {
            let lit = l.as_bytes().to_ascii_lowercase();
            keywords
                .iter()
                .any(|k| !k.is_empty() && lit.starts_with(k.to_ascii_lowercase().as_bytes()))
        })
}

fn parse(text: &str, file: &'static str) -> Result<File, RulesError> {
    toml::from_str(text).map_err(|e| RulesError::File {
        file,
        message: e.to_string(),
    })
}

impl Rules {
    /// The process's rule set, compiled on first use.
    pub fn get() -> Result<&'static Rules, RulesError> {
        static RULES: OnceLock<Result<Rules, RulesError>> = OnceLock::new();
        RULES
            .get_or_init(|| Rules::compile(GITLEAKS, BULKHEAD))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn compile(gitleaks: &str, bulkhead: &str) -> Result<Rules, RulesError> {
        let upstream = parse(gitleaks, "gitleaks.toml")?;
        let ours = parse(bulkhead, "bulkhead.toml")?;
        let replaced: std::collections::BTreeSet<&str> =
            ours.rules.iter().map(|r| r.id.as_str()).collect();
        let mut global = Allow::default();
        for allow in [upstream.allowlist, ours.allowlist].into_iter().flatten() {
            global.extend(Allow::compile(allow, "allowlist")?);
        }
        let mut specs: Vec<RuleSpec> = upstream
            .rules
            .into_iter()
            .filter(|r| !replaced.contains(r.id.as_str()))
            .collect();
        for more in ours.extend {
            let Some(rule) = specs.iter_mut().find(|r| r.id == more.id) else {
                return Err(RulesError::Rule {
                    rule: more.id,
                    message: "`extend` names no rule of gitleaks.toml".into(),
                });
            };
            let allow = rule.allowlist.get_or_insert_with(AllowSpec::default);
            allow.regexes.extend(more.allowlist.regexes);
            allow.stopwords.extend(more.allowlist.stopwords);
        }
        specs.extend(ours.rules);
        // The generic rule last: where a specific rule finds the same value, it names it.
        specs.sort_by_key(|r| r.id.starts_with("generic"));
        let mut rules = Vec::with_capacity(specs.len());
        let mut patterns: Vec<String> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for spec in specs {
            let Some(pattern) = &spec.regex else { continue };
            let index = rules.len();
            if spec.keywords.is_empty() {
                always.push(index);
            }
            for k in &spec.keywords {
                match patterns.iter().position(|p| p == k) {
                    Some(at) => keyword_rules[at].push(index),
                    None => {
                        patterns.push(k.clone());
                        keyword_rules.push(vec![index]);
                    }
                }
            }
            let regex = compile_rule(pattern, &spec.id)?;
            if spec.secret_group
                >= regex
                    .group_info()
                    .group_len(regex_automata::PatternID::ZERO)
            {
                return Err(RulesError::Rule {
                    rule: spec.id,
                    message: "secretGroup names a group the regex does not have".into(),
                });
            }
            let allow = match spec.allowlist {
                Some(a) => Allow::compile(a, &spec.id)?,
                None => Allow::default(),
            };
            rules.push(Rule {
                anchored: starts_with_keyword(pattern, &spec.keywords),
                id: Box::leak(spec.id.into_boxed_str()),
                regex,
                group: spec.secret_group,
                entropy: spec.entropy,
                allow,
            });
        }
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&patterns)
            .map_err(|e| RulesError::File {
                file: "keywords",
                message: e.to_string(),
            })?;
        Ok(Rules {
            rules,
            keywords,
            keyword_rules,
            always,
            global,
        })
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are none (never, for the compiled set).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The ids of every rule.
    pub fn ids(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.rules.iter().map(|r| r.id)
    }

    /// The rules whose keywords occur in `hay` (and those without keywords), in rule order,
    /// each with where its keywords start (ascending; empty for a rule without keywords).
    pub(crate) fn candidates(&self, hay: &[u8]) -> Vec<(usize, Vec<usize>)> {
        let mut at: Vec<Option<Vec<usize>>> = Vec::new();
        for m in self.keywords.find_overlapping_iter(hay) {
            if at.is_empty() {
                at.resize(self.rules.len(), None);
            }
            for i in &self.keyword_rules[m.pattern().as_usize()] {
                at[*i].get_or_insert_with(Vec::new).push(m.start());
            }
        }
        if at.is_empty() {
            at.resize(self.rules.len(), None);
        }
        for i in &self.always {
            at[*i].get_or_insert_with(Vec::new);
        }
        at.into_iter()
            .enumerate()
            .filter_map(|(i, places)| {
                places.map(|mut p| {
                    p.sort_unstable();
                    p.dedup();
                    (i, p)
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Rules;

    /// Most rules are tried only where their keywords are; the classification is sound (the
    /// corpus in `tests/unit/inspect.rs` finds every family either way).
    #[test]
    fn rules_that_start_with_a_keyword_are_tried_only_there() {
        let r = Rules::get().unwrap();
        let anchored = |id: &str| r.rules.iter().find(|x| x.id == id).unwrap().anchored;
        for id in [
            "generic-api-key",
            "github-pat",
            "jwt",
            "private-key",
            "slack-access-token",
        ] {
            assert!(anchored(id), "{id}");
        }
        // Its keyword `://` is inside the match, not at its start.
        assert!(!anchored("url-password"));
        let n = r.rules.iter().filter(|x| x.anchored).count();
        assert!(
            n * 10 >= r.rules.len() * 8,
            "{n} of {} anchored",
            r.rules.len()
        );
    }
}
