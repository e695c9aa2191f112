//! Finding credentials in bytes and replacing them: the keyword automaton picks the rules, each
//! rule's regex finds its secret, the entropy floor and allowlists drop what is not one, and
//! overlapping finds merge into one redaction named by the most specific rule.

use super::rules::Rules;

/// One credential found: the rule and the secret's byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The rule's id.
    pub rule: &'static str,
    /// Start of the secret.
    pub start: usize,
    /// End of the secret (exclusive).
    pub end: usize,
}

/// Shannon entropy of `bytes`, in bits per byte (gitleaks' measure).
pub(crate) fn entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for b in bytes {
        counts[*b as usize] += 1;
    }
    let n = bytes.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / n;
            -p * p.log2()
        })
        .sum()
}

impl Rules {
    /// Every credential in `hay`, sorted, overlaps merged (the earlier rule names a merged one).
    pub fn find(&self, hay: &[u8]) -> Vec<Hit> {
        use regex_automata::{Anchored, Input};
        let mut hits = Vec::new();
        for (i, places) in self.candidates(hay) {
            let rule = &self.rules[i];
            let mut caps = rule.regex.create_captures();
            let mut keep = |caps: &regex_automata::util::captures::Captures| {
                let Some(span) = caps
                    .get_group(rule.group)
                    .or_else(|| caps.get_match().map(|m| m.span()))
                else {
                    return;
                };
                let secret = &hay[span.start..span.end];
                if secret.is_empty()
                    || rule.entropy.is_some_and(|floor| entropy(secret) < floor)
                    || rule.allow.allows(secret)
                    || self.global.allows(secret)
                {
                    return;
                }
                let (start, end) = widen(hay, span.start, span.end);
                hits.push((
                    i,
                    Hit {
                        rule: rule.id,
                        start,
                        end,
                    },
                ));
            };
            if rule.anchored && !places.is_empty() {
                // Every match starts at a keyword: try there only, leftmost first.
                let mut after = 0;
                for p in places {
                    if p < after {
                        continue;
                    }
                    let input = Input::new(hay).span(p..hay.len()).anchored(Anchored::Yes);
                    rule.regex.search_captures(&input, &mut caps);
                    if let Some(m) = caps.get_match() {
                        keep(&caps);
                        after = m.end().max(p + 1);
                    }
                }
            } else {
                for c in rule.regex.captures_iter(hay) {
                    keep(&c);
                }
            }
        }
        merge(hits)
    }

    /// `text` with every credential replaced by `[redacted: <rule>]`, and what was found; `None`
    /// when nothing was.
    pub fn redact(&self, text: &str) -> Option<(String, Vec<&'static str>)> {
        let hits = self.find(text.as_bytes());
        if hits.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut rules = Vec::new();
        for h in &hits {
            // A secret's ends fall on character boundaries (the rules match UTF-8); widen if not.
            let start = floor_char(text, h.start.max(at));
            let end = ceil_char(text, h.end);
            out.push_str(&text[at..start]);
            out.push_str(&placeholder(h.rule));
            at = end;
            if !rules.contains(&h.rule) {
                rules.push(h.rule);
            }
        }
        out.push_str(&text[at..]);
        Some((out, rules))
    }
}

/// A rule finds the part of a token it recognises (gitleaks' Slack rule stops at the first `-`
/// of `xoxb-…-…-…`): a redaction covers the whole run of token characters around it, so no
/// part of a credential is left to read.
fn widen(hay: &[u8], mut start: usize, mut end: usize) -> (usize, usize) {
    let token = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'/');
    while start > 0 && token(hay[start - 1]) {
        start -= 1;
    }
    while end < hay.len() && (token(hay[end]) || hay[end] == b'=') {
        end += 1;
    }
    (start, end)
}

/// What a redacted credential reads as.
pub fn placeholder(rule: &str) -> String {
    format!("[redacted: {rule}]")
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Sorts hits and merges overlapping ones; the rule listed first (the more specific) names one.
fn merge(mut hits: Vec<(usize, Hit)>) -> Vec<Hit> {
    hits.sort_by_key(|(rank, h)| (h.start, *rank));
    let mut out: Vec<(usize, Hit)> = Vec::with_capacity(hits.len());
    for (rank, h) in hits {
        match out.last_mut() {
            Some((last_rank, last)) if h.start < last.end => {
                last.end = last.end.max(h.end);
                if rank < *last_rank {
                    *last_rank = rank;
                    last.rule = h.rule;
                }
            }
            _ => out.push((rank, h)),
        }
    }
    out.into_iter().map(|(_, h)| h).collect()
}
