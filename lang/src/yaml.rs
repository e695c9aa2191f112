//! YAML → a position-keeping tree → JSON, via saphyr (YAML 1.2, duplicate keys are errors).

use crate::diag::Diagnostic;
use crate::source::{CharTable, SourceFile, Span};
use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};
use serde_json::{Map, Number, Value};

/// A YAML node with its position. Mapping keys keep their own positions.
#[derive(Clone, Debug)]
pub struct Node {
    /// Where the node starts.
    pub span: Span,
    /// What it holds.
    pub kind: NodeKind,
}

/// The shape of a [`Node`].
#[derive(Clone, Debug)]
pub enum NodeKind {
    /// A scalar, already resolved to JSON.
    Scalar(Value),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping with string keys, in document order.
    Map(Vec<(Key, Node)>),
}

/// A mapping key and where it is.
#[derive(Clone, Debug)]
pub struct Key {
    /// The key text.
    pub name: String,
    /// Where the key is.
    pub span: Span,
}

impl Node {
    /// Looks up a mapping entry.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, n)| n)
    }

    /// Looks up a mapping entry with its key.
    pub fn entry(&self, key: &str) -> Option<(&Key, &Node)> {
        match &self.kind {
            NodeKind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.name == key)
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// Follows an RFC 6901 JSON pointer; returns the deepest node reached and, when the last
    /// step named a key, that key's span.
    pub fn locate(&self, pointer: &str) -> (Span, Option<Span>) {
        let mut node = self;
        let mut key_span = None;
        for raw in pointer.split('/').skip(1) {
            let part = raw.replace("~1", "/").replace("~0", "~");
            let next = match &node.kind {
                NodeKind::Map(entries) => {
                    entries.iter().find(|(k, _)| k.name == part).map(|(k, v)| {
                        key_span = Some(k.span);
                        v
                    })
                }
                NodeKind::Seq(items) => part
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i))
                    .inspect(|_| key_span = None),
                NodeKind::Scalar(_) => None,
            };
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        (node.span, key_span)
    }

    /// The JSON value of this tree (positions dropped).
    pub fn to_json(&self) -> Value {
        match &self.kind {
            NodeKind::Scalar(v) => v.clone(),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Map(entries) => {
                let mut map = Map::new();
                for (k, v) in entries {
                    map.insert(k.name.clone(), v.to_json());
                }
                Value::Object(map)
            }
        }
    }
}

/// Parses one YAML document. Errors come back as diagnostics at the offending position.
pub fn parse(file: &SourceFile) -> Result<Node, Vec<Diagnostic>> {
    let docs = MarkedYaml::load_from_str(&file.text).map_err(|e| {
        let m = e.marker();
        let span = Span::from_chars(&file.text, m.line(), m.col(), m.index(), m.index() + 1);
        if e.info() == "duplicated key in mapping" {
            return vec![duplicate_key(file, span)];
        }
        let d = Diagnostic::error(file, span, format!("invalid YAML: {}", e.info())).label("here");
        if e.info().starts_with("mapping values are not allowed") {
            return vec![
                d.help("a plain value cannot contain `: `; put the whole value in quotes"),
            ];
        }
        vec![d]
    })?;
    let table = &CharTable::new(&file.text);
    match docs.len() {
        0 => Err(vec![
            Diagnostic::error(
                file,
                Span::from_chars(&file.text, 1, 0, 0, 1),
                "the spec file is empty",
            )
            .label("expected a mapping"),
        ]),
        1 => {
            let mut errors = Vec::new();
            let node = convert(file, table, &docs[0], &mut errors);
            if errors.is_empty() {
                Ok(node)
            } else {
                Err(errors)
            }
        }
        _ => Err(vec![
            Diagnostic::error(
                file,
                span_of(file, table, &docs[1]),
                "a spec file holds exactly one YAML document",
            )
            .label("second document starts here"),
        ]),
    }
}

