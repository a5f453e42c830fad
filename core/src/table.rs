//! Tables with an entry per watched object.
//!
//! A cache's store, the change filter, the scheduler's entries and deadlines each hold an entry
//! per object of a watch, so at 100,000 objects their room is most of a host's memory beside the
//! objects themselves. A hash table grows by doubling its slots and touches every slot it fills
//! in: at 33,000 entries `std`'s `HashMap` has 65,536 slots of a whole entry each, half of them
//! empty, at 100,000 it has 131,072, a quarter empty; so a host given a third of the objects
//! (a sharded replica) would hold far more than a third. [`KeyMap`] keeps its entries in one
//! dense array and its hash index holds only their positions: the index's empty slots cost 8
//! bytes each, and the array's room beyond its entries is not written, so it stays unbacked by
//! memory unless the allocator hands out pages it used before (`make bench`, part `scale`: 7-12
//! MiB less anonymous memory in each of three sharded hosts; `docs/src/design/memory.md`). A
//! lookup reads the index, then the entry; a removal moves the last entry into the gap, so the
//! order of iteration is as arbitrary as a `HashMap`'s.

/// A map with an entry per object: see the [module docs](self).
pub type KeyMap<K, V> = indexmap::IndexMap<K, V>;

/// A set with an entry per object: see the [module docs](self).
pub type KeySet<K> = indexmap::IndexSet<K>;
