//! A rate limit: calls per period with a burst, as `config.yaml` (`rate_limits:`) and a tool
//! spec (`rate_limit:`) declare it, and the order that says whether one limit admits more than
//! another (review).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `calls` per `per_seconds`, at most `burst` at once after a quiet spell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Calls allowed per period (at least 1).
    pub calls: u32,
    /// The period, in seconds (at least 1).
    #[serde(default = "one")]
    pub per_seconds: u32,
    /// Calls allowed at once after a quiet spell (default: `calls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

fn one() -> u32 {
    1
}

impl RateLimit {
    /// The burst, `calls` when unset (at least 1).
    pub fn burst(&self) -> u32 {
        self.burst.unwrap_or(self.calls).max(1)
    }

    /// Seconds between two calls at the sustained rate (the GCRA emission interval).
    pub fn interval_secs(&self) -> f64 {
        f64::from(self.per_seconds.max(1)) / f64::from(self.calls.max(1))
    }

    /// How far ahead of the sustained rate a caller may run, in seconds (the GCRA tolerance).
    pub fn tolerance_secs(&self) -> f64 {
        self.interval_secs() * f64::from(self.burst() - 1)
    }

    /// What is wrong with it, if anything.
    pub fn problem(&self) -> Option<&'static str> {
        if self.calls == 0 {
            Some("`calls` must be at least 1 (to refuse every call, remove the tool)")
        } else if self.per_seconds == 0 {
            Some("`per_seconds` must be at least 1")
        } else if self.burst == Some(0) {
            Some("`burst` must be at least 1")
        } else {
            None
        }
    }

    /// Whether `self` admits more than `other` anywhere: a higher sustained rate or a larger
    /// burst. (A limit that trades one for the other counts as looser.)
    pub fn is_looser_than(&self, other: &RateLimit) -> bool {
        // calls/per_seconds compared without division: a/b > c/d ⇔ a·d > c·b.
        let looser_rate = u64::from(self.calls) * u64::from(other.per_seconds.max(1))
            > u64::from(other.calls) * u64::from(self.per_seconds.max(1));
        looser_rate || self.burst() > other.burst()
    }
}

impl std::fmt::Display for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} calls per {} s", self.calls, self.per_seconds)?;
        if let Some(b) = self.burst {
            write!(f, ", burst {b}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(calls: u32, per_seconds: u32, burst: Option<u32>) -> RateLimit {
        RateLimit {
            calls,
            per_seconds,
            burst,
        }
    }

    #[test]
    fn looser_means_more_calls_or_a_larger_burst() {
        assert!(r(21, 1, None).is_looser_than(&r(20, 1, None)));
        assert!(r(20, 1, None).is_looser_than(&r(20, 2, Some(20))));
        assert!(r(20, 1, Some(40)).is_looser_than(&r(20, 1, None)));
        assert!(!r(20, 1, None).is_looser_than(&r(20, 1, None)));
        assert!(!r(10, 1, None).is_looser_than(&r(20, 1, None)));
        assert!(!r(60, 60, Some(1)).is_looser_than(&r(2, 1, Some(1))));
    }

    #[test]
    fn the_gcra_parameters_follow_the_declaration() {
        let l = r(20, 1, None);
        assert!((l.interval_secs() - 0.05).abs() < 1e-12);
        assert!((l.tolerance_secs() - 0.95).abs() < 1e-12);
        assert_eq!(r(5, 60, Some(1)).tolerance_secs(), 0.0);
    }
}
