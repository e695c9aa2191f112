//! The hash chain of one audit writer (one process): every record carries its writer's id `w`,
//! its sequence number `seq` (0, 1, 2, … with no gap) and `prev`, the SHA-256 of the line the
//! writer wrote before it (for `seq` 0, of the writer's genesis text). The chain's head is
//! anchored in the state store at intervals and at shutdown ([`Head`]), optionally signed.
//!
//! What this makes evident (`bulkhead audit verify`): a changed byte (the next record's `prev`,
//! or the anchor, no longer matches), a removed record (a gap in `seq`), reordered records, a cut
//! tail (the log ends before the anchored head), and a record appended by hand (after a closed
//! head, or by a writer the store never saw; with a signing key, also a forged anchor). What it
//! does not: records appended after the last anchor of a writer that crashed, by someone who
//! recomputes the hashes, are caught only by the signature of the next anchor (none, after a
//! crash); the window is one anchor interval.

use sha2::{Digest, Sha256};

/// One writer's chain, advanced by the audit writer thread as it writes lines.
pub struct Chain {
    writer: String,
    server: String,
    next_seq: u64,
    prev: [u8; 32],
    signer: Option<ed25519_dalek::SigningKey>,
}

/// A chain head as anchored in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The writer's id.
    pub writer: String,
    /// The server whose log it writes.
    pub server: String,
    /// The last record's `seq` (-1: nothing written yet).
    pub seq: i64,
    /// The last record's hash (hex), or the genesis hash.
    pub hash: String,
    /// Whether the writer closed (no record of it may follow).
    pub closed: bool,
    /// Ed25519 signature (hex) of [`Head::message`], when a signing key is configured.
    pub sig: Option<String>,
}

impl Head {
    /// The bytes a signature covers.
    pub fn message(&self) -> Vec<u8> {
        format!(
            "bulkhead-audit-head\n{}\n{}\n{}\n{}\n{}",
            self.writer, self.server, self.seq, self.hash, self.closed
        )
        .into_bytes()
    }
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
    pub fn new(server: &str, signer: Option<ed25519_dalek::SigningKey>) -> Chain {
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).expect("the OS random source works");
        let writer = hex(&id);
        Chain {
            prev: genesis(&writer),
            writer,
            server: server.to_owned(),
            next_seq: 0,
            signer,
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

    /// The head after the last linked line, signed when a key is configured.
    pub fn head(&self, closed: bool) -> Head {
        let mut head = Head {
            writer: self.writer.clone(),
            server: self.server.clone(),
            seq: self.next_seq as i64 - 1,
            hash: hex(&self.prev),
            closed,
            sig: None,
        };
        if let Some(key) = &self.signer {
            use ed25519_dalek::Signer as _;
            head.sig = Some(hex(&key.sign(&head.message()).to_bytes()));
        }
        head
    }
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
        let mut c = Chain::new("s", None);
        let a = c.link(b"{\"x\":1}\n");
        let b = c.link(b"{\"x\":2}\n");
        let va: serde_json::Value = serde_json::from_slice(&a).unwrap();
        let vb: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(va["seq"], 0);
        assert_eq!(va["prev"], hex(&genesis(c.writer())));
        assert_eq!(vb["seq"], 1);
        assert_eq!(vb["prev"], hex(&line_hash(&a)));
        assert_eq!(c.head(false).hash, hex(&line_hash(&b)));
        assert!(a.ends_with(b"}\n"));
    }
}
