//! The Rust that the real build generated from `specs/` compiles (this binary links it from
//! `OUT_DIR`) and says what `specs/servers/template.yaml` says.

use bulkhead::codegen::{Annotations, Permission, Sensitivity, Target};
use bulkhead::serverdef::ServerDef;
use bulkhead_example::servers::{CONNECTORS, SERVERS, server};
use saphyr::{LoadableYamlNode, Yaml};

fn template() -> &'static ServerDef {
    SERVERS
        .iter()
        .copied()
        .find(|s| s.name == "template")
        .expect("SERVERS lists `template`")
}

/// The tools of the spec file, as (name, permission, context, sensitivity), sorted by name.
fn spec_tools() -> Vec<(String, String, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/servers/template.yaml");
    let text = std::fs::read_to_string(path).expect("read the template spec");
    let docs = Yaml::load_from_str(&text).expect("the template spec is YAML");
    let tools = docs[0]["tools"].as_mapping().expect("`tools` is a mapping");
    let field = |t: &Yaml, k: &str| t[k].as_str().expect("string field").to_string();
    let mut out: Vec<_> = tools
        .iter()
        .map(|(k, t)| {
            (
                k.as_str().expect("tool names are strings").to_string(),
                field(t, "permission"),
                field(t, "context"),
                field(t, "sensitivity"),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn servers_lists_template_with_the_tools_of_its_spec() {
    let t = template();
    let generated: Vec<(String, String, String, String)> = t
        .tools
        .iter()
        .map(|x| {
            (
                x.name.to_string(),
                x.permission.as_str().to_string(),
                x.context.to_string(),
                x.sensitivity.as_str().to_string(),
            )
        })
        .collect();
    assert_eq!(generated, spec_tools());
    assert!(!t.instructions.is_empty());
    assert_eq!(t.max_sensitivity(), Sensitivity::Secret);
    let names: Vec<&str> = SERVERS.iter().map(|s| s.name).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "SERVERS is sorted by name");
}

#[test]
fn every_input_schema_is_a_json_schema_for_an_object() {
    for def in SERVERS {
        for tool in def.tools {
            let schema: serde_json::Value = serde_json::from_str(tool.input_schema)
                .unwrap_or_else(|e| panic!("{}: input_schema is not JSON: {e}", tool.name));
            let validator = jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("{}: input_schema does not compile: {e}", tool.name));
            assert_eq!(schema["type"], "object", "{}", tool.name);
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name);
            let required = schema["required"].as_array().map_or(0, Vec::len);
            assert_eq!(
                validator.is_valid(&serde_json::json!({})),
                required == 0,
                "{}: an empty call is valid exactly when nothing is required",
                tool.name
            );
            assert!(
                !validator.is_valid(&serde_json::json!({ "not_a_parameter": 1 })),
                "{}: unknown arguments are refused",
                tool.name
            );
        }
    }
}

#[test]
fn annotations_follow_permission() {
    for tool in template().tools {
        let Annotations {
            read_only,
            destructive,
            open_world,
            ..
        } = tool.annotations;
        match tool.permission {
            Permission::Read => {
                assert!(read_only && !destructive && !open_world, "{}", tool.name)
            }
            Permission::Write => assert!(!read_only && !open_world, "{}", tool.name),
            Permission::Connect => assert!(!read_only && open_world, "{}", tool.name),
        }
    }
    let perms: std::collections::BTreeSet<&str> = template()
        .tools
        .iter()
        .map(|t| t.permission.as_str())
        .collect();
    assert_eq!(
        perms.len(),
        3,
        "the template exercises read, write and connect"
    );
}

#[test]
fn connector_tools_point_at_real_operations_with_the_same_schema() {
    let mut seen = 0;
    for tool in template().tools {
        let Target::Connector {
            connector,
            operation,
        } = tool.target
        else {
            continue;
        };
        let c = CONNECTORS
            .iter()
            .find(|c| c.name == connector)
            .unwrap_or_else(|| panic!("{}: no connector {connector}", tool.name));
        assert!(
            tool.sensitivity >= c.sensitivity,
            "{} understates {connector}",
            tool.name
        );
        let op = c
            .operation(operation)
            .unwrap_or_else(|| panic!("{}: no operation {connector}.{operation}", tool.name));
        assert_eq!(tool.input_schema, op.params_schema, "{}", tool.name);
        seen += 1;
    }
    assert!(seen > 0);
}

#[test]
fn template_is_runnable_and_unknown_names_are_not() {
    let s = server("template").expect("server(\"template\") is Some");
    assert_eq!(s.def.name, "template");
    assert!(server("no_such_server").is_none());
}
