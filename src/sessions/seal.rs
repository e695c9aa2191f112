//! Sealed values of the sign-in flow (a registered client, a sign-in under way, an authorization
//! code): XChaCha20-Poly1305 under a key derived from the signing key's file, so every process of
//! the deployment opens what another sealed and no client can read or change them. Each kind has
//! its own associated data: a value sealed as one kind never opens as another.

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::Digest as _;

/// Longest sealed value accepted, in characters.
pub const MAX_SEALED: usize = 8192;

/// What a sealed value is; the associated data of its seal.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A client registered with `POST /register` (its `client_id`).
    Client,
    /// A sign-in sent to the provider (the `state` it returns).
    SignIn,
    /// An authorization code given to a client.
    Code,
    /// The identity provider's token inside a session token (`idp`), for upstream exchanges.
    Idp,
}

impl Kind {
    fn aad(self) -> &'static [u8] {
        match self {
            Kind::Client => b"bulkhead oauth client v1",
            Kind::SignIn => b"bulkhead oauth sign-in v1",
            Kind::Code => b"bulkhead oauth code v1",
            Kind::Idp => b"bulkhead idp token v1",
        }
    }
}

/// Seals and opens values with one key.
pub struct Sealer {
    aead: XChaCha20Poly1305,
}

impl Sealer {
    /// A sealer whose key is derived from `secret` (the signing key file's bytes), domain
    /// separated from every other use of it.
    pub fn from_secret(secret: &[u8]) -> Sealer {
        let mut h = sha2::Sha256::new();
        h.update(b"bulkhead oauth seal key v1\0");
        h.update(secret);
        Sealer {
            aead: XChaCha20Poly1305::new(&h.finalize()),
        }
    }

    /// `value` as an opaque, URL-safe string.
    pub fn seal<T: Serialize>(&self, kind: Kind, value: &T) -> String {
        let mut nonce = [0u8; 24];
        getrandom::fill(&mut nonce).expect("the OS random source works");
        let plain = serde_json::to_vec(value).expect("plain data serialises");
        let sealed = self
            .aead
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &plain,
                    aad: kind.aad(),
                },
            )
            .expect("encryption of a bounded message cannot fail");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out)
    }

    /// The value `text` sealed as `kind`, or `None` (never why: a forger learns nothing).
    pub fn open<T: DeserializeOwned>(&self, kind: Kind, text: &str) -> Option<T> {
        if text.len() > MAX_SEALED {
            return None;
        }
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .ok()?;
        if raw.len() < 24 + 16 {
            return None;
        }
        let (nonce, sealed) = raw.split_at(24);
        let nonce: [u8; 24] = nonce.try_into().ok()?;
        let plain = self
            .aead
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: sealed,
                    aad: kind.aad(),
                },
            )
            .ok()?;
        serde_json::from_slice(&plain).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_as_its_kind_unchanged_and_under_its_key() {
        let s = Sealer::from_secret(b"key one");
        let text = s.seal(Kind::Code, &vec!["a".to_string()]);
        assert_eq!(
            s.open::<Vec<String>>(Kind::Code, &text),
            Some(vec!["a".into()])
        );
        assert_eq!(s.open::<Vec<String>>(Kind::Client, &text), None);
        assert_eq!(
            Sealer::from_secret(b"key two").open::<Vec<String>>(Kind::Code, &text),
            None
        );
        let mut bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&text)
            .unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let changed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        assert_eq!(s.open::<Vec<String>>(Kind::Code, &changed), None);
    }
}
