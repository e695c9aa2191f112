//! Context presets: how much of a large result reaches the model, by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Limits that decide what of a large tool result reaches the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// The preset's name, as tools name it in their spec.
    pub name: String,
    /// Results of at most this many chars pass through unchanged.
    pub threshold_chars: usize,
    /// Table rows kept from the start (after the header).
    pub rows_head: usize,
    /// Table rows kept from the end.
    pub rows_tail: usize,
    /// Lines kept from the start (logs and text).
    pub lines_head: usize,
    /// Lines kept from the end.
    pub lines_tail: usize,
    /// JSON array items kept from the start of every array.
    pub json_items_head: usize,
    /// JSON array items kept from the end of every array.
    pub json_items_tail: usize,
    /// JSON object keys kept per object.
    pub json_max_keys: usize,
    /// JSON nesting levels kept; deeper containers are replaced by a marker.
    pub json_max_depth: usize,
    /// Every kept line (and JSON string or key) is cut to this many chars.
    pub max_line_chars: usize,
    /// Hard cap on the preview text, whatever the content.
    pub max_preview_chars: usize,
}

/// Fields of a preset to override in configuration; absent fields keep their value.
///
/// When `threshold_chars` is given without `max_preview_chars`, the cap follows as
/// twice the new threshold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PresetOverride {
    /// See [`Preset::threshold_chars`].
    pub threshold_chars: Option<usize>,
    /// See [`Preset::rows_head`].
    pub rows_head: Option<usize>,
    /// See [`Preset::rows_tail`].
    pub rows_tail: Option<usize>,
    /// See [`Preset::lines_head`].
    pub lines_head: Option<usize>,
    /// See [`Preset::lines_tail`].
    pub lines_tail: Option<usize>,
    /// See [`Preset::json_items_head`].
    pub json_items_head: Option<usize>,
    /// See [`Preset::json_items_tail`].
    pub json_items_tail: Option<usize>,
    /// See [`Preset::json_max_keys`].
    pub json_max_keys: Option<usize>,
    /// See [`Preset::json_max_depth`].
    pub json_max_depth: Option<usize>,
    /// See [`Preset::max_line_chars`].
    pub max_line_chars: Option<usize>,
    /// See [`Preset::max_preview_chars`].
    pub max_preview_chars: Option<usize>,
}

/// A preset override that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PresetError {
    /// The preset name is not usable as a spec value.
    #[error("preset name {0:?} must be 1-64 chars of a-z, 0-9, '_' or '-'")]
    BadName(String),
    /// A limit is outside what keeps previews useful and bounded.
    #[error("preset {preset:?}: {field} must be {rule}, got {value}")]
    OutOfRange {
        /// The preset's name.
        preset: String,
        /// The offending field.
        field: &'static str,
        /// What the field must be.
        rule: &'static str,
        /// The value given.
        value: usize,
    },
}

/// Smallest hard cap a preset may set; below it no marker fits.
pub const MIN_PREVIEW_CHARS: usize = 200;
/// Upper bound on every count-like limit, so a typo cannot disable truncation.
const MAX_LIMIT: usize = 100_000;
/// Upper bound on thresholds and caps (chars).
const MAX_CHARS: usize = 10_000_000;

impl Preset {
    fn reference(name: &str, threshold: usize, rows: (usize, usize)) -> Preset {
        Preset {
            name: name.to_owned(),
            threshold_chars: threshold,
            rows_head: rows.0,
            rows_tail: rows.1,
            lines_head: 50,
            lines_tail: 20,
            json_items_head: 10,
            json_items_tail: 5,
            json_max_keys: 20,
            json_max_depth: 5,
            max_line_chars: 1000,
            max_preview_chars: 2 * threshold,
        }
    }

