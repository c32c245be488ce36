//! Region names: a stable name for each place regions are made, and which call of it a region is
//! (its index, counted per thread).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::panic::Location;

/// What names a region: the name given (`#[checkpoint(name = "..")]`, `Region::named`), else
/// the method or function `#[checkpoint]` is on (`crate::module::Type::method`, without generic
/// arguments), else the place in the source the function form was called from
/// (`src/model.rs:42:17`).
///
/// The 16 dense layers of a dense block, called through one method, are one name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RegionName(Repr);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Repr {
    Given(Cow<'static, str>),
    Location(&'static Location<'static>),
}

impl RegionName {
    /// A name given in the code.
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        Self(Repr::Given(name.into()))
    }

    /// The name of the place the function calling this was called from.
    #[track_caller]
    pub fn caller() -> Self {
        Self(Repr::Location(Location::caller()))
    }
}

impl fmt::Display for RegionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Given(name) => f.write_str(name),
            Repr::Location(place) => {
                write!(f, "{}:{}:{}", place.file(), place.line(), place.column())
            }
        }
    }
}

/// One region: its name, and which call of that name it is on this thread (0 for the first
/// since the thread started or since [`RegionId::restart_indices`]; a plan's step restarts them).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RegionId {
    /// Where the region comes from.
    pub name: RegionName,
    /// The how-manieth region of this name this is.
    pub index: u64,
}

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.name, self.index)
    }
}

thread_local! {
    static OPENED: RefCell<HashMap<RegionName, u64>> = RefCell::new(HashMap::new());
}

impl RegionId {
    /// The id of a region of `name` opening now on this thread: the next index of that name.
    pub fn next(name: RegionName) -> RegionId {
        OPENED.with(|opened| {
            let mut opened = opened.borrow_mut();
            let count = opened.entry(name.clone()).or_default();
            let index = *count;
            *count += 1;
            RegionId { name, index }
        })
    }
}

impl RegionId {
    /// Starts the indices of this thread's region names again from 0: the next region of each
    /// name is `name#0`. A [`Plan`](crate::planner::Plan) does it before each step it runs, so
    /// that its `name#index` names the same region every step.
    ///
    /// ```
    /// use burn_checkpoint_core::{RegionId, RegionName};
    ///
    /// assert_eq!(RegionId::next(RegionName::new("block")).index, 0);
    /// assert_eq!(RegionId::next(RegionName::new("block")).index, 1);
    /// RegionId::restart_indices();
    /// assert_eq!(RegionId::next(RegionName::new("block")).index, 0);
    /// ```
    pub fn restart_indices() {
        OPENED.with(|opened| opened.borrow_mut().clear());
    }
}

/// The name `#[checkpoint]` gives a method of `T`: `path::Type::method`, generic arguments left
/// out, so that every monomorphisation of a block shares one name. Both crates' attributes call
/// it once per method and keep the result in a static: the leak is one string per method.
///
/// ```
/// use burn_checkpoint_core::engine::method_region_name;
///
/// struct Block<B>(B);
/// let name = method_region_name::<Block<f32>>("forward");
/// assert!(name.ends_with("::Block::forward"), "{name}");
/// ```
pub fn method_region_name<T: ?Sized>(method: &str) -> &'static str {
    method_name(core::any::type_name::<T>(), method).leak()
}

/// `Type::method` from a `type_name`: the path without generic arguments.
fn method_name(type_name: &str, method: &str) -> String {
    let path = type_name.split('<').next().unwrap_or(type_name);
    format!("{path}::{method}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_is_named_by_its_type_without_generics() {
        assert_eq!(
            method_name(
                "densenet_bc::model::DenseLayer<burn_checkpoint::Checkpointed<B>>",
                "forward"
            ),
            "densenet_bc::model::DenseLayer::forward"
        );
        assert_eq!(method_name("my::Block", "run"), "my::Block::run");
    }

    #[test]
    fn names_print_as_given_or_as_a_place() {
        assert_eq!(RegionName::new("attention").to_string(), "attention");
        let line = line!() + 1;
        let here = RegionName::caller().to_string();
        assert!(here.ends_with(&format!("names.rs:{line}:20")), "{here}");
    }

    #[test]
    fn indices_count_per_name_until_restarted() {
        let ids = ["a", "b", "a"].map(|name| RegionId::next(RegionName::new(name)).to_string());
        assert_eq!(ids, ["a#0", "b#0", "a#1"]);
        RegionId::restart_indices();
        assert_eq!(RegionId::next(RegionName::new("a")).to_string(), "a#0");
    }
}
