//! The host's allocator: jemalloc, with the settings of [`JEMALLOC_CONF`].

/// The allocator: jemalloc, with the settings of [`JEMALLOC_CONF`]. glibc's malloc (and musl's,
/// in the image) kept what the host freed in free lists between the long-lived cached objects:
/// at 10,000 objects its heap peaked at 56 MiB (heaptrack) while 69 MiB of its arenas were
/// resident, against 66 MiB in all with jemalloc (`make bench`, part `burst-10k`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts; `_RJEM_MALLOC_CONF` in the environment adds to and
/// overrides them (`_RJEM_MALLOC_CONF=confirm_conf:true` prints what it uses):
/// - one arena (`narenas:1`; jemalloc's default is four per CPU, each holding freed pages of its
///   own): the host waits on the API server far more than it allocates, and every thread keeps
///   a cache of small blocks (`tcache_max:4096`: blocks up to 4 KiB, a cached object's parts);
/// - freed pages go back to the system after a second (`dirty_decay_ms:1000`,
///   `muzzy_decay_ms:0`), purged by jemalloc's own thread (`background_thread:true`), not by the
///   thread that frees;
/// - blocks over 1 MiB (`oversize_threshold:1048576`, 8 MiB by default) come from jemalloc's
///   arena for large blocks, which returns them as soon as they are freed: the arrays of the
///   tables with an entry per object, whose old array a table frees each time it doubles. Kept
///   for a second, those were most of what a sharded host of part `scale` held beyond its share
///   (100,000 objects: 70.3-73.4 MiB anonymous at 8 MiB in two rounds, 66.8-68.6 at 1 MiB in one;
///   the single host 193.2-197.1 and 188.9; CPU within the spread).
///
/// `make bench` (one round each, wasmop only): at 10,000 objects 66.2 MiB anonymous against
/// 72.4-73.1 with glibc's malloc; at 1,000 11.3-11.7 against 11.1-12.5; CPU within the spread.
/// Four arenas per CPU: 68.0 and 12.8-13.6 MiB; no thread caches: 66.0 and 10.9-11.2 MiB, but
/// 10% more CPU.
#[allow(unsafe_code, reason = "the name jemalloc reads its settings from; a constant C string")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: &[u8; 113] =
    b"narenas:1,tcache_max:4096,dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true,oversize_threshold:1048576\0";
