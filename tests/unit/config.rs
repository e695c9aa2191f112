//! Configuration loading: YAML with positions, every `${VAR}` form, nested lists, injection.

use bulkhead::config::{Config, ConfigError, expand, load_file, load_yaml};
use serde_json::{Value, json};
use std::collections::HashMap;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn run(yaml: &str, vars: &HashMap<String, String>) -> Result<Value, ConfigError> {
    let mut v = load_yaml(yaml, "config.yaml")?;
    expand(&mut v, &|name| vars.get(name).cloned())?;
    Ok(v)
}

fn one(template: &str, vars: &[(&str, &str)]) -> Result<String, ConfigError> {
    let mut v = json!({ "k": template });
    let vars = env(vars);
    expand(&mut v, &|name| vars.get(name).cloned())?;
    Ok(v["k"].as_str().unwrap().to_owned())
}

#[test]
fn plain_variable_and_unset_error() {
    assert_eq!(
        one("http://${HOST}:80", &[("HOST", "db")]).unwrap(),
        "http://db:80"
    );
    assert_eq!(one("${E}", &[("E", "")]).unwrap(), "");
    let e = one("${HOST}", &[]).unwrap_err();
    assert!(matches!(&e, ConfigError::Unset { var, path } if var == "HOST" && path == "k"));
}

#[test]
fn colon_dash_default_applies_when_unset_or_empty() {
    assert_eq!(one("${P:-8000}", &[]).unwrap(), "8000");
    assert_eq!(one("${P:-8000}", &[("P", "")]).unwrap(), "8000");
    assert_eq!(one("${P:-8000}", &[("P", "9")]).unwrap(), "9");
    assert_eq!(one("${P:-}", &[]).unwrap(), "");
    assert_eq!(one("${P:-a:b-c}", &[]).unwrap(), "a:b-c");
}

#[test]
fn dash_default_applies_only_when_unset() {
    assert_eq!(one("${P-8000}", &[]).unwrap(), "8000");
    assert_eq!(one("${P-8000}", &[("P", "")]).unwrap(), "");
    assert_eq!(one("${P-8000}", &[("P", "9")]).unwrap(), "9");
}

#[test]
fn required_variable_errors_carry_the_message() {
    let e = one("${TOKEN:?set TOKEN to the API key}", &[("TOKEN", "")]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Required { var, message, .. }
            if var == "TOKEN" && message == "set TOKEN to the API key"),
        "{e:?}"
    );
    assert_eq!(one("${TOKEN:?x}", &[("TOKEN", "t")]).unwrap(), "t");
    assert_eq!(one("${TOKEN?x}", &[("TOKEN", "")]).unwrap(), "");
    assert!(one("${TOKEN?x}", &[]).is_err());
}

#[test]
fn dollar_dollar_is_a_literal_dollar() {
    assert_eq!(one("pa$$word", &[]).unwrap(), "pa$word");
    assert_eq!(one("$${HOME}", &[]).unwrap(), "${HOME}");
    assert_eq!(one("cost $5 ^a$", &[]).unwrap(), "cost $5 ^a$");
}

#[test]
fn malformed_expressions_are_errors() {
    for bad in ["${", "${HOST", "${}", "${1X}", "${A B}", "${A:x}"] {
        let e = one(bad, &[("A", "1"), ("HOST", "h")]).unwrap_err();
        assert!(matches!(e, ConfigError::Syntax { .. }), "{bad:?} → {e:?}");
    }
}