/// saphyr reports a repeated key at its start: name the key, underline it, and find the first one.
fn duplicate_key(file: &SourceFile, at: Span) -> Diagnostic {
    let text: &str = &file.text;
    let line = file.line_range(at.line);
    let rest = &text[at.start.clamp(line.start, line.end)..line.end];
    let key = rest.split(':').next().unwrap_or_default().trim_end();
    let span = Span {
        end: at.start + key.len().max(1),
        ..at
    };
    let name = key.trim_matches(['"', '\'']);
    let indent = at.col - 1;
    // The first occurrence: an earlier line with the same indentation and key, before any line
    // that is less indented (which would close the mapping).
    let first = (1..at.line).rev().find_map(|n| {
        let l = &text[file.line_range(n)];
        let body = l.trim_start();
        let lead = l.chars().count() - body.chars().count();
        if body.is_empty() || body.starts_with('#') || lead > indent {
            return None;
        }
        if lead < indent {
            return Some(None);
        }
        let k = body.split(':').next().unwrap_or_default().trim_end();
        (k == key).then_some(Some(n))
    });
    let d = Diagnostic::error(file, span, format!("duplicate key `{name}`"))
        .label("this key is already set in this mapping");
    match first.flatten() {
        Some(n) => d.help(format!(
            "the first `{name}` is on line {n}; a key may appear once per mapping"
        )),
        None => d.help("a key may appear once per mapping"),
    }
}

fn span_of(file: &SourceFile, table: &CharTable, y: &MarkedYaml<'_>) -> Span {
    let (s, e) = (y.span.start, y.span.end);
    Span::from_chars_with(
        table,
        &file.text,
        s.line().max(1),
        s.col(),
        s.index(),
        e.index(),
    )
}

fn convert(
    file: &SourceFile,
    table: &CharTable,
    y: &MarkedYaml<'_>,
    errors: &mut Vec<Diagnostic>,
) -> Node {
    let span = span_of(file, table, y);
    let kind = match &y.data {
        YamlData::Value(s) => NodeKind::Scalar(scalar(file, span, s, errors)),
        YamlData::Representation(text, _, _) => NodeKind::Scalar(Value::String(text.to_string())),
        YamlData::Sequence(items) => NodeKind::Seq(
            items
                .iter()
                .map(|i| convert(file, table, i, errors))
                .collect(),
        ),
        YamlData::Mapping(map) => {
            let mut entries = Vec::with_capacity(map.len());
            for (k, v) in map.iter() {
                let key_span = span_of(file, table, k);
                let name = match &k.data {
                    YamlData::Value(Scalar::String(s)) => s.to_string(),
                    YamlData::Representation(s, _, _) => s.to_string(),
                    _ => {
                        errors.push(
                            Diagnostic::error(file, key_span, "mapping keys must be strings")
                                .label("not a string key"),
                        );
                        continue;
                    }
                };
                entries.push((
                    Key {
                        name,
                        span: key_span,
                    },
                    convert(file, table, v, errors),
                ));
            }
            NodeKind::Map(entries)
        }
        YamlData::Tagged(_, inner) => return convert(file, table, inner, errors),
        YamlData::Alias(_) => {
            errors.push(
                Diagnostic::error(file, span, "YAML aliases are not supported in specs")
                    .label("alias")
                    .help("write the value out in full"),
            );
            NodeKind::Scalar(Value::Null)
        }
        YamlData::BadValue => {
            errors.push(
                Diagnostic::error(file, span, "this value cannot be read").label("bad value"),
            );
            NodeKind::Scalar(Value::Null)
        }
    };
    Node { span, kind }
}

