//! The process environment as `${VAR}` expansion sees it: `VAR`, or else the contents of the file
//! named by `VAR_FILE` (how compose and Kubernetes pass secrets: a mounted file, never a value in
//! the deployment files).

/// Largest secret file read, in bytes.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// `VAR`'s value; when unset, the contents of the file `VAR_FILE` names (one trailing newline
/// removed). A `VAR_FILE` that cannot be read counts as unset and is logged.
pub fn lookup(name: &str) -> Option<String> {
    if let Ok(v) = std::env::var(name) {
        return Some(v);
    }
    let path = std::env::var(format!("{name}_FILE")).ok()?;
    match read(&path) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(var = %name, file = %path, error = %e, "cannot read the variable's file");
            None
        }
    }
}

/// The egress proxy this process is given (`HTTPS_PROXY`, then `HTTP_PROXY`, either case), as
/// `host:port`. The http connector (through reqwest), the postgres connector's tunnel, the
/// jails' gates and the isolation self-check all go by it.
pub fn egress_proxy() -> Option<String> {
    egress_proxy_in(&lookup)
}

/// [`egress_proxy`] as `lookup` sees the environment.
pub fn egress_proxy_in(lookup: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let url = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
        .iter()
        .find_map(|k| lookup(k).filter(|v| !v.is_empty()))?;
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    Some(rest.trim_end_matches('/').to_string())
}

/// The variables `${…}` references in `text` (`${NAME}`, `${NAME:-default}`, …).
pub fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        rest = &rest[i + 2..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end > 0 {
            out.push(rest[..end].to_string());
        }
        rest = &rest[end..];
    }
    out
}

/// Of `secrets` (variable names that carry credentials), those set as plain environment
/// variables rather than read from a file (`<VAR>_FILE`): any process started with this
/// environment, and anyone who can read `/proc/<pid>/environ` of this one, sees them.
pub fn plain_secrets<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = secrets
        .into_iter()
        .filter(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
        .collect();
    out.sort();
    out.dedup();
    out
}

fn read(path: &str) -> Result<String, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    if let Some(t) = text.strip_suffix('\n') {
        let t = t.strip_suffix('\r').unwrap_or(t);
        return Ok(t.to_string());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_stands_in_for_an_unset_variable() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "s3cret\n").unwrap();
        // Names no other test uses; set once (tests in this binary share the environment).
        // SAFETY: no other thread reads or writes these variables (names used nowhere else).
        unsafe {
            std::env::set_var("BH_ENVTEST_TOKEN_FILE", &f);
            std::env::set_var("BH_ENVTEST_BOTH", "direct");
            std::env::set_var("BH_ENVTEST_BOTH_FILE", &f);
            std::env::set_var("BH_ENVTEST_MISSING_FILE", dir.path().join("nope"));
        }
        assert_eq!(lookup("BH_ENVTEST_TOKEN").as_deref(), Some("s3cret"));
        assert_eq!(lookup("BH_ENVTEST_BOTH").as_deref(), Some("direct"));
        assert_eq!(lookup("BH_ENVTEST_MISSING"), None);
        assert_eq!(lookup("BH_ENVTEST_NEVER_SET"), None);
    }
}
