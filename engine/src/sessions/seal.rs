//! Sealed values of the sign-in flow (a registered client, a sign-in under way, an authorization
//! code, the provider's token in a session token), sealed by [`crate::seal`] under a key derived
//! from the signing key, so every process of the deployment opens what another sealed and no
//! client can read or change them. Each kind has its own associated data: a value sealed as one
//! kind never opens as another.

use serde::Serialize;
use serde::de::DeserializeOwned;

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
    key: crate::seal::SealKey,
}

impl Sealer {
    /// A sealer whose key is derived from `secret` (a digest of the signing key), domain
    /// separated from every other use of it.
    pub fn from_secret(secret: &[u8]) -> Sealer {
        Sealer {
            key: crate::seal::SealKey::derive(b"bulkhead oauth seal key v1\0", secret),
        }
    }

    /// `value` as an opaque, URL-safe string.
    pub fn seal<T: Serialize>(&self, kind: Kind, value: &T) -> String {
        let plain = serde_json::to_vec(value).expect("plain data serialises");
        self.key.seal(kind.aad(), &plain)
    }

    /// The value `text` sealed as `kind`, or `None` (never why: a forger learns nothing).
    pub fn open<T: DeserializeOwned>(&self, kind: Kind, text: &str) -> Option<T> {
        let plain = self.key.open(kind.aad(), text, MAX_SEALED).ok()?;
        serde_json::from_slice(&plain).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

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
