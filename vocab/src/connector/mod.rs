//! Connector kinds, each one typed thing: its settings (serde and schema, defaults in code
//! once) and its facts as methods. The generator checks specs into these types, the emitters
//! and the review read them, and the runtime deserialises the same types from the expanded
//! settings. Every match on a kind is exhaustive, so a new kind is a compile error wherever a
//! fact about it is missing (recipe: ARCHITECTURE.md, "A new connector kind").

mod count;
#[cfg(feature = "fixture-kind")]
mod echo;
mod files;
mod http;
mod logs;
mod mcp;
mod operation;
mod postgres;
mod sandbox;
mod sqlite;

pub use count::{Count, Flag, SettingError};
#[cfg(feature = "fixture-kind")]
pub use echo::EchoSettings;
pub use files::FilesSettings;
pub use http::HttpSettings;
pub use logs::LogsSettings;
pub use mcp::McpSettings;
pub use operation::{FileAction, HttpMethod, OperationBody};
pub use postgres::{PostgresSettings, SetRole};
pub use sandbox::SandboxSettings;
pub use sqlite::SqliteSettings;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Built-in connector kinds.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ConnectorKind {
    /// Files in the caller's workspace.
    Files,
    /// An SQLite database with named, parameterised SQL.
    Sqlite,
    /// An HTTP API under a declared base URL (reaches the network).
    Http,
    /// A directory of log files searched with regexes.
    Logs,
    /// A PostgreSQL database with named, parameterised SQL (reads in read-only transactions).
    Postgres,
    /// A program run in a per-session jail (bubblewrap) over the session's workspace.
    Sandbox,
    /// An MCP server nobody here wrote (stdio or Streamable HTTP): only the tools a spec
    /// declares, each pinned by the hash of its definition in a reviewed lock.
    Mcp,
    /// Test-only: answers with its arguments (never in the published schema).
    #[cfg(feature = "fixture-kind")]
    #[schemars(skip)]
    Echo,
}

/// A connector's settings, typed by its kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per connector, read at start and at build time"
)]
#[serde(untagged)]
pub enum Settings {
    /// `files`
    Files(FilesSettings),
    /// `sqlite`
    Sqlite(SqliteSettings),
    /// `http`
    Http(HttpSettings),
    /// `logs`
    Logs(LogsSettings),
    /// `postgres`
    Postgres(PostgresSettings),
    /// `sandbox`
    Sandbox(SandboxSettings),
    /// `mcp`
    Mcp(McpSettings),
    /// `echo` (test-only)
    #[cfg(feature = "fixture-kind")]
    Echo(EchoSettings),
}

/// A file or folder on the host that a connector's settings name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataPath<'a> {
    /// The settings key.
    pub setting: &'static str,
    /// Its value as written (may hold `${VAR}`).
    pub written: &'a str,
    /// A folder rather than a file.
    pub is_dir: bool,
    /// Whether it holds the data the connector serves (a database, logs), rather than what it
    /// trusts (a CA bundle). Readiness and the self-check look at data paths.
    pub holds_data: bool,
}

