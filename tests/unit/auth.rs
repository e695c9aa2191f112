//! Adversarial tests of `bulkhead::auth`: forged, confused, expired, misaddressed and hostile
//! tokens against a real configuration with HS256, RS256, ES256 and JWKS keys.

use std::path::PathBuf;

use base64::Engine as _;
use bulkhead::auth::mint::{self, MintClaims};
use bulkhead::auth::{AuthConfig, AuthConfigError, AuthError, KeyAlg, KeyConfig, Verifier};
use jsonwebtoken::{Algorithm, EncodingKey, Header, get_current_timestamp};
use serde_json::{Value, json};

const SECRET: &str = "test-only-hs256-secret-0123456789abcdef";
const ISS: &str = "https://issuer.test";
const AUD: &str = "bulkhead-records";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/auth")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

fn key(kid: Option<&str>, alg: KeyAlg) -> KeyConfig {
    KeyConfig {
        kid: kid.map(Into::into),
        alg,
        secret: None,
        public_key_pem: None,
        public_key_file: None,
    }
}

fn hs_key(kid: Option<&str>, secret: &str) -> KeyConfig {
    KeyConfig {
        secret: Some(secret.into()),
        ..key(kid, KeyAlg::HS256)
    }
}

fn rs_key(kid: Option<&str>) -> KeyConfig {
    KeyConfig {
        public_key_file: Some(fixture("rsa_public.pem")),
        ..key(kid, KeyAlg::RS256)
    }
}

fn es_key(kid: Option<&str>) -> KeyConfig {
    KeyConfig {
        public_key_pem: Some(read("ec_public.pem")),
        ..key(kid, KeyAlg::ES256)
    }
}

fn config(keys: Vec<KeyConfig>) -> AuthConfig {
    AuthConfig {
        issuer: ISS.into(),
        audience: AUD.into(),
        leeway_secs: 30,
        max_token_bytes: 8192,
        keys,
        jwks_file: None,
    }
}

/// Every kind of key at once: HS256 (kid hs-1), RS256 (rs-1), ES256 (es-1), and the JWKS file
/// (jwks-rs-1, jwks-es-1).
fn full_verifier() -> Verifier {
    let mut cfg = config(vec![
        hs_key(Some("hs-1"), SECRET),
        rs_key(Some("rs-1")),
        es_key(Some("es-1")),
    ]);
    cfg.jwks_file = Some(fixture("jwks.json"));
    Verifier::new(&cfg).unwrap()
}

fn now() -> u64 {
    get_current_timestamp()
}

fn good_claims() -> Value {
    json!({"sub": "alice", "session_id": "sess-1", "iss": ISS, "aud": AUD,
           "exp": now() + 300, "nbf": now() - 5, "iat": now() - 5})
}

fn with(changes: Value) -> Value {
    let mut claims = good_claims();
    for (k, v) in changes.as_object().unwrap() {
        claims[k] = v.clone();
    }
    claims
}

fn without(name: &str) -> Value {
    let mut claims = good_claims();
    claims.as_object_mut().unwrap().remove(name);
    claims
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn signing_key(alg: Algorithm, material: &[u8]) -> EncodingKey {
    match alg {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
            EncodingKey::from_secret(material)
        }
        Algorithm::ES256 => EncodingKey::from_ec_pem(material).unwrap(),
        _ => EncodingKey::from_rsa_pem(material).unwrap(),
    }
}

/// Signs `claims` with jsonwebtoken itself: a well-formed token whose content we choose.
fn sign(alg: Algorithm, material: &[u8], kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(Into::into);
    jsonwebtoken::encode(&header, claims, &signing_key(alg, material)).unwrap()
}

