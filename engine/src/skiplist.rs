//! An arena-allocated skiplist of internal keys: one writer at a time, lock-free readers.
//!
//! Thread-safety contract (as LevelDB's `db/skiplist.h`):
//! - Writes (`insert`) must be externally serialized; the engine inserts under its commit
//!   lock. A mutex inside also guards the arena, so misuse cannot corrupt memory.
//! - Reads need no lock. A node is fully written (key, value, tower, `prev`) before it is
//!   linked with a `Release` store; readers follow links with `Acquire` loads, so any node a
//!   reader reaches is completely initialised.
//! - Nodes are never removed or moved, and arena memory is freed only when the list is
//!   dropped; readers keep the list alive through an `Arc` of its memtable.
//! - Entries are unique by (user key, trailer); the engine guarantees it by giving every
//!   commit its own sequence number and removing duplicate keys within a batch.
//!
//! Node layout in the node arena (8-byte aligned):
//! `NodeHeader` (40 bytes) | tower: `height` × `AtomicPtr<NodeHeader>` | key.
//! Values live in a second arena, and the header points to its value. A search only reads
//! headers, links and keys, so keeping values out of the nodes makes the structure it
//! walks about a third as large (for 16-byte keys and 100-byte values), so that more of
//! it stays in the CPU caches (fillrandom of 1 M keys into 64 MiB memtables: 377 k → 409 k
//! puts/s).
//! Level-0 links are doubled with a `prev` pointer so reverse iteration is O(1) per step.
//! `prev` of a node may briefly lag behind an insert of its new predecessor; that
//! predecessor's sequence number is not yet published, so no reader needs it.
//!
//! Point lookups go through a hash index beside the towers ([`PointIndex`]): per user key
//! its newest node, so a get costs one or two cache misses instead of a walk down the
//! towers, whose lower levels miss the cache at every step in a list of this size.

#![allow(
    unsafe_code,
    reason = "nodes live in a bump arena and are linked by atomic raw pointers, which safe Rust cannot express without a lock or reference counting on every link"
)]

use crate::chunk_pool::ChunkPool;
use crate::invariants::invariant;
use crate::key;
use crate::memtable_bloom::hash_key;
use parking_lot::Mutex;
use std::cmp::Ordering;
use std::mem::size_of;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Tallest tower; with branching 4 this indexes ~16 M entries at full speed.
pub(crate) const MAX_HEIGHT: usize = 12;
const BRANCHING: u64 = 4;
const ALIGN: usize = 8;

#[repr(C)]
struct NodeHeader {
    trailer: u64,
    key_len: u32,
    value_len: u32,
    height: u32,
    _pad: u32,
    prev: AtomicPtr<NodeHeader>,
    /// The value's bytes in the value arena (dangling, never read, when `value_len` is 0).
    value: *const u8,
}

const HEADER_BYTES: usize = size_of::<NodeHeader>();
const LINK_BYTES: usize = size_of::<AtomicPtr<NodeHeader>>();

/// Chunks at least this large are anonymous memory maps advised to use transparent huge
/// pages: a skiplist walk is a chain of dependent loads, and with 4 KiB pages most of them
/// also miss the TLB.
const HUGE_PAGE_CHUNK_BYTES: usize = 2 << 20;

/// One block of arena memory.
enum Chunk {
    /// From `Box::into_raw`: a raw pointer rather than a box, so that pointers into the
    /// chunk keep their provenance while the chunk list grows.
    Heap(*mut [u64]),
    /// An anonymous mapping (page aligned, zero filled when handed out), owned so that it
    /// stays mapped as long as the arena, then given to the pool.
    Mapped(memmap2::MmapMut),
}

/// Bump allocator over large chunks; chunks live until the arena is dropped (and then go
/// to the pool, if it has one and they fit it).
struct Arena {
    chunks: Vec<Chunk>,
    cursor: *mut u8,
    left_bytes: usize,
    chunk_bytes: usize,
    pool: Option<Arc<ChunkPool>>,
}

/// The chunk size an arena asked for `chunk_bytes` uses.
pub(crate) fn arena_chunk_bytes(chunk_bytes: usize) -> usize {
    chunk_bytes.clamp(4096, 8 << 20).next_multiple_of(ALIGN)
}

impl Arena {
    fn new(chunk_bytes: usize, pool: Option<Arc<ChunkPool>>) -> Self {
        let chunk_bytes = arena_chunk_bytes(chunk_bytes);
        Arena { chunks: Vec::new(), cursor: ptr::null_mut(), left_bytes: 0, chunk_bytes, pool }
    }

    /// Returns `bytes` of zeroed, 8-byte aligned memory valid until the arena drops.
    fn alloc(&mut self, bytes: usize) -> *mut u8 {
        let bytes = bytes.next_multiple_of(ALIGN);
        if bytes > self.left_bytes {
            if bytes > self.chunk_bytes / 4 {
                // A large node gets a chunk of its own; the current chunk stays in use.
                return self.new_chunk(bytes);
            }
            self.cursor = self.new_chunk(self.chunk_bytes);
            self.left_bytes = self.chunk_bytes;
        }
        let result = self.cursor;
        // SAFETY: `bytes <= left_bytes`, so the new cursor stays inside (or one past the end
        // of) the current chunk.
        self.cursor = unsafe { self.cursor.add(bytes) };
        self.left_bytes -= bytes;
        result
    }