#[test]
fn expands_at_every_depth_and_names_the_path() {
    let yaml = "
mcp_servers:
  template:
    url: http://${HOST:-localhost}:${PORT}/mcp
    args: [--port, '${PORT}', [nested, '${HOST-x}']]
    headers: [{name: auth, value: 'Bearer ${TOKEN}'}]
    timeout: 30
";
    let vars = env(&[("PORT", "8000"), ("TOKEN", "abc")]);
    let v = run(yaml, &vars).unwrap();
    assert_eq!(
        v,
        json!({"mcp_servers": {"template": {
            "url": "http://localhost:8000/mcp",
            "args": ["--port", "8000", ["nested", "x"]],
            "headers": [{"name": "auth", "value": "Bearer abc"}],
            "timeout": 30,
        }}})
    );
    let e = run(yaml, &env(&[("TOKEN", "abc")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "mcp_servers.template.url: environment variable PORT is not set"
    );
    let e = run(yaml, &env(&[("PORT", "1")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "mcp_servers.template.headers[0].value: environment variable TOKEN is not set"
    );
}

#[test]
fn variable_values_cannot_inject_yaml() {
    let yaml = "server:\n  name: ${NAME}\n  admin: false\n";
    let evil = "x\n  admin: true\nkey: x";
    let v = run(yaml, &env(&[("NAME", evil)])).unwrap();
    assert_eq!(v, json!({"server": {"name": evil, "admin": false}}));
    // Nor can they be re-expanded.
    let v = run(yaml, &env(&[("NAME", "${OTHER}")])).unwrap();
    assert_eq!(v["server"]["name"], "${OTHER}");
}

#[test]
fn duplicate_key_error_points_at_line_and_column() {
    let yaml = "mcp_servers:\n  a: {url: x}\n  b: {url: y}\n  a: {url: z}\n";
    let e = load_yaml(yaml, "config.yaml").unwrap_err();
    assert!(
        matches!(
            &e,
            ConfigError::Yaml {
                line: 4,
                col: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("config.yaml:4:3: "), "{e}");
    assert!(e.to_string().contains("duplicate"), "{e}");
}

#[test]
fn syntax_error_points_at_line_and_column() {
    let e = load_yaml("a: 1\nb: [1, 2\n", "c.yaml").unwrap_err();
    let ConfigError::Yaml { origin, line, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(origin, "c.yaml");
    assert!(*line >= 2, "{e}");
}

#[test]
fn load_file_reads_parses_and_expands_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    // A name only this test uses, so setting it cannot disturb other tests.
    let var = "BULKHEAD_CONFIG_TEST_ONLY_VAR";
    std::fs::write(
        &path,
        format!("a: ${{{var}:-fallback}}\nb: ${{{var}-unset}}\n"),
    )
    .unwrap();
    let v = load_file(&path).unwrap();
    assert_eq!(v, json!({"a": "fallback", "b": "unset"}));
    let e = load_file(&dir.path().join("missing.yaml")).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }), "{e:?}");
}

/// A config.yaml that parses but does not fit is reported like a spec error: file:line:col, the
/// line with a caret under the key, and a help line.
#[test]
fn a_broken_config_names_file_line_col_with_help() {
    let base = "auth:\n  issuer: i\n  audience: a\n  keys:\n    - { alg: HS256, secret: 0123456789abcdef0123456789abcdef }\n";
    let cases = [
        (
            format!("{base}htpp:\n  stateful: true\n"),
            "cfg.yaml:6:1",
            "unknown key `htpp`",
            "did you mean `http`?",
        ),
        (
            format!("{base}http:\n  allowd_origins: []\n"),
            "cfg.yaml:7:3",
            "unknown key `allowd_origins` in `http`",
            "did you mean `allowed_origins`?",
        ),
        (
            format!("{base}http:\n  max_sessions: lots\n"),
            "cfg.yaml:7:3",
            "`http.max_sessions` is invalid",
            "help:",
        ),
        (
            "auth:\n  audience: a\n".to_string(),
            "cfg.yaml:1:1",
            "`issuer` is missing in `auth`",
            "add `issuer:` to `auth`",
        ),
    ];
    for (text, at, message, help) in cases {
        let e = Config::parse(&text, "cfg.yaml", &|_| None).unwrap_err();
        let ConfigError::Invalid { location, rendered } = &e else {
            panic!("{text}\n→ {e:?}")
        };
        assert_eq!(location, at, "{rendered}");
        assert!(rendered.contains(message), "{rendered}");
        assert!(rendered.contains(help), "{rendered}");
        assert!(rendered.contains(&format!(" --> {at}")), "{rendered}");
    }
}

/// `specs/config.schema.json` is the schema of the configuration types (rewrite it with
/// `BLESS=1`), and the shipped config.yaml validates against it and names it for editors.
#[test]
fn the_config_schema_is_current_and_the_shipped_config_fits_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join(bulkhead::config::SCHEMA_PATH);
    let want = format!(
        "{}\n",
        serde_json::to_string_pretty(&bulkhead::config::schema()).unwrap()
    );
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: run `BLESS=1 cargo test --test unit -- config_schema`",
        path.display()
    );
    let shipped = std::fs::read_to_string(root.join("config.yaml")).unwrap();
    assert!(
        shipped
            .lines()
            .next()
            .unwrap_or("")
            .contains("yaml-language-server: $schema=specs/config.schema.json"),
        "config.yaml names its schema on its first line"
    );
    let value = load_yaml(&shipped, "config.yaml").unwrap();
    let schema = bulkhead::config::schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    // A misspelt key is an error for editors too.
    let bad = load_yaml(
        &shipped.replace("  stateful:", "  statefull:"),
        "config.yaml",
    )
    .unwrap();
    assert!(validator.iter_errors(&bad).next().is_some());
}

/// The form the docs tell a reader to try parses for each limit, `burst` defaults to `calls`, and
/// a limit no call can meet is refused naming its key.
#[test]
fn rate_limits_parse_in_the_documented_form() {
    for key in ["per_user", "per_user_tool", "per_tool", "per_server"] {
        let text = format!(
            "{}\nrate_limits: {{ {key}: {{ calls: 20, per_seconds: 1 }} }}\n",
            bulkhead::config::EMBEDDED
        );
        let c = Config::parse(&text, "t", &|_| None).unwrap();
        let declared: Vec<_> = c.rate_limits.declared().collect();
        assert_eq!(declared.len(), 1, "{key}");
        assert_eq!(declared[0].0, format!("rate_limits.{key}"));
        assert_eq!(declared[0].1.burst(), 20);
    }
    let text = format!(
        "{}\nrate_limits: {{ per_user: {{ calls: 0, per_seconds: 1 }} }}\n",
        bulkhead::config::EMBEDDED
    );
    let e = Config::parse(&text, "t", &|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rate_limits.per_user: `calls` must be at least 1"),
        "{e}"
    );
    let c = Config::parse(bulkhead::config::EMBEDDED, "t", &|_| None).unwrap();
    assert_eq!(
        c.rate_limits.declared().count(),
        0,
        "no limit is on by default"
    );
    assert!(c.audit.chain, "the audit chain is on by default");
}
