//! Structural JSON truncation: arrays keep head and tail items, objects keep their first keys,
//! deep containers and long strings are cut, and the result stays valid JSON.

use serde_json::{Map, Value};

use super::text::cap_chars;
use super::{Omitted, Preset, Totals};

/// Key of the entry that stands for omitted object keys.
pub const OMITTED_KEYS_KEY: &str = "…";

/// Limits of one truncation pass; tightened until the pretty text fits the hard cap.
#[derive(Clone, Copy, Debug)]
struct Limits {
    head: usize,
    tail: usize,
    keys: usize,
    depth: usize,
    str_chars: usize,
}

impl Limits {
    fn of(p: &Preset) -> Limits {
        Limits {
            head: p.json_items_head,
            tail: p.json_items_tail,
            keys: p.json_max_keys,
            depth: p.json_max_depth,
            str_chars: p.max_line_chars,
        }
    }

    fn tighter(self) -> Limits {
        Limits {
            head: (self.head / 2).max(1),
            tail: self.tail / 2,
            keys: (self.keys / 2).max(1),
            depth: self.depth.saturating_sub(1).max(1),
            str_chars: (self.str_chars / 2).max(16),
        }
    }

    fn is_minimal(&self) -> bool {
        self.head == 1
            && self.tail == 0
            && self.keys == 1
            && self.depth == 1
            && self.str_chars == 16
    }
}

/// The truncated value, its pretty text, and what was left out.
pub(crate) struct JsonCut {
    pub(crate) value: Value,
    pub(crate) text: String,
    pub(crate) omitted: Omitted,
    pub(crate) totals: Totals,
}

/// Truncates with the preset's limits, tightening them until the pretty text fits the cap.
pub(crate) fn cut(value: &Value, p: &Preset) -> JsonCut {
    let totals = match value {
        Value::Array(a) => Totals {
            items: a.len() as u64,
            ..Totals::default()
        },
        Value::Object(o) => Totals {
            keys: o.len() as u64,
            ..Totals::default()
        },
        _ => Totals::default(),
    };
    let mut limits = Limits::of(p);
    loop {
        let mut omitted = Omitted::default();
        let value = shrink(value, 1, &limits, &mut omitted);
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        if text.len() <= p.max_preview_chars
            || text.chars().count() <= p.max_preview_chars
            || limits.is_minimal()
        {
            return JsonCut {
                value,
                text,
                omitted,
                totals,
            };
        }
        limits = limits.tighter();
    }
}

fn shrink(v: &Value, depth: usize, lim: &Limits, om: &mut Omitted) -> Value {
    match v {
        Value::String(s) => Value::String(cap_string(s, lim.str_chars, om)),
        Value::Array(a) if !a.is_empty() && depth > lim.depth => {
            om.items += a.len() as u64;
            Value::String(format!("[… {} items, depth limit]", a.len()))
        }
        Value::Object(o) if !o.is_empty() && depth > lim.depth => {
            om.keys += o.len() as u64;
            Value::String(format!("{{… {} keys, depth limit}}", o.len()))
        }
        Value::Array(a) if a.len() > lim.head + lim.tail => {
            let dropped = a.len() - lim.head - lim.tail;
            om.items += dropped as u64;
            let mut out: Vec<Value> = a[..lim.head]
                .iter()
                .map(|x| shrink(x, depth + 1, lim, om))
                .collect();
            out.push(Value::String(format!("... {dropped} items omitted ...")));
            out.extend(
                a[a.len() - lim.tail..]
                    .iter()
                    .map(|x| shrink(x, depth + 1, lim, om)),
            );
            Value::Array(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| shrink(x, depth + 1, lim, om)).collect()),
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, x) in o.iter().take(lim.keys) {
                out.insert(
                    cap_string(k, lim.str_chars, om),
                    shrink(x, depth + 1, lim, om),
                );
            }
            if o.len() > lim.keys {
                let dropped = o.len() - lim.keys;
                om.keys += dropped as u64;
                out.insert(
                    OMITTED_KEYS_KEY.to_owned(),
                    Value::String(format!("{dropped} keys omitted")),
                );
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn cap_string(s: &str, max: usize, om: &mut Omitted) -> String {
    let (end, _) = cap_chars(s, max);
    if end == s.len() {
        return s.to_owned();
    }
    let cut = s[end..].chars().count() as u64;
    om.chars += cut;
    format!("{}… [{cut} chars cut]", &s[..end])
}

/// Chars of the compact serialization, counted without building the string.
pub(crate) fn compact_chars(v: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.iter().filter(|&&b| (b as i8) >= -0x40).count() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a Value into an infallible writer cannot fail.
    let _ = serde_json::to_writer(&mut count, v);
    count.0
}
