//! The claims Bulkhead reads from a verified token, and their strict extraction.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AuthError;
use crate::identity::{Identity, IdentityError};

/// The claims of an accepted token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Subject: the user id.
    pub sub: String,
    /// The caller's session id.
    pub session_id: String,
    /// Issuer.
    pub iss: String,
    /// Audiences (a single-string `aud` becomes a one-element list).
    pub aud: Vec<String>,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Not-before, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Issued-at, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Granted scopes, from `scope` (space-separated, RFC 8693 §4.2) or `scp` (a list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Every other claim, as sent (the approver rule of a tool's `approval:` reads them; nothing
    /// else trusts them).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty", flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// What a caller's credential grants beyond its identity: every scope (stdio, where the identity
/// is configured; in-process callers), or the scopes its token carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grants {
    /// No scope restriction.
    All,
    /// Exactly these scopes.
    Scopes(Vec<String>),
}

impl Grants {
    /// Whether `scope` is granted.
    pub fn has(&self, scope: &str) -> bool {
        match self {
            Grants::All => true,
            Grants::Scopes(s) => s.iter().any(|g| g == scope),
        }
    }
}

/// Most scopes read from one token (the rest are ignored: a grant is never widened by them).
const MAX_SCOPES: usize = 256;

/// The payload as it arrives: each claim kept as raw JSON so a wrong type is reported as a bad
/// claim rather than a parse failure. Duplicate keys among these fields are refused by serde.
#[derive(Deserialize)]
pub(crate) struct RawClaims {
    #[serde(default)]
    sub: Option<Value>,
    #[serde(default)]
    session_id: Option<Value>,
    #[serde(default)]
    iss: Option<Value>,
    #[serde(default)]
    aud: Option<Value>,
    #[serde(default)]
    exp: Option<Value>,
    #[serde(default)]
    nbf: Option<Value>,
    #[serde(default)]
    iat: Option<Value>,
    #[serde(default)]
    scope: Option<Value>,
    #[serde(default)]
    scp: Option<Value>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

/// Where a token's session comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SessionRule {
    /// The named claim holds it (`session_id` unless `auth.session_claim` says otherwise).
    Claim(String),
    /// The token names no session: an identity provider's token offered to the token service,
    /// which makes the session itself. [`Claims::session_id`] is then empty.
    None,
}

impl RawClaims {
    /// Checks presence and type of every claim, `iss`/`aud` against the configuration, and the
    /// session claim the rule names. Time claims were checked by `jsonwebtoken`.
    pub(crate) fn into_claims(
        mut self,
        issuer: &str,
        audience: &str,
        session: &SessionRule,
    ) -> Result<Claims, AuthError> {
        let exp = time_claim("exp", self.exp)?.ok_or(AuthError::MissingClaim("exp".into()))?;
        let nbf = time_claim("nbf", self.nbf)?;
        let iat = time_claim("iat", self.iat)?;
        let iss = string_claim("iss", self.iss)?;
        if iss != issuer {
            return Err(AuthError::WrongIssuer);
        }
        let aud = match self.aud {
            None | Some(Value::Null) => return Err(AuthError::MissingClaim("aud".into())),
            Some(Value::String(s)) => vec![s],
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(bad("aud", "list holds a non-string")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(bad("aud", "not a string or list of strings")),
        };
        if !aud.iter().any(|a| a == audience) {
            return Err(AuthError::WrongAudience);
        }
        let sub = string_claim("sub", self.sub)?;
        let session_id = match session {
            SessionRule::None => String::new(),
            SessionRule::Claim(name) if name == "session_id" => {
                string_claim("session_id", self.session_id.take())?
            }
            SessionRule::Claim(name) => {
                let value = self.other.remove(name.as_str());
                string_claim_named(Cow::Owned(name.clone()), value)?
            }
        };
        // A `session_id` the rule does not read stays visible to nothing that trusts it.
        if let Some(v) = self.session_id {
            self.other.insert("session_id".into(), v);
        }
        let scopes = scopes(self.scope, self.scp)?;
        Ok(Claims {
            sub,
            session_id,
            iss,
            aud,
            exp,
            nbf,
            iat,
            scopes,
            other: self.other,
        })
    }

    /// [`into_claims`](Self::into_claims) for a token that must name a session, with `sub` and
    /// the session validated through [`Identity::new`].
    pub(crate) fn into_verified(
        self,
        issuer: &str,
        audience: &str,
        session: &SessionRule,
    ) -> Result<(Identity, Claims), AuthError> {
        let claims = self.into_claims(issuer, audience, session)?;
        let session_claim = match session {
            SessionRule::Claim(name) => name.clone(),
            SessionRule::None => "session_id".into(),
        };
        let identity = Identity::new(claims.sub.clone(), claims.session_id.clone())
            .map_err(|e| identity_error(e, session_claim))?;
        Ok((identity, claims))
    }
}

/// The claims of an active token introspection answer (RFC 7662 §2.2) from the provider whose
/// issuer is `issuer`: `iss`, when given, must be it; audiences, when given, must include
/// `audience`; an answer naming none is accepted only for a token of one of `clients`. `exp` is
/// required and must be ahead (the answer's time claims are checked here, not by a signature
/// library). The caller checked `active`.
pub(crate) fn introspected(
    answer: serde_json::Map<String, Value>,
    issuer: &str,
    audience: &str,
    clients: &[String],
    leeway: u64,
) -> Result<Claims, AuthError> {
    let mut raw: RawClaims = serde_json::from_value(Value::Object(answer))
        .map_err(|_| AuthError::Malformed("the introspection answer is not a claims object"))?;
    raw.other.remove("active");
    if raw.iss.is_none() {
        raw.iss = Some(Value::String(issuer.to_owned()));
    }
    if matches!(raw.aud, None | Some(Value::Null)) {
        let client = raw.other.get("client_id").and_then(Value::as_str);
        if !client.is_some_and(|c| clients.iter().any(|l| l == c)) {
            return Err(bad(
                "aud",
                "the token names no audience and its client is not in token_service.introspection.clients",
            ));
        }
        raw.aud = Some(Value::String(audience.to_owned()));
    }
    let claims = raw.into_claims(issuer, audience, &SessionRule::None)?;
    let now = jsonwebtoken::get_current_timestamp();
    if claims.exp.saturating_add(leeway) <= now {
        return Err(AuthError::Expired);
    }
    if claims
        .nbf
        .is_some_and(|nbf| nbf > now.saturating_add(leeway))
    {
        return Err(AuthError::NotYetValid);
    }
    Ok(claims)
}

fn bad(claim: &'static str, reason: &str) -> AuthError {
    AuthError::BadClaim {
        claim: claim.into(),
        reason: reason.into(),
    }
}

/// `scope` as a space-separated string and/or `scp` as a list (or string); both are merged.
fn scopes(scope: Option<Value>, scp: Option<Value>) -> Result<Vec<String>, AuthError> {
    let mut out = Vec::new();
    for (name, value) in [("scope", scope), ("scp", scp)] {
        match value {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => out.extend(s.split_whitespace().map(str::to_owned)),
            Some(Value::Array(items)) => {
                for v in items {
                    match v {
                        Value::String(s) => out.push(s),
                        _ => return Err(bad(name, "list holds a non-string")),
                    }
                }
            }
            Some(_) => return Err(bad(name, "not a string or list of strings")),
        }
    }
    out.truncate(MAX_SCOPES);
    Ok(out)
}

/// A required string claim.
fn string_claim(name: &'static str, value: Option<Value>) -> Result<String, AuthError> {
    string_claim_named(Cow::Borrowed(name), value)
}

/// A required string claim whose name may come from the configuration.
fn string_claim_named(name: Cow<'static, str>, value: Option<Value>) -> Result<String, AuthError> {
    match value {
        None | Some(Value::Null) => Err(AuthError::MissingClaim(name)),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(AuthError::BadClaim {
            claim: name,
            reason: "not a string".into(),
        }),
    }
}

/// An optional NumericDate claim; Bulkhead accepts whole non-negative seconds only.
fn time_claim(name: &'static str, value: Option<Value>) -> Result<Option<u64>, AuthError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(name, "not whole seconds")),
        Some(_) => Err(bad(name, "not a number")),
    }
}

/// Maps an identity refusal to the claim it came from; the reason never repeats the value.
fn identity_error(err: IdentityError, session_claim: String) -> AuthError {
    let field = match &err {
        IdentityError::Empty { field }
        | IdentityError::TooLong { field }
        | IdentityError::BadChar { field } => *field,
    };
    let claim = if field == "user" {
        Cow::Borrowed("sub")
    } else {
        Cow::Owned(session_claim)
    };
    AuthError::BadClaim {
        claim,
        reason: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: Value) -> RawClaims {
        serde_json::from_value(v).unwrap()
    }

    fn rule() -> SessionRule {
        SessionRule::Claim("session_id".into())
    }

    /// RFC 7662 answers: audience rules, issuer, expiry.
    #[test]
    fn an_introspection_answer_names_a_user_only_within_its_audience_rules() {
        let ahead = jsonwebtoken::get_current_timestamp() + 600;
        let answer = |extra: Value| {
            let mut base = json!({"active": true, "sub": "alice", "client_id": "desk",
                                  "iss": "https://idp", "exp": ahead, "scope": "openid read"});
            for (k, v) in extra.as_object().unwrap() {
                base[k] = v.clone();
            }
            base.as_object().unwrap().clone()
        };
        let listed = ["desk".to_string()];
        let got = introspected(answer(json!({})), "https://idp", "bh", &listed, 0).unwrap();
        assert_eq!((got.sub.as_str(), got.scopes.len()), ("alice", 2));
        assert!(!got.other.contains_key("active"));
        // No audience and a client not listed: another application's token.
        let e = introspected(answer(json!({})), "https://idp", "bh", &[], 0).unwrap_err();
        assert!(e.to_string().contains("introspection.clients"), "{e}");
        // An audience that is not ours, even from a listed client.
        let e = introspected(
            answer(json!({"aud": ["crm"]})),
            "https://idp",
            "bh",
            &listed,
            0,
        );
        assert_eq!(e.unwrap_err(), AuthError::WrongAudience);
        assert!(introspected(answer(json!({"aud": "bh"})), "https://idp", "bh", &[], 0).is_ok());
        let e = introspected(
            answer(json!({"iss": "https://other"})),
            "https://idp",
            "bh",
            &listed,
            0,
        );
        assert_eq!(e.unwrap_err(), AuthError::WrongIssuer);
        let e = introspected(answer(json!({"exp": 1})), "https://idp", "bh", &listed, 0);
        assert_eq!(e.unwrap_err(), AuthError::Expired);
        let e = introspected(
            answer(json!({"exp": null})),
            "https://idp",
            "bh",
            &listed,
            0,
        );
        assert!(matches!(e.unwrap_err(), AuthError::MissingClaim(_)));
    }

    #[test]
    fn a_configured_session_claim_is_read_and_session_id_is_not_trusted() {
        let v = json!({"sub": "a", "session_id": "forged", "conv": "c-1", "iss": "i",
                       "aud": "me", "exp": 1});
        let conv = SessionRule::Claim("conv".into());
        let (id, claims) = raw(v).into_verified("i", "me", &conv).unwrap();
        assert_eq!(id.session(), "c-1");
        assert!(!claims.other.contains_key("conv"));
        let missing = json!({"sub": "a", "session_id": "s", "iss": "i", "aud": "me", "exp": 1});
        assert_eq!(
            raw(missing).into_verified("i", "me", &conv).unwrap_err(),
            AuthError::MissingClaim("conv".into())
        );
        let subject = json!({"sub": "a", "iss": "i", "aud": "me", "exp": 1});
        let claims = raw(subject)
            .into_claims("i", "me", &SessionRule::None)
            .unwrap();
        assert_eq!((claims.sub.as_str(), claims.session_id.as_str()), ("a", ""));
    }

    #[test]
    fn extracts_single_and_list_audience() {
        let base = json!({"sub": "alice", "session_id": "s1", "iss": "i", "aud": "me", "exp": 10});
        let (id, claims) = raw(base).into_verified("i", "me", &rule()).unwrap();
        assert_eq!((id.user(), id.session()), ("alice", "s1"));
        assert_eq!(claims.aud, vec!["me".to_string()]);
        let list = json!({"sub": "a", "session_id": "s", "iss": "i", "aud": ["x", "me"], "exp": 1});
        raw(list).into_verified("i", "me", &rule()).unwrap();
    }

    #[test]
    fn scopes_come_from_scope_and_scp() {
        let v = json!({"sub": "a", "session_id": "s", "iss": "i", "aud": "me", "exp": 1,
                       "scope": "openid  mcp:write", "scp": ["mcp:connect"]});
        let (_, claims) = raw(v).into_verified("i", "me", &rule()).unwrap();
        assert_eq!(claims.scopes, ["openid", "mcp:write", "mcp:connect"]);
        let v =
            json!({"sub": "a", "session_id": "s", "iss": "i", "aud": "me", "exp": 1, "scope": 7});
        assert_eq!(
            raw(v).into_verified("i", "me", &rule()).unwrap_err(),
            bad("scope", "not a string or list of strings")
        );
        assert!(Grants::Scopes(vec!["x".into()]).has("x"));
        assert!(!Grants::Scopes(vec!["x".into()]).has("y"));
        assert!(Grants::All.has("anything"));
    }

    #[test]
    fn classifies_claim_problems() {
        let cases = [
            (
                json!({"session_id": "s", "iss": "i", "aud": "me", "exp": 1}),
                AuthError::MissingClaim("sub".into()),
            ),
            (
                json!({"sub": 7, "session_id": "s", "iss": "i", "aud": "me", "exp": 1}),
                bad("sub", "not a string"),
            ),
            (
                json!({"sub": "a", "session_id": "s", "iss": "i", "aud": "me", "exp": 1.5}),
                bad("exp", "not whole seconds"),
            ),
            (
                json!({"sub": "a", "session_id": "s", "iss": "j", "aud": "me", "exp": 1}),
                AuthError::WrongIssuer,
            ),
            (
                json!({"sub": "a", "session_id": "s", "iss": "i", "aud": [], "exp": 1}),
                AuthError::WrongAudience,
            ),
            (
                json!({"sub": "a", "session_id": "s", "iss": "i", "exp": 1}),
                AuthError::MissingClaim("aud".into()),
            ),
        ];
        for (v, want) in cases {
            let got = raw(v.clone())
                .into_verified("i", "me", &rule())
                .unwrap_err();
            assert_eq!(got, want, "{v}");
        }
        let err = raw(json!({"sub": "a", "session_id": "../x", "iss": "i", "aud": "me", "exp": 1}))
            .into_verified("i", "me", &rule())
            .unwrap_err();
        assert!(
            matches!(
                err,
                AuthError::BadClaim { ref claim, .. } if claim == "session_id"
            ),
            "{err}"
        );
        assert!(!err.to_string().contains("../x"));
    }
}
