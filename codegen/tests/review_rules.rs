//! The catalogue of the review's rules, `docs/review-rules.md`, keeps up with [`Rule::ALL`]: a
//! section per rule with its description word for word and an example line, and no other rule.

use bulkhead_codegen::review::Rule;

const DOC: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../docs/review-rules.md"
));

#[test]
fn the_docs_name_every_rule_with_its_description_and_an_example() {
    let mut missing = Vec::new();
    for r in Rule::ALL {
        let name = r.name();
        let Some(at) = DOC.find(&format!("\n## `{name}`\n")) else {
            missing.push(format!("{name}: no `## `{name}`` section"));
            continue;
        };
        let section = &DOC[at + 1..];
        let section = &section[..section[1..].find("\n## ").map_or(section.len(), |e| e + 1)];
        if !section.contains(r.describe()) {
            missing.push(format!(
                "{name}: its section lacks the description `{}`",
                r.describe()
            ));
        }
        if !section.lines().any(|l| l.starts_with(&format!("{name}: "))) {
            missing.push(format!(
                "{name}: its section has no example line `{name}: …`"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/review-rules.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_docs_name_no_other_rule() {
    for line in DOC.lines() {
        if let Some(name) = line.strip_prefix("## `").and_then(|l| l.strip_suffix('`')) {
            assert!(
                Rule::parse(name).is_some(),
                "docs/review-rules.md: `{name}` is no rule"
            );
        }
    }
}
