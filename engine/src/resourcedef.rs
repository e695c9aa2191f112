//! Static descriptions of a server's resources and prompts, as generated code declares them.

use crate::tooldef::ToolDef;

/// A resource: a fixed URI or a URI template, read through a hidden read tool (so a read is
/// admitted, raises the session and is audited like a tool call).
#[derive(Debug)]
pub struct ResourceDef {
    /// Name.
    pub name: &'static str,
    /// URI, or URI template with `{variable}` parts (the tool's arguments).
    pub uri: &'static str,
    /// Description for the model.
    pub description: &'static str,
    /// Media type of the contents.
    pub mime_type: Option<&'static str>,
    /// Whether `uri` is a template.
    pub template: bool,
    /// The read it performs (`resource:<name>`; never listed or callable as a tool).
    pub tool: ToolDef,
}

impl ResourceDef {
    /// The template's arguments when `uri` matches it (`records://{id}` and `records://17` give
    /// `id = "17"`); `None` when it does not match. A variable matches one or more characters
    /// other than `/`.
    pub fn matches(&self, uri: &str) -> Option<Vec<(&'static str, String)>> {
        let mut vars = Vec::new();
        let mut pattern = self.uri;
        let mut rest = uri;
        loop {
            match pattern.find('{') {
                None => return (pattern == rest).then_some(vars),
                Some(open) => {
                    let (lit, after) = pattern.split_at(open);
                    rest = rest.strip_prefix(lit)?;
                    let close = after.find('}')?;
                    let name = &after[1..close];
                    pattern = &after[close + 1..];
                    let next = pattern.chars().next();
                    let end = rest
                        .find(|c: char| c == '/' || Some(c) == next)
                        .unwrap_or(rest.len());
                    if end == 0 {
                        return None;
                    }
                    vars.push((name, rest[..end].to_string()));
                    rest = &rest[end..];
                }
            }
        }
    }
}

/// A prompt: messages with `{argument}` placeholders.
#[derive(Debug)]
pub struct PromptDef {
    /// Name.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// Arguments.
    pub arguments: &'static [PromptArgDef],
    /// Messages, in order.
    pub messages: &'static [PromptMessageDef],
}

/// One prompt argument.
#[derive(Debug)]
pub struct PromptArgDef {
    /// Name.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// Whether callers must give it.
    pub required: bool,
}

/// Who says a prompt message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptRole {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

/// One prompt message.
#[derive(Debug)]
pub struct PromptMessageDef {
    /// Who says it.
    pub role: PromptRole,
    /// The text, with `{argument}` placeholders.
    pub text: &'static str,
}

impl PromptDef {
    /// The messages with every placeholder filled; the error names a missing required argument.
    pub fn render(
        &self,
        args: &std::collections::BTreeMap<String, String>,
    ) -> Result<Vec<(PromptRole, String)>, String> {
        for a in self.arguments.iter().filter(|a| a.required) {
            if !args.contains_key(a.name) {
                return Err(format!(
                    "prompt `{}` needs the argument `{}`",
                    self.name, a.name
                ));
            }
        }
        if let Some(k) = args
            .keys()
            .find(|k| !self.arguments.iter().any(|a| a.name == k.as_str()))
        {
            return Err(format!("prompt `{}` has no argument `{k}`", self.name));
        }
        Ok(self
            .messages
            .iter()
            .map(|m| {
                let mut text = m.text.to_string();
                for a in self.arguments {
                    text = text.replace(
                        &format!("{{{}}}", a.name),
                        args.get(a.name).map_or("", String::as_str),
                    );
                }
                (m.role, text)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Permission, Sensitivity};
    use crate::tooldef::{Annotations, Target};

    fn res(uri: &'static str) -> ResourceDef {
        ResourceDef {
            name: "r",
            uri,
            description: "",
            mime_type: None,
            template: true,
            tool: ToolDef {
                name: "resource:r",
                title: None,
                description: "",
                permission: Permission::Read,
                context: "default",
                sensitivity: Sensitivity::Public,
                annotations: Annotations {
                    read_only: true,
                    destructive: false,
                    idempotent: true,
                    open_world: false,
                },
                input_schema: "{}",
                output_schema: None,
                dataset: "r",
                rate_limit: None,
                approval: None,
                inspection: crate::tooldef::Inspection::On,
                bound: &[],
                target: Target::Static(""),
            },
        }
    }

    #[test]
    fn templates_match_and_bind_their_variables() {
        let r = res("records://{id}");
        assert_eq!(r.matches("records://17"), Some(vec![("id", "17".into())]));
        assert_eq!(r.matches("records://"), None);
        assert_eq!(r.matches("records://1/2"), None);
        assert_eq!(r.matches("other://1"), None);
        let r = res("logs://{day}/{level}.log");
        assert_eq!(
            r.matches("logs://2026-11-23/warn.log"),
            Some(vec![("day", "2026-11-23".into()), ("level", "warn".into())])
        );
        assert_eq!(res("docs://guide").matches("docs://guide"), Some(vec![]));
    }
}
