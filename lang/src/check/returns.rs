//! What a tool declares it returns: a handler's `returns:` fields, the columns of a SQL
//! `SELECT` (the row set's shape comes with the statement), or an `http` operation's
//! `result_schema`.

use super::{Loaded, params};
use crate::diag::Diagnostic;
use crate::model::{Connector, OperationBody, Returns, Target};
use crate::spec::{ServerSpec, ToolSpec};

/// The declared result of a tool, checked.
#[allow(clippy::too_many_arguments)]
pub fn returns(
    l: &Loaded<ServerSpec>,
    at: &str,
    what: &str,
    name: &str,
    spec: &ToolSpec,
    target: &Target,
    connectors: &[Connector],
    errors: &mut Vec<Diagnostic>,
) -> Option<Returns> {
    match (target, &spec.returns) {
        (Target::Handler, Some(fields)) => Some(Returns::Fields(params::check(
            l,
            &format!("{at}/returns"),
            fields,
            errors,
        ))),
        (Target::Connector { .. }, Some(_)) => {
            errors.push(
                l.error_at_key(
                    &format!("{at}/returns"),
                    format!("{what} `{name}` uses a connector operation and also declares `returns`"),
                )
                .label("a connector operation's result shape is not declared here")
                .help("a SQL `SELECT` declares its rows by itself; `returns` is for `handler: rust` tools"),
            );
            None
        }
        (
            Target::Connector {
                connector,
                operation,
            },
            None,
        ) => {
            let op = connectors
                .iter()
                .find(|c| c.name == *connector)?
                .operations
                .iter()
                .find(|o| o.name == *operation)?;
            match &op.body {
                OperationBody::Sql { sql, writes: false } => select_columns(sql).map(Returns::Rows),
                _ => op.result_schema.clone().map(Returns::Schema),
            }
        }
        (_, _) => None,
    }
}

/// The result column names of a `SELECT` (alias, or the last part of a column reference), or
/// `None` when they cannot be told from the text (`*`, no `FROM`).
pub fn select_columns(sql: &str) -> Option<Vec<String>> {
    let upper = sql.to_ascii_uppercase();
    let start = upper.find("SELECT")? + "SELECT".len();
    let mut depth = 0usize;
    let mut items = Vec::new();
    let mut current = String::new();
    let bytes: Vec<char> = sql[start..].chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let rest_upper: String = bytes[i..bytes.len().min(i + 6)]
            .iter()
            .collect::<String>()
            .to_ascii_uppercase();
        if depth == 0 && rest_upper.starts_with("FROM") && current.ends_with(char::is_whitespace) {
            items.push(current.trim().to_string());
            current.clear();
            break;
        }
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(current.trim().to_string());
                current.clear();
                i += 1;
                continue;
            }
            _ => {}
        }
        current.push(c);
        i += 1;
    }
    if !current.trim().is_empty() || items.is_empty() {
        return None; // no FROM found
    }
    let mut out = Vec::new();
    for item in items {
        let words: Vec<&str> = item.split_whitespace().collect();
        let last = match words.as_slice() {
            [] => return None,
            [.., as_kw, alias] if as_kw.eq_ignore_ascii_case("as") => *alias,
            [single] => single.rsplit('.').next().unwrap_or(single),
            [.., alias] => *alias,
        };
        let col = last.trim_matches(|c| c == '"' || c == '`' || c == '[' || c == ']');
        if col == "*" || col.is_empty() {
            return None;
        }
        out.push(col.to_string());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_of_a_select() {
        assert_eq!(
            select_columns("SELECT id, title, owner FROM records WHERE id = :id"),
            Some(vec!["id".into(), "title".into(), "owner".into()])
        );
        assert_eq!(
            select_columns("select r.id, count(x) AS n, upper(r.t) label from r"),
            Some(vec!["id".into(), "n".into(), "label".into()])
        );
        assert_eq!(select_columns("SELECT * FROM t"), None);
        assert_eq!(select_columns("SELECT 1"), None);
    }
}
