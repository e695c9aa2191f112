//! Context presets and truncation: golden previews per preset × kind, detection, omitted
//! counts, the hard cap, chunk splitting, and stream/one-value agreement.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use bulkhead::context::{
    ContentKind, Preset, PresetOverride, Presets, Strategy, StreamPreview, detect, render_saved,
    truncate_json, truncate_text,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

// ---------- deterministic inputs ----------

fn json_array() -> String {
    let items: Vec<Value> = (0..300)
        .map(
            |i| json!({"id": i, "name": format!("item-{i}"), "tags": ["a", "b"], "ok": i % 3 == 0}),
        )
        .collect();
    serde_json::to_string_pretty(&Value::Array(items)).unwrap()
}

fn json_many_keys() -> String {
    let mut map = serde_json::Map::new();
    for i in 0..300 {
        map.insert(
            format!("key_{i:03}"),
            json!(format!("value number {i} of many")),
        );
    }
    serde_json::to_string_pretty(&Value::Object(map)).unwrap()
}

fn deep_json_value() -> Value {
    let mut v = json!({"leaf": true, "numbers": (0..40).collect::<Vec<_>>()});
    for level in (0..10).rev() {
        v = json!({"level": level, "child": v, "numbers": (0..40).collect::<Vec<_>>()});
    }
    json!({"note": "n".repeat(11_000), "tree": v})
}

fn deep_json() -> String {
    serde_json::to_string_pretty(&deep_json_value()).unwrap()
}

fn table(delim: &str, rows: usize) -> String {
    let mut s = ["id", "name", "email", "score"].join(delim);
    for i in 0..rows {
        let _ = write!(
            s,
            "\n{i}{delim}user {i}{delim}user{i}@example.com{delim}{}",
            (i * 37) % 101
        );
    }
    s
}

fn markdown(rows: usize) -> String {
    let mut s = String::from("| id | name | score |\n|---:|:-----|------:|");
    for i in 0..rows {
        let _ = write!(s, "\n| {i} | user {i} | {} |", (i * 37) % 101);
    }
    s
}

