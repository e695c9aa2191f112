//! What a PostgreSQL statement may not call when it runs in a `READ ONLY` transaction. `READ
//! ONLY` stops writes to tables, but these functions act outside the transaction or outlive it:
//! a notification other sessions receive (`pg_notify`), a setting that stays on the pooled
//! connection (`set_config(…, false)`), advisory locks other sessions wait on, remote or
//! administrative effects. One home for the rule: `bulkhead check` and the build refuse such a
//! read operation, and the runtime's postgres connector refuses to start with one. A function
//! that wraps them is beyond a text check: the database role of a read connector is the real
//! boundary (docs/specs.md, "PostgreSQL connector: the read role").
//!
//! Also the one home of "does this statement write": [`writes`] decides whether an operation is
//! a read (a `read` tool may use it) from the statement's words, not its first word only, so a
//! data-modifying CTE (`WITH d AS (DELETE … RETURNING …) SELECT …`) counts as a write.
//! Both read the statement through one lexer ([`words`]) that skips comments, string literals
//! (standard, `E'…'` with backslash escapes, dollar-quoted) and keeps quoted identifiers.

/// Functions refused by name (lowercase, without schema).
const FORBIDDEN: &[&str] = &[
    "pg_notify",
    "set_config",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_logical_emit_message",
    "pg_file_write",
    "lo_import",
    "lo_export",
    "pg_switch_wal",
    "pg_create_restore_point",
    "pg_stat_statements_reset",
];

/// Function name prefixes refused (advisory locks of every kind, dblink, stats resets).
const FORBIDDEN_PREFIXES: &[&str] = &[
    "pg_create_logical_replication_slot",
    "pg_create_physical_replication_slot",
    "pg_drop_replication_slot",
    "pg_advisory_",
    "pg_try_advisory_",
    "dblink",
    "pg_stat_reset",
];

/// One significant token of a statement: a word (keyword or identifier; lowercased unless it
/// was quoted) or a punctuation character. Whitespace, comments and literals are dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    /// An identifier or keyword. `quoted` for `"…"` (kept as written) and `U&"…"` (kept with
    /// its prefix: its escapes can spell any name, so callers treat it as unknown).
    Word {
        /// The word, lowercased when unquoted.
        text: String,
        /// Whether it was a quoted identifier.
        quoted: bool,
    },
    /// Any other character outside literals (`(`, `;`, `.`, `,` …).
    Punct(char),
    /// A string literal as written, prefix and quotes (or dollar tags) included. Calls and
    /// writes never hide in one; what a statement does may (`WHERE tenant = 'acme'`).
    Literal(String),
}

/// The tokens of `sql`, in order.
pub fn words(sql: &str) -> Vec<Token> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    // Skips a '…' literal starting at the quote `at`; `backslash`: `E'…'`, where `\'` escapes.
    let skip_string = |mut i: usize, backslash: bool| -> usize {
        i += 1;
        while i < b.len() {
            if backslash && b[i] == b'\\' {
                i += 2;
                continue;
            }
            if b[i] == b'\'' {
                if b.get(i + 1) == Some(&b'\'') {
                    i += 2;
                    continue;
                }
                return i + 1;
            }
            i += 1;
        }
        b.len()
    };
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            // Nested block comments, as PostgreSQL reads them.
            let mut depth = 0usize;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            continue;
        }
        if c == b'\'' {
            let end = skip_string(i, false);
            out.push(Token::Literal(sql[i..end].to_string()));
            i = end;
            continue;
        }
        if c == b'$' {
            let tag_end = b[i + 1..]
                .iter()
                .position(|&x| !(x.is_ascii_alphanumeric() || x == b'_'))
                .map(|p| i + 1 + p);
            if let Some(e) = tag_end.filter(|&e| b.get(e) == Some(&b'$')) {
                let tag = &sql[i..=e];
                let end = match sql[e + 1..].find(tag) {
                    Some(p) => e + 1 + p + tag.len(),
                    None => b.len(),
                };
                out.push(Token::Literal(sql[i..end].to_string()));
                i = end;
                continue;
            }
        }
        if c == b'"' {
            let (text, end) = quoted(sql, i);
            out.push(Token::Word { text, quoted: true });
            i = end;
            continue;
        }
        // Identifiers: letters, digits, `_`, `$`, and (as PostgreSQL reads them) any non-ASCII
        // byte, so `xé'…'` is one word followed by a string, never an `E'…'` literal.
        if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let mut e = i;
            while e < b.len()
                && (b[e].is_ascii_alphanumeric() || b[e] == b'_' || b[e] == b'$' || b[e] >= 0x80)
            {
                e += 1;
            }
            let word = sql[i..e].to_ascii_lowercase();
            let start = i;
            let literal = move |out: &mut Vec<Token>, end: usize| {
                out.push(Token::Literal(sql[start..end].to_string()));
                end
            };
            match (word.as_str(), b.get(e)) {
                // E'…' (and the B, X, N, U& prefixes): a literal, not a word.
                ("e", Some(b'\'')) => i = literal(&mut out, skip_string(e, true)),
                ("b" | "x" | "n", Some(b'\'')) => i = literal(&mut out, skip_string(e, false)),
                ("u", Some(b'&')) if b.get(e + 1) == Some(&b'\'') => {
                    i = literal(&mut out, skip_string(e + 1, false))
                }
                ("u", Some(b'&')) if b.get(e + 1) == Some(&b'"') => {
                    let (text, end) = quoted(sql, e + 1);
                    out.push(Token::Word {
                        text: format!("U&\"{text}\""),
                        quoted: true,
                    });
                    i = end;
                }
                _ => {
                    out.push(Token::Word {
                        text: word,
                        quoted: false,
                    });
                    i = e;
                }
            }
            continue;
        }
        if c.is_ascii() {
            out.push(Token::Punct(char::from(c)));
        }
        i += 1;
    }
    out
}