fn scalar(file: &SourceFile, span: Span, s: &Scalar<'_>, errors: &mut Vec<Diagnostic>) -> Value {
    match s {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number((*i).into()),
        Scalar::FloatingPoint(f) => match Number::from_f64(f.into_inner()) {
            Some(n) => Value::Number(n),
            None => {
                errors.push(
                    Diagnostic::error(
                        file,
                        span,
                        "infinite or NaN numbers are not allowed in specs",
                    )
                    .label("not a finite number"),
                );
                Value::Null
            }
        },
        Scalar::String(s) => Value::String(s.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(text: &str) -> (SourceFile, Node) {
        let file = SourceFile::in_memory("t.yaml", text);
        let root = parse(&file).unwrap_or_else(|e| panic!("{}", e[0].render()));
        (file, root)
    }

    const TEXT: &str = "name: demo
tools:
  read_file:
    permission: read
    params:
      a/b:
        type: string
      t~x: {type: integer}
list:
  - first
  - second: {deep: [10, 20]}
";

    #[test]
    fn locate_follows_nested_maps_and_reports_the_key() {
        let (_, root) = tree(TEXT);
        let (value, key) = root.locate("/tools/read_file/permission");
        assert_eq!((value.line, value.col), (4, 17));
        let key = key.expect("the last step named a key");
        assert_eq!((key.line, key.col), (4, 5));
        assert_eq!(&TEXT[key.start..key.end], "permission");
        assert_eq!(&TEXT[value.start..value.end], "read");
    }

    #[test]
    fn locate_unescapes_pointer_tokens() {
        let (_, root) = tree(TEXT);
        let (_, key) = root.locate("/tools/read_file/params/a~1b/type");
        assert_eq!(key.map(|k| k.line), Some(7));
        let (value, key) = root.locate("/tools/read_file/params/t~0x");
        assert_eq!(key.map(|k| (k.line, k.col)), Some((8, 7)));
        assert_eq!(value.line, 8);
    }

    #[test]
    fn locate_walks_sequences_and_flow_collections() {
        let (_, root) = tree(TEXT);
        let (value, key) = root.locate("/list/0");
        assert_eq!((value.line, value.col, key), (10, 5, None));
        let (value, _) = root.locate("/list/1/second/deep/1");
        assert_eq!(&TEXT[value.start..value.end], "20");
        assert_eq!(value.line, 11);
    }

    #[test]
    fn locate_stops_at_the_deepest_existing_node() {
        let (_, root) = tree(TEXT);
        let (value, key) = root.locate("/tools/read_file/missing/deeper");
        let (tool, tool_key) = root.locate("/tools/read_file");
        assert_eq!(value, tool);
        assert_eq!(key, tool_key);
        let (value, _) = root.locate("/list/7");
        assert_eq!(value, root.locate("/list").0);
        assert_eq!(root.locate("").0, root.span);
    }

    #[test]
    fn to_json_keeps_types_and_order() {
        let (_, root) = tree("b: 1\na: [true, 1.5, x, null, '017', 017]\n");
        assert_eq!(
            root.to_json().to_string(),
            r#"{"b":1,"a":[true,1.5,"x",null,"017",17]}"#
        );
    }

    #[test]
    fn duplicate_key_names_the_key_and_the_first_line() {
        let file = SourceFile::in_memory("t.yaml", "a:\n  x: 1\n  y: 2\n  x: 3\n");
        let e = parse(&file).expect_err("duplicate keys are rejected");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].message, "duplicate key `x`");
        assert_eq!((e[0].span.line, e[0].span.col), (4, 3));
        assert_eq!(
            e[0].help.as_deref(),
            Some("the first `x` is on line 2; a key may appear once per mapping")
        );
    }

    #[test]
    fn aliases_are_expanded_by_saphyr() {
        // saphyr 0.3 resolves `*x` to a copy of the anchored node, so `convert` never sees an
        // alias; this pins that behaviour (the `Alias` arm there is a safety net).
        let (_, root) = tree("a: &x 1\nb: *x\n");
        assert_eq!(root.to_json().to_string(), r#"{"a":1,"b":1}"#);
    }

    #[test]
    fn infinities_and_several_documents_are_errors() {
        for (text, message) in [
            (
                "a: .inf\n",
                "infinite or NaN numbers are not allowed in specs",
            ),
            (
                "a: .nan\n",
                "infinite or NaN numbers are not allowed in specs",
            ),
            (
                "a: 1\n---\nb: 2\n",
                "a spec file holds exactly one YAML document",
            ),
            ("", "the spec file is empty"),
        ] {
            let file = SourceFile::in_memory("t.yaml", text);
            let e = parse(&file).expect_err(text);
            assert_eq!(e[0].message, message, "{text:?}");
        }
    }
}
