//! Token verification: size limit, header pre-check, key selection, signature and claims.

use std::collections::HashSet;

use base64::Engine as _;
use jsonwebtoken::{Validation, decode};
use serde::Deserialize;

use super::claims::{Claims, RawClaims, SessionRule};
use super::config::{AuthConfig, AuthConfigError, KeyAlg, MAX_LEEWAY_SECS};
use super::error::AuthError;
use super::jwks::load_jwks;
use super::keys::{VerifyKey, load_key};
use super::remote::RemoteKeys;
use crate::identity::Identity;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// An accepted token: who is calling, and the claims that said so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The validated (user, session) pair from `sub` and `session_id`.
    pub identity: Identity,
    /// The token's claims.
    pub claims: Claims,
}

/// Verifies bearer tokens against one `auth:` configuration. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Verifier {
    issuer: String,
    audience: String,
    max_token_bytes: usize,
    keys: Vec<(VerifyKey, Validation)>,
    /// Keys from the identity provider, when configured.
    remote: Option<Arc<RemoteKeys>>,
    /// Every scope some permission requires (`scopes_supported` in the resource metadata).
    scopes: Vec<String>,
    /// Clock-skew allowance for `exp` and `nbf`, in seconds.
    leeway: u64,
    /// Which claim names the caller's session.
    session: SessionRule,
    /// Tokens verified before (see [`Accepted`]), at most `verified_max`.
    verified: Mutex<HashMap<Box<str>, Accepted>>,
    verified_max: usize,
}

/// A token this verifier accepted, remembered so that the next request with the same token does
/// not check its signature again.
///
/// Invariant (enforced in [`Verifier::verify`]): a remembered acceptance is never wider than a
/// fresh verification. It is used only for the very same token bytes, only while the provider's
/// key set is the one it was verified under (the entry holds that snapshot and compares it by
/// pointer; holding it keeps the address from being reused), and only while `nbf - leeway <=
/// now <= exp + leeway`, the window `jsonwebtoken` checks. Everything else in a verification
/// depends on the token bytes and the configuration alone, which do not change while a
/// verifier lives.
#[derive(Debug)]
struct Accepted {
    verified: Arc<Verified>,
    keys: Option<Arc<Vec<(VerifyKey, Validation)>>>,
}

fn now_secs() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// The header fields that pick a key; everything else in the header is left to `jsonwebtoken`.
#[derive(Deserialize)]
struct PeekHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    /// RFC 7515 §4.1.11: extensions the recipient must understand; Bulkhead understands none.
    #[serde(default)]
    crit: Option<serde::de::IgnoredAny>,
}

impl Verifier {
    /// Checks the configuration and loads every key (inline, from files, from the JWKS file).
    pub fn new(config: &AuthConfig) -> Result<Verifier, AuthConfigError> {
        Verifier::build(config, None)
    }

    /// [`new`](Self::new), also accepting tokens signed by `session_key` (the token service's
    /// key, ES256 with a `kid`): the session tokens this deployment issues, under the same issuer
    /// and audience rules. `auth` may then name no other key.
    pub fn with_session_key(
        config: &AuthConfig,
        session_key: &jsonwebtoken::jwk::Jwk,
    ) -> Result<Verifier, AuthConfigError> {
        Verifier::build(config, Some(session_key))
    }

