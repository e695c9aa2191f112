//! The inspection corpus: one true positive per rule family (each found, named, and gone from
//! the redacted text) and near-misses that must not raise a session (identifiers, digests, an
//! image, documentation examples, placeholders). Every change of the rule files passes this.

use bulkhead::inspect::{Rules, StreamRedactor, find_in_args, redact_json};
use serde_json::json;

fn rules() -> &'static Rules {
    Rules::get().expect("the rule set compiles")
}

const PEM_BODY: &str = "j8hYs5suKcNd8Zra9A9sKPxZ9W3qLy7zKUVQDT7S8sTQCBNR3YbDgbleph1QHt61\n\
QTC4XATWS8PHp9NHfYjFM5DI4pZj59fhZ5R1Py4oJe2JbmPTuSgR7cMy+UcU3zr1\n\
ZtoLuCr64CxqlIOdNKhiFXiQ2hzT/pLjHX2JiCLhKcIhP6Br1iQFeOUhGXZnnal5\n\
WisCgEBCY8f5N3/ynbdrZRzsGQBJg3UHKwkflF6XUi5AhuqpfEnbtXAqwK8jZfAL";

const JWT: &str = "eyJhbGciOiAiUlMyNTYiLCAia2lkIjogImstMjAyNi0xMSIsICJ0eXAiOiAiSldUIn0.\
eyJzdWIiOiAiYW5hIiwgImF1ZCI6ICJjcm0iLCAiZXhwIjogMTg5MzQ1NjAwMH0.\
xJu2jGjNGkTfi3oYv2DzaKG05Rk-GQV81rkmghzem9yPVUJa_c5q52RYfLWrLoevhZC0x0awirH_juQbLifxz5";

/// (family, text, the secret in it, the rule that must name it)
fn positives() -> Vec<(&'static str, String, String, &'static str)> {
    let pem = format!("-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----");
    vec![
        (
            "cloud key id",
            "aws_access_key_id = AKIAUJZDE8GXD6NCF10E".into(),
            "AKIAUJZDE8GXD6NCF10E".into(),
            "aws-access-token",
        ),
        (
            "cloud secret",
            "aws_secret_access_key = eL2HPcHyGcFRl1SPnXNYvMIHa/2o76umfXfKm/r5\n".into(),
            "eL2HPcHyGcFRl1SPnXNYvMIHa/2o76umfXfKm/r5".into(),
            "aws-secret-access-key",
        ),
        (
            "cloud api key",
            "maps: AIzaXhkAS1voQG6yyzyN9zHYIa4UOrGNATMuDJa\n".into(),
            "AIzaXhkAS1voQG6yyzyN9zHYIa4UOrGNATMuDJa".into(),
            "gcp-api-key",
        ),
        (
            "private key",
            format!("key file:\n{pem}\n"),
            pem.clone(),
            "private-key",
        ),
        (
            "jwt",
            format!("Authorization: Bearer {JWT}\n"),
            JWT.into(),
            "jwt",
        ),
        (
            "provider token",
            "GITHUB_TOKEN=ghp_SmEHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8".into(),
            "ghp_SmEHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8".into(),
            "github-pat",
        ),
        (
            "provider token",
            "token glpat-i8IHn5kxsC7tVO_HbkQf here".into(),
            "glpat-i8IHn5kxsC7tVO_HbkQf".into(),
            "gitlab-pat",
        ),
        (
            "provider token",
            "//registry.npmjs.org/:_authToken=npm_ZZ63fFKcZjR4I0b3jRtaWr4Y9OJFLJOqOAf1\n".into(),
            "npm_ZZ63fFKcZjR4I0b3jRtaWr4Y9OJFLJOqOAf1".into(),
            "npm-access-token",
        ),
        (
            "provider token",
            "stripe: sk_live_nYJoQ9WmXeHH2fdeeTFJGvVv".into(),
            "sk_live_nYJoQ9WmXeHH2fdeeTFJGvVv".into(),
            "stripe-access-token",
        ),
        (
            "provider token",
            "SLACK=xoxb-47280385280-841485253888-VoOnzyw2MzP0ZvzOMhfWuBBy".into(),
            "xoxb-47280385280-841485253888-VoOnzyw2MzP0ZvzOMhfWuBBy".into(),
            "slack-access-token",
        ),
        (
            "url with password",
            "DATABASE_URL=postgres://crm_app:Zq8vrT2kLm4x@db.internal:5432/crm".into(),
            "Zq8vrT2kLm4x".into(),
            "url-password",
        ),
        (
            "generic",
            "api_key = \"b9T2039BICbtw5ze9lfAEZ77\"".into(),
            "b9T2039BICbtw5ze9lfAEZ77".into(),
            "generic-api-key",
        ),
    ]
}

