//! The hash chain of one audit writer (one process): every record carries its writer's id `w`,
//! its sequence number `seq` (0, 1, 2, … with no gap) and `prev`, the SHA-256 of the line the
//! writer wrote before it (for `seq` 0, of the writer's genesis text). Each writer's head goes
//! into the store's signed checkpoints ([`super::checkpoint`]) at intervals and at shutdown.

use sha2::{Digest, Sha256};

/// One writer's chain, advanced by the audit writer thread as it writes lines.
pub struct Chain {
    writer: String,
    server: String,
    next_seq: u64,
    prev: [u8; 32],
}

/// The `prev` of a writer's first record.
pub fn genesis(writer: &str) -> [u8; 32] {
    Sha256::digest(format!("bulkhead-audit-genesis\n{writer}")).into()
}

/// The hash a line is chained by: SHA-256 of its bytes, without the newline.
pub fn line_hash(line: &[u8]) -> [u8; 32] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    Sha256::digest(line).into()
}

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

impl Chain {
    /// A new chain for a writer of `server`'s log, with a fresh random writer id.
    pub fn new(server: &str) -> Chain {
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).expect("the OS random source works");
        let writer = hex(&id);
        Chain {
            prev: genesis(&writer),
            writer,
            server: server.to_owned(),
            next_seq: 0,
        }
    }

    /// The last linked record's `seq` (-1: none yet).
    pub fn last_seq(&self) -> i64 {
        self.next_seq as i64 - 1
    }

    /// The writer's id.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// Links one record line (`{…}\n`, as [`super::AuditRecord::to_line`] makes it) into the
    /// chain: `"w"`, `"seq"` and `"prev"` are added as its last fields.
    pub fn link(&mut self, line: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(line.len() + 128);
        self.link_into(&mut out, line);
        out
    }

    /// [`link`](Chain::link), appending the linked line to `out` (the writer's batch).
    pub fn link_into(&mut self, out: &mut Vec<u8>, line: &[u8]) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let body = body.strip_suffix(b"}").unwrap_or(body);
        let start = out.len();
        out.extend_from_slice(body);
        if body.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"w\":\"");
        out.extend_from_slice(self.writer.as_bytes());
        out.extend_from_slice(b"\",\"seq\":");
        out.extend_from_slice(self.next_seq.to_string().as_bytes());
        out.extend_from_slice(b",\"prev\":\"");
        push_hex(out, &self.prev);
        out.extend_from_slice(b"\"}");
        self.prev = line_hash(&out[start..]);
        self.next_seq += 1;
        out.push(b'\n');
    }

    /// The hash of the last linked line (hex), or the genesis hash.
    pub fn last_hash(&self) -> String {
        hex(&self.prev)
    }

    /// Starts a new chain under a fresh writer id (this one was closed by another writer).
    pub fn renew(&mut self) {
        let fresh = Chain::new(&self.server);
        self.writer = fresh.writer;
        self.prev = fresh.prev;
        self.next_seq = 0;
    }

    /// The server whose log it writes.
    pub fn server(&self) -> &str {
        &self.server
    }
}

/// The last of `links` (a writer's records in log order: seq, prev, hash) that continues its
/// chain from record `seq` with hash `hash`, stopping at the first that does not.
pub fn last_continuing(
    seq: i64,
    hash: &str,
    links: impl IntoIterator<Item = (u64, String, String)>,
) -> Option<(u64, String)> {
    let mut last = None;
    let (mut expect, mut prev) = ((seq + 1) as u64, hash.to_owned());
    for (s, p, h) in links {
        if s != expect || p != prev {
            break;
        }
        last = Some((s, h.clone()));
        expect += 1;
        prev = h;
    }
    last
}

/// A record's chain fields, read from the end of its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link<'a> {
    /// The writer's id.
    pub writer: &'a str,
    /// The record's `seq`.
    pub seq: u64,
    /// The hash of the writer's record before it (hex).
    pub prev: &'a str,
}

/// The chain fields of a line as [`Chain::link_into`] writes them (its last fields, exactly
/// `"w":"<16 hex>","seq":<n>,"prev":"<64 hex>"}`), without parsing the rest: None when they
/// are not there. The hash chain covers every byte, so the rest needs no parse to be verified.
pub fn parse_link(line: &[u8]) -> Option<Link<'_>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let rest = line.strip_suffix(b"\"}")?;
    let (rest, prev) = rest.split_at_checked(rest.len().checked_sub(64)?)?;
    let rest = rest.strip_suffix(b",\"prev\":\"")?;
    let digits = rest.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    let (rest, seq) = rest.split_at(rest.len() - digits);
    let rest = rest.strip_suffix(b",\"seq\":")?;
    let rest = rest.strip_suffix(b"\"")?;
    let (rest, writer) = rest.split_at_checked(rest.len().checked_sub(16)?)?;
    let rest = rest.strip_suffix(b"\"w\":\"")?;
    if !matches!(rest.last(), Some(b',' | b'{')) || !rest.starts_with(b"{") {
        return None;
    }
    let lower_hex = |s: &[u8]| s.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !lower_hex(prev) || !lower_hex(writer) || (seq.len() > 1 && seq[0] == b'0') {
        return None;
    }
    Some(Link {
        writer: std::str::from_utf8(writer).ok()?,
        seq: std::str::from_utf8(seq).ok()?.parse().ok()?,
        prev: std::str::from_utf8(prev).ok()?,
    })
}

/// Reads an Ed25519 private key (PKCS#8 PEM) for signing anchored heads.
pub fn read_signing_key(path: &std::path::Path) -> Result<ed25519_dalek::SigningKey, String> {
    use ed25519_dalek::pkcs8::DecodePrivateKey;
    let pem = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    ed25519_dalek::SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
        format!(
            "{}: not an Ed25519 PKCS#8 PEM private key ({e})",
            path.display()
        )
    })
}

/// Reads an Ed25519 public key (SPKI PEM), or derives it from a private key file.
pub fn read_verifying_key(path: &std::path::Path) -> Result<ed25519_dalek::VerifyingKey, String> {
    use ed25519_dalek::pkcs8::DecodePublicKey;
    let pem = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Ok(k) = ed25519_dalek::VerifyingKey::from_public_key_pem(&pem) {
        return Ok(k);
    }
    read_signing_key(path).map(|k| k.verifying_key())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_lines_stay_json_and_chain() {
        let mut c = Chain::new("s");
        let a = c.link(b"{\"x\":1}\n");
        let b = c.link(b"{\"x\":2}\n");
        let va: serde_json::Value = serde_json::from_slice(&a).unwrap();
        let vb: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(va["seq"], 0);
        assert_eq!(va["prev"], hex(&genesis(c.writer())));
        assert_eq!(vb["seq"], 1);
        assert_eq!(vb["prev"], hex(&line_hash(&a)));
        assert_eq!(c.last_hash(), hex(&line_hash(&b)));
        assert!(a.ends_with(b"}\n"));
        let l = parse_link(&b).unwrap();
        assert_eq!((l.writer, l.seq), (c.writer(), 1));
        assert_eq!(l.prev, hex(&line_hash(&a)));
        assert_eq!(parse_link(b"{\"x\":1}"), None);
        let tampered = String::from_utf8(b.clone())
            .unwrap()
            .replace("\"seq\":1", "\"seq\":01");
        assert_eq!(parse_link(tampered.as_bytes()), None);
    }
}
