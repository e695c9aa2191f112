//! The adversarial table: every token here must be refused with the expected error.

use super::*;

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
        claim: claim.into(),
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
        let want = AuthError::MissingClaim(
            match name {
                "exp" => "exp",
                "sub" => "sub",
                "session_id" => "session_id",
                "iss" => "iss",
                _ => "aud",
            }
            .into(),
        );
        add(&format!("missing {name}"), hs(&without(name)), want);
    }
    add(
        "sub null",
        hs(&with(json!({"sub": null}))),
        AuthError::MissingClaim("sub".into()),
    );
    add(
        "sub as number",
        hs(&with(json!({"sub": 42}))),
        bad_claim("sub"),
    );
    add(
        // jsonwebtoken's own claim parser fails on a list `sub` (after the signature check), so
        // this one is refused as malformed rather than as a bad claim.
        "sub as list",
        hs(&with(json!({"sub": ["alice"]}))),
        malformed(),
    );
    add(
        "iss as number",
        hs(&with(json!({"iss": 7}))),
        bad_claim("iss"),
    );
    add(
        "aud as number",
        hs(&with(json!({"aud": 7}))),
        bad_claim("aud"),
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

    // Header tricks: nothing in the header may bring its own key or bypass the checks.
    let attacker = b"attacker-chosen-secret-0123456789abcdef";
    let embedded = format!(
        r#"{{"alg":"HS256","jwk":{{"kty":"oct","k":"{}"}}}}"#,
        b64(attacker)
    );
    add(
        "embedded jwk header with the attacker's key",
        sign_raw(Algorithm::HS256, attacker, &embedded, &payload_json),
        AuthError::BadSignature,
    );
    add(
        "jku header pointing at the attacker",
        sign_raw(
            Algorithm::HS256,
            attacker,
            r#"{"alg":"HS256","jku":"https://evil.test/jwks.json"}"#,
            &payload_json,
        ),
        AuthError::BadSignature,
    );
    add(
        "duplicate alg in header",
        sign_raw(
            Algorithm::HS256,
            SECRET.as_bytes(),
            r#"{"alg":"HS256","alg":"none"}"#,
            &payload_json,
        ),
        malformed(),
    );
    add(
        "crit header extension",
        sign_raw(
            Algorithm::HS256,
            SECRET.as_bytes(),
            r#"{"alg":"HS256","crit":["exp"],"exp":1}"#,
            &payload_json,
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
