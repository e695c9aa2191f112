//! YAML → a position-keeping tree → JSON, via saphyr (YAML 1.2, duplicate keys are errors).

use crate::diag::Diagnostic;
use crate::source::{SourceFile, Span};
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
            let node = convert(file, &docs[0], &mut errors);
            if errors.is_empty() {
                Ok(node)
            } else {
                Err(errors)
            }
        }
        _ => Err(vec![
            Diagnostic::error(
                file,
                span_of(file, &docs[1]),
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

fn span_of(file: &SourceFile, y: &MarkedYaml<'_>) -> Span {
    let (s, e) = (y.span.start, y.span.end);
    Span::from_chars(&file.text, s.line().max(1), s.col(), s.index(), e.index())
}

fn convert(file: &SourceFile, y: &MarkedYaml<'_>, errors: &mut Vec<Diagnostic>) -> Node {
    let span = span_of(file, y);
    let kind = match &y.data {
        YamlData::Value(s) => NodeKind::Scalar(scalar(file, span, s, errors)),
        YamlData::Representation(text, _, _) => NodeKind::Scalar(Value::String(text.to_string())),
        YamlData::Sequence(items) => {
            NodeKind::Seq(items.iter().map(|i| convert(file, i, errors)).collect())
        }
        YamlData::Mapping(map) => {
            let mut entries = Vec::with_capacity(map.len());
            for (k, v) in map.iter() {
                let key_span = span_of(file, k);
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
                    convert(file, v, errors),
                ));
            }
            NodeKind::Map(entries)
        }
        YamlData::Tagged(_, inner) => return convert(file, inner, errors),
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
