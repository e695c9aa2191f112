//! Hundreds of traversal payloads against every operation: nothing outside the session is read,
//! written, created or removed.

use std::fs;
use std::io::{Read as _, Write as _};
use std::path::Path;

use bulkhead::workspace::{WorkspaceError, agent_to_relative};

use super::{CANARY, Fixture, plant_link};

/// Hand-written payloads, the classics and the odd ones.
fn hand_payloads() -> Vec<String> {
    let mut v: Vec<String> = [
        "../x",
        "/etc/passwd",
        "/workspace/../../x",
        "....//",
        "..\\x",
        "..\\..\\canary-base.txt",
        "%2e%2e/x",
        "%2e%2e%2fx",
        "%2e%2e%2f%2e%2e%2fcanary-base.txt",
        "..%2f..%2fcanary-base.txt",
        "a\0b",
        "../\0",
        "/workspace/a/../../..",
        "\u{2024}\u{2024}/x",
        "\u{ff0e}\u{ff0e}/x",
        "\u{2025}/x",
        "\u{2026}/x",
        "/proc/self/root/etc/passwd",
        "/proc/self/cwd/canary-base.txt",
        "~/.ssh/id_rsa",
        "~",
        "$HOME/.ssh",
        "//etc",
        "//etc/passwd",
        "//workspace/x",
        "/workspacex/../x",
        "/workspace/..",
        "/workspace/../",
        "/workspace/.../..",
        "..",
        "./..",
        "/workspace/./../outside",
        "/workspace//../x",
        "\\\\server\\share",
        "C:\\Windows\\win.ini",
        "file:///etc/passwd",
        "/workspace%2f..%2f..",
        "..;/x",
        "\t../x",
        "/workspace/a/\n/../..",
        "/dev/stdin",
        "/root/.bashrc",
        "/",
        "/ws/../x",
        "/workspace\u{0}/x",
        "\u{7f}",
        "a\u{85}b",
        "\u{202e}txt.exe",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("a".repeat(256));
    v.push(format!("/workspace/{}", "b".repeat(300)));
    v.push("a/".repeat(2100));
    v.push(format!("{}x", "../".repeat(1400)));
    v
}

/// Generated `..` payloads: every prefix × depth × target. All must be refused by the parser.
fn dotdot_payloads() -> Vec<String> {
    let prefixes = [
        "",
        "./",
        "/workspace/",
        "/workspace/./",
        "notes/",
        "/workspace/notes/deep/",
        "nope/",
    ];
    let ups = ["..", "../..", "../../..", "../../../..", &"../".repeat(20)];
    let targets = [
        "",
        "outside/canary-outside.txt",
        "canary-base.txt",
        "bob/s1/bob-canary.txt",
        "etc/passwd",
        "pwned.txt",
    ];
    let mut v = Vec::new();
    for p in prefixes {
        for u in ups {
            for t in targets {
                let u = u.trim_end_matches('/');
                v.push(if t.is_empty() {
                    format!("{p}{u}")
                } else {
                    format!("{p}{u}/{t}")
                });
            }
        }
    }
    v
}

/// Symlinks a hostile tool could leave in the session; every one resolves outside it.
fn hostile_links(fx: &Fixture) -> Vec<(&'static str, std::path::PathBuf)> {
    let b = &fx.base;
    vec![
        ("to_root", "/".into()),
        ("to_parent", "..".into()),
        ("to_parent2", "../..".into()),
        ("to_base", "../../..".into()),
        ("to_outside_rel", "../../../outside".into()),
        ("to_outside_abs", b.join("outside")),
        ("to_bob", "../../bob/s1".into()),
        ("to_alice_s2", "../s2".into()),
        (
            "to_canary_rel",
            "../../../outside/canary-outside.txt".into(),
        ),
        ("to_canary_abs", b.join("outside/canary-outside.txt")),
        ("to_self_abs", fx.session_host.clone()),
        ("to_proc_root", "/proc/self/root".into()),
        ("to_proc_cwd", "/proc/self/cwd".into()),
        ("chain1", "chain2".into()),
        ("chain2", "notes/chain3".into()),
        ("notes/chain3", "../to_parent2".into()),
        ("notes/up2", "../..".into()),
        ("notes/deep/up5", "../../../../..".into()),
        ("dangling_rel", "../../../outside/new-file.txt".into()),
        ("dangling_abs", b.join("outside/new-abs.txt")),
        ("loop1", "loop2".into()),
        ("loop2", "loop1".into()),
    ]
}

/// Suffixes appended to each link name; with a `/workspace/` or bare prefix.
const LINK_SUFFIXES: &[&str] = &[
    "",
    "/",
    "/canary-outside.txt",
    "/outside/canary-outside.txt",
    "/bob-canary.txt",
    "/s2-canary.txt",
    "/user-canary.txt",
    "/canary-base.txt",
    "/etc/passwd",
    "/pwned.txt",
    "/newdir/pwned.txt",
];

/// Names that only exist outside the session: a listing that shows one has escaped.
const OUTSIDE_NAMES: &[&str] = &[
    "canary-outside.txt",
    "deep-canary.txt",
    "hard-canary.txt",
    "canary-base.txt",
    "user-canary.txt",
    "s2-canary.txt",
    "bob-canary.txt",
    "atime-control.txt",
    "outside",
    "s2",
    "bob",
    "alice",
    "etc",
    "usr",
    "proc",
    "passwd",
];

fn plant_all(fx: &Fixture, links: &[(&str, std::path::PathBuf)]) {
    fs::create_dir_all(fx.session_host.join("notes/deep")).unwrap();
    for (name, target) in links {
        let p = fx.session_host.join(name);
        if fs::read_link(&p).ok().as_deref() != Some(target.as_path()) {
            plant_link(&fx.session_host, name, target);
        }
    }
    let hard = fx.session_host.join("notes/hard.txt");
    let outside = fx.base.join("outside/hard-canary.txt");
    let same = |a: &Path, b: &Path| {
        use std::os::unix::fs::MetadataExt as _;
        match (fs::symlink_metadata(a), fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.ino() == y.ino(),
            _ => false,
        }
    };
    if !same(&hard, &outside) {
        let _ = fs::remove_file(&hard);
        fs::hard_link(&outside, &hard).unwrap();
    }
}

/// Runs every operation on `payload`; returns how many calls were refused.
fn attack(fx: &Fixture, payload: &str, links: &[(&str, std::path::PathBuf)]) -> (usize, usize) {
    let ws = &fx.ws;
    let leaked = |bytes: &[u8], op: &str| {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains(CANARY),
            "{op}({payload:?}) returned canary content"
        );
        assert!(
            !text.contains("root:x:0:0"),
            "{op}({payload:?}) returned /etc/passwd"
        );
    };
    let mut refused = 0;
    let mut calls = 0;
    let mut tally = |ok: bool| {
        calls += 1;
        if !ok {
            refused += 1;
        }
    };
    plant_all(fx, links);
    let r = ws.read(payload);
    if let Ok(b) = &r {
        leaked(b, "read");
    }
    tally(r.is_ok());
    plant_all(fx, links);
    let r = ws.read_to_string(payload);
    if let Ok(s) = &r {
        leaked(s.as_bytes(), "read_to_string");
    }
    tally(r.is_ok());
    plant_all(fx, links);
    let r = ws.open(payload);
    if let Ok(mut f) = r {
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        leaked(&buf, "open");
        tally(true);
    } else {
        tally(false);
    }
    plant_all(fx, links);
    let r = ws.list(payload);
    if let Ok(entries) = &r {
        for e in entries {
            assert!(
                !OUTSIDE_NAMES.contains(&e.name.as_str()),
                "list({payload:?}) shows {:?}",
                e.name
            );
        }
    }
    tally(r.is_ok());
    plant_all(fx, links);
    let r = ws.exists(payload);
    tally(r.is_ok());
    plant_all(fx, links);
    tally(ws.write(payload, "PWNED-write").is_ok());
    plant_all(fx, links);
    tally(ws.append(payload, "PWNED-append").is_ok());
    plant_all(fx, links);
    let r = ws.create(payload);
    if let Ok(mut f) = r {
        let _ = f.write_all(b"PWNED-create");
        tally(true);
    } else {
        tally(false);
    }
    plant_all(fx, links);
    tally(ws.remove(payload).is_ok());
    (calls, refused)
}

