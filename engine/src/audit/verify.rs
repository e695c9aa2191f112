//! `bulkhead audit verify`: checks every writer's chain in a log (files in rotation order, or the
//! PostgreSQL table in insertion order) against the heads anchored in the store, and names the
//! first record that was altered, removed, reordered or appended out of order, and a cut tail.

use super::chain::{Head, genesis, hex, line_hash};
use std::collections::HashMap;

/// One line of the log, where it was read.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Where (`audit-x.jsonl.1:17`, `bulkhead_audit id 42`).
    pub at: String,
    /// The line as stored, without its newline.
    pub line: Vec<u8>,
    /// The line is the last of its file and has no newline (a crash while writing it).
    pub torn: bool,
    /// The line is in the oldest file while older ones were rotated away: a writer's chain may
    /// start there past `seq` 0.
    pub after_rotation: bool,
}

/// What verification found.
#[derive(Debug, Default)]
pub struct Report {
    /// Records read.
    pub records: usize,
    /// Writers seen.
    pub writers: usize,
    /// Every problem, the first one first (empty: the log is intact).
    pub problems: Vec<String>,
    /// Things worth knowing that are not tampering (a torn last line after a crash).
    pub notes: Vec<String>,
    /// Records before the first chained one that carry no chain (written before the chain
    /// existed, or with `audit.chain: false`): not verifiable, not tampering.
    pub unchained: usize,
}

