//! What the crate remembers of autodiff nodes, by node id, for as long as each node lives: the
//! one map behind every per-thread registry (which tensors regions made, their recipes, host
//! copies of offloaded operands, outputs marked for offload). A leaf.
//!
//! Burn gives no callback when a node dies, so an entry holds something that can tell
//! ([`Liveness`]: a weak reference) and dead entries are pruned. Pruning runs when the map has
//! doubled since the last pruning (and is at least [`MIN_PRUNE_AT`] long): its cost, linear
//! in the map, is paid for by the inserts since, so an insert is amortised O(1) however many
//! entries are alive (a map pruned at a fixed size would prune on every insert once that many
//! are alive: quadratic over a long chain of regions).

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Whether a remembered node still lives.
pub(crate) trait Liveness {
    /// False once nothing refers to the node (or the value remembered for it) any more.
    fn alive(&self) -> bool;
}

impl<T: ?Sized> Liveness for Weak<T> {
    fn alive(&self) -> bool {
        self.strong_count() > 0
    }
}

/// The fewest entries at which a map prunes.
const MIN_PRUNE_AT: usize = 4096;

/// A node id's entry, by id.
pub(crate) struct NodeMap<V> {
    entries: HashMap<u64, V>,
    /// The length at which dead entries are pruned next.
    prune_at: usize,
}

impl<V> Default for NodeMap<V> {
    fn default() -> Self {
        NodeMap {
            entries: HashMap::new(),
            prune_at: MIN_PRUNE_AT,
        }
    }
}

impl<V: Liveness> NodeMap<V> {
    /// Remembers `value` for node `id` (replacing what was there).
    pub(crate) fn insert(&mut self, id: u64, value: V) {
        self.entries.insert(id, value);
        if self.entries.len() >= self.prune_at {
            self.prune();
        }
    }

    /// Forgets the entries whose node is dead.
    pub(crate) fn prune(&mut self) {
        self.entries.retain(|_, value| value.alive());
        self.prune_at = (2 * self.entries.len()).max(MIN_PRUNE_AT);
    }

    pub(crate) fn get(&self, id: u64) -> Option<&V> {
        self.entries.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut V> {
        self.entries.get_mut(&id)
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        self.entries.contains_key(&id)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// A shared value remembered weakly, whatever its type: a registry generic over a backend keeps
/// one map for every backend (the value's type is checked when it is read back).
pub(crate) type ErasedWeak = Weak<dyn Any + Send + Sync>;

impl NodeMap<ErasedWeak> {
    /// Remembers `value` for node `id`, weakly.
    pub(crate) fn insert_shared<T: Any + Send + Sync>(&mut self, id: u64, value: &Arc<T>) {
        let erased: Arc<dyn Any + Send + Sync> = value.clone();
        self.insert(id, Arc::downgrade(&erased));
    }

    /// The value remembered for node `id`, if it is alive and of type `T`.
    pub(crate) fn get_shared<T: Any + Send + Sync>(&self, id: u64) -> Option<Arc<T>> {
        self.get(id)?.upgrade()?.downcast::<T>().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_entries_go_when_the_map_has_doubled() {
        let mut map = NodeMap::<Weak<u8>>::default();
        let alive: Vec<Arc<u8>> = (0..3000).map(|_| Arc::new(0)).collect();
        for (id, value) in alive.iter().enumerate() {
            map.insert(id as u64, Arc::downgrade(value));
        }
        // 3000 alive, then 2000 that die at once: pruned at 4096 entries, 3000 left.
        for id in 3000..5000 {
            let dead = Arc::downgrade(&Arc::new(0));
            map.insert(id, dead);
        }
        assert!(map.len() < 5000);
        assert!(map.contains(0) && map.get(2999).is_some_and(Liveness::alive));
        // Next pruning at twice the live entries, not at every insert.
        assert_eq!(map.prune_at, 6000);
    }

    #[test]
    fn many_live_entries_are_pruned_a_logarithmic_number_of_times() {
        let mut map = NodeMap::<Weak<u8>>::default();
        let mut alive = Vec::new();
        let mut prunes = 0;
        for id in 0..100_000u64 {
            let value = Arc::new(0);
            let before = map.prune_at;
            map.insert(id, Arc::downgrade(&value));
            prunes += usize::from(map.prune_at != before);
            alive.push(value);
        }
        assert_eq!(map.len(), 100_000);
        assert!(prunes <= 5, "pruned {prunes} times");
    }

    #[test]
    fn erased_values_come_back_as_their_type() {
        let mut map = NodeMap::<ErasedWeak>::default();
        let value = Arc::new(7u32);
        map.insert_shared(1, &value);
        assert_eq!(map.get_shared::<u32>(1).as_deref(), Some(&7));
        assert!(map.get_shared::<u64>(1).is_none(), "another type");
        drop(value);
        assert!(map.get_shared::<u32>(1).is_none(), "dead");
    }
}
