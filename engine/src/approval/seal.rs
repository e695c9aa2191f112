//! The sealed `requestState` of a 2026-07-28 approval round: XChaCha20-Poly1305 under a key read
//! from a file, so a client can neither read nor change what Bulkhead asked, of whom, for what.
//! Opening checks only the seal; what the state binds is checked in [`super::Approvals`].

use serde::{Deserialize, Serialize};

/// Domain separation: a sealed approval state is never another Bulkhead ciphertext.
const AAD: &[u8] = b"bulkhead approval state v1";
/// The longest `requestState` opened (anything longer is not ours).
pub const MAX_STATE_BYTES: usize = 4096;

/// What one question binds: who asked, in which session, for which call, until when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asked {
    /// The single-use id (random; consumed in the state store).
    pub id: String,
    /// The caller's issuer-scoped user and session.
    pub user: String,
    /// The caller's session.
    pub session: String,
    /// The server and tool.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// SHA-256 of the validated arguments' canonical JSON.
    pub args: String,
    /// Seconds since the epoch after which the answer is refused.
    pub exp: u64,
}

/// Seals and opens states with one key.
pub struct Sealer {
    key: crate::seal::SealKey,
}

impl Sealer {
    /// A sealer whose key is derived from `secret` (a key file's bytes, or the development
    /// signing secret), domain-separated from every other use of it.
    pub fn from_secret(secret: &[u8]) -> Sealer {
        Sealer {
            key: crate::seal::SealKey::derive(b"bulkhead approval key v1\0", secret),
        }
    }

    /// `asked` as an opaque, URL-safe string.
    pub fn seal(&self, asked: &Asked) -> String {
        let plain = serde_json::to_vec(asked).expect("plain data serialises");
        self.key.seal(AAD, &plain)
    }

    /// The state `text` sealed, or why not (never which byte: a forger learns nothing).
    pub fn open(&self, text: &str) -> Result<Asked, &'static str> {
        use crate::seal::Unsealed;
        let plain = self
            .key
            .open(AAD, text, MAX_STATE_BYTES)
            .map_err(|e| match e {
                Unsealed::TooLong => "the requestState is longer than any Bulkhead writes",
                Unsealed::Malformed => "the requestState is not one Bulkhead wrote",
                Unsealed::Forged => "the requestState was changed or sealed with another key",
            })?;
        serde_json::from_slice(&plain).map_err(|_| "the requestState is not one Bulkhead wrote")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn asked() -> Asked {
        Asked {
            id: "a1".into(),
            user: "alice".into(),
            session: "s1".into(),
            server: "template".into(),
            tool: "delete_file".into(),
            args: "00".into(),
            exp: 10,
        }
    }

    #[test]
    fn a_sealed_state_opens_only_unchanged_and_under_its_key() {
        let s = Sealer::from_secret(b"k1");
        let text = s.seal(&asked());
        assert_eq!(s.open(&text).unwrap(), asked());
        assert_ne!(s.seal(&asked()), text, "a fresh nonce each time");
        let mut raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&text)
            .unwrap();
        for i in [0, 30, raw.len() - 1] {
            raw[i] ^= 1;
            let edited = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw);
            assert!(s.open(&edited).is_err(), "byte {i} edited");
            raw[i] ^= 1;
        }
        assert!(Sealer::from_secret(b"k2").open(&text).is_err());
        assert!(s.open("not-base64!").is_err());
        assert!(s.open(&"A".repeat(MAX_STATE_BYTES + 1)).is_err());
    }
}