impl ConnectorKind {
    /// Every kind, in the order specs document them.
    pub const ALL: &'static [ConnectorKind] = &[
        ConnectorKind::Files,
        ConnectorKind::Sqlite,
        ConnectorKind::Http,
        ConnectorKind::Logs,
        ConnectorKind::Postgres,
        ConnectorKind::Sandbox,
        ConnectorKind::Mcp,
        #[cfg(feature = "fixture-kind")]
        ConnectorKind::Echo,
    ];

    /// Whether the kind is the test-only fixture (left out of the published spec schema, so
    /// `specs/schema/` is the same whichever features built it).
    pub fn is_fixture(self) -> bool {
        match self {
            ConnectorKind::Files
            | ConnectorKind::Sqlite
            | ConnectorKind::Http
            | ConnectorKind::Logs
            | ConnectorKind::Postgres
            | ConnectorKind::Sandbox
            | ConnectorKind::Mcp => false,
            #[cfg(feature = "fixture-kind")]
            ConnectorKind::Echo => true,
        }
    }

    /// The spec spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectorKind::Files => "files",
            ConnectorKind::Sqlite => "sqlite",
            ConnectorKind::Http => "http",
            ConnectorKind::Logs => "logs",
            ConnectorKind::Postgres => "postgres",
            ConnectorKind::Sandbox => "sandbox",
            ConnectorKind::Mcp => "mcp",
            #[cfg(feature = "fixture-kind")]
            ConnectorKind::Echo => "echo",
        }
    }

    /// The kind spelled `s`.
    pub fn parse(s: &str) -> Option<ConnectorKind> {
        ConnectorKind::ALL.iter().copied().find(|k| k.as_str() == s)
    }

    /// Reads `value` (a spec's `settings`, or the runtime's after `${VAR}` expansion) as this
    /// kind's settings. Unknown keys are refused.
    pub fn settings(self, value: serde_json::Value) -> Result<Settings, serde_json::Error> {
        use serde_json::from_value as read;
        Ok(match self {
            ConnectorKind::Files => Settings::Files(read(value)?),
            ConnectorKind::Sqlite => Settings::Sqlite(read(value)?),
            ConnectorKind::Http => Settings::Http(read(value)?),
            ConnectorKind::Logs => Settings::Logs(read(value)?),
            ConnectorKind::Postgres => Settings::Postgres(read(value)?),
            ConnectorKind::Sandbox => Settings::Sandbox(read(value)?),
            ConnectorKind::Mcp => Settings::Mcp(read(value)?),
            #[cfg(feature = "fixture-kind")]
            ConnectorKind::Echo => Settings::Echo(read(value)?),
        })
    }

    /// What `bulkhead new connector` writes after `name:` and `kind:` for this kind: the least
    /// sensitivity, settings with their variables and one operation, each a choice to review
    /// (`NAME` is the connector's name in capitals). `None`: the kind is not written by hand
    /// (an `mcp` connector comes from `bulkhead import mcp`, which pins its tools).
    pub fn example(self) -> Option<&'static str> {
        match self {
            ConnectorKind::Files => Some(
                "description: Files of the caller's workspace.\n\
                 sensitivity: internal\n\
                 operations:\n  read:\n    description: Read one file.\n    action: read\n",
            ),
            ConnectorKind::Sqlite => Some(
                "description: An SQLite database.\n\
                 # The least sensitivity of what it holds: tools over it declare at least this.\n\
                 sensitivity: confidential\n\
                 settings:\n  path: \"${NAME_DB:-data/NAME.db}\"\n\
                 operations:\n  get:\n    description: One row by its id.\n\
                 \x20   params:\n      id:\n        type: integer\n        description: The row's id\n\
                 \x20   sql: SELECT id FROM items WHERE id = :id\n",
            ),
            ConnectorKind::Http => Some(
                "description: An HTTP API.\n\
                 sensitivity: internal\n\
                 settings:\n  base_url: \"${NAME_URL:-https://api.example.com}\"\n\
                 \x20 # The API's token, passed to deployments as a file: name it in `secrets`.\n\
                 \x20 headers:\n    Authorization: \"Bearer ${NAME_TOKEN:-}\"\n\
                 secrets: [NAME_TOKEN]\n\
                 operations:\n  get_item:\n    description: One item by its id.\n    method: GET\n    path: /items/{id}\n\
                 \x20   params:\n      id:\n        type: string\n        description: The item's id\n        pattern: \"^[A-Za-z0-9-]{1,64}$\"\n",
            ),
            ConnectorKind::Logs => Some(
                "description: A folder of log files.\n\
                 sensitivity: internal\n\
                 settings:\n  dir: \"${NAME_DIR:-data/NAME}\"\n\
                 operations:\n  search:\n    description: Search the logs with a regular expression.\n    action: search\n",
            ),
            ConnectorKind::Postgres => Some(
                "description: A PostgreSQL database.\n\
                 sensitivity: confidential\n\
                 settings:\n  url: \"${NAME_DATABASE_URL}\"\n\
                 secrets: [NAME_DATABASE_URL]\n\
                 operations:\n  get:\n    description: One row by its id.\n\
                 \x20   params:\n      id:\n        type: integer\n        description: The row's id\n\
                 \x20   sql: SELECT id FROM items WHERE id = :id\n",
            ),
            ConnectorKind::Sandbox => Some(
                "description: Code run in a jail over the session's workspace.\n\
                 sensitivity: internal\n\
                 operations:\n  run:\n    description: Run a Python program.\n\
                 \x20   params:\n      code:\n        type: string\n        description: The program\n        max_length: 100000\n\
                 \x20   command: [python3, -I, -c, \"{code}\"]\n",
            ),
            ConnectorKind::Mcp => None,
            #[cfg(feature = "fixture-kind")]
            ConnectorKind::Echo => Some(
                "sensitivity: public\nsettings:\n  prefix: \"echo: \"\noperations:\n  say:\n    description: The arguments back.\n",
            ),
        }
    }

    /// The keys an operation of this kind may have (besides `description`).
    pub fn operation_fields(self) -> &'static [&'static str] {
        match self {
            ConnectorKind::Files | ConnectorKind::Logs => &["action"],
            ConnectorKind::Sqlite | ConnectorKind::Postgres => &["sql", "params"],
            ConnectorKind::Http => &[
                "method",
                "path",
                "params",
                "query",
                "body",
                "headers",
                "result_schema",
            ],
            ConnectorKind::Sandbox => &["command", "params"],
            ConnectorKind::Mcp => &["tool", "params"],
            #[cfg(feature = "fixture-kind")]
            ConnectorKind::Echo => &["params"],
        }
    }

    /// The JSON Schema of this kind's settings, with its `$defs` name.
    pub fn settings_schema(self) -> (&'static str, schemars::Schema) {
        use schemars::schema_for as schema;
        match self {
            ConnectorKind::Files => ("FilesSettings", schema!(FilesSettings)),
            ConnectorKind::Sqlite => ("SqliteSettings", schema!(SqliteSettings)),
            ConnectorKind::Http => ("HttpSettings", schema!(HttpSettings)),
            ConnectorKind::Logs => ("LogsSettings", schema!(LogsSettings)),
            ConnectorKind::Postgres => ("PostgresSettings", schema!(PostgresSettings)),
            ConnectorKind::Sandbox => ("SandboxSettings", schema!(SandboxSettings)),
            ConnectorKind::Mcp => ("McpSettings", schema!(McpSettings)),
            #[cfg(feature = "fixture-kind")]
            ConnectorKind::Echo => ("EchoSettings", schema!(EchoSettings)),
        }
    }
}

