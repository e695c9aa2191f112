//! The test-only `echo` kind (feature `fixture-kind`), built and called like every kind: the
//! runtime half of the new-kind recipe's fixture.

use super::*;
use serde_json::json;

static ECHO: ConnectorDef = ConnectorDef {
    secrets: &[],
    name: "parrot",
    kind: ConnectorKind::Echo,
    sensitivity: Sensitivity::Public,
    settings: r#"{"prefix":"${PREFIX:-parrot says: }"}"#,
    operations: &[OperationDef {
        name: "say",
        params_schema: "{}",
        body: r#""echo""#,
    }],
};

#[tokio::test]
async fn the_fixture_kind_builds_from_its_settings_and_answers() {
    let t = tmp();
    let c = build(&ECHO, &[]);
    let out = run(&c, &t, "parrot", "say", json!({"words": "hello"}))
        .await
        .unwrap();
    assert_eq!(
        out,
        Collected::Text(r#"parrot says: {"words":"hello"}"#.into())
    );
    let c = build(&ECHO, &[("PREFIX", "> ".into())]);
    let out = run(&c, &t, "parrot", "say", json!({})).await.unwrap();
    assert_eq!(out, Collected::Text("> {}".into()));
}
