//! The credential rules, compiled once per process: gitleaks' rule set and Bulkhead's additions
//! (`rules/`), each rule's regex with its secret group, entropy floor and allowlist, and one
//! Aho-Corasick automaton over every rule's keywords that decides which regexes run at all.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
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
    pub(crate) regex: Regex,
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

fn compile(pattern: &str, rule: &str) -> Result<Regex, RulesError> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| RulesError::Rule {
            rule: rule.to_string(),
            message: e.to_string(),
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
            let regex = compile(pattern, &spec.id)?;
            if spec.secret_group > regex.captures_len() - 1 {
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

    /// The rules whose keywords occur in `hay` (and those without keywords), in rule order.
    pub(crate) fn candidates(&self, hay: &[u8]) -> Vec<usize> {
        let mut on = vec![false; self.rules.len()];
        for i in &self.always {
            on[*i] = true;
        }
        let mut any = !self.always.is_empty();
        for m in self.keywords.find_overlapping_iter(hay) {
            for i in &self.keyword_rules[m.pattern().as_usize()] {
                on[*i] = true;
                any = true;
            }
        }
        if !any {
            return Vec::new();
        }
        on.iter()
            .enumerate()
            .filter_map(|(i, on)| on.then_some(i))
            .collect()
    }
}