#[test]
fn every_rule_family_is_found_named_and_removed() {
    let r = rules();
    assert!(r.len() > 140, "gitleaks' rules and ours: {}", r.len());
    for (family, text, secret, rule) in positives() {
        let (clean, found) = r
            .redact(&text)
            .unwrap_or_else(|| panic!("{family}: nothing found in {text:?}"));
        assert!(
            found.contains(&rule),
            "{family}: found {found:?}, not {rule}"
        );
        assert!(
            !clean.contains(&secret),
            "{family}: {clean:?} still holds the secret"
        );
        assert!(
            clean.contains(&format!("[redacted: {rule}]")),
            "{family}: {clean:?}"
        );
        // No piece of a secret's tail stays readable.
        let tail = &secret[secret.len() - 8..];
        assert!(!clean.contains(tail), "{family}: {clean:?} keeps {tail}");
    }
}

/// Near-misses: nothing here is a credential, so nothing may be found.
fn near_misses() -> Vec<(&'static str, String)> {
    let image = {
        // A deterministic pseudo-random PNG body, base64 as a data URI carries it.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let bytes: Vec<u8> = (0..6000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        use base64::Engine as _;
        format!(
            "<img src=\"data:image/png;base64,{}\">",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    };
    vec![
        ("uuid", json!({"id": "550e8400-e29b-41d4-a716-446655440000", "idempotency_key": "9b2f7c1e-4d3a-4b8e-9f6a-2c1d0e5b7a93", "request_token": "3f1c9a2b-7d4e-4f8a-b6c1-0e2d5a9b7c43"}).to_string()),
        ("sha256", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  image.tar".into()),
        ("md5 checksum", json!({"checksum": "d41d8cd98f00b204e9800998ecf8427e", "etag": "33a64df551425fcc55e4d42a148795d9f25f89d4"}).to_string()),
        ("git log", "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: Ana <ana@example.org>\n\n    Rotate the deploy keys\n".into()),
        ("base64 image", image),
        ("aws documentation", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n".into()),
        ("placeholders", "api_key: ${API_KEY}\npassword: \"<your password>\"\ntoken = \"****\"\nDATABASE_URL=postgres://user:password@localhost/app\n".into()),
        ("prose", "The key to this quarter: access for every author, a secret santa, and the token ring.".into()),
        ("ids and numbers", json!({"account_id": 4121, "api_version": "2024-06-01", "client": "web", "session": "s-42"}).to_string()),
    ]
}

#[test]
fn near_misses_raise_nothing() {
    let r = rules();
    for (what, text) in near_misses() {
        let hits = r.find(text.as_bytes());
        assert!(
            hits.is_empty(),
            "{what}: {:?}",
            hits.iter()
                .map(|h| (h.rule, &text[h.start..h.end]))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn json_results_are_redacted_where_they_are_and_keys_kept() {
    let mut v = json!({"rows": [{"name": "deploy", "value": "ghp_SmEHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8"}], "note": "fine"});
    let mut found = Vec::new();
    redact_json(rules(), &mut v, "", &mut found);
    assert_eq!(v["rows"][0]["value"], "[redacted: github-pat]");
    assert_eq!(v["note"], "fine");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "github-pat");
    assert_eq!(found[0].at, "/rows/0/value");
}

#[test]
fn an_argument_with_a_credential_is_named_by_rule_and_argument() {
    let args = json!({"channel": "ops", "message": "here you go: aws_secret_access_key=eL2HPcHyGcFRl1SPnXNYvMIHa/2o76umfXfKm/r5"});
    let f = find_in_args(rules(), args.as_object().unwrap()).expect("found");
    assert_eq!(
        (f.rule, f.at.as_str()),
        ("aws-secret-access-key", "message")
    );
    let clean = json!({"channel": "ops", "message": "the build is green"});
    assert_eq!(find_in_args(rules(), clean.as_object().unwrap()), None);
}

/// A credential split across chunks at every offset is still found and removed whole.
#[test]
fn a_stream_finds_a_credential_across_any_chunk_boundary() {
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----\n");
    let mut text = String::new();
    for i in 0..300 {
        text.push_str(&format!("line {i} of an ordinary log\n"));
    }
    text.push_str(&pem);
    text.push_str("token ghp_SmEHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8 end\n");
    for i in 0..300 {
        text.push_str(&format!("after {i}\n"));
    }
    for chunk in [1usize, 7, 64, 500, 4096] {
        let mut red = StreamRedactor::new(rules(), 1024);
        let mut out = Vec::new();
        for piece in text.as_bytes().chunks(chunk) {
            out.extend(red.push(piece));
        }
        out.extend(red.finish());
        let out = String::from_utf8(out).unwrap();
        assert!(
            !out.contains("PEM_BODY") && !out.contains(&PEM_BODY[..40]),
            "chunk {chunk}"
        );
        assert!(!out.contains("ghp_SmEH"), "chunk {chunk}");
        assert!(out.contains("[redacted: private-key]") && out.contains("[redacted: github-pat]"));
        assert!(
            out.starts_with("line 0 of") && out.ends_with("after 299\n"),
            "chunk {chunk}"
        );
        let mut found = red.found().to_vec();
        found.sort();
        assert_eq!(found, ["github-pat", "private-key"], "chunk {chunk}");
    }
}

mod through_the_wrapper {
    //! The pipeline's half: the generated template server on real SQLite and workspaces.
    use crate::call::{args, env, id, template};
    use bulkhead::policy::{NetworkMode, Sensitivity};
    use serde_json::json;

    /// The file of the issue: an AWS key pair, a PEM private key and a JWT.
    pub(crate) fn leaky_file() -> String {
        format!(
            "[default]\naws_access_key_id = AKIAUJZDE8GXD6NCF10E\naws_secret_access_key = eL2HPcHyGcFRl1SPnXNYvMIHa/2o76umfXfKm/r5\n\n-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n\nsession: {}\n",
            super::PEM_BODY,
            super::JWT
        )
    }

    #[tokio::test]
    async fn a_credential_read_back_is_redacted_and_raises_the_session_to_secret() {
        let env = env();
        let rt = template(&env, NetworkMode::Full);
        let u = id("ana", "leak-1");
        let w = rt
            .call(
                &u,
                "write_file",
                args(json!({"path": "/workspace/creds.ini", "content": leaky_file()})),
            )
            .await;
        assert!(!w.is_error, "{}", w.text);
        assert!(w.level < Sensitivity::Secret, "writing is not reading");
        let r = rt
            .call(
                &u,
                "read_file",
                args(json!({"path": "/workspace/creds.ini"})),
            )
            .await;
        assert!(!r.is_error, "{}", r.text);
        for secret in [
            "AKIAUJZDE8GXD6NCF10E",
            "eL2HPcHyGcFRl1SPnXNYvMIHa",
            &super::PEM_BODY[..30],
            &super::JWT[..40],
        ] {
            assert!(
                !r.text.contains(secret),
                "{secret} reached the model: {}",
                r.text
            );
        }
        for rule in [
            "aws-access-token",
            "aws-secret-access-key",
            "private-key",
            "jwt",
        ] {
            assert!(
                r.text.contains(&format!("[redacted: {rule}]")),
                "{rule}: {}",
                r.text
            );
            assert!(r.found.contains(&rule), "{:?}", r.found);
        }
        assert_eq!(r.level, Sensitivity::Secret);
        assert_eq!(r.required_mode, NetworkMode::None);
        // The ratchet holds it: the next call on this instance is refused, naming the level.
        let n = rt
            .call(
                &u,
                "notify_team",
                args(json!({"channel": "ops", "message": "done"})),
            )
            .await;
        assert!(n.is_error && n.text.contains("secret"), "{}", n.text);
        // The audit says what was found and where, never the value.
        drop(rt); // the last handle: everything queued is written
        let audit = std::fs::read_to_string(env.root.join("state/audit.jsonl")).unwrap();
        assert!(
            audit.contains("credentials redacted: aws-access-token at result"),
            "{audit}"
        );
        assert!(
            !audit.contains("AKIAUJZDE8GXD6NCF10E") && !audit.contains("eL2HPcHyGcFRl1SPnXNYvMIHa")
        );
    }

    #[tokio::test]
    async fn a_connect_call_carrying_a_credential_is_refused_naming_the_rule() {
        let env = env();
        let rt = template(&env, NetworkMode::Full);
        let u = id("ana", "leak-2");
        let n = rt
            .call(&u, "notify_team", args(json!({"channel": "ops", "message": "key: aws_secret_access_key=eL2HPcHyGcFRl1SPnXNYvMIHa/2o76umfXfKm/r5"})))
            .await;
        assert!(n.is_error, "{}", n.text);
        assert!(
            n.text.contains("aws-secret-access-key") && n.text.contains("`message`"),
            "{}",
            n.text
        );
        assert!(!n.text.starts_with("[FATAL]"), "retryable: {}", n.text);
        assert!(!n.text.contains("eL2HPcHy"), "{}", n.text);
        assert_eq!(n.level, Sensitivity::Public, "a refusal raises nothing");
        drop(rt);
        let audit = std::fs::read_to_string(env.root.join("state/audit.jsonl")).unwrap();
        assert!(!audit.contains("eL2HPcHy"), "{audit}");
    }

    #[tokio::test]
    async fn a_truncated_result_saves_only_the_redacted_text() {
        let env = env();
        let rt = template(&env, NetworkMode::Full);
        let u = id("ana", "leak-3");
        let mut big = String::new();
        for i in 0..4000 {
            big.push_str(&format!("log line {i}: nothing to see\n"));
        }
        big.push_str(&leaky_file());
        for i in 0..4000 {
            big.push_str(&format!("after {i}\n"));
        }
        let w = rt
            .call(
                &u,
                "write_file",
                args(json!({"path": "/workspace/big.log", "content": big})),
            )
            .await;
        assert!(!w.is_error, "{}", w.text);
        let r = rt
            .call(&u, "read_file", args(json!({"path": "/workspace/big.log"})))
            .await;
        assert!(!r.is_error, "{}", r.text);
        let saved = r.saved_to.clone().expect("cut and saved");
        assert_eq!(
            r.level,
            Sensitivity::Secret,
            "found in the part the preview left out"
        );
        let file = std::fs::read_dir(env.root.join("workspaces"))
            .unwrap()
            .flatten()
            .flat_map(|user| walk(&user.path()))
            .find(|p| {
                p.to_string_lossy()
                    .ends_with(saved.trim_start_matches("/workspace/"))
            })
            .expect("the saved file");
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains("[redacted: private-key]") && !text.contains(&super::PEM_BODY[..30]));
        assert!(text.contains("after 3999"));
    }

    fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                let path = e.path();
                if path.is_dir() {
                    out.extend(walk(&path));
                } else {
                    out.push(path);
                }
            }
        }
        out
    }
}
