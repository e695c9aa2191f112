//! Criterion micro benchmarks of the per-call building blocks: token verification (HS256, RS256,
//! ES256), the ratchet check and escalation (real SQLite), context presets on 10 KB and 10 MB
//! text, and opening a session workspace / reading a file from it.

use bulkhead::audit::{ArgsSummary, AuditLog, AuditOptions, AuditRecord, Outcome, Phase};
use bulkhead::auth::Verifier;
use bulkhead::auth::mint::{self, MintClaims};
use bulkhead::config::Config;
use bulkhead::context::{Presets, StreamPreview, truncate_text};
use bulkhead::identity::Identity;
use bulkhead::policy::{Permission, Sensitivity};
use bulkhead::state::{StateStore, StoreOptions};
use bulkhead::workspace::WorkspaceRoot;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;

const SECRET: &str = "perf-secret-0123456789abcdef0123456789";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/auth")
        .join(name)
}

fn claims() -> MintClaims {
    MintClaims {
        sub: "bench".into(),
        session_id: "s1".into(),
        iss: "perf".into(),
        aud: "mcp".into(),
        ttl_secs: 3600,
    }
}

fn tokens(c: &mut Criterion) {
    let text = format!(
        "auth:\n  issuer: perf\n  audience: mcp\n  keys:\n    - {{ kid: hs, alg: HS256, secret: {SECRET} }}\n    - {{ kid: rs, alg: RS256, public_key_file: {} }}\n    - {{ kid: es, alg: ES256, public_key_file: {} }}\n",
        fixture("rsa_public.pem").display(),
        fixture("ec_public.pem").display()
    );
    let config = Config::parse(&text, "bench", &|_| None).expect("config");
    let verifier = Verifier::new(&config.auth).expect("verifier");
    let rsa = std::fs::read(fixture("rsa_private.pem")).expect("rsa key");
    let ec = std::fs::read(fixture("ec_private.pem")).expect("ec key");
    let cases = [
        (
            "hs256",
            mint::mint_hs256(SECRET.as_bytes(), &claims()).expect("hs"),
        ),
        ("rs256", mint::mint_rs256(&rsa, &claims()).expect("rs")),
        ("es256", mint::mint_es256(&ec, &claims()).expect("es")),
    ];
    let mut g = c.benchmark_group("token_verify");
    for (name, token) in &cases {
        verifier.verify(token).expect("token verifies");
        g.bench_function(*name, |b| {
            b.iter(|| verifier.verify(black_box(token)).is_ok())
        });
    }
    g.finish();
}

fn ratchet(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = StateStore::create_sqlite(
        &dir.path().join("compliance.db"),
        StoreOptions::new("bench"),
    )
    .expect("store");
    let audit = AuditLog::open_file(&dir.path().join("audit.jsonl"), AuditOptions::default())
        .expect("audit");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let known = Identity::new("bench", "known").expect("id");
    rt.block_on(store.raise(&known, "seed", Sensitivity::Internal))
        .expect("seed");
    let mut g = c.benchmark_group("ratchet");
    // A call's pass: the session's lock taken shared, its counter and the lock file checked, the
    // level from the cache, the lock released.
    g.bench_function("pass_existing", |b| {
        b.iter(|| {
            rt.block_on(async {
                let p = store.enter(black_box(&known)).await.expect("enter");
                store.leave(p).await;
            })
        })
    });
    let unknown = Identity::new("bench", "fresh").expect("id");
    g.bench_function("pass_no_record", |b| {
        b.iter(|| {
            rt.block_on(async {
                let p = store.enter(black_box(&unknown)).await.expect("enter");
                store.leave(p).await;
            })
        })
    });
    let mut n = 0u64;
    g.bench_function("escalate_new_session", |b| {
        b.iter(|| {
            n += 1;
            let id = Identity::new("bench", format!("e{n}")).expect("id");
            rt.block_on(store.raise(&id, "dataset:x", Sensitivity::Confidential))
                .expect("escalate")
        })
    });
    g.bench_function("audit_append", |b| {
        b.iter(|| {
            let rec = AuditRecord::new(
                "c-1",
                Phase::Outcome,
                &known,
                "echo",
                Some(Permission::Read),
                (Sensitivity::Public, Sensitivity::Public),
                Some(Outcome::Allowed),
                ArgsSummary::default(),
                None,
            );
            audit.append(&rec).expect("append")
        })
    });
    g.finish();
}

fn log_text(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 128);
    let mut i = 0u64;
    while s.len() < bytes {
        s.push_str(&format!(
            "2026-11-22T10:00:{:02}Z INFO request id={i} path=/api/items status=200 took=3ms\n",
            i % 60
        ));
        i += 1;
    }
    s
}

fn context(c: &mut Criterion) {
    let presets = Presets::builtin();
    let preset = presets.get("default").expect("default preset");
    let mut g = c.benchmark_group("context_default");
    for (name, size) in [("10KB", 10 * 1024), ("10MB", 10 * 1024 * 1024)] {
        let text = log_text(size);
        g.throughput(Throughput::Bytes(text.len() as u64));
        if size > 1_000_000 {
            g.sample_size(10);
        }
        g.bench_function(format!("truncate_{name}"), |b| {
            b.iter(|| truncate_text(preset, black_box(&text)).is_some())
        });
        g.bench_function(format!("stream_{name}"), |b| {
            b.iter(|| {
                let mut s = StreamPreview::new(preset, None, std::io::sink());
                for chunk in text.as_bytes().chunks(64 * 1024) {
                    s.push_chunk(chunk).expect("push");
                }
                s.finish().expect("finish")
            })
        });
    }
    g.finish();
}

fn workspace(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = WorkspaceRoot::new(dir.path().join("ws")).expect("root");
    let id = Identity::new("bench", "s1").expect("id");
    let ws = root.session(&id).expect("session");
    ws.write("/workspace/notes/a.txt", "hello bulkhead\n".repeat(64))
        .expect("write");
    let mut g = c.benchmark_group("workspace");
    g.bench_function("open_session_existing", |b| {
        b.iter(|| root.session(black_box(&id)).expect("open"))
    });
    let mut n = 0u64;
    g.bench_function("open_session_new", |b| {
        b.iter_batched(
            || {
                n += 1;
                Identity::new("bench", format!("n{n}")).expect("id")
            },
            |id| root.session(&id).expect("open"),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("read_1KB", |b| {
        b.iter(|| ws.read(black_box("/workspace/notes/a.txt")).expect("read"))
    });
    g.finish();
}

criterion_group!(benches, tokens, ratchet, context, workspace);
criterion_main!(benches);
