//! Building connectors: `${VAR}` expansion with defaults, and bad settings as startup errors.

use super::*;
use bulkhead::connectors::ConnectorError;

fn def(kind: &'static str, settings: &'static str) -> &'static ConnectorDef {
    Box::leak(Box::new(ConnectorDef {
        secrets: &[],
        name: "c",
        kind: bulkhead::codegen::ConnectorKind::parse(kind).expect("a kind"),
        sensitivity: Sensitivity::Public,
        settings,
        operations: &[],
    }))
}

fn err(d: &'static ConnectorDef, env: &[(&str, &str)]) -> String {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match Connectors::new([d], &move |n| {
        env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
    }) {
        Ok(_) => panic!("expected an error"),
        Err(e @ ConnectorError::Settings { .. }) => e.to_string(),
    }
}

#[test]
fn unset_variables_name_the_setting_and_defaults_apply() {
    let m = err(def("sqlite", r#"{"path":"${NO_SUCH_DB}"}"#), &[]);
    assert_eq!(
        m,
        "connector `c`: settings.path: environment variable NO_SUCH_DB is not set"
    );
    let ok = Connectors::new(
        [def("sqlite", r#"{"path":"${NO_SUCH_DB:-data/x.db}"}"#)],
        &|_| None,
    );
    assert!(ok.unwrap().contains("c"));
}

#[test]
fn malformed_settings_fail_at_start() {
    let m = err(def("http", r#"{"base_url":"${U}"}"#), &[("U", "not a url")]);
    assert!(
        m.starts_with("connector `c`: settings.base_url is not a URL"),
        "{m}"
    );
    let m = err(def("http", r#"{"base_url":"ftp://x"}"#), &[]);
    assert!(m.contains("http(s)"), "{m}");
    let m = err(
        def("http", r#"{"base_url":"http://x","timeout_ms":"${T}"}"#),
        &[("T", "soon")],
    );
    assert!(m.contains("`soon` is not a whole number"), "{m}");
    let m = err(def("logs", r#"{"dir":"/x","extra":1}"#), &[]);
    assert!(m.contains("unknown field `extra`"), "{m}");
    // A kind is a type now: a definition of a kind this runtime lacks does not compile.
    assert_eq!(bulkhead::codegen::ConnectorKind::parse("ftp"), None);
}