fn log(lines: usize) -> String {
    let levels = ["INFO", "WARN", "ERROR", "DEBUG"];
    (0..lines)
        .map(|i| {
            format!(
                "2024-05-01T12:{:02}:{:02}Z {} service[42]: request {i} handled in {}ms",
                (i / 60) % 60,
                i % 60,
                levels[i % 4],
                (i * 7) % 250
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn prose(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("Line {i} of the plain text: the quick brown fox jumps over the lazy dog"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Plain text of exactly `n` chars: 59-char lines and a newline each, then filler.
fn text_of(n: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() + 60 <= n {
        let _ = writeln!(
            s,
            "{:<59}",
            format!("line {i} of a text that has an exact size")
        );
        i += 1;
    }
    s.push_str(&"z".repeat(n - s.len()));
    s
}

fn cases(p: &Preset) -> Vec<(&'static str, String)> {
    vec![
        ("json_array", json_array()),
        ("json_many_keys", json_many_keys()),
        ("json_deep", deep_json()),
        ("csv", table(",", 1200)),
        ("tsv", table("\t", 1200)),
        ("markdown", markdown(500)),
        ("log", log(1000)),
        ("text", prose(800)),
        ("long_line", "abcdefghij".repeat(20_000)),
        ("empty", String::new()),
        ("at_threshold", text_of(p.threshold_chars)),
        ("threshold_plus_one", text_of(p.threshold_chars + 1)),
    ]
}

fn presets() -> Presets {
    Presets::builtin()
}

// ---------- golden files ----------

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/context")
}

fn rendered(p: &Preset, case: &str, input: &str) -> String {
    match truncate_text(p, input) {
        None => format!("(unchanged: {} chars)\n", input.chars().count()),
        Some(preview) => {
            let mut out = render_saved(&preview, &format!("/workspace/results/{case}.txt"));
            out.push('\n');
            out
        }
    }
}

/// Compares against the golden file, or rewrites it under `BLESS=1`.
fn check_golden(name: &str, actual: &str, failures: &mut Vec<String>) {
    let path = golden_dir().join(format!("{name}.golden"));
    if std::env::var("BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let Ok(expected) = std::fs::read_to_string(&path) else {
        failures.push(format!("{}: missing; run with BLESS=1", path.display()));
        return;
    };
    if expected == actual {
        return;
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let line = (0..e.len().max(a.len()))
        .find(|&i| e.get(i) != a.get(i))
        .unwrap_or(0);
    failures.push(format!(
        "{}: differs at line {}\n  expected: {:?}\n  actual:   {:?}\n  (rerun with BLESS=1 to accept)",
        path.display(),
        line + 1,
        e.get(line).copied().unwrap_or("<end of file>"),
        a.get(line).copied().unwrap_or("<end of file>"),
    ));
}

/// Line-based previews show exactly the lines they claim (no blind cut by the hard cap).
fn assert_counts_consistent(p: &bulkhead::context::Preview, what: &str) {
    let shown = p.text.lines().count() as u64;
    let marker = u64::from(p.omitted.rows + p.omitted.lines > 0);
    assert!(
        !p.text.contains("(preview cap)"),
        "{what}: builtin presets fit without a blind cut"
    );
    match p.strategy {
        Strategy::Lines => assert_eq!(shown, p.totals.lines - p.omitted.lines + marker, "{what}"),
        Strategy::Rows => {
            let header = shown - (p.totals.rows - p.omitted.rows + marker);
            assert!((1..=2).contains(&header), "{what}: {header} header lines");
        }
        Strategy::Json => {}
    }
}

#[test]
fn golden_previews_per_preset_and_kind() {
    let presets = presets();
    let mut failures = Vec::new();
    for name in presets.names() {
        let p = presets.get(name).unwrap();
        for (case, input) in cases(p) {
            if let Some(preview) = truncate_text(p, &input) {
                assert_counts_consistent(&preview, &format!("{name}/{case}"));
            }
            check_golden(
                &format!("{name}__{case}"),
                &rendered(p, case, &input),
                &mut failures,
            );
        }
    }
    let p = presets.get("default").unwrap();
    let structured = truncate_json(p, &deep_json_value()).expect("deep json is large");
    let mut out = render_saved(&structured.preview, "/workspace/results/structured.json");
    out.push('\n');
    check_golden("default__structured_deep", &out, &mut failures);
    assert!(
        failures.is_empty(),
        "{} golden mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------- detection ----------

#[test]
fn detection_by_kind() {
    let cases = [
        (json_array(), ContentKind::Json),
        (r#"{"a": 1}"#.to_owned(), ContentKind::Json),
        ("[\n  {\n    \"a\": 1,".to_owned(), ContentKind::Json),
        ("{\"a\":1}\n{\"a\":2}\n".to_owned(), ContentKind::Json),
        (table(",", 5), ContentKind::Table),
        (table("\t", 5), ContentKind::Table),
        (markdown(5), ContentKind::Table),
        (
            "a,\"b,c\",d\n1,\"2,3\",4\n5,6,7\n".to_owned(),
            ContentKind::Table,
        ),
        (log(10), ContentKind::Log),
        (
            "[2024-01-01 10:00:00] INFO start\n[2024-01-01 10:00:01] ERROR boom\n".to_owned(),
            ContentKind::Log,
        ),
        (
            "WARN disk low\nERROR: disk full\nINFO retry\n".to_owned(),
            ContentKind::Log,
        ),
        (
            "Jan 12 10:00:01 host sshd[1]: ok\nJan 12 10:00:02 host sshd[1]: ok".to_owned(),
            ContentKind::Log,
        ),
        (prose(10), ContentKind::Text),
        (
            "INFORMATION is power\nWARNINGS ahead\nhello\n".to_owned(),
            ContentKind::Text,
        ),
        ("42".to_owned(), ContentKind::Text),
        (String::new(), ContentKind::Text),
        ("one line, only".to_owned(), ContentKind::Text),
        ("a,b\n1,2,3\n".to_owned(), ContentKind::Text),
    ];
    for (sample, want) in cases {
        assert_eq!(
            detect(&sample),
            want,
            "sample: {:?}",
            &sample[..sample.len().min(60)]
        );
    }
}

// ---------- omitted counts ----------

#[test]
fn omitted_counts_match_what_is_shown() {
    let presets = presets();
    let sql = presets.get("sql_query").unwrap();
    let p = truncate_text(sql, &table(",", 1200)).unwrap();
    assert_eq!((p.kind, p.strategy), (ContentKind::Table, Strategy::Rows));
    assert_eq!((p.totals.rows, p.omitted.rows), (1200, 1160));
    assert_eq!(p.text.lines().count(), 1 + 30 + 1 + 10);
    assert_eq!(p.text.lines().next(), Some("id,name,email,score"));
    assert!(p.text.contains("\n... 1160 rows omitted ...\n1190,"));
    let out = render_saved(&p, "/workspace/results/q.csv");
    let mut lines = out.lines();
    let first = format!(
        "Results saved to /workspace/results/q.csv ({} chars)",
        table(",", 1200).chars().count()
    );
    assert_eq!(lines.next(), Some(first.as_str()));
    assert_eq!(
        lines.next(),
        Some("Showing 40 of 1200 rows; 1160 rows omitted.")
    );
    assert_eq!(lines.next(), Some(""));

    let def = presets.get("default").unwrap();
    let md = truncate_text(def, &markdown(500)).unwrap();
    assert_eq!((md.totals.rows, md.omitted.rows), (500, 470));
    assert_eq!(md.text.lines().nth(1), Some("|---:|:-----|------:|"));

    let lg = truncate_text(def, &log(1000)).unwrap();
    assert_eq!(
        (lg.kind, lg.totals.lines, lg.omitted.lines),
        (ContentKind::Log, 1000, 930)
    );
    assert_eq!(lg.text.lines().count(), 50 + 1 + 20);

    let arr = truncate_text(def, &json_array()).unwrap();
    assert_eq!(
        (arr.kind, arr.omitted.items, arr.omitted.keys),
        (ContentKind::Json, 285, 0)
    );
    let v: Value = serde_json::from_str(&arr.text).expect("preview stays valid json");
    assert_eq!(v.as_array().unwrap().len(), 16);
    assert_eq!(v[10], json!("... 285 items omitted ..."));
    assert_eq!(v[15]["id"], json!(299));

    let obj = truncate_text(def, &json_many_keys()).unwrap();
    let v: Value = serde_json::from_str(&obj.text).unwrap();
    assert_eq!(obj.omitted.keys, 280);
    assert_eq!(v.as_object().unwrap().len(), 21);
    assert_eq!(v["…"], json!("280 keys omitted"));

    let long = truncate_text(def, &"abcdefghij".repeat(20_000)).unwrap();
    assert_eq!(long.omitted.chars, 200_000 - 1000);
    assert!(long.text.ends_with("… [199000 chars cut]"));
}

#[test]
fn structured_preview_keeps_a_valid_truncated_value() {
    let def = presets().get("default").unwrap().clone();
    let v = deep_json_value();
    let jp = truncate_json(&def, &v).unwrap();
    let reparsed: Value = serde_json::from_str(&jp.preview.text).unwrap();
    assert_eq!(reparsed, jp.value);
    // Depth 5 keeps five nested containers: root, tree, child, child, child.
    let cut = &jp.value["tree"]["child"]["child"]["child"];
    assert_eq!(cut["child"], json!("{… 3 keys, depth limit}"));
    assert_eq!(cut["numbers"], json!("[… 40 items, depth limit]"));
    assert!(jp.preview.omitted.chars >= 10_000);
    assert!(truncate_json(&def, &json!({"small": [1, 2, 3]})).is_none());
}

// ---------- hard cap ----------

fn random_input(rng: &mut StdRng) -> String {
    let line = |rng: &mut StdRng| -> String {
        let len = match rng.random_range(0..10) {
            0 => rng.random_range(5_000..60_000),
            _ => rng.random_range(0..300),
        };
        let alphabet = ['a', 'é', ',', '\t', '|', ' ', '€', '"', '𝄞', 'x'];
        (0..len)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect()
    };
    match rng.random_range(0..6) {
        0 => line(rng),
        1 => (0..rng.random_range(1..400))
            .map(|_| line(rng))
            .collect::<Vec<_>>()
            .join("\n"),
        2 => {
            let v: Vec<Value> = (0..rng.random_range(1..500))
                .map(|i| {
                    let mut m = serde_json::Map::new();
                    m.insert(line(rng), json!(i));
                    m.insert("s".into(), json!(line(rng)));
                    m.insert("n".into(), json!([[[[[[[i]]]]]]]));
                    Value::Object(m)
                })
                .collect();
            serde_json::to_string(&v).unwrap()
        }
        3 => table(",", rng.random_range(1..3000)),
        4 => log(rng.random_range(1..3000)),
        _ => {
            let mut m = serde_json::Map::new();
            m.insert(line(rng), json!(line(rng)));
            m.insert("k".into(), json!(line(rng)));
            serde_json::to_string(&m).unwrap()
        }
    }
}

#[test]
fn hard_cap_holds_for_every_preset() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut presets: Vec<Preset> = {
        let b = presets();
        b.names().map(|n| b.get(n).unwrap().clone()).collect()
    };
    let tight: BTreeMap<String, PresetOverride> = serde_json::from_value(json!({
        "tight": {"threshold_chars": 100, "max_preview_chars": 200, "max_line_chars": 5000}
    }))
    .unwrap();
    presets.push(
        Presets::with_overrides(&tight)
            .unwrap()
            .get("tight")
            .unwrap()
            .clone(),
    );
    for _ in 0..40 {
        let input = random_input(&mut rng);
        for p in &presets {
            let Some(preview) = truncate_text(p, &input) else {
                assert!(input.chars().count() <= p.threshold_chars);
                continue;
            };
            let n = preview.text.chars().count();
            assert!(
                n <= p.max_preview_chars,
                "{}: {n} > {}",
                p.name,
                p.max_preview_chars
            );
            assert_eq!(preview.total_chars, input.chars().count() as u64);
            let rendered = render_saved(&preview, "/workspace/results/r.txt");
            let body: String = rendered.splitn(4, '\n').nth(3).unwrap().to_owned();
            assert_eq!(body, preview.text);
        }
    }
}

// ---------- streaming ----------

fn stream_in_chunks(
    p: &Preset,
    input: &[u8],
    sizes: &mut dyn FnMut() -> usize,
) -> (bulkhead::context::StreamOutcome, Vec<u8>) {
    let mut sink = Vec::new();
    let mut s = StreamPreview::new(p, None, &mut sink);
    let mut rest = input;
    while !rest.is_empty() {
        let n = sizes().clamp(1, rest.len());
        s.push_chunk(&rest[..n]).unwrap();
        rest = &rest[n..];
    }
    let out = s.finish().unwrap();
    (out, sink)
}

#[test]
fn chunk_boundaries_do_not_change_lines() {
    let tight: BTreeMap<String, PresetOverride> = serde_json::from_value(json!({
        "small": {"threshold_chars": 20, "lines_head": 2, "lines_tail": 2, "max_line_chars": 16,
                  "max_preview_chars": 200}
    }))
    .unwrap();
    let presets = Presets::with_overrides(&tight).unwrap();
    let p = presets.get("small").unwrap();
    let input = "é1 first line\r\nsecond 𝄞 line that is long enough to be cut\n\nfourth\r\nfifth\nsixth€\r\nlast\r";
    let whole = truncate_text(p, input).unwrap();
    assert_eq!(whole.totals.lines, 7);
    for split in 0..=input.len() {
        let mut sizes = [split, usize::MAX].into_iter();
        let (out, sink) = stream_in_chunks(p, input.as_bytes(), &mut || sizes.next().unwrap_or(1));
        assert_eq!(sink, input.as_bytes(), "split at {split}");
        assert_eq!(out.preview.as_ref(), Some(&whole), "split at {split}");
    }
    let (out, _) = stream_in_chunks(p, input.as_bytes(), &mut || 1);
    assert_eq!(out.preview.as_ref(), Some(&whole));
    assert!(
        whole.text.contains("... 3 lines omitted ..."),
        "{}",
        whole.text
    );
    assert!(
        whole
            .text
            .starts_with("é1 first line\nsecond 𝄞 line th… [27 chars cut]"),
        "{}",
        whole.text
    );
    assert!(whole.text.ends_with("sixth€\nlast\r"), "{:?}", whole.text);
}

#[test]
fn stream_matches_one_value_result() {
    let presets = presets();
    let mut rng = StdRng::seed_from_u64(7);
    for name in presets.names() {
        let p = presets.get(name).unwrap();
        for (case, input) in cases(p) {
            if case.starts_with("json") {
                continue; // structural JSON needs the whole value; streams preview JSON by lines
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("full.txt");
            let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            let mut s = StreamPreview::new(p, None, file);
            let mut rest = input.as_bytes();
            while !rest.is_empty() {
                let n = rng.random_range(1..5000).min(rest.len());
                s.push_chunk(&rest[..n]).unwrap();
                rest = &rest[n..];
            }
            let out = s.finish().unwrap();
            assert_eq!(
                std::fs::read(&path).unwrap(),
                input.as_bytes(),
                "{name}/{case}"
            );
            assert_eq!(
                out.total_chars,
                input.chars().count() as u64,
                "{name}/{case}"
            );
            let one = truncate_text(p, &input);
            assert_eq!(out.preview, one, "{name}/{case}");
            match one {
                None => assert_eq!(out.full_text_if_small.as_deref(), Some(input.as_str())),
                Some(_) => assert_eq!(out.full_text_if_small, None),
            }
        }
    }
}

#[test]
fn stream_rows_are_csv_records() {
    let def = presets().get("sql_query").unwrap().clone();
    let mut sink = Vec::new();
    let mut s = StreamPreview::new(&def, None, &mut sink);
    s.push_row(&["id", "note"]).unwrap();
    for i in 0..500 {
        s.push_row(&[&i.to_string(), &format!("says \"hi\", {i}")])
            .unwrap();
    }
    let out = s.finish().unwrap();
    let p = out.preview.unwrap();
    assert_eq!(
        (p.kind, p.totals.rows, p.omitted.rows),
        (ContentKind::Table, 500, 460)
    );
    let text = String::from_utf8(sink).unwrap();
    assert!(text.starts_with("id,note\n0,\"says \"\"hi\"\", 0\"\n"));
    assert_eq!(
        truncate_text(&def, &text).as_ref().map(|q| &q.text),
        Some(&p.text)
    );
}

// ---------- presets ----------

#[test]
fn presets_builtin_and_overrides() {
    let b = Presets::builtin();
    assert_eq!(
        b.names().collect::<Vec<_>>(),
        ["default", "log_search", "sql_query"]
    );
    let sql = b.get("sql_query").unwrap();
    assert_eq!(
        (
            sql.threshold_chars,
            sql.rows_head,
            sql.rows_tail,
            sql.lines_head,
            sql.lines_tail
        ),
        (2000, 30, 10, 50, 20)
    );
    assert_eq!(sql.max_preview_chars, 4000);
    let log = b.get("log_search").unwrap();
    assert_eq!(
        (log.threshold_chars, log.rows_head, log.rows_tail),
        (10000, 20, 10)
    );
    let d = b.get("default").unwrap();
    assert_eq!(
        (
            d.json_items_head,
            d.json_items_tail,
            d.json_max_keys,
            d.json_max_depth
        ),
        (10, 5, 20, 5)
    );

    let o: BTreeMap<String, PresetOverride> = serde_json::from_value(json!({
        "sql_query": {"rows_head": 5},
        "audit": {"threshold_chars": 800},
    }))
    .unwrap();
    let p = Presets::with_overrides(&o).unwrap();
    let sql = p.get("sql_query").unwrap();
    assert_eq!(
        (sql.rows_head, sql.rows_tail, sql.threshold_chars),
        (5, 10, 2000)
    );
    let audit = p.get("audit").unwrap();
    assert_eq!(
        (
            audit.threshold_chars,
            audit.max_preview_chars,
            audit.lines_head
        ),
        (800, 1600, 50)
    );
    assert!(p.get("nope").is_none());

    let unknown = serde_json::from_value::<PresetOverride>(json!({"treshold_chars": 1}));
    assert!(unknown.unwrap_err().to_string().contains("unknown field"));
    for bad in [
        json!({"default": {"max_preview_chars": 10}}),
        json!({"default": {"threshold_chars": 0}}),
        json!({"Bad Name": {}}),
    ] {
        let o: BTreeMap<String, PresetOverride> = serde_json::from_value(bad.clone()).unwrap();
        assert!(Presets::with_overrides(&o).is_err(), "{bad}");
    }
}