    fn new_chunk(&mut self, bytes: usize) -> *mut u8 {
        if let Some(mut map) = self.pool.as_ref().filter(|p| p.chunk_bytes() == bytes).and_then(|p| p.take())
        {
            // Zero-filled by the pool, like a fresh mapping.
            let start = map.as_mut_ptr();
            self.chunks.push(Chunk::Mapped(map));
            return start;
        }
        if bytes >= HUGE_PAGE_CHUNK_BYTES && !cfg!(miri) {
            if let Ok(mut map) = memmap2::MmapMut::map_anon(bytes) {
                // Advice only: without huge pages the chunk works the same, just slower.
                #[cfg(target_os = "linux")]
                let _ = map.advise(memmap2::Advice::HugePage);
                let start = map.as_mut_ptr();
                self.chunks.push(Chunk::Mapped(map));
                return start;
            }
        }
        let chunk = Box::into_raw(vec![0u64; bytes / ALIGN].into_boxed_slice());
        self.chunks.push(Chunk::Heap(chunk));
        chunk.cast::<u8>()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for chunk in self.chunks.drain(..) {
            match chunk {
                // SAFETY: every heap chunk came from `Box::into_raw` and is freed exactly
                // once, here, when no node (and so no pointer into it) can be used any more.
                Chunk::Heap(chunk) => drop(unsafe { Box::from_raw(chunk) }),
                // No node can be used any more either: the pool may hand it out again.
                Chunk::Mapped(map) => match &self.pool {
                    Some(pool) => pool.give(map),
                    None => drop(map),
                },
            }
        }
    }
}

/// Most slots a point-index probe visits.
const INDEX_MAX_PROBES: usize = 32;

/// The point index: per user key, its newest node, in an open-addressing table (linear
/// probing, never deleted from) of atomic pointers.
///
/// The writer updates it under the writer lock right after publishing a node: an empty
/// slot takes a new key, the slot of a known key moves to its newer node (with `Release`
/// stores, so a reader that sees a pointer sees the node). The engine publishes a commit's
/// sequence number only after inserting it, so a reader whose snapshot includes a commit
/// sees its index updates. A key is always found before the first empty slot of its probe
/// run, so an empty slot proves the key absent while `complete` holds.
///
/// Once three quarters of the slots are used (or a probe run reaches
/// [`INDEX_MAX_PROBES`]), a new key is not added and `complete` turns false for good: keys
/// already indexed stay exact (their slots keep following their newest nodes), and a
/// lookup that does not find its key walks the towers instead.
struct PointIndex {
    /// A power of two of slots: null, or the newest node of one user key.
    slots: Box<[AtomicPtr<NodeHeader>]>,
    /// Whether every key inserted so far is in `slots`.
    complete: AtomicBool,
}

/// What the point index says of a key.
enum Indexed {
    /// The key's newest node.
    Newest(*mut NodeHeader),
    /// The key is not in the list.
    Absent,
    /// The index cannot tell (it filled up before the key was inserted).
    Unknown,
}

impl PointIndex {
    /// An index of `slots` slots (rounded up to a power of two, at least 16).
    fn new(slots: usize) -> PointIndex {
        let count = slots.max(16).next_power_of_two();
        PointIndex {
            slots: (0..count).map(|_| AtomicPtr::new(ptr::null_mut())).collect(),
            complete: AtomicBool::new(true),
        }
    }

    /// Most keys indexed before new ones are turned away.
    fn max_keys(&self) -> usize {
        self.slots.len() / 4 * 3
    }

    /// Slot positions to probe for a key whose [`hash_key`] is `hash`, in order.
    fn probe_run(&self, hash: u64) -> impl Iterator<Item = &AtomicPtr<NodeHeader>> {
        let mask = self.slots.len() - 1;
        let start = hash as usize;
        (0..INDEX_MAX_PROBES).filter_map(move |step| self.slots.get(start.wrapping_add(step) & mask))
    }

    /// Records `node` (just published, of `user_key` with `trailer`; `hash` is the key's
    /// [`hash_key`]) as its key's newest node. Writer only; `used` counts the slots in use.
    fn record(&self, used: &mut usize, node: *mut NodeHeader, user_key: &[u8], hash: u64, trailer: u64) {
        debug_assert_eq!(hash, hash_key(user_key), "hash of another key");
        for slot in self.probe_run(hash) {
            // Only the writer stores to slots, so its own last store is what it loads.
            let held = slot.load(AtomicOrdering::Relaxed);
            if held.is_null() {
                if *used >= self.max_keys() {
                    break;
                }
                slot.store(node, AtomicOrdering::Release);
                *used += 1;
                return;
            }
            // SAFETY: a non-null slot holds a published node of this list.
            if unsafe { node_key(held) } == user_key {
                // SAFETY: as above.
                if unsafe { node_trailer(held) } < trailer {
                    slot.store(node, AtomicOrdering::Release);
                }
                return;
            }
        }
        self.complete.store(false, AtomicOrdering::Release);
    }

    /// What the index knows of `user_key` (whose [`hash_key`] is `hash`).
    fn find(&self, user_key: &[u8], hash: u64) -> Indexed {
        debug_assert_eq!(hash, hash_key(user_key), "hash of another key");
        let complete = self.complete.load(AtomicOrdering::Acquire);
        for slot in self.probe_run(hash) {
            let held = slot.load(AtomicOrdering::Acquire);
            if held.is_null() {
                break;
            }
            // SAFETY: a non-null slot holds a published node of this list.
            if unsafe { node_key(held) } == user_key {
                return Indexed::Newest(held);
            }
        }
        if complete {
            Indexed::Absent
        } else {
            Indexed::Unknown
        }
    }

