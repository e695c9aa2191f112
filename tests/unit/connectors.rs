//! Connector kinds against real backends: a SQLite file, an HTTP server on 127.0.0.1, log
//! directories and session workspaces in temp dirs. Connectors are built from static definitions
//! the way generated code declares them, with `${VAR}` settings filled from a test lookup.

#[cfg(feature = "fixture-kind")]
mod echo;
mod files;
mod http;
mod logs;
mod postgres;
mod settings;
mod sqlite;

use std::sync::Arc;

/// The echo tests above are compiled in whenever the engine has the fixture kind: a test command
/// that turns on the engine's feature but not this package's would skip them silently.
#[test]
fn the_fixture_kind_tests_run_whenever_the_engine_has_the_kind() {
    let engine_has_it = bulkhead_vocab::connector::ConnectorKind::ALL
        .iter()
        .any(|k| k.is_fixture());
    assert_eq!(
        cfg!(feature = "fixture-kind"),
        engine_has_it,
        "run the tests with `--features failpoints,fixture-kind` (every crate's feature)"
    );
}

use bulkhead::codegen::*;
use bulkhead::connectors::{self, Connectors};
use bulkhead::identity::Identity;
use bulkhead::server::Chunk;
use bulkhead::signals::CallSignals;
use bulkhead::workspace::{SessionWorkspace, WorkspaceRoot};
use futures::StreamExt as _;
use serde_json::Value;

/// A temp dir with a session workspace in it (for the `files` kind and the call signature).
pub struct Tmp {
    pub dir: tempfile::TempDir,
    pub ws: Arc<SessionWorkspace>,
}

pub fn tmp() -> Tmp {
    let dir = tempfile::tempdir().unwrap();
    let root = WorkspaceRoot::new(dir.path().join("workspaces")).unwrap();
    let ws = Arc::new(
        root.session(&Identity::new("alice", "s1").unwrap())
            .unwrap(),
    );
    Tmp { dir, ws }
}

/// Builds one connector with `${VAR}`s answered from `vars`.
pub fn build(def: &'static ConnectorDef, vars: &[(&str, String)]) -> Connectors {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    Connectors::new([def], &move |name| {
        vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
    .unwrap()
}

pub fn obj(v: Value) -> JsonObject {
    v.as_object().cloned().unwrap()
}

/// Runs one operation and drains a streamed result.
pub async fn run(
    c: &Connectors,
    t: &Tmp,
    connector: &str,
    op: &str,
    args: Value,
) -> Result<Collected, ToolError> {
    let out = connectors::call(c, connector, op, &t.ws, obj(args), &CallSignals::new()).await?;
    Ok(match out {
        ToolOutput::Text(s) => Collected::Text(s),
        ToolOutput::Json(v) => Collected::Json(v),
        ToolOutput::Stream(mut s) => {
            let mut chunks = Vec::new();
            while let Some(c) = s.next().await {
                chunks.push(c?);
            }
            Collected::Chunks(chunks)
        }
    })
}

/// A drained tool output.
#[derive(Debug, PartialEq)]
pub enum Collected {
    Text(String),
    Json(Value),
    Chunks(Vec<Chunk>),
}

impl Collected {
    pub fn lines(self) -> Vec<String> {
        match self {
            Collected::Chunks(c) => c
                .into_iter()
                .map(|c| match c {
                    Chunk::Line(l) => l,
                    other => panic!("expected lines, got {other:?}"),
                })
                .collect(),
            other => panic!("expected a stream, got {other:?}"),
        }
    }

    pub fn rows(self) -> Vec<Vec<String>> {
        match self {
            Collected::Chunks(c) => c
                .into_iter()
                .map(|c| match c {
                    Chunk::Row(r) => r,
                    other => panic!("expected rows, got {other:?}"),
                })
                .collect(),
            other => panic!("expected a stream, got {other:?}"),
        }
    }

    pub fn text(self) -> String {
        match self {
            Collected::Text(t) => t,
            other => panic!("expected text, got {other:?}"),
        }
    }
}

/// Asserts a retryable error and returns its message.
#[track_caller]
pub fn retryable<T: std::fmt::Debug>(r: Result<T, ToolError>) -> String {
    match r {
        Err(ToolError::Retryable(m)) => m,
        other => panic!("expected a retryable error, got {other:?}"),
    }
}

/// Asserts a fatal error and returns its message.
#[track_caller]
pub fn fatal<T: std::fmt::Debug>(r: Result<T, ToolError>) -> String {
    match r {
        Err(ToolError::Fatal(m)) => m,
        other => panic!("expected a fatal error, got {other:?}"),
    }
}
