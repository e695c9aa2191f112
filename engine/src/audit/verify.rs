//! `bulkhead audit verify`: reads the log once, in order (files oldest first, or the PostgreSQL
//! table by id), checking each writer's chain as it goes ([`Reader`]), then judges what it read
//! against the store's checkpoints and, when given, an anchor kept outside the store
//! ([`judge`]). It names the first record of a writer that was altered, removed, reordered or
//! appended, a record in no chain, a cut tail, records no checkpoint covers, a writer gone
//! missing, and checkpoints that were forged, rolled back or do not follow one another.
//!
//! What it proves, by attacker (docs/guarantees.md has the table and the tests): against one who
//! reads the store, nothing is needed; against one who writes the log and the store without the
//! signing key, every change is found except cutting both back together to an earlier
//! checkpoint, which needs `--anchor`; against one with the key, only what the anchor pins.

use super::chain::{genesis, line_hash, parse_link};
use super::checkpoint::{Checkpoint, Stored, consistent, retired};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// Where a line was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// A file and line number (`audit-x.jsonl.1:17`).
    File(std::sync::Arc<str>, usize),
    /// A row of `bulkhead_audit`.
    Row(i64),
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::File(name, n) => write!(f, "{name}:{n}"),
            At::Row(id) => write!(f, "bulkhead_audit id {id}"),
        }
    }
}

type Hex = [u8; 64];

fn hex64(bytes: &[u8; 32]) -> Hex {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    out
}

fn text(h: &Hex) -> &str {
    std::str::from_utf8(h).expect("hex is ASCII")
}

/// One writer's records, as read.
struct WriterLog {
    first_seq: u64,
    first_prev: String,
    first_at: At,
    expect: u64,
    prev: Hex,
    last_at: At,
    /// The first break in the chain.
    broken: Option<Broken>,
    /// Hashes of the records named by the checkpoints read before the log (and the anchor).
    wanted: HashMap<u64, Hex>,
    /// Records after the head of the checkpoint read before the log: (seq, hash), the newest
    /// [`TAIL_KEPT`] of them.
    tail: std::collections::VecDeque<(u64, Hex)>,
}

/// Most records kept per writer past the head of the checkpoint read before the log.
const TAIL_KEPT: usize = 1 << 16;

/// The first break in a writer's chain.
enum Broken {
    /// Found and described.
    Problem(String),
    /// Records missing at `at` (`got` follows `missing - 1`); `missing` may still turn up later.
    Gap { at: At, got: u64, missing: u64 },
}

/// Reads the log line by line, checking each writer's chain.
pub struct Reader {
    before: BTreeMap<String, i64>,
    wanted: HashMap<String, HashSet<u64>>,
    writers: HashMap<String, WriterLog>,
    order: Vec<String>,
    records: u64,
    bytes: u64,
    unchained: Vec<At>,
    unchained_count: u64,
    torn: Vec<At>,
}

impl Reader {
    /// A reader for a log whose checkpoint, read just before it, is `before`; the hash of each
    /// record in `wanted` is kept for [`judge`].
    pub fn new(before: Option<&Checkpoint>, wanted: HashMap<String, HashSet<u64>>) -> Reader {
        let before = before
            .map(|c| c.writers.iter().map(|(w, h)| (w.clone(), h.seq)).collect())
            .unwrap_or_default();
        Reader {
            before,
            wanted,
            writers: HashMap::new(),
            order: Vec::new(),
            records: 0,
            bytes: 0,
            unchained: Vec::new(),
            unchained_count: 0,
            torn: Vec::new(),
        }
    }