    /// Bytes of the slot table.
    fn memory_bytes(&self) -> usize {
        self.slots.len() * size_of::<AtomicPtr<NodeHeader>>()
    }
}

/// Writer-side state, behind a mutex.
struct WriterState {
    /// Nodes: header, tower and key.
    arena: Arena,
    /// Values, apart from the nodes a search walks.
    values: Arena,
    rng: u64,
    /// The last insert's node (null before the first) and, per level, the last node at
    /// that level ordered at or before it (the head if none). A new key that falls just
    /// after that node (before its level-0 successor) needs no search: these are its
    /// predecessors, which makes sequential inserts O(1).
    splice: [*mut NodeHeader; MAX_HEIGHT],
    /// Slots of `index` in use.
    indexed_keys: usize,
}

/// The skiplist. See the module docs for the concurrency contract.
pub(crate) struct SkipList {
    head: *mut NodeHeader,
    max_height: AtomicUsize,
    index: PointIndex,
    writer: Mutex<WriterState>,
    memory_bytes: AtomicUsize,
    len: AtomicUsize,
}

// SAFETY: all shared mutable state is either atomic (links, counters) or behind the writer
// mutex (arenas, rng); the value pointers in node headers point into the value arena,
// which lives and stays in place as long as the list. Nodes are immutable after publication apart from their atomic links,
// and their memory lives as long as the list.
unsafe impl Send for SkipList {}
// SAFETY: see `Send`; readers only perform atomic loads and reads of immutable node bytes.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list whose arena grows in chunks of about `chunk_bytes`, with a point
    /// index of 1024 slots.
    #[cfg(test)]
    pub(crate) fn new(chunk_bytes: usize) -> Self {
        Self::with_pool(chunk_bytes, 1024, None)
    }

    /// [`SkipList::new`] with a point index of about `index_slots` slots (three quarters
    /// of them can be used), taking chunks from `pool` first and giving them back when
    /// dropped.
    pub(crate) fn with_pool(chunk_bytes: usize, index_slots: usize, pool: Option<Arc<ChunkPool>>) -> Self {
        let mut arena = Arena::new(chunk_bytes, pool.clone());
        let mut values = Arena::new(chunk_bytes, pool);
        let head = Self::alloc_node(&mut arena, &mut values, MAX_HEIGHT, b"", 0, b"");
        SkipList {
            head,
            max_height: AtomicUsize::new(1),
            index: PointIndex::new(index_slots),
            writer: Mutex::new(WriterState {
                arena,
                values,
                rng: 0x2545_F491_4F6C_DD1D,
                splice: [head; MAX_HEIGHT],
                indexed_keys: 0,
            }),
            memory_bytes: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
        }
    }

    /// Bytes of arena memory used by entries.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Bytes of the point index (allocated when the list is created).
    pub(crate) fn index_bytes(&self) -> usize {
        self.index.memory_bytes()
    }

    /// Whether every key inserted so far is in the point index.
    #[cfg(test)]
    pub(crate) fn index_complete(&self) -> bool {
        self.index.complete.load(AtomicOrdering::Acquire)
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    /// Whether the list has no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn alloc_node(
        arena: &mut Arena,
        values: &mut Arena,
        height: usize,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
    ) -> *mut NodeHeader {
        let bytes = HEADER_BYTES + height * LINK_BYTES + user_key.len();
        let node = arena.alloc(bytes).cast::<NodeHeader>();
        let value_ptr = if value.is_empty() {
            ptr::NonNull::<u8>::dangling().as_ptr()
        } else {
            let dst = values.alloc(value.len());
            // SAFETY: `dst` points to `value.len()` bytes owned by the value arena and not
            // yet shared; the source is a distinct live slice.
            unsafe { ptr::copy_nonoverlapping(value.as_ptr(), dst, value.len()) };
            dst
        };
        // SAFETY: `node` points to `bytes` zeroed bytes, 8-aligned, owned by the arena and not
        // yet shared. The header is written through a raw pointer; the tower is already null
        // (zeroed memory is a valid null `AtomicPtr`); the key is copied after it.
        unsafe {
            node.write(NodeHeader {
                trailer,
                key_len: user_key.len() as u32,
                value_len: value.len() as u32,
                height: height as u32,
                _pad: 0,
                prev: AtomicPtr::new(ptr::null_mut()),
                value: value_ptr,
            });
            let data = node.cast::<u8>().add(HEADER_BYTES + height * LINK_BYTES);
            ptr::copy_nonoverlapping(user_key.as_ptr(), data, user_key.len());
        }
        node
    }

    /// [`SkipList::insert_hashed`] computing the key's hash itself (tests).
    #[cfg(test)]
    pub(crate) fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) {
        self.insert_hashed(user_key, hash_key(user_key), trailer, value);
    }

    /// Inserts an entry; `hash` is the user key's [`hash_key`] (the memtable computes it
    /// once for its bloom filter and this list's point index). Inserts are serialized by
    /// an internal mutex (the engine also inserts under its commit lock). (user_key,
    /// trailer) must be new: with invariant checks on, inserting a duplicate panics.
    ///
    /// # Panics
    /// If the key or the value is longer than `u32::MAX` bytes.
    #[allow(clippy::indexing_slicing, reason = "`level` < `max_height` <= MAX_HEIGHT = `preds.len()`")]
    pub(crate) fn insert_hashed(&self, user_key: &[u8], hash: u64, trailer: u64, value: &[u8]) {
        assert!(user_key.len() <= u32::MAX as usize && value.len() <= u32::MAX as usize);
        let mut writer = self.writer.lock();
        let mut preds = [self.head; MAX_HEIGHT];
        let mut level = self.max_height.load(AtomicOrdering::Relaxed);
        let mut x = self.head;
        if self.splice_fits(&writer.splice, user_key, trailer) {
            // Every node before the new key is at or before `splice[0]`, so each level's
            // last node at or before `splice[0]` is its predecessor there.
            preds = writer.splice;
            level = 0;
        }
        while level > 0 {
            level -= 1;
            loop {
                // SAFETY: `x` is the head or a published node, and `level < max_height`,
                // which no tower reached by the search is shorter than.
                let next = unsafe { link(x, level) }.load(AtomicOrdering::Acquire);
                // SAFETY: a non-null link points to a published node of this list.
                if !next.is_null() && unsafe { node_cmp(next, user_key, trailer) } == Ordering::Less {
                    x = next;
                } else {
                    break;
                }
            }
            preds[level] = x;
        }
        // SAFETY: `preds[0]` is the head or a published node (height >= 1).
        let succ = unsafe { link(preds[0], 0) }.load(AtomicOrdering::Acquire);
        // The search stopped before the first node not less than the new key, so the order
        // holds if that node is greater: no duplicate (key, trailer).
        invariant!(
            // SAFETY: a non-null link points to a published node of this list.
            succ.is_null() || unsafe { node_cmp(succ, user_key, trailer) } == Ordering::Greater,
            "skiplist insert of a duplicate internal key ({user_key:?}, {trailer:#x})"
        );
        let height = random_height(&mut writer.rng);
        if height > self.max_height.load(AtomicOrdering::Relaxed) {
            // preds above the old height are already `head`.
            self.max_height.store(height, AtomicOrdering::Relaxed);
        }
        let state = &mut *writer;
        let node = Self::alloc_node(&mut state.arena, &mut state.values, height, user_key, trailer, value);
        for (level, pred) in preds.iter().enumerate().take(height) {
            // SAFETY: `node` has `height` links; each `pred` is the head (MAX_HEIGHT links)
            // or a node found at `level`, so it has more than `level` links.
            unsafe {
                link(node, level)
                    .store(link(*pred, level).load(AtomicOrdering::Relaxed), AtomicOrdering::Relaxed)
            };
        }
        for (level, slot) in writer.splice.iter_mut().enumerate() {
            *slot = if level < height { node } else { preds[level] };
        }
        let pred0 = if preds[0] == self.head { ptr::null_mut() } else { preds[0] };
        // SAFETY: `node` is initialised and not yet reachable by readers.
        unsafe { (*node).prev.store(pred0, AtomicOrdering::Relaxed) };
        for (level, pred) in preds.iter().enumerate().take(height) {
            // Publishes the node at this level: readers that see the link see the node.
            // SAFETY: as above, `pred` has more than `level` links.
            unsafe { link(*pred, level) }.store(node, AtomicOrdering::Release);
        }
        // SAFETY: `node` is now a published node with at least one link.
        let succ = unsafe { link(node, 0) }.load(AtomicOrdering::Relaxed);
        if !succ.is_null() {
            // SAFETY: `succ` is a published node of this list.
            unsafe { (*succ).prev.store(node, AtomicOrdering::Release) };
        }
        self.index.record(&mut writer.indexed_keys, node, user_key, hash, trailer);
        let bytes = HEADER_BYTES + height * LINK_BYTES + user_key.len() + value.len();
        // Plain load and store (no locked read-modify-write): only the writer, holding
        // `writer`, updates these counters.
        let used = self.memory_bytes.load(AtomicOrdering::Relaxed);
        self.memory_bytes.store(used + bytes, AtomicOrdering::Relaxed);
        let len = self.len.load(AtomicOrdering::Relaxed);
        self.len.store(len + 1, AtomicOrdering::Relaxed);
    }

    /// Whether (user_key, trailer) sorts right after `splice[0]` (the last insert, or the
    /// head): after it, and before its level-0 successor.
    fn splice_fits(&self, splice: &[*mut NodeHeader; MAX_HEIGHT], user_key: &[u8], trailer: u64) -> bool {
        let last = splice[0];
        // SAFETY: `last` is the head or a published node; non-null links point to
        // published nodes of this list.
        unsafe {
            if last != self.head && node_cmp(last, user_key, trailer) != Ordering::Less {
                return false;
            }
            let succ = link(last, 0).load(AtomicOrdering::Acquire);
            succ.is_null() || node_cmp(succ, user_key, trailer) == Ordering::Greater
        }
    }

    /// The neighbours of (user_key, trailer) at level 0: the last node before it (null
    /// if none) and the first node at or after it (null if none).
    fn find_neighbours(&self, user_key: &[u8], trailer: u64) -> (*mut NodeHeader, *mut NodeHeader) {
        let mut x = self.head;
        let mut level = self.max_height.load(AtomicOrdering::Relaxed);
        loop {
            // SAFETY: `x` is the head or a node reached at `level - 1 < max_height`.
            let next = unsafe { link(x, level - 1) }.load(AtomicOrdering::Acquire);
            // Both lines of the node at once: the comparison reads its header, then its key,
            // which often starts in the second line (misses in parallel, not one by one).
            prefetch(next);
            if level >= 2 {
                // Where the search goes if `next` is not before the target: one level
                // down. Its load then overlaps the comparison with `next` instead of
                // following it (the lower levels miss the cache at almost every step).
                // SAFETY: as above, `level - 2 < level - 1 < x.height`.
                prefetch(unsafe { link(x, level - 2) }.load(AtomicOrdering::Relaxed));
            }
            // SAFETY: a non-null link points to a published node of this list.
            if !next.is_null() && unsafe { node_cmp(next, user_key, trailer) } == Ordering::Less {
                x = next;
            } else if level == 1 {
                let before = if x == self.head { ptr::null_mut() } else { x };
                return (before, next);
            } else {
                level -= 1;
            }
        }
    }

    /// Last node, or null.
    fn find_last(&self) -> *mut NodeHeader {
        let mut x = self.head;
        let mut level = self.max_height.load(AtomicOrdering::Relaxed);
        loop {
            // SAFETY: `x` is the head or a node reached at `level - 1 < max_height`.
            let next = unsafe { link(x, level - 1) }.load(AtomicOrdering::Acquire);
            if !next.is_null() {
                x = next;
            } else if level == 1 {
                return if x == self.head { ptr::null_mut() } else { x };
            } else {
                level -= 1;
            }
        }
    }

    /// A cursor over this list, not yet positioned. It borrows the list, so the list
    /// (and every node the cursor reaches) outlives it.
    pub(crate) fn cursor(&self) -> Cursor<'_> {
        Cursor { list: self, node: ptr::null_mut() }
    }
}