/// A `"…"` identifier at `at` (`""` is a quote): its text and the index after it.
fn quoted(sql: &str, at: usize) -> (String, usize) {
    let b = sql.as_bytes();
    let mut text = String::new();
    let mut i = at + 1;
    while i < b.len() {
        if b[i] == b'"' {
            if b.get(i + 1) == Some(&b'"') {
                text.push('"');
                i += 2;
                continue;
            }
            return (text, i + 1);
        }
        let ch = sql[i..].chars().next().unwrap_or('?');
        text.push(ch);
        i += ch.len_utf8();
    }
    (text, b.len())
}

/// The forbidden functions `sql` calls, in order of first appearance (outside string literals and
/// comments, whatever whitespace or comments stand before the `(`; a quoted identifier counts as
/// its name; a schema qualifier is ignored). A `U&"…"` identifier called as a function is
/// reported as itself: its escapes could spell any of them.
pub fn side_effects(sql: &str) -> Vec<String> {
    let tokens = words(sql);
    let mut found: Vec<String> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let Token::Word { text, .. } = t else {
            continue;
        };
        if tokens.get(i + 1) != Some(&Token::Punct('(')) {
            continue;
        }
        let name = text.clone(); // unquoted words are lowercase already
        let forbidden = text.starts_with("U&")
            || FORBIDDEN.contains(&name.as_str())
            || FORBIDDEN_PREFIXES.iter().any(|p| name.starts_with(p));
        if forbidden && !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

/// Statements that only read (the first word of a statement).
const READ_STATEMENTS: &[&str] = &["select", "with", "values", "table", "explain", "show"];

/// Words that change data wherever they stand as a statement's verb: after `(` (a
/// data-modifying CTE), after a CTE list, after `CYCLE … USING …`. Read anywhere, except as a
/// function's name (`replace(…)`) or a qualified name (`t.update`): fail closed.
const DML: &[&str] = &["insert", "update", "delete", "merge", "replace", "upsert"];

/// Whether `sql` may change anything: a statement (first, or after `;`) that is not a read; a
/// DML statement nested after `(` (a data-modifying CTE); `EXPLAIN ANALYZE` of a write (it runs
/// it); `SELECT … INTO` (creates a table); a row lock (`FOR UPDATE`/`FOR SHARE`, refused in a
/// read-only transaction and held against writers).
pub fn writes(sql: &str) -> bool {
    let tokens = words(sql);
    let word = |i: usize| match tokens.get(i) {
        Some(Token::Word {
            text,
            quoted: false,
        }) => Some(text.as_str()),
        _ => None,
    };
    let mut start = true;
    let mut explain = false;
    let mut in_select = false;
    for i in 0..tokens.len() {
        match &tokens[i] {
            Token::Punct(';') => {
                start = true;
                in_select = false;
                continue;
            }
            Token::Punct('(') => {
                if word(i + 1).is_some_and(|w| DML.contains(&w)) {
                    return true;
                }
                continue;
            }
            Token::Punct(_) | Token::Literal(_) => continue,
            Token::Word { .. } => {}
        }
        let Some(w) = word(i) else {
            start = false;
            continue;
        };
        if start || explain {
            if explain && matches!(w, "analyze" | "analyse" | "verbose") {
                continue;
            }
            if !READ_STATEMENTS.contains(&w) {
                return true;
            }
            explain = w == "explain";
            in_select = w == "select";
            start = false;
            continue;
        }
        if w == "select" {
            in_select = true;
        }
        if in_select && w == "into" {
            return true;
        }
        if w == "for" && matches!(word(i + 1), Some("update" | "share" | "no" | "key")) {
            return true;
        }
        if DML.contains(&w)
            && tokens.get(i + 1) != Some(&Token::Punct('('))
            && tokens.get(i.wrapping_sub(1)) != Some(&Token::Punct('.'))
        {
            // A verb that is not a call or a column: `WITH a AS (…) DELETE …`, `… USING p DELETE …`.
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{side_effects, writes};

    #[test]
    fn calls_are_found_and_text_is_not() {
        assert_eq!(
            side_effects("SELECT pg_notify('c', :m), Set_Config ('x','y',false) FROM t"),
            ["pg_notify", "set_config"]
        );
        assert_eq!(
            side_effects("SELECT pg_catalog.pg_advisory_lock(1), \"pg_try_advisory_xact_lock\"(2)"),
            ["pg_advisory_lock", "pg_try_advisory_xact_lock"]
        );
        assert!(
            side_effects("SELECT 'pg_notify(x)' AS s -- pg_notify(y)\n FROM t /* set_config( */")
                .is_empty()
        );
        assert!(side_effects("SELECT $q$ pg_notify('a','b') $q$, $1").is_empty());
        assert!(
            side_effects("SELECT name, pg_notify_count FROM t WHERE set_config_x = 1").is_empty()
        );
        assert_eq!(side_effects("SELECT dblink_exec('x')"), ["dblink_exec"]);
    }

    /// The bypasses a review found: a comment before the `(`, an `E'…'` string whose `\'`
    /// hides a call, a unicode-escaped identifier.
    #[test]
    fn comments_escapes_and_unicode_identifiers_do_not_hide_a_call() {
        assert_eq!(
            side_effects("SELECT pg_notify/**/('c', :name)"),
            ["pg_notify"]
        );
        assert_eq!(
            side_effects("SELECT pg_notify -- x\n ('c', :name)"),
            ["pg_notify"]
        );
        assert_eq!(
            side_effects("SELECT 1 WHERE E'\\'' <> set_config('role','x',false) -- '"),
            ["set_config"]
        );
        assert_eq!(
            side_effects("SELECT U&\"pg\\005Fnotify\"('c','m')"),
            ["U&\"pg\\005Fnotify\""]
        );
        assert!(side_effects("SELECT E'it\\'s pg_notify(x)' AS s").is_empty());
        // A non-ASCII identifier char before the quote makes no `E'…'` literal of it.
        assert_eq!(
            side_effects("SELECT xé'\\', pg_notify('c','m') -- '"),
            ["pg_notify"]
        );
    }

    #[test]
    fn writes_are_found_wherever_a_statement_starts() {
        for read in [
            "SELECT id FROM t WHERE name = :n",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "EXPLAIN SELECT 1",
            "VALUES (1)",
            "SELECT 'delete from t' AS s -- ; drop table t",
            "SELECT \"update\" FROM t",
            "SELECT count(*) FROM t WHERE deleted = false",
            "SELECT replace(title, 'a', 'b'), t.update FROM t",
        ] {
            assert!(!writes(read), "{read}");
        }
        for write in [
            "DELETE FROM t",
            "WITH d AS (DELETE FROM t RETURNING id) SELECT * FROM d",
            "WITH d AS ( /* c */ UPDATE t SET a = 1 RETURNING a) SELECT a FROM d",
            "WITH a AS (SELECT 1) DELETE FROM t",
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n<2) CYCLE n SET c USING p DELETE FROM t",
            "WITH a AS (SELECT 1) REPLACE INTO t VALUES (1)",
            "SELECT 1; DROP TABLE t",
            "EXPLAIN ANALYZE DELETE FROM t",
            "SELECT * INTO copy FROM t",
            "SELECT * FROM t FOR UPDATE",
            "select * from t for no key update",
            "COPY t TO '/tmp/x'",
            "CALL p()",
            "SET role = x",
        ] {
            assert!(writes(write), "{write}");
        }
    }
}