impl std::fmt::Display for ConnectorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Settings {
    /// The kind these settings belong to.
    pub fn kind(&self) -> ConnectorKind {
        match self {
            Settings::Files(_) => ConnectorKind::Files,
            Settings::Sqlite(_) => ConnectorKind::Sqlite,
            Settings::Http(_) => ConnectorKind::Http,
            Settings::Logs(_) => ConnectorKind::Logs,
            Settings::Postgres(_) => ConnectorKind::Postgres,
            Settings::Sandbox(_) => ConnectorKind::Sandbox,
            Settings::Mcp(_) => ConnectorKind::Mcp,
            #[cfg(feature = "fixture-kind")]
            Settings::Echo(_) => ConnectorKind::Echo,
        }
    }

    /// The host files and folders the settings name: what a deployment mounts into the
    /// instance (read-only unless a tool writes) and what readiness checks.
    pub fn data_paths(&self) -> Vec<DataPath<'_>> {
        match self {
            Settings::Sqlite(s) => vec![DataPath {
                setting: "path",
                written: &s.path,
                is_dir: false,
                holds_data: true,
            }],
            Settings::Logs(s) => vec![DataPath {
                setting: "dir",
                written: &s.dir,
                is_dir: true,
                holds_data: true,
            }],
            Settings::Http(s) => s
                .ca_file
                .iter()
                .map(|f| DataPath {
                    setting: "ca_file",
                    written: f,
                    is_dir: false,
                    holds_data: false,
                })
                .collect(),
            Settings::Files(_)
            | Settings::Postgres(_)
            | Settings::Sandbox(_)
            | Settings::Mcp(_) => Vec::new(),
            #[cfg(feature = "fixture-kind")]
            Settings::Echo(_) => Vec::new(),
        }
    }

    /// Where the connector's data is, as the policy review compares it (a moved database or
    /// service is a change a reviewer must see).
    pub fn location(&self) -> String {
        match self {
            Settings::Sqlite(s) => s.path.clone(),
            Settings::Logs(s) => s.dir.clone(),
            Settings::Postgres(s) => s.url.clone(),
            Settings::Http(s) => s.base_url.clone(),
            Settings::Files(_) => "workspace".into(),
            Settings::Sandbox(_) => "jail".into(),
            Settings::Mcp(s) => match (&s.url, &s.command) {
                (Some(url), _) => serde_json::Value::from(url.as_str()).to_string(),
                (None, Some(cmd)) => serde_json::Value::from(cmd.clone()).to_string(),
                (None, None) => String::new(),
            },
            #[cfg(feature = "fixture-kind")]
            Settings::Echo(_) => "echo".into(),
        }
    }

    /// Where a jail of this connector may connect (`host:port` as written); empty: nowhere.
    pub fn egress(&self) -> &[String] {
        match self {
            Settings::Sandbox(s) => &s.egress,
            Settings::Mcp(s) => &s.egress,
            Settings::Files(_)
            | Settings::Sqlite(_)
            | Settings::Http(_)
            | Settings::Logs(_)
            | Settings::Postgres(_) => &[],
            #[cfg(feature = "fixture-kind")]
            Settings::Echo(_) => &[],
        }
    }

    /// Whether the connector runs code nobody here wrote in a jail (a sandbox run, a launched
    /// upstream): the image needs bubblewrap, and `egress` is the jail's way out.
    pub fn jails(&self) -> bool {
        match self {
            Settings::Sandbox(_) => true,
            Settings::Mcp(s) => s.program().is_some(),
            Settings::Files(_)
            | Settings::Sqlite(_)
            | Settings::Http(_)
            | Settings::Logs(_)
            | Settings::Postgres(_) => false,
            #[cfg(feature = "fixture-kind")]
            Settings::Echo(_) => false,
        }
    }

    /// The program a jail of this connector starts on its own (a launched upstream), if any.
    pub fn launches(&self) -> Option<&str> {
        match self {
            Settings::Mcp(s) => s.program(),
            Settings::Files(_)
            | Settings::Sqlite(_)
            | Settings::Http(_)
            | Settings::Logs(_)
            | Settings::Postgres(_)
            | Settings::Sandbox(_) => None,
            #[cfg(feature = "fixture-kind")]
            Settings::Echo(_) => None,
        }
    }
}