// The node accessors below take raw pointers, so they are `unsafe fn`s whose common
// precondition is: `node` is the head of a live list, or a node of a live list whose
// header, key and value were written before it was published (every node a search or a
// cursor reaches); and the returned borrow `'a` does not outlive that list (its arena).

/// Level-`level` link of `node`.
///
/// # Safety
/// `node` as above, and `level < node.height` (the head is `MAX_HEIGHT` tall).
unsafe fn link<'a>(node: *const NodeHeader, level: usize) -> &'a AtomicPtr<NodeHeader> {
    // SAFETY: the caller guarantees a live node of at least `level + 1` links; its pointer
    // is derived from its arena chunk's raw pointer, so its provenance covers the tower.
    unsafe {
        debug_assert!(level < (*node).height as usize);
        &*node.cast::<u8>().add(HEADER_BYTES + level * LINK_BYTES).cast::<AtomicPtr<NodeHeader>>()
    }
}

/// The key bytes of a published node.
///
/// # Safety
/// `node` is a published (non-head) node of a live list that outlives `'a`.
unsafe fn node_key<'a>(node: *const NodeHeader) -> &'a [u8] {
    // SAFETY: a published node's header and key bytes were written before its publication
    // and are never changed; the slice lies inside the node's allocation.
    unsafe {
        let height = (*node).height as usize;
        let data = node.cast::<u8>().add(HEADER_BYTES + height * LINK_BYTES);
        std::slice::from_raw_parts(data, (*node).key_len as usize)
    }
}

