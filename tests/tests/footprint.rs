//! What grows with the objects outside a bounded cache's pool, measured at 100,000 objects
//! (`FOOTPRINT_OBJECTS`) by a counting global allocator: the bounded watch's index (every key
//! and its tag), the change filter's record of each primary, and the scheduler's entry of each
//! key once it ran. Needs no cluster. Prints the heap bytes per object of each structure:
//! `cargo test -p wasmop-tests --test footprint -- --nocapture`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kube::api::{ApiResource, GroupVersionKind, ListParams};
use kube::runtime::watcher::Event;
use wasmop::controller::{ChangeFilter, Filters, Version};
use wasmop::informer::{Bounded, Budget, Pool, PoolMetrics, Shape};
use wasmop::object::ObjectKey;
use wasmop::scheduler::{self, Settings, Verdict};
use wasmop::wire::Object;

#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

fn objects() -> usize {
    std::env::var("FOOTPRINT_OBJECTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

/// The key of object `i`: a name and namespace of the lengths the bench's Greetings have.
fn key(i: usize) -> ObjectKey {
    ObjectKey { namespace: Some("bench-10k-wasmop".into()), name: format!("greeting-{i:06}") }
}

fn uid(i: usize) -> String {
    format!("{i:08x}-1b2c-4d3e-8f40-5a6b7c8d9e0f")
}

/// Heap bytes per object that `build` leaves allocated, of `n` objects.
fn per_object(n: usize, build: impl FnOnce()) -> f64 {
    let before = ALLOCATOR.allocated();
    build();
    (ALLOCATOR.allocated() as f64 - before as f64) / n as f64
}

#[tokio::test]
async fn bytes_per_object_outside_the_pool() {
    let n = objects();
    let mut report = BTreeMap::new();

    // The bounded watch's index, with a pool that holds nothing.
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("demo.wasmop.dev", "v1", "Greeting"));
    let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let pool = Pool::new("footprint", Budget { bytes: 0, idle: None }, PoolMetrics::default());
    let store = Bounded::new(pool, client, resource.clone(), None, ListParams::default(), Shape::default());
    report.insert(
        "bounded index (key, resourceVersion, uid)",
        per_object(n, || {
            for i in 0..n {
                let key = key(i);
                let mut object = Object::new(&key.name, &resource).within(key.namespace.as_deref().unwrap());
                object.metadata.resource_version = Some(format!("{}", 1_000_000 + i));
                object.metadata.uid = Some(uid(i));
                store.apply(&Event::Apply(Arc::new(object)));
            }
        }),
    );
    assert_eq!(store.keys().len(), n);

    // The change filter, given what the host gives it: metadata with two labels, an annotation
    // and the host's finalizer.
    let mut filter = ChangeFilter::new(Filters::default());
    report.insert(
        "change filter",
        per_object(n, || {
            for i in 0..n {
                let version = Version {
                    uid: Some(uid(i)),
                    generation: Some(1),
                    resource_version: Some(format!("{}", 1_000_000 + i)),
                    deleting: false,
                    finalizers: Some(vec!["wasmop.dev/greeting".into()]),
                    annotations: Some([("example.com/owner".to_string(), "team-a".to_string())].into()),
                    labels: Some(
                        [("app".to_string(), "greeting".to_string()), ("tier".to_string(), "web".to_string())].into(),
                    ),
                };
                filter.admit(&key(i), version);
            }
        }),
    );

    // The scheduler once every key ran, with the host's default maximum interval (10 h): an
    // entry and a timer per key.
    let ran = Arc::new(AtomicUsize::new(0));
    let (handle, inbox) = scheduler::channel::<ObjectKey>();
    let settings = Settings { max_interval: Some(Duration::from_secs(36_000)), ..Settings::default() };
    let counted = ran.clone();
    let scheduler = tokio::spawn(scheduler::run(inbox, settings, move |_run| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Verdict::Done { requeue_after: None } }
    }));
    let before = ALLOCATOR.allocated();
    for i in 0..n {
        handle.trigger(key(i));
    }
    while ran.load(Ordering::SeqCst) < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The last runs' bookkeeping settles.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let bytes = (ALLOCATOR.allocated() as f64 - before as f64) / n as f64;
    report.insert("scheduler (after each key ran once)", bytes);

    let total: f64 = report.values().sum();
    println!("heap bytes per object outside the pool, {n} objects:");
    for (structure, bytes) in &report {
        println!("  {structure}: {bytes:.0}");
    }
    println!("  total: {total:.0}");
    drop(handle);
    scheduler.abort();
}