    /// Reads one line (without its newline; `torn`: the last of its file, with no newline).
    pub fn line(&mut self, at: impl Fn() -> At, line: &[u8], torn: bool) {
        self.records += 1;
        self.bytes += line.len() as u64 + 1;
        let Some(link) = parse_link(line) else {
            if torn {
                self.torn.push(at());
            } else {
                self.unchained_count += 1;
                if self.unchained.len() < 10 {
                    self.unchained.push(at());
                }
            }
            return;
        };
        let hash = hex64(&line_hash(line));
        let w = match self.writers.get_mut(link.writer) {
            Some(w) => w,
            None => {
                let at = at();
                self.order.push(link.writer.to_owned());
                let fresh = WriterLog {
                    first_seq: link.seq,
                    first_prev: link.prev.to_owned(),
                    first_at: at.clone(),
                    expect: link.seq,
                    prev: hex64(&genesis(link.writer)),
                    last_at: at,
                    broken: None,
                    wanted: HashMap::new(),
                    tail: Default::default(),
                };
                let w = self.writers.entry(link.writer.to_owned()).or_insert(fresh);
                if link.seq > 0 {
                    // Where it starts is judged against the rotation floor; from here it chains.
                    w.prev.copy_from_slice(link.prev.as_bytes());
                }
                w
            }
        };
        if let Some(Broken::Gap {
            at: gap,
            got,
            missing,
        }) = &w.broken
            && link.seq == *missing
        {
            // The record a gap missed turns up later: they were reordered, not removed.
            let problem = format!(
                "{gap}: writer {} seq {got} comes before seq {missing} (at {}): reordered",
                link.writer,
                at()
            );
            w.broken = Some(Broken::Problem(problem));
            return;
        }
        if w.broken.is_some() {
            return;
        }
        let at = at();
        if link.seq != w.expect {
            w.broken = Some(if link.seq < w.expect {
                Broken::Problem(format!(
                    "{at}: writer {} seq {} comes after seq {}: reordered or duplicated",
                    link.writer,
                    link.seq,
                    w.expect - 1
                ))
            } else {
                Broken::Gap {
                    at,
                    got: link.seq,
                    missing: w.expect,
                }
            });
            return;
        }
        if link.prev.as_bytes() != w.prev {
            let problem = if link.seq == 0 {
                format!(
                    "{at}: writer {} seq 0 does not start from its genesis: altered",
                    link.writer
                )
            } else {
                format!(
                    "{}: writer {} seq {} was altered (the next record, {at}, chains a different hash)",
                    w.last_at,
                    link.writer,
                    link.seq - 1
                )
            };
            w.broken = Some(Broken::Problem(problem));
            return;
        }
        if self
            .wanted
            .get(link.writer)
            .is_some_and(|s| s.contains(&link.seq))
        {
            w.wanted.insert(link.seq, hash);
        }
        if self
            .before
            .get(link.writer)
            .is_none_or(|&s| link.seq as i64 > s)
        {
            if w.tail.len() == TAIL_KEPT {
                w.tail.pop_front();
            }
            w.tail.push_back((link.seq, hash));
        }
        w.prev = hash;
        w.expect = link.seq + 1;
        w.last_at = at;
    }

    /// Bytes read.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// An anchor kept outside the store: a checkpoint's number and hash, and (from `bulkhead audit
/// anchor`) the checkpoint itself.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Anchor {
    /// The checkpoint's number.
    pub n: u64,
    /// Its hash.
    pub hash: String,
    /// Its body, as signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Its signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
}

impl Anchor {
    /// The anchor of a stored checkpoint.
    pub fn of(s: &Stored) -> Anchor {
        Anchor {
            n: s.checkpoint.n,
            hash: s.hash(),
            body: Some(s.body.clone()),
            sig: s.sig.clone(),
        }
    }
}

/// What verification found.
#[derive(Debug, Default)]
pub struct Report {
    /// Records read.
    pub records: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Writers seen in the log.
    pub writers: usize,
    /// Every problem, the first one first (empty: the log is intact).
    pub problems: Vec<String>,
    /// Records a writer alive wrote after its newest checkpoint: covered once it commits the
    /// next one (the caller waits, bounded, and judges again).
    pub pending: Vec<String>,
    /// What is worth knowing that is not tampering, and what this run could not rule out.
    pub notes: Vec<String>,
    /// The newest checkpoint (number, hash), when there is one.
    pub newest: Option<(u64, String)>,
}

