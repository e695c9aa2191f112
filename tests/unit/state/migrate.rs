//! Trust domains: one store per domain, shared by its servers; the stores of single servers from
//! before trust domains are refused until `bulkhead state migrate` folds them in, which lowers
//! nothing and rewrites the workspace markers.

use super::backends::pg;
use super::*;
use bulkhead::state::init::{StoreMarker, open_store};
use bulkhead::state::postgres::PgOptions;
use bulkhead::state::{InitPolicy, StateErrorKind, StoreLocation};

fn domain_options(server: &str) -> StoreOptions {
    let mut o = StoreOptions::new(server);
    o.scope = "default".into();
    o.lock_timeout = Duration::from_secs(20);
    o
}

fn pg(url: &str) -> PgOptions {
    PgOptions {
        url: url.to_string(),
        socket_dir: None,
        pool_size: 4,
        connect_timeout: Duration::from_secs(5),
    }
}

fn folds_and_lowers_nothing(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let ws = dir.path().join("ws/template");
    let url = postgres.then(|| pg::database("migrate"));
    let (legacy_loc, domain_loc) = match &url {
        None => (
            StoreLocation::sqlite(&state, "template"),
            StoreLocation::sqlite_domain(&state, "default"),
        ),
        Some(u) => (
            StoreLocation::Postgres(pg(u)),
            StoreLocation::Postgres(pg(u)),
        ),
    };
    let (ana, ben) = (id("ana", "s1"), id("ben", "s2"));
    // The server's own store, as before trust domains (scope: the server's name).
    let legacy_id = {
        let legacy = rt()
            .block_on(open_store(
                &legacy_loc,
                StoreOptions::new("template"),
                &ws,
                &[],
                InitPolicy::FirstStart,
            ))
            .unwrap();
        raise(
            &legacy,
            &ana,
            "dataset:customers",
            Sensitivity::Confidential,
        );
        raise(&legacy, &ben, "security_logs:search", Sensitivity::Secret);
        legacy.store_id().to_string()
    };
    assert_eq!(
        StoreMarker::at(&ws).read().unwrap().as_deref(),
        Some(legacy_id.as_str())
    );
    // Started as a server of trust domain `default`: refused, and says what to run.
    let e = rt()
        .block_on(open_store(
            &domain_loc,
            domain_options("template"),
            &ws,
            &[],
            InitPolicy::FirstStart,
        ))
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Schema, "{e}");
    assert!(e.detail().contains("bulkhead state migrate"), "{e}");
    // Another server of the domain already raised ana higher: the migration keeps that.
    {
        let other_ws = dir.path().join("ws/crm");
        let shared = rt()
            .block_on(open_store(
                &domain_loc,
                domain_options("crm"),
                &other_ws,
                &[],
                InitPolicy::FirstStart,
            ))
            .unwrap();
        raise(&shared, &ana, "crm_db:search", Sensitivity::Secret);
    }
    let servers = vec![(
        "template".to_string(),
        vec![ws.clone(), dir.path().join("ws/template.proxied")],
    )];
    let folded = rt()
        .block_on(bulkhead::state::migrate::migrate(
            &domain_loc,
            &state,
            domain_options("template"),
            &servers,
        ))
        .unwrap();
    assert_eq!(folded.len(), 1);
    assert_eq!((folded[0].sessions, folded[0].markers), (2, 1));
    let store = rt()
        .block_on(open_store(
            &domain_loc,
            domain_options("template"),
            &ws,
            &[],
            InitPolicy::MustExist,
        ))
        .unwrap();
    assert_eq!(
        level(&store, &ana).unwrap(),
        Sensitivity::Secret,
        "lowered by the migration"
    );
    assert_eq!(level(&store, &ben).unwrap(), Sensitivity::Secret);
    let datasets: Vec<String> = rt()
        .block_on(store.record(&ben))
        .unwrap()
        .datasets
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(datasets, ["security_logs:search"]);
    assert_eq!(
        StoreMarker::at(&ws).read().unwrap().as_deref(),
        Some(store.store_id())
    );
    // Twice is harmless: nothing left to fold.
    let again = rt()
        .block_on(bulkhead::state::migrate::migrate(
            &domain_loc,
            &state,
            domain_options("template"),
            &servers,
        ))
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn sqlite_a_per_server_store_is_refused_until_folded_into_its_domain_lowering_nothing() {
    folds_and_lowers_nothing(false);
}

#[test]
fn postgres_a_per_server_scope_is_refused_until_folded_into_its_domain_lowering_nothing() {
    folds_and_lowers_nothing(true);
}

#[test]
fn servers_of_one_domain_share_one_level_per_session() {
    let dir = tempfile::tempdir().unwrap();
    let loc = StoreLocation::sqlite_domain(&dir.path().join("state"), "default");
    let crm = rt()
        .block_on(open_store(
            &loc,
            domain_options("crm"),
            &dir.path().join("ws/crm"),
            &[],
            InitPolicy::FirstStart,
        ))
        .unwrap();
    let template = rt()
        .block_on(open_store(
            &loc,
            domain_options("template"),
            &dir.path().join("ws/template"),
            &[],
            InitPolicy::FirstStart,
        ))
        .unwrap();
    let who = id("u7", "s7");
    raise(&crm, &who, "crm_db:search", Sensitivity::Confidential);
    assert_eq!(level(&template, &who).unwrap(), Sensitivity::Confidential);
}

#[test]
fn a_domain_named_like_its_server_still_finds_the_servers_old_store() {
    // The old store is found by its file, not by comparing names.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let ws = dir.path().join("ws/template");
    let legacy = rt()
        .block_on(open_store(
            &StoreLocation::sqlite(&state, "template"),
            StoreOptions::new("template"),
            &ws,
            &[],
            InitPolicy::FirstStart,
        ))
        .unwrap();
    raise(
        &legacy,
        &id("ana", "s1"),
        "dataset:customers",
        Sensitivity::Confidential,
    );
    drop(legacy);
    let e = rt()
        .block_on(open_store(
            &StoreLocation::sqlite_domain(&state, "template"),
            StoreOptions::new("template"),
            &ws,
            &[],
            InitPolicy::FirstStart,
        ))
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Schema, "{e}");
}
