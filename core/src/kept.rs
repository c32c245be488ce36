//! The regions a recomputed region keeps by name ([`KeptRegions`]): what both crates'
//! `Policy::recompute_all_but` holds.

use std::fmt;
use std::sync::Arc;

use crate::RegionName;

/// Name patterns of the regions nested in a recomputed region whose work is kept from forward to
/// backward rather than recomputed (torch_remat's SAVE regions, torchtitan's `save_regions`).
///
/// A pattern is a region's name as given in the code, with `*` standing for any run of
/// characters (none included): `"attention.qkv"`, `"attention.*"`, `"*::Mlp::forward"` (the name
/// `#[checkpoint]` gives a method). Made by the Burn crates' `Policy::recompute_all_but`.
///
/// ```
/// use burn_checkpoint_core::{KeptRegions, RegionName};
///
/// let kept = KeptRegions::new(["attention.qkv", "mlp.*"]);
/// assert!(kept.keeps(&RegionName::new("attention.qkv")));
/// assert!(kept.keeps(&RegionName::new("mlp.up")));
/// assert!(!kept.keeps(&RegionName::new("attention.out")));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KeptRegions(Arc<[String]>);

impl KeptRegions {
    /// The regions whose names match any of `patterns`.
    pub fn new<S: Into<String>>(patterns: impl IntoIterator<Item = S>) -> Self {
        Self(patterns.into_iter().map(Into::into).collect())
    }

    /// Whether a region called `name` is kept.
    pub fn keeps(&self, name: &RegionName) -> bool {
        let name = name.to_string();
        self.0.iter().any(|pattern| matches(pattern, &name))
    }

    /// The patterns, as given.
    pub fn patterns(&self) -> &[String] {
        &self.0
    }
}

impl fmt::Debug for KeptRegions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

/// Whether `name` matches `pattern`, whose `*`s match any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    // Without a `*`, the one part is the whole name.
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn stars_match_any_run_of_characters() {
        assert!(matches("attention.qkv", "attention.qkv"));
        assert!(!matches("attention.qkv", "attention.qkv2"));
        assert!(!matches("attention.qkv", "my.attention.qkv"));
        assert!(matches("attention.*", "attention."));
        assert!(matches("attention.*", "attention.out"));
        assert!(!matches("attention.*", "mlp.out"));
        assert!(matches("*::Mlp::forward", "gpt::model::Mlp::forward"));
        assert!(matches("*", ""));
        assert!(matches("a*b*c", "abc"));
        assert!(matches("a*b*c", "a-b-b-c"));
        assert!(!matches("a*b*c", "a-c-b"));
        assert!(!matches("ab*ba", "aba"));
        assert!(matches("ab*ba", "abba"));
    }
}