/// The value bytes of a published node.
///
/// # Safety
/// As for [`node_key`].
unsafe fn node_value<'a>(node: *const NodeHeader) -> &'a [u8] {
    // SAFETY: as for `node_key`; the header's value pointer is non-null and points to
    // `value_len` bytes of the value arena written before publication and never changed
    // (or is dangling with `value_len` 0, a valid empty slice).
    unsafe { std::slice::from_raw_parts((*node).value, (*node).value_len as usize) }
}

/// The trailer of a published node.
///
/// # Safety
/// As for [`node_key`].
unsafe fn node_trailer(node: *const NodeHeader) -> u64 {
    // SAFETY: the header of a published node is initialised and immutable.
    unsafe { (*node).trailer }
}

/// Compares a published node's internal key with (user_key, trailer).
///
/// # Safety
/// As for [`node_key`].
unsafe fn node_cmp(node: *const NodeHeader, user_key: &[u8], trailer: u64) -> Ordering {
    // SAFETY: forwarded from the caller.
    unsafe { key::compare(node_key(node), node_trailer(node), user_key, trailer) }
}

/// A hint to the CPU to start loading the node at `node` (which may be null): the cache
/// line it starts in and the next one. Nodes are only 8-byte aligned, so a node's
/// level-0 link (40 bytes in) and a short key after it often lie in the second line. No
/// effect on results.
#[inline]
fn prefetch(node: *const NodeHeader) {
    stampkv_sstable::prefetch::prefetch_line(node);
    stampkv_sstable::prefetch::prefetch_line(node.wrapping_byte_add(64));
}

fn random_height(rng: &mut u64) -> usize {
    let mut height = 1;
    while height < MAX_HEIGHT {
        // xorshift64
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        if !rng.is_multiple_of(BRANCHING) {
            break;
        }
        height += 1;
    }
    height
}

/// A position in a [`SkipList`]; invalid until positioned.
pub(crate) struct Cursor<'a> {
    list: &'a SkipList,
    node: *mut NodeHeader,
}

// SAFETY: a cursor only reads published, immutable node data and atomic links of a `Sync`
// list it borrows.
unsafe impl Send for Cursor<'_> {}

