//! `bulkhead token`: mint a development token from the configured HS256 key.

use bulkhead::auth::KeyAlg;
use bulkhead::auth::mint::{MintClaims, mint_hs256};
use bulkhead::config::{Config, Environment};

/// Prints a token for `user`/`session`, valid for `ttl` seconds. Refuses production configs.
pub fn run(config: &Config, user: &str, session: &str, ttl: u64) -> anyhow::Result<()> {
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
