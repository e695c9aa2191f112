//! A handler module against its spec: a method left behind by a removed (or renamed) tool is a
//! diagnostic at the method, in the build's words, before rustc sees the generated code.

use std::path::Path;

fn project(dir: &Path, handlers: &str) {
    std::fs::create_dir_all(dir.join("specs/servers")).unwrap();
    std::fs::create_dir_all(dir.join("src/handlers")).unwrap();
    std::fs::write(
        dir.join("specs/servers/desk.yaml"),
        "name: desk\ninstructions: Help desk.\ntools:\n  lookup:\n    description: Look a ticket up.\n    permission: read\n    context: default\n    sensitivity: internal\n    handler: rust\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/handlers/mod.rs"), "pub mod desk;\n").unwrap();
    std::fs::write(dir.join("src/handlers/desk.rs"), handlers).unwrap();
}

const TWO_METHODS: &str = "\
use crate::servers::desk::{CloseTicketArgs, Handlers, LookupArgs};

pub struct Desk;

impl Handlers for Desk {
    async fn lookup(&self, cx: ToolContext, args: LookupArgs) -> ToolResult {
        todo()
    }

    async fn close_ticket(&self, cx: ToolContext, args: CloseTicketArgs) -> ToolResult {
        todo()
    }
}
";

#[test]
fn a_method_of_a_removed_tool_is_reported_at_the_method() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), TWO_METHODS);
    let model = bulkhead_codegen::load(&dir.path().join("specs"), dir.path()).expect("specs load");
    let err = bulkhead_codegen::check_handler_modules(dir.path(), &model)
        .expect_err("the leftover method is refused");
    let text = err.to_string();
    assert!(
        text.contains("error: `close_ticket` handles no tool of server `desk`"),
        "{text}"
    );
    assert!(text.contains("src/handlers/desk.rs:10:14"), "{text}");
    assert!(text.contains("delete this method"), "{text}");
    assert!(!text.contains("`lookup`"), "{text}");
}

#[test]
fn a_module_whose_methods_all_have_tools_passes() {
    let dir = tempfile::tempdir().unwrap();
    let one = TWO_METHODS.replace(
        "\n    async fn close_ticket(&self, cx: ToolContext, args: CloseTicketArgs) -> ToolResult {\n        todo()\n    }\n",
        "",
    );
    project(dir.path(), &one);
    let model = bulkhead_codegen::load(&dir.path().join("specs"), dir.path()).expect("specs load");
    bulkhead_codegen::check_handler_modules(dir.path(), &model).expect("nothing left behind");
}