/// Builds a token from raw header and payload text, signed over exactly those bytes.
fn sign_raw(alg: Algorithm, material: &[u8], header: &str, payload: &str) -> String {
    let message = format!("{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()));
    let sig =
        jsonwebtoken::crypto::sign(message.as_bytes(), &signing_key(alg, material), alg).unwrap();
    format!("{message}.{sig}")
}

fn hs(claims: &Value) -> String {
    sign(Algorithm::HS256, SECRET.as_bytes(), None, claims)
}

/// Same kind of error; for claim errors, the same claim.
fn same_kind(got: &AuthError, want: &AuthError) -> bool {
    match (got, want) {
        (AuthError::BadClaim { claim: a, .. }, AuthError::BadClaim { claim: b, .. }) => a == b,
        (AuthError::Malformed(_), AuthError::Malformed(_)) => true,
        _ => got == want,
    }
}

fn bad_claim(claim: &'static str) -> AuthError {
    AuthError::BadClaim {
        claim,
        reason: String::new(),
    }
}

fn malformed() -> AuthError {
    AuthError::Malformed("")
}

/// The adversarial table: (what, token, expected refusal).
fn bad_tokens() -> Vec<(String, String, AuthError)> {
    let rsa_priv = read("rsa_private.pem");
    let ec_priv = read("ec_private.pem");
    let jwks_rsa_priv = read("jwks_rsa_private.pem");
    let rsa_pub = read("rsa_public.pem");
    let good = hs(&good_claims());
    let good_parts: Vec<&str> = good.split('.').collect();
    let payload_json = good_claims().to_string();
    let mut t: Vec<(String, String, AuthError)> = Vec::new();
    let mut add =
        |what: &str, token: String, want: AuthError| t.push((what.to_string(), token, want));

    // Algorithm attacks.
    let none_payload = b64(payload_json.as_bytes());
    add(
        "alg none, unsigned",
        format!("{}.{none_payload}.", b64(br#"{"alg":"none","typ":"JWT"}"#)),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "alg None, unsigned",
        format!("{}.{none_payload}.", b64(br#"{"alg":"None"}"#)),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "alg none with kid and junk signature",
        format!(
            "{}.{none_payload}.AAAA",
            b64(br#"{"alg":"none","kid":"hs-1"}"#)
        ),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "alg HS256 but no signature",
        format!("{}.{}.", good_parts[0], good_parts[1]),
        AuthError::BadSignature,
    );
    add(
        "HS/RS confusion: HS256 keyed with the RSA public PEM, kid rs-1",
        sign(
            Algorithm::HS256,
            rsa_pub.as_bytes(),
            Some("rs-1"),
            &good_claims(),
        ),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "HS/RS confusion without kid (tried only against HS256 keys)",
        sign(Algorithm::HS256, rsa_pub.as_bytes(), None, &good_claims()),
        AuthError::BadSignature,
    );
    add(
        "RS256 token naming the ES256 key",
        sign(
            Algorithm::RS256,
            rsa_priv.as_bytes(),
            Some("es-1"),
            &good_claims(),
        ),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "HS256 token naming the RS256 key",
        sign(
            Algorithm::HS256,
            SECRET.as_bytes(),
            Some("rs-1"),
            &good_claims(),
        ),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "HS384 with the right secret",
        sign(Algorithm::HS384, SECRET.as_bytes(), None, &good_claims()),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "HS512 with the right secret",
        sign(Algorithm::HS512, SECRET.as_bytes(), None, &good_claims()),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "PS256 with the right RSA key",
        sign(
            Algorithm::PS256,
            rsa_priv.as_bytes(),
            Some("rs-1"),
            &good_claims(),
        ),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "RS512 with the right RSA key",
        sign(Algorithm::RS512, rsa_priv.as_bytes(), None, &good_claims()),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "ES384 header",
        format!(
            "{}.{}.{}",
            b64(br#"{"alg":"ES384"}"#),
            good_parts[1],
            good_parts[2]
        ),
        AuthError::AlgorithmNotAllowed,
    );

    // Signature attacks.
    add(
        "wrong HMAC key",
        sign(
            Algorithm::HS256,
            b"another-secret-that-is-long-enough!!",
            None,
            &good_claims(),
        ),
        AuthError::BadSignature,
    );
    let evil = b64(with(json!({"sub": "mallory"})).to_string().as_bytes());
    add(
        "tampered HS256 payload, original signature",
        format!("{}.{evil}.{}", good_parts[0], good_parts[2]),
        AuthError::BadSignature,
    );
    let rs = sign(
        Algorithm::RS256,
        rsa_priv.as_bytes(),
        Some("rs-1"),
        &good_claims(),
    );
    let rs_parts: Vec<&str> = rs.split('.').collect();
    add(
        "tampered RS256 payload, original signature",
        format!("{}.{evil}.{}", rs_parts[0], rs_parts[2]),
        AuthError::BadSignature,
    );
    let es = sign(
        Algorithm::ES256,
        ec_priv.as_bytes(),
        Some("es-1"),
        &good_claims(),
    );
    let es_parts: Vec<&str> = es.split('.').collect();
    add(
        "tampered ES256 payload, original signature",
        format!("{}.{evil}.{}", es_parts[0], es_parts[2]),
        AuthError::BadSignature,
    );
    add(
        "RS256 signed by the JWKS key but naming rs-1",
        sign(
            Algorithm::RS256,
            jwks_rsa_priv.as_bytes(),
            Some("rs-1"),
            &good_claims(),
        ),
        AuthError::BadSignature,
    );
    add(
        "ES256 signed by es-1's key but naming jwks-es-1",
        sign(
            Algorithm::ES256,
            ec_priv.as_bytes(),
            Some("jwks-es-1"),
            &good_claims(),
        ),
        AuthError::BadSignature,
    );
    add(
        "ES256 signature bytes truncated",
        format!("{}.{}.{}", es_parts[0], es_parts[1], &es_parts[2][..40]),
        AuthError::BadSignature,
    );

    // Time.
    add(
        "expired an hour ago",
        hs(&with(json!({"exp": now() - 3600}))),
        AuthError::Expired,
    );
    add(
        "expired just beyond leeway",
        hs(&with(json!({"exp": now() - 120}))),
        AuthError::Expired,
    );
    add(
        "nbf in the future",
        hs(&with(json!({"nbf": now() + 600}))),
        AuthError::NotYetValid,
    );

    // Addressing.
    add(
        "wrong aud",
        hs(&with(json!({"aud": "bulkhead-other"}))),
        AuthError::WrongAudience,
    );
    add(
        "aud list without ours",
        hs(&with(json!({"aud": ["a", "b", "bulkhead-records2"]}))),
        AuthError::WrongAudience,
    );
    add(
        "empty aud list",
        hs(&with(json!({"aud": []}))),
        AuthError::WrongAudience,
    );
    add(
        "aud case differs",
        hs(&with(json!({"aud": "Bulkhead-Records"}))),
        AuthError::WrongAudience,
    );
    add(
        "wrong iss",
        hs(&with(json!({"iss": "https://evil.test"}))),
        AuthError::WrongIssuer,
    );
    add(
        "iss with trailing slash",
        hs(&with(json!({"iss": "https://issuer.test/"}))),
        AuthError::WrongIssuer,
    );
    add(
        "iss as a list holding ours",
        hs(&with(json!({"iss": [ISS]}))),
        bad_claim("iss"),
    );

    // Missing and mistyped claims.
    for name in ["exp", "sub", "session_id", "iss", "aud"] {
        let want = AuthError::MissingClaim(match name {
            "exp" => "exp",
            "sub" => "sub",
            "session_id" => "session_id",
            "iss" => "iss",
            _ => "aud",
        });
        add(&format!("missing {name}"), hs(&without(name)), want);
    }
    add(
        "sub null",
        hs(&with(json!({"sub": null}))),
        AuthError::MissingClaim("sub"),
    );
    add(
        "sub as number",
        hs(&with(json!({"sub": 42}))),
        bad_claim("sub"),
    );
    add(
        "sub as list",
        hs(&with(json!({"sub": ["alice"]}))),
        bad_claim("sub"),
    );
    add(
        "session_id as object",
        hs(&with(json!({"session_id": {"id": "s"}}))),
        bad_claim("session_id"),
    );
    add(
        "exp as string",
        hs(&with(json!({"exp": (now() + 300).to_string()}))),
        bad_claim("exp"),
    );
    add(
        "exp fractional",
        hs(&with(json!({"exp": (now() + 300) as f64 + 0.5}))),
        bad_claim("exp"),
    );

    // Hostile identities.
    let long = "a".repeat(200);
    let hostile = [
        "../bob",
        "/etc",
        "a/b",
        ".",
        "..",
        "",
        "a\0b",
        long.as_str(),
        " alice",
        "alice bob",
        "alice\n",
        "ålice",
        "用户",
        "-rf",
        ".hidden",
        "a\\b",
        "%2e%2e",
    ];
    for value in hostile {
        add(
            &format!("hostile sub {value:?}"),
            hs(&with(json!({"sub": value}))),
            bad_claim("sub"),
        );
    }
    for value in [
        "../bob",
        "/etc",
        "..",
        "",
        "a\0b",
        long.as_str(),
        "x y",
        "ß",
    ] {
        add(
            &format!("hostile session_id {value:?}"),
            hs(&with(json!({"session_id": value}))),
            bad_claim("session_id"),
        );
    }

    // Shape.
    let padding = "p".repeat(9000);
    add(
        "oversized but validly signed",
        hs(&with(json!({"pad": padding}))),
        AuthError::TooLarge { max: 8192 },
    );
    add(
        "two segments",
        format!("{}.{}", good_parts[0], good_parts[1]),
        malformed(),
    );
    add("four segments", format!("{good}.AAAA"), malformed());
    add("empty string", String::new(), malformed());
    add(
        "garbage base64 payload",
        format!("{}.!!!*.{}", good_parts[0], good_parts[2]),
        malformed(),
    );
    add(
        "garbage base64 header",
        format!("%%%.{}.{}", good_parts[1], good_parts[2]),
        malformed(),
    );
    add(
        "garbage base64 signature",
        format!("{}.{}.@@@@", good_parts[0], good_parts[1]),
        malformed(),
    );
    add(
        "padded base64",
        format!("{}=.{}.{}", good_parts[0], good_parts[1], good_parts[2]),
        malformed(),
    );
    add(
        "header not JSON",
        format!("{}.{}.{}", b64(b"not json"), good_parts[1], good_parts[2]),
        malformed(),
    );
    add(
        "header without alg",
        format!(
            "{}.{}.{}",
            b64(br#"{"typ":"JWT"}"#),
            good_parts[1],
            good_parts[2]
        ),
        malformed(),
    );
    add(
        "Bearer prefix left on",
        format!("Bearer {good}"),
        malformed(),
    );
    add(
        "payload not JSON, validly signed",
        sign_raw(
            Algorithm::HS256,
            SECRET.as_bytes(),
            r#"{"alg":"HS256"}"#,
            "alice",
        ),
        malformed(),
    );
    add(
        "payload a JSON array, validly signed",
        sign_raw(
            Algorithm::HS256,
            SECRET.as_bytes(),
            r#"{"alg":"HS256"}"#,
            "[1,2]",
        ),
        malformed(),
    );
    let dup = payload_json.replacen('{', r#"{"sub":"../bob","#, 1);
    add(
        "duplicate sub claim, validly signed",
        sign_raw(
            Algorithm::HS256,
            SECRET.as_bytes(),
            r#"{"alg":"HS256"}"#,
            &dup,
        ),
        malformed(),
    );

    // Key selection.
    add(
        "unknown kid",
        sign(
            Algorithm::HS256,
            SECRET.as_bytes(),
            Some("hs-2"),
            &good_claims(),
        ),
        AuthError::UnknownKid,
    );
    add(
        "kid with path traversal",
        sign(
            Algorithm::HS256,
            SECRET.as_bytes(),
            Some("../../etc/passwd"),
            &good_claims(),
        ),
        AuthError::UnknownKid,
    );
    add(
        "kid of a key with another alg (ES256 kid, HS256 token)",
        sign(
            Algorithm::HS256,
            SECRET.as_bytes(),
            Some("es-1"),
            &good_claims(),
        ),
        AuthError::AlgorithmNotAllowed,
    );
    add(
        "kid of a JWKS key with another alg",
        sign(
            Algorithm::HS256,
            SECRET.as_bytes(),
            Some("jwks-rs-1"),
            &good_claims(),
        ),
        AuthError::AlgorithmNotAllowed,
    );
    t
}

#[test]
fn every_bad_token_is_refused_with_the_expected_error() {
    let verifier = full_verifier();
    let cases = bad_tokens();
    let distinct: std::collections::HashSet<&String> =
        cases.iter().map(|(_, tok, _)| tok).collect();
    assert!(
        distinct.len() >= 30,
        "only {} distinct bad tokens",
        distinct.len()
    );
    assert_eq!(distinct.len(), cases.len(), "two cases share a token");
    let mut failures = Vec::new();
    for (what, token, want) in &cases {
        match verifier.verify(token) {
            Ok(v) => failures.push(format!("{what}: ACCEPTED as {}", v.identity)),
            Err(got) if !same_kind(&got, want) => {
                failures.push(format!("{what}: got {got:?}, want {want:?}"))
            }
            Err(got) => {
                let shown = got.to_string();
                if token.len() > 8 && shown.contains(token.as_str()) {
                    failures.push(format!("{what}: error message echoes the token"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn hostile_claim_values_never_reach_the_error_message() {
    let verifier = full_verifier();
    for value in ["../../etc/shadow", "evil\nlog line", "<script>x</script>"] {
        let err = verifier
            .verify(&hs(&with(json!({"sub": value}))))
            .unwrap_err();
        assert!(
            matches!(err, AuthError::BadClaim { claim: "sub", .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains(value), "{err}");
        assert!(!format!("{err:?}").contains(value), "{err:?}");
    }
}

#[test]
fn good_tokens_of_every_algorithm_are_accepted() {
    let verifier = full_verifier();
    let rsa_priv = read("rsa_private.pem");
    let ec_priv = read("ec_private.pem");
    let cases = [
        ("HS256 without kid", hs(&good_claims())),
        (
            "HS256 with kid",
            sign(
                Algorithm::HS256,
                SECRET.as_bytes(),
                Some("hs-1"),
                &good_claims(),
            ),
        ),
        (
            "RS256 with kid",
            sign(
                Algorithm::RS256,
                rsa_priv.as_bytes(),
                Some("rs-1"),
                &good_claims(),
            ),
        ),
        (
            "RS256 without kid",
            sign(Algorithm::RS256, rsa_priv.as_bytes(), None, &good_claims()),
        ),
        (
            "ES256 with kid",
            sign(
                Algorithm::ES256,
                ec_priv.as_bytes(),
                Some("es-1"),
                &good_claims(),
            ),
        ),
        (
            "ES256 without kid",
            sign(Algorithm::ES256, ec_priv.as_bytes(), None, &good_claims()),
        ),
        (
            "aud list holding ours",
            hs(&with(json!({"aud": ["other", AUD]}))),
        ),
        (
            "expired within leeway",
            hs(&with(json!({"exp": now() - 10}))),
        ),
        ("nbf within leeway", hs(&with(json!({"nbf": now() + 10})))),
        (
            "no nbf, no iat",
            hs(
                &json!({"sub": "alice", "session_id": "sess-1", "iss": ISS, "aud": AUD, "exp": now() + 60}),
            ),
        ),
        (
            "extra claims ignored",
            hs(&with(json!({"scope": "read", "roles": ["x"]}))),
        ),
    ];
    for (what, token) in cases {
        let got = verifier
            .verify(&token)
            .unwrap_or_else(|e| panic!("{what}: refused: {e:?}"));
        assert_eq!(
            (got.identity.user(), got.identity.session()),
            ("alice", "sess-1"),
            "{what}"
        );
        assert_eq!(got.claims.iss, ISS, "{what}");
        assert!(got.claims.aud.iter().any(|a| a == AUD), "{what}");
    }
}

#[test]
fn identity_comes_from_the_token_claims() {
    let verifier = full_verifier();
    let claims = with(json!({"sub": "bob@example.com", "session_id": "S-42_x.y+z", "iat": 1000}));
    let got = verifier.verify(&hs(&claims)).unwrap();
    assert_eq!(got.identity.user(), "bob@example.com");
    assert_eq!(got.identity.session(), "S-42_x.y+z");
    assert_eq!(got.claims.sub, "bob@example.com");
    assert_eq!(got.claims.exp, claims["exp"].as_u64().unwrap());
    assert_eq!(got.claims.iat, Some(1000));
}

#[test]
fn jwks_file_keys_are_accepted() {
    let verifier = full_verifier();
    let jwks_rsa = read("jwks_rsa_private.pem");
    let jwks_ec = read("jwks_ec_private.pem");
    let rs = sign(
        Algorithm::RS256,
        jwks_rsa.as_bytes(),
        Some("jwks-rs-1"),
        &good_claims(),
    );
    assert_eq!(verifier.verify(&rs).unwrap().identity.user(), "alice");
    let es = sign(
        Algorithm::ES256,
        jwks_ec.as_bytes(),
        Some("jwks-es-1"),
        &good_claims(),
    );
    assert_eq!(verifier.verify(&es).unwrap().identity.user(), "alice");
    // Without kid, the JWKS key is found among the keys of its algorithm.
    let es = sign(Algorithm::ES256, jwks_ec.as_bytes(), None, &good_claims());
    assert_eq!(verifier.verify(&es).unwrap().identity.session(), "sess-1");

    // A verifier with only the JWKS file.
    let mut cfg = config(vec![]);
    cfg.jwks_file = Some(fixture("jwks.json"));
    let only = Verifier::new(&cfg).unwrap();
    assert_eq!(only.verify(&rs).unwrap().identity.user(), "alice");
    let hs_token = hs(&good_claims());
    assert_eq!(only.verify(&hs_token), Err(AuthError::AlgorithmNotAllowed));
}

#[test]
fn confusion_against_single_algorithm_verifiers() {
    let rs_only = Verifier::new(&config(vec![rs_key(None)])).unwrap();
    let rsa_pub = read("rsa_public.pem");
    let forged = sign(Algorithm::HS256, rsa_pub.as_bytes(), None, &good_claims());
    assert_eq!(rs_only.verify(&forged), Err(AuthError::AlgorithmNotAllowed));
    let forged_der_like = sign(
        Algorithm::HS256,
        rsa_pub.trim().as_bytes(),
        None,
        &good_claims(),
    );
    assert_eq!(
        rs_only.verify(&forged_der_like),
        Err(AuthError::AlgorithmNotAllowed)
    );

    let es_only = Verifier::new(&config(vec![es_key(None)])).unwrap();
    let rs = sign(
        Algorithm::RS256,
        read("rsa_private.pem").as_bytes(),
        None,
        &good_claims(),
    );
    assert_eq!(es_only.verify(&rs), Err(AuthError::AlgorithmNotAllowed));
    assert_eq!(rs_only.verify(&rs).unwrap().identity.user(), "alice");
}

#[test]
fn several_keys_of_one_algorithm_are_all_tried() {
    let other = "second-secret-for-rotation-0123456789";
    let verifier = Verifier::new(&config(vec![hs_key(None, SECRET), hs_key(None, other)])).unwrap();
    let token = sign(Algorithm::HS256, other.as_bytes(), None, &good_claims());
    assert_eq!(verifier.verify(&token).unwrap().identity.user(), "alice");
    // The claim checks still apply once a later key verifies the signature.
    let expired = sign(
        Algorithm::HS256,
        other.as_bytes(),
        None,
        &with(json!({"exp": now() - 3600})),
    );
    assert_eq!(verifier.verify(&expired), Err(AuthError::Expired));
}

#[test]
fn minted_tokens_verify() {
    let verifier = full_verifier();
    let claims = MintClaims {
        sub: "carol".into(),
        session_id: "s9".into(),
        iss: ISS.into(),
        aud: AUD.into(),
        ttl_secs: 120,
    };
    let hs = mint::mint_hs256(SECRET.as_bytes(), &claims).unwrap();
    let rs = mint::mint_rs256(read("rsa_private.pem").as_bytes(), &claims).unwrap();
    let es = mint::mint_es256(read("ec_private.pem").as_bytes(), &claims).unwrap();
    let es_kid = mint::mint(
        KeyAlg::ES256,
        read("jwks_ec_private.pem").as_bytes(),
        Some("jwks-es-1"),
        &claims,
    )
    .unwrap();
    for token in [hs, rs, es, es_kid] {
        let got = verifier.verify(&token).unwrap();
        assert_eq!(got.identity.user(), "carol");
        assert_eq!(got.claims.exp - got.claims.iat.unwrap(), 120);
    }
    let wrong_aud = MintClaims {
        aud: "elsewhere".into(),
        ..claims
    };
    let token = mint::mint_hs256(SECRET.as_bytes(), &wrong_aud).unwrap();
    assert_eq!(verifier.verify(&token), Err(AuthError::WrongAudience));
}

#[test]
fn leeway_is_configurable() {
    let mut cfg = config(vec![hs_key(None, SECRET)]);
    cfg.leeway_secs = 0;
    let strict = Verifier::new(&cfg).unwrap();
    let token = hs(&with(json!({"exp": now() - 10})));
    assert_eq!(strict.verify(&token), Err(AuthError::Expired));
    cfg.leeway_secs = 30;
    assert!(Verifier::new(&cfg).unwrap().verify(&token).is_ok());
}

#[test]
fn max_token_bytes_is_configurable() {
    let mut cfg = config(vec![hs_key(None, SECRET)]);
    let token = hs(&good_claims());
    cfg.max_token_bytes = token.len();
    assert!(Verifier::new(&cfg).unwrap().verify(&token).is_ok());
    cfg.max_token_bytes = token.len() - 1;
    assert_eq!(
        Verifier::new(&cfg).unwrap().verify(&token),
        Err(AuthError::TooLarge {
            max: token.len() - 1
        })
    );
}

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
