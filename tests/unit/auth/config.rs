//! Configurations that must be refused, each naming the offending key.

use super::*;

fn config_error(cfg: AuthConfig) -> AuthConfigError {
    match Verifier::new(&cfg) {
        Ok(_) => panic!("configuration accepted"),
        Err(e) => e,
    }
}

#[test]
fn bad_configurations_are_refused_with_the_key_named() {
    let err = config_error(config(vec![
        rs_key(Some("rs-1")),
        hs_key(Some("short"), "only-31-bytes-long-secret-xxxxx"),
    ]));
    assert!(
        matches!(err, AuthConfigError::SecretTooShort { len: 31, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        r#"keys[1] (kid "short"): HS256 secret is 31 bytes, at least 32 are required"#
    );

    let err = config_error(config(vec![key(None, KeyAlg::RS256)]));
    assert!(
        matches!(&err, AuthConfigError::MissingMaterial { key } if key == "keys[0]"),
        "{err:?}"
    );

    let both = KeyConfig {
        secret: Some(SECRET.into()),
        ..rs_key(Some("x"))
    };
    assert!(matches!(
        config_error(config(vec![both])),
        AuthConfigError::ConflictingMaterial { .. }
    ));

    let pem_and_file = KeyConfig {
        public_key_pem: Some(read("rsa_public.pem")),
        ..rs_key(None)
    };
    assert!(matches!(
        config_error(config(vec![pem_and_file])),
        AuthConfigError::ConflictingMaterial { .. }
    ));

    let rs_with_secret = KeyConfig {
        secret: Some(SECRET.into()),
        ..key(Some("r"), KeyAlg::RS256)
    };
    let err = config_error(config(vec![rs_with_secret]));
    assert!(
        matches!(
            err,
            AuthConfigError::WrongMaterial {
                alg: KeyAlg::RS256,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(r#"keys[0] (kid "r"): RS256 needs `public_key_pem`"#),
        "{err}"
    );
    assert!(!err.to_string().contains(SECRET));

    let private = KeyConfig {
        public_key_file: Some(fixture("rsa_private.pem")),
        ..key(None, KeyAlg::RS256)
    };
    assert!(matches!(
        config_error(config(vec![private])),
        AuthConfigError::PrivateKeyGiven { .. }
    ));

    let ec_as_rsa = KeyConfig {
        public_key_file: Some(fixture("ec_public.pem")),
        ..key(None, KeyAlg::RS256)
    };
    assert!(matches!(
        config_error(config(vec![ec_as_rsa])),
        AuthConfigError::BadPublicKey { .. }
    ));
    let rsa_as_ec = KeyConfig {
        public_key_file: Some(fixture("rsa_public.pem")),
        ..key(None, KeyAlg::ES256)
    };
    assert!(matches!(
        config_error(config(vec![rsa_as_ec])),
        AuthConfigError::BadPublicKey { .. }
    ));

    let missing = KeyConfig {
        public_key_file: Some(fixture("nope.pem")),
        ..key(None, KeyAlg::ES256)
    };
    assert!(matches!(
        config_error(config(vec![missing])),
        AuthConfigError::ReadFile { .. }
    ));

    assert!(matches!(
        config_error(config(vec![])),
        AuthConfigError::NoKeys
    ));

    let dup = config(vec![hs_key(Some("k"), SECRET), rs_key(Some("k"))]);
    assert!(matches!(
        config_error(dup),
        AuthConfigError::DuplicateKid { .. }
    ));
    let mut dup_jwks = config(vec![rs_key(Some("jwks-rs-1"))]);
    dup_jwks.jwks_file = Some(fixture("jwks.json"));
    assert!(matches!(
        config_error(dup_jwks),
        AuthConfigError::DuplicateKid { .. }
    ));

    let mut bad_leeway = config(vec![hs_key(None, SECRET)]);
    bad_leeway.leeway_secs = 86_400;
    assert!(matches!(
        config_error(bad_leeway),
        AuthConfigError::LeewayTooLarge(86_400)
    ));
    let mut no_aud = config(vec![hs_key(None, SECRET)]);
    no_aud.audience = String::new();
    assert!(matches!(
        config_error(no_aud),
        AuthConfigError::EmptyAudience
    ));
}

#[test]
fn bad_jwks_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, body.to_string()).unwrap();
        path
    };
    let jwks: Value = serde_json::from_str(&read("jwks.json")).unwrap();
    let rsa = jwks["keys"][0].clone();
    let cases = [
        ("not a set", json!({"key": []})),
        (
            "rs384 alg",
            json!({"keys": [{"kty": "RSA", "alg": "RS384", "n": rsa["n"], "e": "AQAB"}]}),
        ),
        (
            "rsa declared es256",
            json!({"keys": [{"kty": "RSA", "alg": "ES256", "n": rsa["n"], "e": "AQAB"}]}),
        ),
        (
            "small rsa",
            json!({"keys": [{"kty": "RSA", "alg": "RS256", "n": b64(&[0xc5; 128]), "e": "AQAB"}]}),
        ),
        (
            "short oct",
            json!({"keys": [{"kty": "oct", "alg": "HS256", "k": b64(b"short")}]}),
        ),
        (
            "oct without alg",
            json!({"keys": [{"kty": "oct", "k": b64(SECRET.as_bytes())}]}),
        ),
        (
            "p-384 curve",
            json!({"keys": [{"kty": "EC", "crv": "P-384", "x": b64(&[1; 48]), "y": b64(&[2; 48])}]}),
        ),
        (
            "point not on curve",
            json!({"keys": [{"kty": "EC", "crv": "P-256", "x": b64(&[1; 32]), "y": b64(&[2; 32])}]}),
        ),
    ];
    for (what, body) in cases {
        let mut cfg = config(vec![]);
        cfg.jwks_file = Some(write("jwks.json", &body));
        match Verifier::new(&cfg) {
            Ok(_) => panic!("{what}: accepted"),
            Err(e) => assert!(
                matches!(
                    e,
                    AuthConfigError::BadJwks { .. }
                        | AuthConfigError::BadJwk { .. }
                        | AuthConfigError::BadPublicKey { .. }
                        | AuthConfigError::RsaKeyTooSmall { .. }
                        | AuthConfigError::SecretTooShort { .. }
                ),
                "{what}: {e:?}"
            ),
        }
    }
    // An encryption key is skipped, not an error; a set of only those has no keys.
    let mut enc = rsa.clone();
    enc["use"] = json!("enc");
    let mut cfg = config(vec![]);
    cfg.jwks_file = Some(write("enc.json", &json!({"keys": [enc]})));
    assert!(matches!(config_error(cfg), AuthConfigError::NoKeys));
}

#[test]
fn config_parses_from_json_with_unknown_fields_refused() {
    let ok: AuthConfig = serde_json::from_value(json!({
        "issuer": ISS, "audience": AUD,
        "keys": [{"kid": "rs-1", "alg": "RS256", "public_key_file": fixture("rsa_public.pem")}],
        "jwks_file": fixture("jwks.json"),
    }))
    .unwrap();
    assert_eq!(ok.leeway_secs, 30);
    Verifier::new(&ok).unwrap();
    let typo = serde_json::from_value::<AuthConfig>(
        json!({"issuer": ISS, "audience": AUD, "keys": [], "audiences": ["x"]}),
    );
    assert!(typo.is_err());
    let key_typo = serde_json::from_value::<KeyConfig>(json!({"alg": "HS256", "secrett": SECRET}));
    assert!(key_typo.is_err());
    for alg in ["none", "HS384", "hs256", "PS256"] {
        assert!(
            serde_json::from_value::<KeyAlg>(json!(alg)).is_err(),
            "{alg}"
        );
    }
}

/// `auth.session_claim`: a per-login or per-token claim would share or reset the ratchet, so
/// `sid` and `jti` are refused with the reason; a per-conversation claim is read instead of
/// `session_id`, which then names nothing.
#[test]
fn session_claim_refuses_sid_and_jti_and_reads_the_named_claim() {
    for (name, says) in [
        ("sid", "one per login"),
        ("jti", "one per token"),
        ("sub", "registered claim"),
        ("", "empty"),
    ] {
        let mut cfg = config(vec![hs_key(None, SECRET)]);
        cfg.session_claim = Some(name.into());
        let err = config_error(cfg);
        assert!(
            matches!(&err, AuthConfigError::SessionClaim { claim, .. } if claim == name)
                && err.to_string().contains(says),
            "{err}"
        );
    }
    let mut cfg = config(vec![hs_key(None, SECRET)]);
    cfg.session_claim = Some("conversation_id".into());
    let verifier = Verifier::new(&cfg).unwrap();
    let token = |extra: Value| {
        let mut claims = json!({"sub": "ana", "iss": ISS, "aud": AUD,
                                "exp": get_current_timestamp() + 60});
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap()
    };
    let got = verifier
        .verify(&token(
            json!({"conversation_id": "c-9", "session_id": "other"}),
        ))
        .unwrap();
    assert_eq!(got.identity.session(), "c-9");
    assert_eq!(
        verifier.verify(&token(json!({"session_id": "s-1"}))),
        Err(AuthError::MissingClaim("conversation_id".into()))
    );
}
