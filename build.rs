//! Generates this project's servers from `specs/` (the generator, `bulkhead-codegen`).

fn main() {
    bulkhead_codegen::build();
}