    fn apply(&mut self, o: &PresetOverride) {
        let set = |dst: &mut usize, src: Option<usize>| {
            if let Some(v) = src {
                *dst = v;
            }
        };
        set(&mut self.threshold_chars, o.threshold_chars);
        set(&mut self.rows_head, o.rows_head);
        set(&mut self.rows_tail, o.rows_tail);
        set(&mut self.lines_head, o.lines_head);
        set(&mut self.lines_tail, o.lines_tail);
        set(&mut self.json_items_head, o.json_items_head);
        set(&mut self.json_items_tail, o.json_items_tail);
        set(&mut self.json_max_keys, o.json_max_keys);
        set(&mut self.json_max_depth, o.json_max_depth);
        set(&mut self.max_line_chars, o.max_line_chars);
        match (o.max_preview_chars, o.threshold_chars) {
            (Some(cap), _) => self.max_preview_chars = cap,
            (None, Some(t)) => self.max_preview_chars = t.saturating_mul(2),
            (None, None) => {}
        }
    }

    /// Checks that every limit keeps previews useful and bounded.
    pub fn validate(&self) -> Result<(), PresetError> {
        let valid_name = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(PresetError::BadName(self.name.clone()));
        }
        let range = |field: &'static str, value: usize, lo: usize, hi: usize, rule| {
            if (lo..=hi).contains(&value) {
                Ok(())
            } else {
                Err(PresetError::OutOfRange {
                    preset: self.name.clone(),
                    field,
                    rule,
                    value,
                })
            }
        };
        range(
            "threshold_chars",
            self.threshold_chars,
            1,
            MAX_CHARS,
            "1..=10000000",
        )?;
        range("rows_head", self.rows_head, 1, MAX_LIMIT, "1..=100000")?;
        range("rows_tail", self.rows_tail, 0, MAX_LIMIT, "0..=100000")?;
        range("lines_head", self.lines_head, 1, MAX_LIMIT, "1..=100000")?;
        range("lines_tail", self.lines_tail, 0, MAX_LIMIT, "0..=100000")?;
        range(
            "json_items_head",
            self.json_items_head,
            1,
            MAX_LIMIT,
            "1..=100000",
        )?;
        range(
            "json_items_tail",
            self.json_items_tail,
            0,
            MAX_LIMIT,
            "0..=100000",
        )?;
        range(
            "json_max_keys",
            self.json_max_keys,
            1,
            MAX_LIMIT,
            "1..=100000",
        )?;
        range("json_max_depth", self.json_max_depth, 1, 64, "1..=64")?;
        range(
            "max_line_chars",
            self.max_line_chars,
            16,
            MAX_CHARS,
            "16..=10000000",
        )?;
        range(
            "max_preview_chars",
            self.max_preview_chars,
            MIN_PREVIEW_CHARS,
            MAX_CHARS,
            "200..=10000000",
        )
    }
}

/// All presets known to a server, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Presets {
    by_name: BTreeMap<String, Preset>,
}

impl Presets {
    /// The reference presets: `default`, `sql_query` and `log_search`.
    pub fn builtin() -> Presets {
        let by_name = [
            Preset::reference("default", 5000, (20, 10)),
            Preset::reference("sql_query", 2000, (30, 10)),
            Preset::reference("log_search", 10000, (20, 10)),
        ]
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect();
        Presets { by_name }
    }

    /// The builtin presets with configuration applied: an override of a builtin changes only
    /// the given fields; a new name defines a preset that starts from `default`.
    pub fn with_overrides(
        overrides: &BTreeMap<String, PresetOverride>,
    ) -> Result<Presets, PresetError> {
        let mut presets = Presets::builtin();
        let base = presets.by_name["default"].clone();
        for (name, o) in overrides {
            let preset = presets
                .by_name
                .entry(name.clone())
                .or_insert_with(|| Preset {
                    name: name.clone(),
                    ..base.clone()
                });
            preset.apply(o);
            preset.validate()?;
        }
        Ok(presets)
    }

    /// The preset of that name, if any.
    pub fn get(&self, name: &str) -> Option<&Preset> {
        self.by_name.get(name)
    }

    /// All preset names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}