impl<'a> Cursor<'a> {
    /// Whether the cursor is at an entry.
    pub(crate) fn valid(&self) -> bool {
        !self.node.is_null()
    }
    /// Moves to the first entry >= (user_key, trailer).
    pub(crate) fn seek(&mut self, user_key: &[u8], trailer: u64) {
        self.node = self.list.find_neighbours(user_key, trailer).1;
    }
    /// [`Cursor::seek_for_get_hashed`] computing the key's hash itself (tests).
    #[cfg(test)]
    pub(crate) fn seek_for_get(&mut self, user_key: &[u8], trailer: u64) {
        self.seek_for_get_hashed(user_key, hash_key(user_key), trailer);
    }
    /// For a point lookup: moves to the first entry >= (user_key, trailer) if that entry
    /// has user key `user_key` (whose [`hash_key`] is `hash`); otherwise to some entry of
    /// another user key, or off the list. Through the point index when it knows the key
    /// (its newest node, then forward over the versions newer than `trailer`); otherwise
    /// like [`Cursor::seek`].
    pub(crate) fn seek_for_get_hashed(&mut self, user_key: &[u8], hash: u64, trailer: u64) {
        let mut node = match self.list.index.find(user_key, hash) {
            Indexed::Newest(node) => node,
            Indexed::Absent => {
                self.node = ptr::null_mut();
                return;
            }
            Indexed::Unknown => return self.seek(user_key, trailer),
        };
        // The key's versions follow its newest node at level 0, newest first.
        // SAFETY: `node` (the index's newest node, then non-null level-0 links) is a
        // published node of the borrowed list.
        while !node.is_null() && unsafe { node_key(node) == user_key && node_trailer(node) > trailer } {
            // SAFETY: as above; every node has a level-0 link.
            node = unsafe { link(node, 0) }.load(AtomicOrdering::Acquire);
        }
        self.node = node;
    }
    /// Moves to the last entry <= (user_key, trailer).
    pub(crate) fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) {
        let (before, at_or_after) = self.list.find_neighbours(user_key, trailer);
        let exact = !at_or_after.is_null()
            // SAFETY: a non-null neighbour is a published node of the borrowed list.
            && unsafe { node_cmp(at_or_after, user_key, trailer) } == Ordering::Equal;
        self.node = if exact { at_or_after } else { before };
    }
    /// Moves to the first entry.
    pub(crate) fn seek_to_first(&mut self) {
        // SAFETY: the head of the borrowed list has MAX_HEIGHT links.
        self.node = unsafe { link(self.list.head, 0) }.load(AtomicOrdering::Acquire);
    }
    /// Moves to the last entry.
    pub(crate) fn seek_to_last(&mut self) {
        self.node = self.list.find_last();
    }
    /// The current node.
    ///
    /// # Panics
    /// If the cursor is not at an entry (`!valid()`): a cursor that was never positioned,
    /// or that ran off either end.
    fn current(&self) -> *mut NodeHeader {
        assert!(self.valid(), "skiplist cursor used while not positioned at an entry");
        self.node
    }
    /// Moves to the next entry.
    ///
    /// # Panics
    /// If the cursor is not at an entry.
    pub(crate) fn next(&mut self) {
        // SAFETY: `current` is a published node of the borrowed list, with >= 1 link.
        self.node = unsafe { link(self.current(), 0) }.load(AtomicOrdering::Acquire);
        if !self.node.is_null() {
            // Nodes lie in insertion order, so a scan's next node is usually a cache miss:
            // start loading the one after this while the caller works on this one.
            // SAFETY: a non-null link points to a published node of the borrowed list.
            prefetch(unsafe { link(self.node, 0) }.load(AtomicOrdering::Relaxed));
        }
    }
    /// Moves to the previous entry.
    ///
    /// # Panics
    /// If the cursor is not at an entry.
    pub(crate) fn prev(&mut self) {
        let node = self.current();
        // SAFETY: `node` is a published node of the borrowed list.
        self.node = unsafe { (*node).prev.load(AtomicOrdering::Acquire) };
    }
    /// User key of the current entry.
    ///
    /// # Panics
    /// If the cursor is not at an entry.
    pub(crate) fn user_key(&self) -> &'a [u8] {
        // SAFETY: `current` is a published node of the list borrowed for `'a`.
        unsafe { node_key(self.current()) }
    }
    /// Trailer of the current entry.
    ///
    /// # Panics
    /// If the cursor is not at an entry.
    pub(crate) fn trailer(&self) -> u64 {
        // SAFETY: `current` is a published node of the borrowed list.
        unsafe { node_trailer(self.current()) }
    }
    /// Value of the current entry.
    ///
    /// # Panics
    /// If the cursor is not at an entry.
    pub(crate) fn value(&self) -> &'a [u8] {
        // SAFETY: `current` is a published node of the list borrowed for `'a`.
        unsafe { node_value(self.current()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{trailer, EntryKind};
    use std::collections::BTreeSet;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    #[should_panic(expected = "not positioned")]
    fn reading_an_unpositioned_cursor_panics_instead_of_dereferencing_null() {
        let list = SkipList::new(4096);
        list.insert(b"a", trailer(1, EntryKind::Put), b"1");
        let _ = list.cursor().user_key();
    }

    #[test]
    #[should_panic(expected = "not positioned")]
    fn stepping_past_the_end_then_reading_panics() {
        let list = SkipList::new(4096);
        list.insert(b"a", trailer(1, EntryKind::Put), b"1");
        let mut cursor = list.cursor();
        cursor.seek_to_last();
        cursor.next();
        assert!(!cursor.valid());
        cursor.prev();
    }

    #[test]
    #[cfg(any(feature = "invariants", debug_assertions))]
    #[should_panic(expected = "duplicate internal key")]
    fn inserting_a_duplicate_internal_key_violates_an_invariant() {
        let list = SkipList::new(4096);
        list.insert(b"a", trailer(1, EntryKind::Put), b"1");
        list.insert(b"a", trailer(1, EntryKind::Put), b"2");
    }

    fn collect_forward(list: &SkipList) -> Vec<(Vec<u8>, u64)> {
        let mut c = list.cursor();
        c.seek_to_first();
        let mut out = Vec::new();
        while c.valid() {
            out.push((c.user_key().to_vec(), c.trailer()));
            c.next();
        }
        out
    }

    #[test]
    fn entries_come_back_in_internal_key_order_both_ways() {
        let list = SkipList::new(4096);
        let mut model = BTreeSet::new();
        let mut rng = 7u64;
        let count = if cfg!(miri) { 60 } else { 3000 };
        for i in 0..count {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = format!("k{:03}", (rng >> 33) % 200).into_bytes();
            let t = trailer(i, EntryKind::Put);
            list.insert(&key, t, format!("v{i}").as_bytes());
            model.insert((key, std::cmp::Reverse(t)));
        }
        let expected: Vec<_> = model.iter().map(|(k, t)| (k.clone(), t.0)).collect();
        assert_eq!(collect_forward(&list), expected);
        let mut c = list.cursor();
        c.seek_to_last();
        let mut backward = Vec::new();
        while c.valid() {
            backward.push((c.user_key().to_vec(), c.trailer()));
            c.prev();
        }
        backward.reverse();
        assert_eq!(backward, expected);
        assert_eq!(list.len(), count as usize);
    }

    /// Every level's chain is in strictly increasing order, and each level is a sublist of
    /// the one below (a node at level `l` is linked at every level under it).
    fn check_levels(list: &SkipList) {
        let mut below: Option<BTreeSet<usize>> = None;
        for level in (0..MAX_HEIGHT).rev() {
            let mut nodes = BTreeSet::new();
            let mut prev: Option<*mut NodeHeader> = None;
            // SAFETY: the head has MAX_HEIGHT links; every node reached at `level` has more
            // than `level` links, and links point to published nodes of `list`.
            let mut x = unsafe { link(list.head, level) }.load(AtomicOrdering::Acquire);
            while !x.is_null() {
                if let Some(p) = prev {
                    // SAFETY: as above.
                    let (key, t) = unsafe { (node_key(x), node_trailer(x)) };
                    // SAFETY: as above.
                    assert_eq!(unsafe { node_cmp(p, key, t) }, Ordering::Less, "level {level} out of order");
                }
                nodes.insert(x as usize);
                prev = Some(x);
                // SAFETY: as above.
                x = unsafe { link(x, level) }.load(AtomicOrdering::Acquire);
            }
            if let Some(upper) = &below {
                assert!(upper.is_subset(&nodes), "level {} holds nodes level {level} lacks", level + 1);
            }
            below = Some(nodes);
        }
    }

    /// Ascending runs (which skip the search), descending runs and random jumps, mixed:
    /// every level stays ordered and every entry is found by a seek.
    #[test]
    fn sequential_runs_and_jumps_keep_every_level_ordered() {
        let list = SkipList::new(4096);
        let mut model = BTreeSet::new();
        let mut rng = 11u64;
        let mut next_key = 0u64;
        let count = if cfg!(miri) { 80 } else { 4000 };
        let mut seq = 0;
        while seq < count {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let run = (rng >> 40) % 50;
            let (start, step): (u64, i64) = match (rng >> 33) % 3 {
                0 => (next_key, 1),
                1 => ((rng >> 20) % 100_000, 1),
                _ => ((rng >> 20) % 100_000, -1),
            };
            for j in 0..run {
                seq += 1;
                let k = start.wrapping_add_signed(step * j as i64) % 100_000;
                let key = format!("k{k:06}").into_bytes();
                let t = trailer(seq, EntryKind::Put);
                list.insert(&key, t, b"v");
                model.insert((key, std::cmp::Reverse(t)));
                next_key = k + 1;
            }
        }
        check_levels(&list);
        let expected: Vec<_> = model.iter().map(|(k, t)| (k.clone(), t.0)).collect();
        assert_eq!(collect_forward(&list), expected);
        let mut c = list.cursor();
        for (key, t) in &expected {
            c.seek(key, *t);
            assert_eq!((c.user_key(), c.trailer()), (key.as_slice(), *t));
        }
    }

    #[test]
    fn seeks_land_on_the_right_versions() {
        let list = SkipList::new(4096);
        for seq in [3u64, 5, 9] {
            list.insert(b"b", trailer(seq, EntryKind::Put), &seq.to_le_bytes());
        }
        list.insert(b"a", trailer(1, EntryKind::Put), b"a1");
        list.insert(b"c", trailer(2, EntryKind::Delete), b"");
        let mut c = list.cursor();
        c.seek(b"b", key::seek_trailer(6));
        assert_eq!((c.user_key(), key::trailer_seq(c.trailer())), (&b"b"[..], 5));
        assert_eq!(c.value(), &5u64.to_le_bytes());
        c.seek(b"b", key::seek_trailer(2));
        assert_eq!(c.user_key(), b"c");
        c.seek_for_prev(b"b", key::seek_trailer(6));
        assert_eq!((c.user_key(), key::trailer_seq(c.trailer())), (&b"b"[..], 9));
        c.seek_for_prev(b"a", 0);
        assert_eq!(c.user_key(), b"a");
        c.seek_for_prev(b"", 0);
        assert!(!c.valid());
        c.seek(b"d", u64::MAX);
        assert!(!c.valid());
    }

    #[test]
    fn large_values_get_their_own_chunks() {
        let list = SkipList::new(4096);
        let big = vec![0xAB; 10_000];
        list.insert(b"big", trailer(1, EntryKind::Put), &big);
        list.insert(b"small", trailer(2, EntryKind::Put), b"s");
        let mut c = list.cursor();
        c.seek(b"big", u64::MAX);
        assert_eq!(c.value(), &big[..]);
        c.next();
        assert_eq!(c.value(), b"s");
        assert!(list.memory_bytes() >= 10_000);
    }

    #[test]
    fn readers_see_a_sorted_list_while_a_writer_inserts() {
        let list = Arc::new(SkipList::new(4096));
        let done = Arc::new(AtomicBool::new(false));
        let total = if cfg!(miri) { 200 } else { 20_000u64 };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (list, done) = (list.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut scans = 0;
                    while !done.load(AtomicOrdering::Acquire) || scans < 2 {
                        let entries = collect_forward(&list);
                        for pair in entries.windows(2) {
                            let ord = key::compare(&pair[0].0, pair[0].1, &pair[1].0, pair[1].1);
                            assert_eq!(ord, Ordering::Less);
                        }
                        for (k, t) in &entries {
                            assert_eq!(k, format!("{:08}", key::trailer_seq(*t) * 7919 % total).as_bytes());
                        }
                        scans += 1;
                    }
                })
            })
            .collect();
        for seq in 0..total {
            let key = format!("{:08}", seq * 7919 % total);
            list.insert(key.as_bytes(), trailer(seq, EntryKind::Put), b"v");
        }
        done.store(true, AtomicOrdering::Release);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(collect_forward(&list).len() as u64, total);
    }

    /// Point lookups through the index land where a seek does whenever the seek lands on
    /// the key, and nowhere on the key otherwise: for present and absent keys, versions
    /// newer and older than the target, and indexes that fill up part-way (16 slots) or
    /// never (4096).
    #[test]
    fn point_lookups_agree_with_seeks_as_the_index_fills() {
        let mut rng = stampkv_testkit::SplitMix64::new(5);
        for index_slots in [16, 64, 4096] {
            let list = SkipList::with_pool(4096, index_slots, None);
            let mut seq = 0u64;
            for step in 0..3000 {
                if rng.below(3) > 0 {
                    seq += 1;
                    let key = format!("k{}", rng.below(120));
                    list.insert(key.as_bytes(), trailer(seq, EntryKind::Put), &seq.to_le_bytes());
                }
                let probe = format!("k{}", rng.below(150));
                let target = key::seek_trailer(rng.below(seq + 2));
                let (mut by_index, mut by_seek) = (list.cursor(), list.cursor());
                by_index.seek_for_get(probe.as_bytes(), target);
                by_seek.seek(probe.as_bytes(), target);
                let hit =
                    |c: &Cursor<'_>| (c.valid() && c.user_key() == probe.as_bytes()).then(|| c.trailer());
                assert_eq!(
                    hit(&by_index),
                    hit(&by_seek),
                    "slots {index_slots}, step {step}, {probe} at {target:#x}"
                );
            }
            assert_eq!(list.index_complete(), index_slots == 4096, "slots {index_slots}");
        }
    }

    /// Readers doing point lookups at the last published sequence while a writer inserts
    /// new versions and new keys (the index fills up part-way): every lookup finds the
    /// newest version at or below its sequence.
    #[test]
    fn point_lookups_see_every_published_version_while_a_writer_inserts() {
        let list = Arc::new(SkipList::with_pool(4096, 256, None));
        let published = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let total = if cfg!(miri) { 300 } else { 30_000u64 };
        // Commit `seq` writes key `seq % 400` with value `seq`: the newest version of key
        // `k` at or below `s` is the largest `seq <= s` with `seq % 400 == k`.
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (list, published) = (list.clone(), published.clone());
                std::thread::spawn(move || {
                    let mut rng = stampkv_testkit::SplitMix64::new(r);
                    loop {
                        let at = published.load(AtomicOrdering::Acquire);
                        let k = rng.below(400);
                        let mut c = list.cursor();
                        c.seek_for_get(format!("{k:04}").as_bytes(), key::seek_trailer(at));
                        let found = (c.valid() && c.user_key() == format!("{k:04}").as_bytes())
                            .then(|| u64::from_le_bytes(c.value().try_into().unwrap()));
                        let expected = (k <= at && k > 0 || k == 0 && at >= 400).then(|| at - (at - k) % 400);
                        assert_eq!(found, expected, "key {k} at {at}");
                        if at == total {
                            break;
                        }
                    }
                })
            })
            .collect();
        for seq in 1..=total {
            let k = seq % 400;
            list.insert(format!("{k:04}").as_bytes(), trailer(seq, EntryKind::Put), &seq.to_le_bytes());
            published.store(seq, AtomicOrdering::Release);
        }
        for r in readers {
            r.join().unwrap();
        }
    }
}
