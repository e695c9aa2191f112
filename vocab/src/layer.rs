//! Names of the per-mode workspace layers (folders under the workspaces root).

use crate::NetworkMode;

/// The folder of `server`'s workspaces written by an instance in `mode`: `<server>` for
/// `full`, `<server>.<mode>` otherwise. The runtime resolves it under its workspaces root;
/// the deployment emitters mount it as a volume of that name.
pub fn workspace_layer(server: &str, mode: NetworkMode) -> String {
    match mode {
        NetworkMode::Full => server.to_string(),
        other => format!("{server}.{}", other.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_is_the_bare_name() {
        assert_eq!(workspace_layer("template", NetworkMode::Full), "template");
        assert_eq!(
            workspace_layer("template", NetworkMode::Proxied),
            "template.proxied"
        );
        assert_eq!(workspace_layer("crm", NetworkMode::None), "crm.none");
    }
}
