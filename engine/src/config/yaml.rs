//! YAML text to a JSON value with saphyr (YAML 1.2 core schema, duplicate keys rejected);
//! every error names `origin:line:col`.

use super::ConfigError;
use saphyr::{LoadableYamlNode, MarkedYaml, Marker, Scalar, YamlData};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// Where each mapping key and sequence item starts, by JSON pointer (`/http/allowed_origins`):
/// (1-based line, 0-based column, start and end character offsets of the key or item).
pub type Positions = HashMap<String, (usize, usize, usize, usize)>;

/// Parses one YAML document into JSON: mappings (string keys only) → objects, sequences →
/// arrays, scalars → null/bool/int/float/string. An empty document is `null`; more than one
/// document is an error. `origin` (usually the file name) prefixes error locations.
pub fn load_yaml(text: &str, origin: &str) -> Result<Value, ConfigError> {
    load_yaml_with_positions(text, origin).map(|(v, _)| v)
}

/// [`load_yaml`], also returning where each key and item is (for positioned errors later).
pub fn load_yaml_with_positions(
    text: &str,
    origin: &str,
) -> Result<(Value, Positions), ConfigError> {
    let err = |mark: &Marker, message: String| ConfigError::Yaml {
        origin: origin.to_owned(),
        line: mark.line(),
        col: mark.col() + 1,
        message,
    };
    let docs = MarkedYaml::load_from_str(text).map_err(|e| err(e.marker(), e.info().to_owned()))?;
    let mut positions = Positions::new();
    match docs.as_slice() {
        [] => Ok((Value::Null, positions)),
        [doc] => convert(doc, &err, "", &mut positions).map(|v| (v, positions)),
        [_, second, ..] => Err(err(
            &second.span.start,
            "expected one YAML document, found several".into(),
        )),
    }
}

fn record(positions: &mut Positions, pointer: String, node: &MarkedYaml<'_>) {
    let (start, end) = (&node.span.start, &node.span.end);
    positions.insert(
        pointer,
        (start.line(), start.col(), start.index(), end.index()),
    );
}

fn convert(
    node: &MarkedYaml<'_>,
    err: &dyn Fn(&Marker, String) -> ConfigError,
    pointer: &str,
    positions: &mut Positions,
) -> Result<Value, ConfigError> {
    let at = &node.span.start;
    match &node.data {
        YamlData::Value(scalar) => scalar_to_json(scalar).map_err(|m| err(at, m)),
        YamlData::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let p = format!("{pointer}/{i}");
                record(positions, p.clone(), item);
                out.push(convert(item, err, &p, positions)?);
            }
            Ok(Value::Array(out))
        }
        YamlData::Mapping(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, value) in map {
                let YamlData::Value(Scalar::String(k)) = &key.data else {
                    return Err(err(&key.span.start, "mapping keys must be strings".into()));
                };
                let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                record(positions, p.clone(), key);
                out.insert(k.to_string(), convert(value, err, &p, positions)?);
            }
            Ok(Value::Object(out))
        }
        YamlData::Tagged(tag, _) => Err(err(at, format!("unsupported tag {tag}"))),
        YamlData::Alias(_) => Err(err(at, "unresolved alias".into())),
        YamlData::BadValue => Err(err(at, "value does not match its tag".into())),
        YamlData::Representation(..) => Err(err(at, "unresolved scalar".into())),
    }
}

fn scalar_to_json(scalar: &Scalar<'_>) -> Result<Value, String> {
    Ok(match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number((*i).into()),
        Scalar::FloatingPoint(f) => Value::Number(
            Number::from_f64(f.into_inner())
                .ok_or_else(|| format!("{} cannot be represented in JSON", f.into_inner()))?,
        ),
        Scalar::String(s) => Value::String(s.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn core_schema_scalars() {
        let v = load_yaml(
            "a: ~\nb: true\nc: 017\nd: 0x1f\ne: 1.5\nf: '1'\ng: yes\nh: null\ni: -3\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"a": null, "b": true, "c": 17, "d": 31, "e": 1.5, "f": "1", "g": "yes",
                   "h": null, "i": -3})
        );
    }

    #[test]
    fn refuses_what_json_cannot_hold() {
        for (text, at) in [
            ("x: .inf\n", "t:1:4"),
            ("1: a\n", "t:1:1"),
            ("a: !custom {b: 1}\n", "t:1:4"),
        ] {
            let e = load_yaml(text, "t").unwrap_err().to_string();
            assert!(e.starts_with(at), "{text:?} → {e}");
        }
    }

    #[test]
    fn several_documents_are_refused_and_empty_is_null() {
        assert_eq!(load_yaml("", "t").unwrap(), Value::Null);
        let e = load_yaml("a: 1\n---\nb: 2\n", "t").unwrap_err().to_string();
        assert!(e.starts_with("t:3:"), "{e}");
    }
}
