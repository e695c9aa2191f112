//! Diagnostics: every spec error has a file, a line, a column and a label, rendered like rustc.

use crate::source::{SourceFile, Span};
use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use std::fmt;
use std::sync::Arc;

/// One problem found in a spec, with where it is and how to fix it.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    /// The headline, lowercase, no final period.
    pub message: String,
    /// The file as shown to users.
    pub path: String,
    /// The file's text (shared, not copied per diagnostic).
    pub text: Arc<str>,
    /// Where.
    pub span: Span,
    /// A short label under the caret.
    pub label: String,
    /// A hint that says how to fix it.
    pub help: Option<String>,
    /// An error stops the build; a warning is reported and the build goes on.
    pub warning: bool,
}

impl Diagnostic {
    /// An error at `span` in `file`.
    pub fn error(file: &SourceFile, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            path: file.display.clone(),
            text: file.text.clone(),
            span,
            label: String::new(),
            help: None,
            warning: false,
        }
    }

    /// A warning at `span` in `file` (reported; the build goes on).
    pub fn warning(file: &SourceFile, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            warning: true,
            ..Diagnostic::error(file, span, message)
        }
    }

    /// Sets the label under the caret.
    pub fn label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    /// Adds a help line.
    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// `path:line:col`, the location every diagnostic starts with.
    pub fn location(&self) -> String {
        format!("{}:{}:{}", self.path, self.span.line, self.span.col)
    }

    /// Renders the diagnostic like rustc, without colour (deterministic, for golden tests and logs).
    pub fn render(&self) -> String {
        let text: &str = &self.text;
        let line = self.span.line.max(1);
        let range = line_range(text, line);
        let source = &text[range.clone()];
        let start = self.span.start.clamp(range.start, range.end) - range.start;
        let end = self.span.end.clamp(range.start, range.end) - range.start;
        let end = if end <= start {
            // One whole character, so a caret never splits a multibyte one.
            start + source[start..].chars().next().map_or(1, char::len_utf8)
        } else {
            end
        };
        let snippet = Snippet::source(source)
            .line_start(line)
            .path(self.path.as_str())
            .annotation(
                AnnotationKind::Primary
                    .span(start..end)
                    .label(self.label.as_str()),
            );
        let mut report: Vec<Group<'_>> = vec![
            if self.warning {
                Level::WARNING
            } else {
                Level::ERROR
            }
            .primary_title(self.message.as_str())
            .element(snippet),
        ];
        if let Some(help) = &self.help {
            report.push(Group::with_title(
                Level::HELP.secondary_title(help.as_str()),
            ));
        }
        Renderer::plain().render(&report).to_string()
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

fn line_range(text: &str, line: usize) -> std::ops::Range<usize> {
    let mut start = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return start..start + l.trim_end_matches(['\n', '\r']).len();
        }
        start += l.len();
    }
    text.len()..text.len()
}

/// All diagnostics of one run, sorted by file and position.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Sorts by file, line, column, message so output is stable.
    pub fn sorted(mut self) -> Diagnostics {
        self.0
            .sort_by(|a, b| (&a.path, a.span, &a.message).cmp(&(&b.path, b.span, &b.message)));
        self.0
            .dedup_by(|a, b| a.path == b.path && a.span == b.span && a.message == b.message);
        self
    }

    /// Renders every diagnostic, then a summary line like rustc's.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for d in &self.0 {
            out.push_str(&d.render());
            out.push_str("\n\n");
        }
        let n = self.0.len();
        out.push_str(&format!(
            "error: could not generate servers due to {n} previous error{}\n",
            if n == 1 { "" } else { "s" }
        ));
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for Diagnostics {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_span_before_a_multibyte_char_underlines_the_whole_char() {
        let file = SourceFile::in_memory("x.yaml", "name: é\n");
        let span = Span {
            line: 1,
            col: 7,
            start: 6,
            end: 6,
        };
        let text = Diagnostic::error(&file, span, "bad name")
            .label("here")
            .render();
        assert!(
            text.starts_with("error: bad name\n --> x.yaml:1:7\n"),
            "{text}"
        );
        assert!(text.contains("1 | name: é\n  |       ^ here"), "{text}");
    }

    #[test]
    fn summary_counts_errors() {
        assert!(
            Diagnostics::default()
                .render()
                .ends_with("due to 0 previous errors\n")
        );
    }
}
