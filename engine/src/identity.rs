//! Who is calling: a validated (user, session) pair, readable by tool code through a task-local.

use std::fmt;
use std::future::Future;

/// Longest accepted user or session identifier, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// A caller's identity. Both parts are validated on construction, so they are safe as path
/// components, log fields and labels anywhere in the runtime.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    user: String,
    session: String,
}

/// Why an identifier was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The identifier is empty.
    #[error("{field} is empty")]
    Empty {
        /// Which identifier (`sub`, `session_id`, …).
        field: &'static str,
    },
    /// The identifier is longer than [`MAX_ID_LEN`].
    #[error("{field} is longer than {MAX_ID_LEN} bytes")]
    TooLong {
        /// Which identifier (`sub`, `session_id`, …).
        field: &'static str,
    },
    /// The identifier holds a character outside `[A-Za-z0-9._@+-]` or starts with one of `.-+@`.
    #[error(
        "{field} contains a character that is not allowed (allowed: letters, digits, `.`, `_`, `@`, `+`, `-`; first must be a letter or digit)"
    )]
    BadChar {
        /// Which identifier (`sub`, `session_id`, …).
        field: &'static str,
    },
}

impl Identity {
    /// Validates both parts: 1..=128 bytes of `[A-Za-z0-9._@+-]`, starting with a letter or digit
    /// (so never `.`, `..`, a hidden name, an option-like `-x`, a separator or NUL).
    pub fn new(user: impl Into<String>, session: impl Into<String>) -> Result<Self, IdentityError> {
        let user = user.into();
        let session = session.into();
        validate_id("user", &user)?;
        validate_id("session", &session)?;
        Ok(Identity { user, session })
    }

    /// The user id (the token's `sub`).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The session id (the token's `session_id`).
    pub fn session(&self) -> &str {
        &self.session
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.user, self.session)
    }
}

/// Checks one identifier; `field` names it in the error.
pub fn validate_id(field: &'static str, value: &str) -> Result<(), IdentityError> {
    if value.is_empty() {
        return Err(IdentityError::Empty { field });
    }
    if value.len() > MAX_ID_LEN {
        return Err(IdentityError::TooLong { field });
    }
    let bytes = value.as_bytes();
    if !bytes[0].is_ascii_alphanumeric() {
        return Err(IdentityError::BadChar { field });
    }
    let ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'+' | b'-'));
    if !ok {
        return Err(IdentityError::BadChar { field });
    }
    Ok(())
}

tokio::task_local! {
    static CURRENT: Identity;
}

/// Runs `fut` with `identity` as the current caller; tool code reads it with [`user_id`].
pub async fn scope<F: Future>(identity: Identity, fut: F) -> F::Output {
    CURRENT.scope(identity, fut).await
}

/// The current caller, if called inside [`scope`].
pub fn current() -> Option<Identity> {
    CURRENT.try_with(Clone::clone).ok()
}

/// The current caller's user id, if called inside [`scope`].
pub fn user_id() -> Option<String> {
    CURRENT.try_with(|i| i.user.clone()).ok()
}

/// The current caller's session id, if called inside [`scope`].
pub fn session_id() -> Option<String> {
    CURRENT.try_with(|i| i.session.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_ids() {
        for id in ["alice", "a", "user@example.com", "42", "s-1_2.3+x"] {
            Identity::new(id, "s1").unwrap();
        }
        Identity::new("u", "x".repeat(MAX_ID_LEN)).unwrap();
    }

    #[test]
    fn refuses_hostile_ids() {
        let bad = [
            "", ".", "..", "../bob", "/etc", "a/b", "a\\b", ".hidden", "-rf", "a\0b", "a b", "é",
            "a\nb", "%2e%2e", "@x", "+x",
        ];
        for id in bad {
            assert!(Identity::new(id, "s").is_err(), "user {id:?} accepted");
            assert!(Identity::new("u", id).is_err(), "session {id:?} accepted");
        }
        assert!(Identity::new("x".repeat(MAX_ID_LEN + 1), "s").is_err());
    }

    #[tokio::test]
    async fn task_local_scope() {
        assert_eq!(user_id(), None);
        let id = Identity::new("alice", "s1").unwrap();
        let seen = scope(id, async { (user_id(), session_id()) }).await;
        assert_eq!(seen, (Some("alice".into()), Some("s1".into())));
        assert_eq!(current(), None);
    }
}