impl Report {
    /// Whether the log is intact.
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && self.pending.is_empty()
    }
}

/// What [`judge`] compares the log with.
pub struct Evidence<'a> {
    /// The checkpoints kept, oldest first, as read after the log.
    pub checkpoints: &'a [Stored],
    /// The newest checkpoint as read before the log.
    pub before: Option<&'a Stored>,
    /// The key every checkpoint must be signed by.
    pub key: Option<&'a ed25519_dalek::VerifyingKey>,
    /// An anchor kept outside the store.
    pub anchor: Option<&'a Anchor>,
    /// Only these servers' logs were read (None: every writer's records were).
    pub servers: Option<&'a [String]>,
    /// Now, and `audit.lease` (seconds): a head younger than the lease is a writer alive.
    pub now: i64,
    /// The lease.
    pub lease: i64,
}

/// The records of each checkpoint's writers whose hashes [`judge`] needs (give to [`Reader::new`]).
pub fn wanted(before: Option<&Stored>, anchor: Option<&Anchor>) -> HashMap<String, HashSet<u64>> {
    let mut out: HashMap<String, HashSet<u64>> = HashMap::new();
    let mut add = |c: &Checkpoint| {
        for (w, h) in &c.writers {
            let set = out.entry(w.clone()).or_default();
            if h.seq >= 0 {
                set.insert(h.seq as u64);
            }
            if let Some(f) = &h.floor {
                set.insert(f.seq);
            }
        }
    };
    if let Some(b) = before {
        add(&b.checkpoint);
    }
    if let Some(c) = anchor
        .and_then(|a| a.body.as_deref())
        .and_then(|b| serde_json::from_str::<Checkpoint>(b).ok())
    {
        add(&c);
    }
    out
}

/// Judges the log read by `reader` against `evidence`.
pub fn judge(reader: &Reader, evidence: &Evidence<'_>) -> Report {
    let mut r = Report {
        records: reader.records,
        bytes: reader.bytes,
        writers: reader.writers.len(),
        ..Default::default()
    };
    check_checkpoints(evidence, &mut r);
    let newest = evidence.checkpoints.last();
    r.newest = newest.map(|s| (s.checkpoint.n, s.hash()));
    check_anchor(reader, evidence, &mut r);
    for at in &reader.torn {
        r.notes.push(format!(
            "{at}: the last line is cut short (a crash while it was written)"
        ));
    }
    for at in &reader.unchained {
        r.problems.push(format!(
            "{at}: a line in no writer's chain (no `w`, `seq`, `prev` as a writer writes them): put there by hand, or altered"
        ));
    }
    if reader.unchained_count > reader.unchained.len() as u64 {
        r.problems.push(format!(
            "{} more line(s) in no writer's chain",
            reader.unchained_count - reader.unchained.len() as u64
        ));
    }
    let Some(newest) = newest else {
        if !reader.writers.is_empty() {
            r.problems.push(format!(
                "the log holds records of {} writer(s) and the store no checkpoint: its checkpoints were removed",
                reader.writers.len()
            ));
        }
        return r;
    };
    let before = evidence.before.map(|s| &s.checkpoint);
    for w in &reader.order {
        check_writer(
            w,
            &reader.writers[w],
            before,
            &newest.checkpoint,
            evidence,
            &mut r,
        );
    }
    // Writers the checkpoint read before the log names, whose records the log does not hold.
    if let Some(before) = before {
        for (w, h) in &before.writers {
            let read = evidence.servers.is_none_or(|s| s.contains(&h.server));
            if !read || reader.writers.contains_key(w) || h.seq < 0 {
                continue;
            }
            let dropped = h.floor.as_ref().map_or(-1, |f| f.seq as i64);
            if dropped < h.seq {
                r.problems.push(format!(
                    "writer {w} ({}): its records {}..={} are missing: checkpoint #{} names them and the log has none",
                    h.server,
                    dropped + 1,
                    h.seq,
                    before.n
                ));
            }
        }
    }
    r
}

