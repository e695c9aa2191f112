//! What a PostgreSQL statement may not call when it runs in a `READ ONLY` transaction. `READ
//! ONLY` stops writes to tables, but these functions act outside the transaction or outlive it:
//! a notification other sessions receive (`pg_notify`), a setting that stays on the pooled
//! connection (`set_config(…, false)`), advisory locks other sessions wait on, remote or
//! administrative effects. One home for the rule: `bulkhead check` and the build refuse such a
//! read operation, and the runtime's postgres connector refuses to start with one. A function
//! that wraps them is beyond a text check: the database role of a read connector is the real
//! boundary (README, "PostgreSQL connector").

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
];

/// Function name prefixes refused (advisory locks of every kind, dblink, stats resets).
const FORBIDDEN_PREFIXES: &[&str] = &[
    "pg_advisory_",
    "pg_try_advisory_",
    "dblink",
    "pg_stat_reset",
];

/// The forbidden functions `sql` calls, in order of first appearance (outside string literals and
/// comments; a quoted identifier counts as its name; a schema qualifier is ignored).
pub fn side_effects(sql: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        // Comments and string literals (including dollar-quoted ones) hold no calls.
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        if c == b'\'' {
            i += 1;
            while i < b.len() {
                if b[i] == b'\'' {
                    if b.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c == b'$' {
            let tag_end = b[i + 1..]
                .iter()
                .position(|&x| !(x.is_ascii_alphanumeric() || x == b'_'))
                .map(|p| i + 1 + p);
            if let Some(e) = tag_end.filter(|&e| b.get(e) == Some(&b'$')) {
                let tag = &sql[i..=e];
                match sql[e + 1..].find(tag) {
                    Some(p) => i = e + 1 + p + tag.len(),
                    None => i = b.len(),
                }
                continue;
            }
        }
        // An identifier, plain or quoted, followed by `(` is a call.
        let (name, end) = if c == b'"' {
            let close = sql[i + 1..].find('"').map_or(b.len(), |p| i + 1 + p);
            (sql[i + 1..close.min(b.len())].to_string(), close + 1)
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let mut e = i;
            while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'_' || b[e] == b'$') {
                e += 1;
            }
            (sql[i..e].to_ascii_lowercase(), e)
        } else {
            i += 1;
            continue;
        };
        let mut next = end;
        while next < b.len() && b[next].is_ascii_whitespace() {
            next += 1;
        }
        if b.get(next) == Some(&b'(')
            && (FORBIDDEN.contains(&name.as_str())
                || FORBIDDEN_PREFIXES.iter().any(|p| name.starts_with(p)))
            && !found.contains(&name)
        {
            found.push(name);
        }
        i = end.max(i + 1);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::side_effects;

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
}