    fn build(
        config: &AuthConfig,
        session_key: Option<&jsonwebtoken::jwk::Jwk>,
    ) -> Result<Verifier, AuthConfigError> {
        if config.issuer.is_empty() {
            return Err(AuthConfigError::EmptyIssuer);
        }
        if config.audience.is_empty() {
            return Err(AuthConfigError::EmptyAudience);
        }
        if config.leeway_secs > MAX_LEEWAY_SECS {
            return Err(AuthConfigError::LeewayTooLarge(config.leeway_secs));
        }
        if config.max_token_bytes == 0 {
            return Err(AuthConfigError::ZeroTokenLimit);
        }
        let mut keys = Vec::new();
        for (index, key) in config.keys.iter().enumerate() {
            keys.push(load_key(index, key)?);
        }
        if let Some(path) = &config.jwks_file {
            keys.extend(load_jwks(path)?);
        }
        if let Some(jwk) = session_key {
            let label = "token_service signing key".to_string();
            let key =
                jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| AuthConfigError::BadJwk {
                    key: label.clone(),
                    reason: e.to_string(),
                })?;
            keys.push(VerifyKey {
                label,
                kid: jwk.common.key_id.clone(),
                alg: KeyAlg::ES256,
                key,
            });
        }
        let for_remote = config.clone();
        let remote = RemoteKeys::from_config(config, move |alg| validation_for(alg, &for_remote))
            .map_err(AuthConfigError::Remote)?
            .map(Arc::new);
        if keys.is_empty() && remote.is_none() {
            return Err(AuthConfigError::NoKeys);
        }
        let mut kids = HashSet::new();
        for key in &keys {
            if let Some(kid) = &key.kid
                && !kids.insert(kid.as_str())
            {
                return Err(AuthConfigError::DuplicateKid {
                    key: key.label.clone(),
                    kid: kid.clone(),
                });
            }
        }
        let keys = keys
            .into_iter()
            .map(|key| {
                let validation = validation_for(key.alg, config);
                (key, validation)
            })
            .collect();
        Ok(Verifier {
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            max_token_bytes: config.max_token_bytes,
            keys,
            remote,
            scopes: config.scopes.all(),
            leeway: config.leeway_secs,
            session: SessionRule::Claim(session_claim(config)?),
            verified: Mutex::new(HashMap::new()),
            verified_max: config.verified_tokens,
        })
    }

    /// The scopes this resource requires for some permission (RFC 9728 `scopes_supported`).
    pub fn scopes_supported(&self) -> &[String] {
        &self.scopes
    }

    /// Fetches the identity provider's keys (when configured) and keeps them fresh on the
    /// schedule until `stop`. A failed first fetch is logged; tokens needing those keys are
    /// refused until a later fetch succeeds.
    pub async fn start_remote(&self, stop: tokio_util::sync::CancellationToken) {
        if let Some(remote) = &self.remote {
            remote.refresh(true).await;
            tokio::spawn(remote.clone().run_schedule(stop));
        }
    }

    /// [`verify`](Verifier::verify), fetching the identity provider's keys again when the token
    /// names a key id not seen yet (rate-limited, one fetch at a time) or none were fetched yet.
    pub async fn verify_fresh(&self, token: &str) -> Result<Arc<Verified>, AuthError> {
        let first = self.verify(token);
        let Some(remote) = &self.remote else {
            return first;
        };
        let none_yet = remote.snapshot().is_empty();
        match first {
            Err(AuthError::UnknownKid) => {}
            Err(AuthError::AlgorithmNotAllowed | AuthError::BadSignature) if none_yet => {}
            other => return other,
        }
        remote.refresh(false).await;
        match self.verify(token) {
            Err(_) if remote.snapshot().is_empty() && self.keys.is_empty() => {
                Err(AuthError::KeysUnavailable)
            }
            other => other,
        }
    }

    /// Verifies a compact JWS (without the `Bearer ` prefix) and returns the caller's identity.
    /// A token accepted before is accepted again without checking its signature while the
    /// conditions of [`Accepted`] hold. The acceptance is shared with the cache, not copied.
    pub fn verify(&self, token: &str) -> Result<Arc<Verified>, AuthError> {
        if token.len() > self.max_token_bytes {
            return Err(AuthError::TooLarge {
                max: self.max_token_bytes,
            });
        }
        let remote = self.remote.as_ref().map(|r| r.snapshot());
        if self.verified_max > 0
            && let Some(hit) = self.remembered(token, remote.as_ref())
        {
            return Ok(hit);
        }
        let verified = Arc::new(self.verify_signed(token, remote.as_ref())?);
        if self.verified_max > 0 {
            self.remember(token, &verified, remote);
        }
        Ok(verified)
    }

    /// Tokens remembered now (at most `auth.verified_tokens`).
    pub fn remembered_tokens(&self) -> usize {
        self.verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    fn remembered(
        &self,
        token: &str,
        remote: Option<&Arc<Vec<(VerifyKey, Validation)>>>,
    ) -> Option<Arc<Verified>> {
        let cache = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        let hit = cache.get(token)?;
        let same_keys = match (&hit.keys, remote) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let now = now_secs();
        let claims = &hit.verified.claims;
        let in_window = now <= claims.exp.saturating_add(self.leeway)
            && claims
                .nbf
                .is_none_or(|nbf| now.saturating_add(self.leeway) >= nbf);
        (same_keys && in_window).then(|| hit.verified.clone())
    }

    /// Remembers `verified`; when full, expired entries go first, then (if none had expired)
    /// every entry: a cache, so forgetting costs one verification per token, never an acceptance.
    fn remember(
        &self,
        token: &str,
        verified: &Arc<Verified>,
        remote: Option<Arc<Vec<(VerifyKey, Validation)>>>,
    ) {
        let mut cache = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= self.verified_max {
            let now = now_secs();
            let leeway = self.leeway;
            cache.retain(|_, a| now <= a.verified.claims.exp.saturating_add(leeway));
            if cache.len() >= self.verified_max {
                cache.clear();
            }
        }
        cache.insert(
            token.into(),
            Accepted {
                verified: verified.clone(),
                keys: remote,
            },
        );
    }

    /// The full verification: header, key, signature, claims.
    fn verify_signed(
        &self,
        token: &str,
        remote: Option<&Arc<Vec<(VerifyKey, Validation)>>>,
    ) -> Result<Verified, AuthError> {
        let (identity, claims) = self.verify_signature(token, remote)?.into_verified(
            &self.issuer,
            &self.audience,
            &self.session,
        )?;
        Ok(Verified { identity, claims })
    }

    /// Verifies an identity provider's token offered for exchange: signature, expiry, issuer and
    /// audience as [`verify`](Self::verify) does, but no session claim is read (the token service
    /// makes the session). Never remembered: exchanges are rare and each is checked in full.
    pub async fn verify_subject(&self, token: &str) -> Result<Claims, AuthError> {
        let audience = self.audience.clone();
        self.verify_provider_token(token, &audience).await
    }

    /// Verifies an OpenID Connect ID token issued to `client_id` (RFC: OIDC Core §3.1.3.7):
    /// signature with the provider's keys, expiry, issuer, `client_id` among its audiences and,
    /// with more than one, as its `azp`. The caller checks the `nonce`.
    pub async fn verify_id_token(&self, token: &str, client_id: &str) -> Result<Claims, AuthError> {
        let claims = self.verify_provider_token(token, client_id).await?;
        if claims.aud.len() > 1
            && claims.other.get("azp").and_then(|v| v.as_str()) != Some(client_id)
        {
            return Err(AuthError::WrongAudience);
        }
        Ok(claims)
    }

    /// A provider token for `audience`, its keys fetched again once on an unknown `kid`.
    async fn verify_provider_token(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<Claims, AuthError> {
        if token.len() > self.max_token_bytes {
            return Err(AuthError::TooLarge {
                max: self.max_token_bytes,
            });
        }
        let check = |remote: Option<&Arc<Vec<(VerifyKey, Validation)>>>| {
            self.verify_signature_for(token, remote, audience)?
                .into_claims(&self.issuer, audience, &SessionRule::None)
        };
        let Some(remote) = &self.remote else {
            return check(None);
        };
        let snapshot = remote.snapshot();
        let first = check(Some(&snapshot));
        match first {
            Err(AuthError::UnknownKid) => {}
            Err(AuthError::AlgorithmNotAllowed | AuthError::BadSignature)
                if snapshot.is_empty() => {}
            other => return other,
        }
        remote.refresh(false).await;
        let snapshot = remote.snapshot();
        match check(Some(&snapshot)) {
            Err(_) if snapshot.is_empty() && self.keys.is_empty() => {
                Err(AuthError::KeysUnavailable)
            }
            other => other,
        }
    }

    /// Header, key choice and signature (with `exp`/`nbf`, `iss`, `aud` as `jsonwebtoken`
    /// checks them); the claims still to be read.
    fn verify_signature(
        &self,
        token: &str,
        remote: Option<&Arc<Vec<(VerifyKey, Validation)>>>,
    ) -> Result<RawClaims, AuthError> {
        self.verify_signature_for(token, remote, &self.audience)
    }

    /// [`verify_signature`](Self::verify_signature) with `aud` pinned to `audience`.
    fn verify_signature_for(
        &self,
        token: &str,
        remote: Option<&Arc<Vec<(VerifyKey, Validation)>>>,
        audience: &str,
    ) -> Result<RawClaims, AuthError> {
        let header = peek_header(token)?;
        let alg = KeyAlg::from_jose(&header.alg).ok_or(AuthError::AlgorithmNotAllowed)?;
        // Configured keys first; a remote key never shadows a configured kid.
        let all = || self.keys.iter().chain(remote.iter().flat_map(|r| r.iter()));
        let candidates: Vec<&(VerifyKey, Validation)> = match &header.kid {
            Some(kid) => {
                let pair = all()
                    .find(|(k, _)| k.kid.as_deref() == Some(kid.as_str()))
                    .ok_or(AuthError::UnknownKid)?;
                if pair.0.alg != alg {
                    return Err(AuthError::AlgorithmNotAllowed);
                }
                vec![pair]
            }
            None => all().filter(|(k, _)| k.alg == alg).collect(),
        };
        if candidates.is_empty() {
            return Err(AuthError::AlgorithmNotAllowed);
        }
        for (key, validation) in candidates {
            let other;
            let validation = if audience == self.audience {
                validation
            } else {
                let mut v = validation.clone();
                v.set_audience(&[audience]);
                other = v;
                &other
            };
            match decode::<RawClaims>(token, &key.key, validation) {
                Ok(data) => return Ok(data.claims),
                Err(e) => match AuthError::from_jwt(&e) {
                    // Another key of the same algorithm may have signed it.
                    AuthError::BadSignature => continue,
                    other => return Err(other),
                },
            }
        }
        Err(AuthError::BadSignature)
    }
}

/// The claim that names a caller's session: `auth.session_claim`, `session_id` by default.
///
/// Invariant: the ratchet belongs to one conversation, so the claim must change with the
/// conversation and stay while it lasts. `sid` is one per login (every conversation of a login
/// would share one ratchet) and `jti` one per token (a refreshed token would reset the ratchet
/// mid-conversation); the registered claims that are not per-conversation are refused too.
fn session_claim(config: &AuthConfig) -> Result<String, AuthConfigError> {
    let Some(name) = &config.session_claim else {
        return Ok("session_id".into());
    };
    let reason = match name.as_str() {
        "" => Some("it is empty"),
        "sid" => {
            Some("`sid` is one per login: every conversation of a login would share one ratchet")
        }
        "jti" => Some(
            "`jti` is one per token: a refreshed token would reset the ratchet mid-conversation",
        ),
        "sub" | "iss" | "aud" | "exp" | "nbf" | "iat" | "scope" | "scp" | "azp" | "client_id" => {
            Some("a registered claim that does not change with the conversation")
        }
        _ => None,
    };
    match reason {
        Some(reason) => Err(AuthConfigError::SessionClaim {
            claim: name.clone(),
            reason,
        }),
        None => Ok(name.clone()),
    }
}

/// The `jsonwebtoken` validation for one key: its algorithm only, `exp` and `nbf` with leeway,
/// `iss` and `aud` pinned. Presence and types are checked again in [`RawClaims::into_verified`],
/// so none are marked required here (a wrong type is then reported as such, not as missing).
fn validation_for(alg: KeyAlg, config: &AuthConfig) -> Validation {
    let mut v = Validation::new(alg.jwt_alg());
    v.leeway = config.leeway_secs;
    v.validate_exp = true;
    v.validate_nbf = true;
    v.validate_aud = true;
    v.required_spec_claims = HashSet::new();
    v.set_issuer(&[&config.issuer]);
    v.set_audience(&[&config.audience]);
    v
}

/// Whether `token` has the shape of a compact JWS (three dot-separated segments): opaque tokens
/// (random strings of a provider) do not.
pub fn is_jws_shaped(token: &str) -> bool {
    token.split('.').count() == 3
}

/// Splits a compact JWS, checks all three segments are base64url, and reads `alg`/`kid`.
fn peek_header(token: &str) -> Result<PeekHeader, AuthError> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed(
            "expected three dot-separated segments",
        ));
    };
    if header.is_empty() || payload.is_empty() {
        return Err(AuthError::Malformed("empty segment"));
    }
    if signature.is_empty() {
        // An unsigned token (`alg: none` style) is refused for its algorithm if the header parses.
        let header = decode_header_json(&b64, header)?;
        return Err(if KeyAlg::from_jose(&header.alg).is_some() {
            AuthError::BadSignature
        } else {
            AuthError::AlgorithmNotAllowed
        });
    }
    if b64.decode(payload).is_err() || b64.decode(signature).is_err() {
        return Err(AuthError::Malformed("segment is not base64url"));
    }
    let header = decode_header_json(&b64, header)?;
    if header.crit.is_some() {
        return Err(AuthError::Malformed(
            "critical header extensions are not supported",
        ));
    }
    Ok(header)
}

fn decode_header_json(
    b64: &base64::engine::GeneralPurpose,
    header: &str,
) -> Result<PeekHeader, AuthError> {
    let bytes = b64
        .decode(header)
        .map_err(|_| AuthError::Malformed("header is not base64url"))?;
    serde_json::from_slice(&bytes).map_err(|_| AuthError::Malformed("header is not a JWS header"))
}
