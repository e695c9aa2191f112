//! The row strategy for CSV, TSV and markdown tables: header, head rows, a marker, tail rows.

use super::detect::is_markdown_separator;
use super::text::{Collector, marker};
use super::{Body, Omitted, Totals};

/// Header line(s) (two for markdown: names and `|---|`), then `head` and `tail` rows.
pub(crate) fn rows_body(c: &Collector, head: usize, tail: usize) -> Body {
    let n = c.total();
    let header: u64 = match c.head() {
        [] => 0,
        [_, sep, ..] if is_markdown_separator(sep.text()) => 2,
        _ => 1,
    };
    let rows = n - header;
    let (h, t) = (head as u64, tail as u64);
    let mut text = String::new();
    let mut omitted = Omitted::default();
    if rows <= h + t {
        c.emit(0, n, &mut text, &mut omitted);
    } else {
        omitted.rows = rows - h - t;
        c.emit(0, header + h, &mut text, &mut omitted);
        marker(&mut text, omitted.rows, "rows");
        c.emit(n - t, n, &mut text, &mut omitted);
    }
    let totals = Totals {
        rows,
        ..Totals::default()
    };
    Body {
        text,
        omitted,
        totals,
    }
}

/// One CSV record (RFC 4180 quoting where needed), without line ending.
pub(crate) fn csv_record(fields: &[&str]) -> String {
    let mut out = String::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if field.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(field);
        }
    }
    out
}
