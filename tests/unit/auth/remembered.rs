//! The verified-token cache (`auth.verified_tokens`) against the attacks it could open: a
//! remembered token used past its expiry, a token one byte away from a remembered one, a flood of
//! distinct valid tokens, and a cache switched off.

use super::*;
use std::time::{Duration, Instant};

fn verifier_with(leeway: u64, remembered: usize) -> Verifier {
    let mut cfg = config(vec![hs_key(None, SECRET)]);
    cfg.leeway_secs = leeway;
    cfg.verified_tokens = remembered;
    Verifier::new(&cfg).unwrap()
}

#[test]
fn a_remembered_token_is_refused_once_it_expires() {
    for remembered in [4096, 0] {
        let v = verifier_with(0, remembered);
        // A few seconds of life, so a slow machine still verifies it before it expires.
        let exp = now() + 3;
        let token = hs(&with(json!({"exp": exp, "nbf": now() - 5})));
        assert!(v.verify(&token).is_ok());
        assert!(v.verify(&token).is_ok(), "again, from the cache");
        // Past `exp` (bounded wait on the clock, not a fixed sleep).
        let deadline = Instant::now() + Duration::from_secs(20);
        while now() <= exp {
            assert!(Instant::now() < deadline, "the clock did not pass exp");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            v.verify(&token).unwrap_err(),
            AuthError::Expired,
            "remembered={remembered}"
        );
    }
}

#[test]
fn a_token_one_byte_away_from_a_remembered_one_is_verified_and_refused() {
    let v = verifier_with(30, 4096);
    let token = hs(&good_claims());
    assert!(v.verify(&token).is_ok());
    let (head, sig) = token.rsplit_once('.').unwrap();
    let mut forged = sig.as_bytes().to_vec();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'A' { b'Q' } else { b'A' };
    let forged = format!("{head}.{}", String::from_utf8(forged).unwrap());
    assert!(v.verify(&forged).is_err(), "a changed signature");
    // Another subject's claims under the remembered signature.
    let (_, payload_and_sig) = token.split_once('.').unwrap();
    let (_, sig) = payload_and_sig.split_once('.').unwrap();
    let other = hs(&with(json!({"sub": "mallory"})));
    let (other_head_payload, _) = other.rsplit_once('.').unwrap();
    assert!(v.verify(&format!("{other_head_payload}.{sig}")).is_err());
    assert_eq!(v.verify(&token).unwrap().identity.user(), "alice");
}

#[test]
fn a_flood_of_valid_tokens_stays_within_the_limit_and_every_one_still_verifies() {
    let v = verifier_with(30, 8);
    let tokens: Vec<String> = (0..50)
        .map(|i| hs(&with(json!({"session_id": format!("s-{i}")}))))
        .collect();
    for round in 0..2 {
        for (i, t) in tokens.iter().enumerate() {
            let got = v
                .verify(t)
                .unwrap_or_else(|e| panic!("round {round} token {i}: {e}"));
            assert_eq!(got.identity.session(), format!("s-{i}"));
            assert!(v.remembered_tokens() <= 8, "{}", v.remembered_tokens());
        }
    }
    assert_eq!(verifier_with(30, 0).remembered_tokens(), 0);
}