fn check_checkpoints(e: &Evidence<'_>, r: &mut Report) {
    let cs = e.checkpoints;
    for pair in cs.windows(2) {
        if let Some(p) = consistent(
            &pair[0].checkpoint,
            &pair[0].hash(),
            &pair[1].checkpoint,
            true,
        ) {
            r.problems.push(format!("the store's checkpoints: {p}"));
        }
    }
    if let (Some(b), Some(n)) = (e.before, cs.last())
        && (b.checkpoint.n > n.checkpoint.n
            || (b.checkpoint.n == n.checkpoint.n && b.hash() != n.hash()))
    {
        r.problems.push(format!(
            "the store's newest checkpoint went from #{} to #{} while the log was read: rolled back",
            b.checkpoint.n, n.checkpoint.n
        ));
    }
    match e.key {
        Some(key) => {
            let forged: Vec<u64> = cs
                .iter()
                .filter(|s| !s.signed_by(key))
                .map(|s| s.checkpoint.n)
                .collect();
            if let Some(first) = forged.first() {
                r.problems.push(format!(
                    "checkpoint #{first} ({} of {} kept) is not signed by the audit key: the store's checkpoints were forged or the key changed",
                    forged.len(),
                    cs.len()
                ));
            }
        }
        None => r.notes.push(
            "no audit key: the checkpoints' signatures were not checked, so anyone who can write the store could have rewritten them with the log (configure audit.signing_key, or pass --public-key)"
                .into(),
        ),
    }
}

fn check_anchor(reader: &Reader, e: &Evidence<'_>, r: &mut Report) {
    let Some(newest) = e.checkpoints.last() else {
        if let Some(a) = e.anchor {
            r.problems.push(format!(
                "the anchor names checkpoint #{} and the store holds none: its checkpoints were removed",
                a.n
            ));
        }
        return;
    };
    let Some(a) = e.anchor else {
        r.notes.push(format!(
            "no --anchor: this cannot rule out that the log and the store were cut back together to an earlier checkpoint; the newest here is #{} ({}) — keep `bulkhead audit anchor` output outside the store and pass it with --anchor",
            newest.checkpoint.n,
            newest.hash()
        ));
        return;
    };
    let n = newest.checkpoint.n;
    if a.n > n {
        r.problems.push(format!(
            "the store's newest checkpoint is #{n}, older than the anchor's #{}: the log was rolled back",
            a.n
        ));
        return;
    }
    if let Some(kept) = e.checkpoints.iter().find(|s| s.checkpoint.n == a.n) {
        if kept.hash() != a.hash {
            r.problems.push(format!(
                "checkpoint #{} in the store is not the one anchored (hash {} there, {} in the anchor): the store's checkpoints were replaced",
                a.n,
                kept.hash(),
                a.hash
            ));
        }
        return;
    }
    let Some(body) = &a.body else {
        r.problems.push(format!(
            "the anchor's checkpoint #{} is older than the store keeps (#{}..#{n}) and the anchor holds only its hash: export full anchors with `bulkhead audit anchor`",
            a.n,
            e.checkpoints.first().map_or(n, |s| s.checkpoint.n)
        ));
        return;
    };
    let stored = match Stored::parse(body.clone(), a.sig.clone()) {
        Ok(s) if s.hash() == a.hash && s.checkpoint.n == a.n => s,
        _ => {
            r.problems
                .push("the anchor is not a checkpoint of this hash: it was altered".into());
            return;
        }
    };
    if let Some(p) = consistent(&stored.checkpoint, &a.hash, &newest.checkpoint, false) {
        r.problems.push(format!(
            "the store's newest checkpoint does not follow the anchor: {p}"
        ));
    }
    for (w, h) in &stored.checkpoint.writers {
        let read = e.servers.is_none_or(|s| s.contains(&h.server));
        let dropped = newest.checkpoint.writers.get(w).is_none_or(|now| {
            retired(now) || now.floor.as_ref().is_some_and(|f| f.seq as i64 >= h.seq)
        });
        if !read || h.seq < 0 || dropped {
            continue;
        }
        let found = reader
            .writers
            .get(w)
            .and_then(|l| l.wanted.get(&(h.seq as u64)));
        if found.is_none_or(|x| text(x) != h.hash) {
            r.problems.push(format!(
                "writer {w} ({}): its record seq {} anchored in checkpoint #{} is not in the log as anchored",
                h.server, h.seq, a.n
            ));
        }
    }
}

