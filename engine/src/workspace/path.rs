//! Agent paths (`/workspace/...`) parsed into normalised paths relative to a session directory.
//!
//! This is input validation, not confinement: a [`RelPath`] is still opened through a cap-std
//! `Dir`, which is what keeps symlinks and races from leaving the session directory.

use std::fmt;
use std::path::Path;

use super::WorkspaceError;

/// The directory agents see as their workspace.
pub const AGENT_ROOT: &str = "/workspace";

/// Longest accepted agent path, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_LEN: usize = 4096;

/// Longest accepted path component, in bytes (Linux `NAME_MAX`).
pub const MAX_COMPONENT_LEN: usize = 255;

/// A validated path relative to a session directory: components joined by `/`, no `.`, `..`, empty
/// components, NUL, control characters or backslashes. The empty path is the workspace root.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RelPath(String);

impl RelPath {
    /// The workspace root itself.
    pub fn root() -> Self {
        RelPath(String::new())
    }

    /// The normalised relative form, `""` for the root.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the workspace root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The path to hand to cap-std: `.` for the root, else the relative form.
    pub fn fs_path(&self) -> &Path {
        if self.0.is_empty() {
            Path::new(".")
        } else {
            Path::new(&self.0)
        }
    }

    /// The components, outermost first.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// The last component, or `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        self.components().last()
    }

    /// The containing directory (the root for a top-level name), or `None` for the root.
    pub fn parent(&self) -> Option<RelPath> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(i) => RelPath(self.0[..i].to_owned()),
            None => RelPath::root(),
        })
    }

    /// A child of this path; `name` must be one valid component.
    pub fn join(&self, name: &str) -> Result<RelPath, WorkspaceError> {
        check_component(name)?;
        if name == "." || name == ".." || name.is_empty() {
            return Err(invalid("a file name must not be empty, `.` or `..`"));
        }
        let joined = if self.0.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.0)
        };
        if joined.len() + AGENT_ROOT.len() + 1 > MAX_PATH_LEN {
            return Err(invalid("path is longer than 4096 bytes"));
        }
        Ok(RelPath(joined))
    }

    /// The path as agents see it: `/workspace` or `/workspace/<rel>`.
    pub fn to_agent_path(&self) -> String {
        if self.0.is_empty() {
            AGENT_ROOT.to_owned()
        } else {
            format!("{AGENT_ROOT}/{}", self.0)
        }
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_agent_path())
    }
}

/// Parses an agent path into a path relative to the session directory.
///
/// Accepts `/workspace`, `/workspace/x/y` and relative `x/y`. Refuses any other absolute path
/// (including `//workspace` and `/workspacex`), `..` components, NUL and other control
/// characters, backslashes, paths over [`MAX_PATH_LEN`] bytes and components over
/// [`MAX_COMPONENT_LEN`] bytes. Empty and `.` components are folded away (`a//./b` is `a/b`).
///
/// Percent sequences are **not** decoded: `%2e%2e` is a literal file name of six characters, which
/// stays inside the workspace like any other name. Unicode look-alikes of dots (`․․`, `．．`) are
/// likewise ordinary names; only the ASCII `..` component means "parent", and it is refused.
pub fn agent_to_relative(agent_path: &str) -> Result<RelPath, WorkspaceError> {
    if agent_path.len() > MAX_PATH_LEN {
        return Err(invalid("path is longer than 4096 bytes"));
    }
    if agent_path.contains('\0') {
        return Err(invalid("path contains a NUL byte"));
    }
    if agent_path.chars().any(char::is_control) {
        return Err(invalid("path contains a control character"));
    }
    if agent_path.contains('\\') {
        return Err(invalid(
            "path contains a backslash; use `/` as the separator",
        ));
    }
    let rest = if let Some(rest) = agent_path.strip_prefix(AGENT_ROOT) {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Err(outside());
        }
        rest
    } else if agent_path.starts_with('/') {
        return Err(outside());
    } else {
        agent_path
    };
    let mut parts = Vec::new();
    for comp in rest.split('/') {
        match comp {
            "" | "." => {}
            ".." => return Err(invalid("path must not contain `..` components")),
            name => {
                check_component(name)?;
                parts.push(name);
            }
        }
    }
    Ok(RelPath(parts.join("/")))
}

fn check_component(name: &str) -> Result<(), WorkspaceError> {
    if name.len() > MAX_COMPONENT_LEN {
        return Err(invalid("a path component is longer than 255 bytes"));
    }
    if name.contains('/') || name.contains('\\') || name.chars().any(char::is_control) {
        return Err(invalid(
            "a file name must not contain `/`, `\\` or control characters",
        ));
    }
    Ok(())
}

fn outside() -> WorkspaceError {
    invalid("absolute paths must start with /workspace")
}

fn invalid(reason: &str) -> WorkspaceError {
    WorkspaceError::Invalid {
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(p: &str) -> String {
        agent_to_relative(p).unwrap().as_str().to_owned()
    }

    #[test]
    fn accepts_and_normalises() {
        assert_eq!(rel("/workspace"), "");
        assert_eq!(rel("/workspace/"), "");
        assert_eq!(rel("/workspace/notes/a.txt"), "notes/a.txt");
        assert_eq!(rel("notes//./a.txt/"), "notes/a.txt");
        assert_eq!(rel("%2e%2e/x"), "%2e%2e/x");
        assert_eq!(rel("...."), "....");
        assert_eq!(rel("workspace/x"), "workspace/x");
        assert_eq!(rel(""), "");
    }

    #[test]
    fn refuses_hostile() {
        for p in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "//etc",
            "//workspace/x",
            "/workspacex/y",
            "/workspace/../x",
            "a\0b",
            "a\nb",
            "a\u{85}b",
            "..\\x",
            "/",
        ] {
            assert!(agent_to_relative(p).is_err(), "{p:?} accepted");
        }
        assert!(agent_to_relative(&"a".repeat(256)).is_err());
        assert!(agent_to_relative(&"a".repeat(255)).is_ok());
        assert!(agent_to_relative(&"a/".repeat(2049)).is_err());
    }

    #[test]
    fn parent_join_and_agent_form() {
        let p = agent_to_relative("/workspace/a/b/c.txt").unwrap();
        assert_eq!(p.file_name(), Some("c.txt"));
        assert_eq!(p.parent().unwrap().as_str(), "a/b");
        assert_eq!(
            RelPath::root().join("x").unwrap().parent(),
            Some(RelPath::root())
        );
        assert_eq!(RelPath::root().parent(), None);
        assert!(p.join("..").is_err());
        assert!(p.join("x/y").is_err());
        assert_eq!(p.to_agent_path(), "/workspace/a/b/c.txt");
        assert_eq!(RelPath::root().to_agent_path(), "/workspace");
    }
}
