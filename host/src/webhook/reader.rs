//! What a webhook call reads: the plugin's caches, as its reconciles and `map-inbound` do, once
//! its controller has subscribed its watches. Until then (the controller starts, or waits for a
//! kind the API server does not serve yet) a webhook is still called, with reads that fail
//! saying why: admission must not wait for the caches, and a conversion webhook may be what the
//! primary's own watch waits for.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt as _};

use crate::host::Host;
use crate::runtime::bindings::wasmop::plugin::types::KindRef;
use crate::runtime::{CacheReader, GetResult, ListResult, Module};

/// Plugin `name`'s current module and what its webhook calls read, if it runs.
pub fn plugin(host: &Host, name: &str) -> Option<(Arc<Module>, Arc<dyn CacheReader>)> {
    let (module, inlet) = host.inlet(name)?;
    let reader: Arc<dyn CacheReader> = match inlet.reader() {
        Ok(reader) => reader,
        Err(_) => Arc::new(NotYet),
    };
    Some((module, reader))
}

/// The reads of a plugin whose caches are not there yet.
struct NotYet;

impl NotYet {
    fn refuse<T>(kind: &KindRef) -> Result<T, String> {
        Err(format!("the plugin's caches are not ready yet (asked for {})", kind.kind))
    }
}

impl CacheReader for NotYet {
    fn get<'a>(&'a self, kind: &'a KindRef, _: Option<&'a str>, _: &'a str) -> BoxFuture<'a, GetResult> {
        futures::future::ready(Self::refuse(kind)).boxed()
    }
    fn list<'a>(&'a self, kind: &'a KindRef, _: Option<&'a str>, _: Option<&'a str>) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Self::refuse(kind)).boxed()
    }
    fn secondaries<'a>(&'a self, kind: &'a KindRef) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Err(format!("a webhook call has no primary being reconciled (asked for {})", kind.kind)))
            .boxed()
    }
}
