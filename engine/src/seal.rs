//! Sealed values Bulkhead hands out and takes back (approval questions, sign-ins, codes, the
//! provider's token inside a session token): XChaCha20-Poly1305 under a key derived from a secret
//! with a domain prefix, each value with its own associated data, as URL-safe text. The one home
//! of the AEAD mechanics; what a sealed value binds is checked by its user.

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::Digest as _;

/// Why a text does not open (never which byte: a forger learns nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsealed {
    /// Longer than anything sealed with this use.
    TooLong,
    /// Not base64url, or shorter than a nonce and a tag.
    Malformed,
    /// Changed, sealed with another key, or with other associated data.
    Forged,
}

/// One sealing key.
pub struct SealKey {
    aead: XChaCha20Poly1305,
}

impl SealKey {
    /// The key SHA-256(`domain` ‖ `secret`): one secret serves several uses, never mixed.
    pub fn derive(domain: &[u8], secret: &[u8]) -> SealKey {
        let mut h = sha2::Sha256::new();
        h.update(domain);
        h.update(secret);
        SealKey {
            aead: XChaCha20Poly1305::new(&h.finalize()),
        }
    }

    /// `plain` sealed with `aad`, as base64url (a fresh random nonce each time).
    pub fn seal(&self, aad: &[u8], plain: &[u8]) -> String {
        let mut nonce = [0u8; 24];
        getrandom::fill(&mut nonce).expect("the OS random source works");
        let sealed = self
            .aead
            .encrypt(&XNonce::from(nonce), Payload { msg: plain, aad })
            .expect("encryption of a bounded message cannot fail");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out)
    }

    /// What `text` sealed with `aad`; texts longer than `max_len` are refused unread.
    pub fn open(&self, aad: &[u8], text: &str, max_len: usize) -> Result<Vec<u8>, Unsealed> {
        if text.len() > max_len {
            return Err(Unsealed::TooLong);
        }
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| Unsealed::Malformed)?;
        if raw.len() < 24 + 16 {
            return Err(Unsealed::Malformed);
        }
        let (nonce, sealed) = raw.split_at(24);
        let nonce: [u8; 24] = nonce.try_into().map_err(|_| Unsealed::Malformed)?;
        self.aead
            .decrypt(&XNonce::from(nonce), Payload { msg: sealed, aad })
            .map_err(|_| Unsealed::Forged)
    }
}