fn check_writer(
    w: &str,
    log: &WriterLog,
    before: Option<&Checkpoint>,
    newest: &Checkpoint,
    e: &Evidence<'_>,
    r: &mut Report,
) {
    match &log.broken {
        Some(Broken::Problem(p)) => {
            r.problems.push(p.clone());
            return;
        }
        Some(Broken::Gap { at, got, missing }) => {
            r.problems.push(format!(
                "{at}: writer {w} seq {got} follows seq {}: {} record(s) removed before it",
                *missing as i64 - 1,
                got - missing
            ));
            return;
        }
        None => {}
    }
    let Some(head) = newest.writers.get(w) else {
        r.problems.push(format!(
            "{}: writer {w} is in no checkpoint (a record put there by hand, or the store's checkpoints were replaced)",
            log.first_at
        ));
        return;
    };
    let last = log.expect - 1;
    // Where the chain starts: at its genesis, or right after what rotation dropped.
    let floor = head.floor.as_ref();
    let start = log.first_seq;
    if start > 0 {
        match floor {
            None => {
                r.problems.push(format!(
                    "{}: writer {w} starts at seq {start}: its records 0..={} are missing, and no checkpoint says rotation dropped them",
                    log.first_at,
                    start - 1
                ));
                return;
            }
            Some(f) if start > f.seq + 1 => {
                r.problems.push(format!(
                    "{}: writer {w} starts at seq {start}: its records {}..={} are missing (rotation dropped only up to seq {})",
                    log.first_at,
                    f.seq + 1,
                    start - 1,
                    f.seq
                ));
                return;
            }
            Some(f) if start == f.seq + 1 && log.first_prev != f.hash => {
                r.problems.push(format!(
                    "{}: writer {w} seq {start} does not follow the last record rotation dropped (seq {}): altered",
                    log.first_at, f.seq
                ));
                return;
            }
            Some(f) => {
                if let Some(h) = log.wanted.get(&f.seq)
                    && text(h) != f.hash
                {
                    r.problems.push(format!(
                        "writer {w}: its record seq {} is not the one rotation recorded as dropped: altered",
                        f.seq
                    ));
                    return;
                }
            }
        }
    }
    // A cut tail: the checkpoint read before the log names a record the log does not reach.
    if let Some(b) = before.and_then(|b| b.writers.get(w)) {
        if b.seq > last as i64 {
            r.problems.push(format!(
                "{}: writer {w} ends at seq {last} but checkpoint #{} names seq {}: the tail was cut ({} record(s))",
                log.last_at,
                before.map_or(0, |b| b.n),
                b.seq,
                b.seq - last as i64
            ));
            return;
        }
        if b.seq >= start as i64
            && log
                .wanted
                .get(&(b.seq as u64))
                .is_some_and(|h| text(h) != b.hash)
        {
            r.problems.push(format!(
                "writer {w} seq {} does not match checkpoint #{}: altered",
                b.seq,
                before.map_or(0, |b| b.n)
            ));
            return;
        }
    }
    // Records past the newest checkpoint's head.
    if head.seq >= 0
        && let Some((_, h)) = log.tail.iter().find(|(s, _)| *s as i64 == head.seq)
        && text(h) != head.hash
    {
        r.problems.push(format!(
            "writer {w} seq {} does not match the newest checkpoint #{}: altered",
            head.seq, newest.n
        ));
        return;
    }
    if let Some(seal) = &head.sealed {
        r.notes.push(format!(
            "writer {w} ({}) stopped without closing after seq {}; writer {} closed it at seq {}, the last record of it the log held{}",
            head.server,
            seal.signed,
            seal.by,
            head.seq,
            if head.seq > seal.signed {
                format!(
                    " (records {}..={} were not signed by their own writer)",
                    seal.signed + 1,
                    head.seq
                )
            } else {
                String::new()
            }
        ));
    }
    if last as i64 > head.seq {
        let uncovered = last as i64 - head.seq;
        if head.closed {
            let by = head.sealed.as_ref().map_or("it closed".to_string(), |s| {
                format!("writer {} closed it", s.by)
            });
            r.problems.push(format!(
                "writer {w} seq {} follows seq {} where {by}: {uncovered} record(s) appended by hand",
                head.seq + 1,
                head.seq
            ));
        } else if e.now - head.at <= e.lease {
            r.pending.push(format!(
                "writer {w} ({}): {uncovered} record(s) after its newest checkpoint (seq {}) are not covered yet",
                head.server, head.seq
            ));
        } else {
            r.problems.push(format!(
                "writer {w} ({}): {uncovered} record(s) after seq {} are in no checkpoint: its writer stopped without closing {} s ago and no writer of its server has closed it since, or they were put there by hand",
                head.server,
                head.seq,
                e.now - head.at
            ));
        }
    }
}