impl Report {
    /// Whether the log is intact.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

struct Link {
    seq: u64,
    prev: String,
    hash: String,
    at: String,
    after_rotation: bool,
}

/// Verifies `entries` (in log order) against `heads`; with `key`, every head must carry a valid
/// signature by it.
pub fn verify(
    entries: &[Entry],
    heads: &[Head],
    key: Option<&ed25519_dalek::VerifyingKey>,
) -> Report {
    let mut report = Report::default();
    let mut chains: HashMap<String, Vec<Link>> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut first_unchained: Option<String> = None;
    for e in entries {
        report.records += 1;
        let parsed: Option<serde_json::Value> = serde_json::from_slice(&e.line).ok();
        let Some(v) = parsed.filter(serde_json::Value::is_object) else {
            if e.torn {
                report.notes.push(format!(
                    "{}: the last line is cut short (a crash while it was written)",
                    e.at
                ));
            } else {
                report.problems.push(format!(
                    "{}: not a record (altered: it is not a JSON object)",
                    e.at
                ));
            }
            continue;
        };
        let w = v.get("w").and_then(|x| x.as_str());
        let seq = v.get("seq").and_then(serde_json::Value::as_u64);
        let prev = v.get("prev").and_then(|x| x.as_str());
        let (Some(w), Some(seq), Some(prev)) = (w, seq, prev) else {
            // Only a prefix of unchained records is history (an upgrade, or the chain off);
            // one after a chained record was put there.
            if chains.is_empty() {
                report.unchained += 1;
                first_unchained.get_or_insert_with(|| e.at.clone());
            } else {
                report.problems.push(format!(
                    "{}: a record without its chain fields (`w`, `seq`, `prev`) after chained ones: appended by hand or altered",
                    e.at
                ));
            }
            continue;
        };
        if !chains.contains_key(w) {
            order.push(w.to_owned());
        }
        chains.entry(w.to_owned()).or_default().push(Link {
            seq,
            prev: prev.to_owned(),
            hash: hex(&line_hash(&e.line)),
            at: e.at.clone(),
            after_rotation: e.after_rotation,
        });
    }
    report.writers = chains.len();
    if let Some(at) = first_unchained {
        report.notes.push(format!(
            "{} record(s) from {at} on carry no chain (written before it existed, or with audit.chain off): they cannot be verified",
            report.unchained
        ));
    }
    let heads: HashMap<&str, &super::chain::Head> =
        heads.iter().map(|h| (h.writer.as_str(), h)).collect();
    for w in &order {
        check_chain(w, &chains[w], heads.get(w.as_str()).copied(), &mut report);
    }
    for (w, h) in &heads {
        if let Some(key) = key {
            check_signature(h, key, &mut report);
        }
        if !chains.contains_key(*w) && h.seq >= 0 {
            report.problems.push(format!(
                "writer {w} ({}): its records 0..={} are missing: the store anchored them and the log has none",
                h.server, h.seq
            ));
        }
    }
    report
}

fn check_chain(w: &str, links: &[Link], head: Option<&Head>, r: &mut Report) {
    let Some(head) = head else {
        r.problems.push(format!(
            "{}: writer {w} is unknown to the store (a record appended by hand, or the store's heads were removed)",
            links[0].at
        ));
        return;
    };
    let first = &links[0];
    let mut expect = 0u64;
    let mut prev = hex(&genesis(w));
    if first.seq > 0 && first.after_rotation {
        r.notes.push(format!(
            "writer {w}: starts at seq {} in the oldest file kept (older files were rotated away)",
            first.seq
        ));
        expect = first.seq;
        prev = first.prev.clone();
    }
    let position: HashMap<u64, usize> = links.iter().enumerate().map(|(i, l)| (l.seq, i)).collect();
    for (i, l) in links.iter().enumerate() {
        if l.seq != expect {
            let problem = if l.seq < expect {
                format!(
                    "{}: writer {w} seq {} comes after seq {}: reordered or duplicated",
                    l.at,
                    l.seq,
                    expect - 1
                )
            } else if let Some(&j) = position.get(&expect).filter(|&&j| j > i) {
                format!(
                    "{}: writer {w} seq {} comes before seq {} (at {}): reordered",
                    l.at, l.seq, expect, links[j].at
                )
            } else {
                format!(
                    "{}: writer {w} seq {} follows seq {}: {} record(s) removed before it",
                    l.at,
                    l.seq,
                    expect as i64 - 1,
                    l.seq - expect
                )
            };
            r.problems.push(problem);
            return;
        }
        if l.prev != prev {
            let altered = if i == 0 {
                format!(
                    "{}: writer {w} seq 0 does not start from its genesis: altered",
                    l.at
                )
            } else {
                format!(
                    "{}: writer {w} seq {} was altered (the next record, {}, chains a different hash)",
                    links[i - 1].at,
                    links[i - 1].seq,
                    l.at
                )
            };
            r.problems.push(altered);
            return;
        }
        prev = l.hash.clone();
        expect += 1;
    }
    let last = links.last().expect("a chain has a record");
    if head.seq < 0 {
        if head.closed {
            r.problems.push(format!(
                "{}: writer {w} closed without writing, yet this record is its: appended by hand",
                first.at
            ));
        }
        return;
    }
    let anchored_seq = head.seq as u64;
    if last.seq < anchored_seq {
        r.problems.push(format!(
            "{}: writer {w} ends at seq {} but the store anchored seq {}: the tail was cut ({} record(s))",
            last.at,
            last.seq,
            head.seq,
            anchored_seq - last.seq
        ));
        return;
    }
    match position.get(&anchored_seq) {
        Some(&j) if links[j].hash != head.hash => r.problems.push(format!(
            "{}: writer {w} seq {} does not match the head anchored in the store: altered",
            links[j].at, head.seq
        )),
        _ => {}
    }
    if head.closed && last.seq > anchored_seq {
        let j = position[&(anchored_seq + 1)];
        r.problems.push(format!(
            "{}: writer {w} seq {} follows the head it closed at (seq {}): appended by hand",
            links[j].at,
            anchored_seq + 1,
            head.seq
        ));
    }
}

fn check_signature(h: &Head, key: &ed25519_dalek::VerifyingKey, r: &mut Report) {
    let valid = h
        .sig
        .as_deref()
        .and_then(|s| {
            let bytes: Vec<u8> = (0..s.len())
                .step_by(2)
                .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
                .collect::<Option<_>>()?;
            ed25519_dalek::Signature::from_slice(&bytes).ok()
        })
        .is_some_and(|sig| key.verify_strict(&h.message(), &sig).is_ok());
    if !valid {
        r.problems.push(format!(
            "writer {} ({}): its anchored head (seq {}) is not signed by the audit key: the store's heads were forged or the key changed",
            h.writer, h.server, h.seq
        ));
    }
}

/// The lines of the log file at `path` and its rotated predecessors, oldest first. `keep` is
/// `audit.keep`: when `path.<keep>` exists, older files may have been rotated away.
pub fn read_files(path: &std::path::Path, keep: usize) -> std::io::Result<Vec<Entry>> {
    let numbered = |n: usize| {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".{n}"));
        std::path::PathBuf::from(p)
    };
    let mut files: Vec<std::path::PathBuf> = (1..=keep.max(1))
        .rev()
        .map(numbered)
        .filter(|p| p.exists())
        .collect();
    let rotated_away = numbered(keep.max(1)).exists();
    if path.exists() {
        files.push(path.to_path_buf());
    }
    let mut out = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let bytes = std::fs::read(f)?;
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let complete = bytes.ends_with(b"\n") || bytes.is_empty();
        if complete {
            lines.pop();
        }
        let n = lines.len();
        for (k, line) in lines.into_iter().enumerate() {
            if line.is_empty() {
                continue;
            }
            out.push(Entry {
                at: format!("{name}:{}", k + 1),
                line: line.to_vec(),
                torn: !complete && k + 1 == n,
                after_rotation: i == 0 && rotated_away,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::chain::Chain;

    fn entry(i: usize, line: &[u8]) -> Entry {
        Entry {
            at: format!("log:{}", i + 1),
            line: line.strip_suffix(b"\n").unwrap_or(line).to_vec(),
            torn: false,
            after_rotation: false,
        }
    }

    #[test]
    fn unchained_history_is_noted_and_an_unchained_record_after_the_chain_is_named() {
        let mut c = Chain::new("s", None);
        let mut lines: Vec<Vec<u8>> = vec![b"{\"old\":1}\n".to_vec(), b"{\"old\":2}\n".to_vec()];
        for i in 0..3 {
            lines.push(c.link(format!("{{\"n\":{i}}}\n").as_bytes()));
        }
        let head = c.head(true);
        let entries: Vec<Entry> = lines.iter().enumerate().map(|(i, l)| entry(i, l)).collect();
        let r = verify(&entries, std::slice::from_ref(&head), None);
        assert!(r.ok(), "{:?}", r.problems);
        assert_eq!(r.unchained, 2);
        assert!(
            r.notes[0].contains("from log:1 on carry no chain"),
            "{:?}",
            r.notes
        );

        let mut more = entries.clone();
        more.push(entry(5, b"{\"old\":3}"));
        let r = verify(&more, &[head], None);
        assert_eq!(
            r.problems,
            [
                "log:6: a record without its chain fields (`w`, `seq`, `prev`) after chained ones: appended by hand or altered"
            ]
        );
    }
}
