//! "Did you mean …?": the closest candidate by edit distance.

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1) + usize::from(word.len() > 6);
    candidates
        .into_iter()
        .map(|c| (distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)))
        .map(|(_, c)| c)
}

/// Edit distance over characters, case-insensitive, where swapping two neighbours counts as one
/// edit (optimal string alignment): `raed` is one typo away from `read`, not two.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut d = vec![vec![0; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_misses_only() {
        let keys = ["permission", "context", "sensitivity", "description"];
        assert_eq!(did_you_mean("permision", keys), Some("permission"));
        assert_eq!(did_you_mean("sensitivty", keys), Some("sensitivity"));
        assert_eq!(did_you_mean("contxt", keys), Some("context"));
        assert_eq!(did_you_mean("zebra", keys), None);
    }

    #[test]
    fn a_swap_of_neighbours_is_one_edit() {
        assert_eq!(distance("raed", "read"), 1);
        assert_eq!(distance("read", "read"), 0);
        assert_eq!(did_you_mean("raed", ["read", "write"]), Some("read"));
        assert_eq!(did_you_mean("wirte", ["read", "write"]), Some("write"));
    }

    #[test]
    fn case_and_multibyte_characters_count_as_characters() {
        assert_eq!(distance("READ", "read"), 0);
        assert_eq!(distance("grüß", "gruß"), 1);
        assert_eq!(
            did_you_mean("Permission", ["permission"]),
            Some("permission")
        );
    }

    #[test]
    fn short_words_allow_one_edit_and_ties_go_alphabetically() {
        assert_eq!(did_you_mean("rea", ["read"]), Some("read"));
        assert_eq!(did_you_mean("ab", ["xy"]), None);
        assert_eq!(did_you_mean("cat", ["cut", "bat"]), Some("bat"));
        assert_eq!(did_you_mean("anything", std::iter::empty()), None);
        assert_eq!(did_you_mean("", ["a", "bb"]), Some("a"));
    }

    #[test]
    fn long_words_allow_more_edits() {
        // 11 chars: limit 11 / 3 + 1 = 4.
        assert_eq!(
            did_you_mean("confidental", ["confidential", "public"]),
            Some("confidential")
        );
        assert_eq!(
            did_you_mean("sql_querry", ["sql_query", "log_search"]),
            Some("sql_query")
        );
        assert_eq!(did_you_mean("sensitivity", ["description"]), None);
    }
}
