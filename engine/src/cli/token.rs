//! `bulkhead token`: mint a development token from the configured HS256 key.

use bulkhead::auth::KeyAlg;
use bulkhead::auth::mint::{MintClaims, mint_hs256};
use bulkhead::config::{Config, Environment};

/// Prints a token for `user`/`session` (a new session when `None`, named on stderr), valid for
/// `ttl` seconds. Refuses production configs.
pub fn run(config: &Config, user: &str, session: Option<&str>, ttl: u64) -> anyhow::Result<()> {
    let session = match session {
        Some(s) => s.to_string(),
        None => {
            let mut bytes = [0u8; 4];
            getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
            let s = format!("session-{:08x}", u32::from_be_bytes(bytes));
            eprintln!(
                "bulkhead: a new session `{s}` (its level starts at public; pass --session {s} to continue it)"
            );
            s
        }
    };
    let session = session.as_str();
    if config.environment == Environment::Production {
        anyhow::bail!(
            "refusing to mint a development token: this configuration says `environment: production`"
        );
    }
    let key = config
        .auth
        .keys
        .iter()
        .find(|k| k.alg == KeyAlg::HS256 && k.secret.is_some())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no HS256 key with a `secret` in `auth.keys` to mint a development token with"
            )
        })?;
    let secret = key.secret.as_deref().unwrap_or_default();
    let claims = MintClaims {
        sub: user.into(),
        session_id: session.into(),
        iss: config.auth.issuer.clone(),
        aud: config.auth.audience.clone(),
        ttl_secs: ttl,
    };
    println!("{}", mint_hs256(secret.as_bytes(), &claims)?);
    Ok(())
}