#[test]
fn traversal_payloads_never_touch_anything_outside() {
    let fx = Fixture::new();
    let links = hostile_links(&fx);
    plant_all(&fx, &links);
    let before = fx.outside_snapshot();

    let hand = hand_payloads();
    let dotdot = dotdot_payloads();
    let mut via_links = Vec::new();
    for (name, _) in &links {
        for suffix in LINK_SUFFIXES {
            via_links.push(format!("{name}{suffix}"));
            via_links.push(format!("/workspace/{name}{suffix}"));
        }
    }
    via_links.push("notes/hard.txt".to_owned());
    via_links.push("/workspace/notes/hard.txt".to_owned());

    // The parser alone refuses every `..` payload, with a retryable error.
    for p in &dotdot {
        let err = agent_to_relative(p).expect_err(p);
        assert!(
            matches!(err, WorkspaceError::Invalid { .. }) && err.is_retryable(),
            "{p}"
        );
    }

    let all: Vec<&String> = hand.iter().chain(&dotdot).chain(&via_links).collect();
    assert!(all.len() >= 100, "only {} payloads", all.len());
    let (mut calls, mut refused) = (0, 0);
    for p in &all {
        let (c, r) = attack(&fx, p, &links);
        calls += c;
        refused += r;
        let after = fx.outside_snapshot();
        assert_eq!(
            before, after,
            "payload {p:?} changed something outside the session"
        );
        fx.assert_canaries_unread(&format!("payload {p:?}"));
    }
    eprintln!(
        "traversal: {} payloads ({} hand, {} generated `..`, {} via symlinks), {calls} calls, {refused} refused",
        all.len(),
        hand.len(),
        dotdot.len(),
        via_links.len()
    );

    // Every read through a hostile link was refused by confinement, not merely empty.
    plant_all(&fx, &links);
    for (name, _) in links.iter().filter(|(n, _)| !n.starts_with("loop")) {
        let err = fx
            .ws
            .read(&format!("{name}/canary-outside.txt"))
            .unwrap_err();
        assert!(
            matches!(
                err,
                WorkspaceError::Escape { .. }
                    | WorkspaceError::NotFound { .. }
                    | WorkspaceError::WrongType { .. }
            ),
            "{name}: {err:?}"
        );
    }
    for name in [
        "to_canary_rel",
        "to_canary_abs",
        "notes/hard.txt",
        "to_outside_rel/f.txt",
    ] {
        let err = fx.ws.read(name).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::Escape { .. }),
            "{name}: {err:?}"
        );
        assert!(!err.is_retryable());
    }

    // Positive control: the same planted links *do* reach the canaries through ambient paths,
    // so the assertions above could have failed.
    let naive = fs::read_to_string(fx.session_host.join("to_canary_rel")).unwrap();
    assert!(naive.contains(CANARY));
}