/// Reads the log file at `path` and its rotated predecessors (`keep` of them), oldest first,
/// into `reader`.
pub fn read_files(path: &std::path::Path, keep: usize, reader: &mut Reader) -> std::io::Result<()> {
    let numbered = |n: usize| {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".{n}"));
        std::path::PathBuf::from(p)
    };
    // Files beyond `keep` are read too: nothing is left out because of a number.
    let mut n = keep.max(1);
    while numbered(n + 1).exists() {
        n += 1;
    }
    let mut files: Vec<std::path::PathBuf> = (1..=n).rev().map(numbered).collect();
    files.push(path.to_path_buf());
    for f in files {
        let name: std::sync::Arc<str> = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .into();
        match super::for_each_line(&f, &mut |line, number, torn| {
            reader.line(|| At::File(name.clone(), number), line, torn)
        }) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::chain::{Chain, hex};
    use crate::audit::checkpoint::{Update, WriterHead, next};

    fn head(c: &Chain, closed: bool) -> WriterHead {
        WriterHead {
            server: "s".into(),
            seq: c.last_seq(),
            hash: c.last_hash(),
            closed,
            floor: None,
            sealed: None,
            at: 0,
        }
    }

    fn evidence<'a>(cs: &'a [Stored], anchor: Option<&'a Anchor>) -> Evidence<'a> {
        Evidence {
            checkpoints: cs,
            before: cs.last(),
            key: None,
            anchor,
            servers: None,
            now: 0,
            lease: 60,
        }
    }

    fn read(lines: &[Vec<u8>], before: Option<&Stored>, anchor: Option<&Anchor>) -> Reader {
        let mut r = Reader::new(before.map(|s| &s.checkpoint), wanted(before, anchor));
        for (i, l) in lines.iter().enumerate() {
            r.line(
                || At::Row(i as i64 + 1),
                l.strip_suffix(b"\n").unwrap(),
                false,
            );
        }
        r
    }

    #[test]
    fn a_prepended_line_and_a_rollback_past_the_anchor_fail() {
        let mut c = Chain::new("s");
        let mut u = Update {
            writer: c.writer().into(),
            head: Some(head(&c, false)),
            ..Default::default()
        };
        let c0 = Stored::seal(next(None, &u), None);
        let mut lines: Vec<Vec<u8>> = (0..3)
            .map(|i| c.link(format!("{{\"n\":{i}}}\n").as_bytes()))
            .collect();
        u.head = Some(head(&c, true));
        let c1 = Stored::seal(next(Some((&c0.checkpoint, c0.hash())), &u), None);
        let cs = vec![c0.clone(), c1.clone()];
        let r = judge(&read(&lines, cs.last(), None), &evidence(&cs, None));
        assert!(r.ok(), "{r:?}");
        assert!(r.notes.iter().any(|n| n.contains("no --anchor")), "{r:?}");

        lines.insert(0, b"{\"forged\":1}\n".to_vec());
        let r = judge(&read(&lines, cs.last(), None), &evidence(&cs, None));
        assert!(
            r.problems[0].contains("id 1: a line in no writer's chain"),
            "{r:?}"
        );
        lines.remove(0);

        // Cut back to checkpoint 0 (and the log with it): only the anchor of #1 sees it.
        let rolled = vec![c0.clone()];
        let anchor = Anchor::of(&c1);
        let r = judge(
            &read(&[], rolled.last(), Some(&anchor)),
            &evidence(&rolled, Some(&anchor)),
        );
        assert!(
            r.problems[0].contains("newest checkpoint is #0, older than the anchor's #1"),
            "{r:?}"
        );
    }

    /// An attacker with the key rewrites records the anchor covers and signs a new chain of
    /// checkpoints, keeping only the newest (the anchored number is no longer kept): the anchor's
    /// own checkpoint, which names the original records, still catches it.
    #[test]
    fn an_anchor_pins_its_records_against_a_key_holder() {
        let key = ed25519_dalek::SigningKey::from_bytes(&[5u8; 32]);
        let write = |tool: &str| {
            let mut c = Chain::new("s");
            let lines: Vec<Vec<u8>> = (0..3)
                .map(|i| c.link(format!("{{\"tool\":\"{tool}\",\"n\":{i}}}\n").as_bytes()))
                .collect();
            (c, lines)
        };
        let (c, lines) = write("read");
        let mut u = Update {
            writer: c.writer().into(),
            head: Some(head(&c, false)),
            ..Default::default()
        };
        let c0 = Stored::seal(next(None, &u), Some(&key));
        u.head = Some(head(&c, true));
        let c1 = Stored::seal(next(Some((&c0.checkpoint, c0.hash())), &u), Some(&key));
        let anchor = Anchor::of(&c1);
        let kept = vec![c1.clone()];
        let mut e = evidence(&kept, Some(&anchor));
        let vk = key.verifying_key();
        e.key = Some(&vk);
        assert!(judge(&read(&lines, kept.last(), Some(&anchor)), &e).ok());

        // The same writer id, other records, a new signed chain of which #2 alone is kept.
        let mut forged_chain = Chain::new("s");
        let forged_lines: Vec<Vec<u8>> = (0..3)
            .map(|i| {
                let mut l =
                    forged_chain.link(format!("{{\"tool\":\"wipe\",\"n\":{i}}}\n").as_bytes());
                let text = String::from_utf8(l.clone()).unwrap();
                l = text.replace(forged_chain.writer(), c.writer()).into_bytes();
                l
            })
            .collect();
        // Rechain under the original id (the attacker recomputes every hash).
        let mut rechained = Vec::new();
        let mut prev = hex(&genesis(c.writer()));
        for l in &forged_lines {
            let text = String::from_utf8(l.clone()).unwrap();
            let body = &text[..text.rfind(",\"prev\":\"").unwrap()];
            let line = format!("{body},\"prev\":\"{prev}\"}}\n");
            prev = hex(&line_hash(line.as_bytes()));
            rechained.push(line.into_bytes());
        }
        let mut fu = Update {
            writer: c.writer().into(),
            head: Some(WriterHead {
                hash: prev.clone(),
                ..head(&c, true)
            }),
            ..Default::default()
        };
        let f0 = Stored::seal(next(None, &fu), Some(&key));
        let f1 = Stored::seal(next(Some((&f0.checkpoint, f0.hash())), &fu), Some(&key));
        fu.now = 1;
        let f2 = Stored::seal(next(Some((&f1.checkpoint, f1.hash())), &fu), Some(&key));
        let kept = vec![f2];
        let mut e = evidence(&kept, Some(&anchor));
        e.key = Some(&vk);
        let r = judge(&read(&rechained, kept.last(), Some(&anchor)), &e);
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("does not follow the anchor")),
            "{r:?}"
        );
    }
}
