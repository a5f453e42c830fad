//! The recent LISTs of a bounded watch, by namespace. Readers that ask while a LIST is under way
//! wait for it, and one that ended less than [`REUSE`] ago serves them too, so lists of a
//! bounded kind cost the API server at most one LIST per namespace per [`REUSE`], however many
//! reconciles ask. A LIST is held only that long (or while a reader still uses it), outside the
//! pool's budget; readers check each of its objects against the watch's index and fetch what
//! changed since.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::object::ObjectKey;
use crate::wire::Object;

/// How long a LIST serves later readers.
pub const REUSE: Duration = Duration::from_secs(2);

/// A LIST's objects by key.
pub type Listed = Arc<HashMap<ObjectKey, Arc<Object>>>;

/// The recent LIST of one namespace (or of all of them), once it ended.
type Scope = Arc<tokio::sync::Mutex<Weak<HashMap<ObjectKey, Arc<Object>>>>>;

/// A bounded watch's recent LISTs.
#[derive(Default)]
pub struct Snapshots {
    scopes: Mutex<HashMap<Option<String>, Scope>>,
}

impl Snapshots {
    /// The recent LIST of `namespace`, or a new one by `list` when there is none: at most one
    /// `list` runs per namespace at a time, and the others wait for its result.
    pub async fn get_or_list<F, Fut>(&self, namespace: Option<&str>, list: F) -> Result<Listed, kube::Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<Arc<Object>>, kube::Error>>,
    {
        let scope = {
            let mut scopes = self.scopes.lock().expect("never poisoned");
            scopes.entry(namespace.map(String::from)).or_default().clone()
        };
        let mut recent = scope.lock().await;
        if let Some(listed) = recent.upgrade() {
            return Ok(listed);
        }
        let listed: Listed =
            Arc::new(list().await?.into_iter().filter_map(|o| Some((crate::object::key_of(&o)?, o))).collect());
        *recent = Arc::downgrade(&listed);
        let held = listed.clone();
        tokio::spawn(async move {
            tokio::time::sleep(REUSE).await;
            drop(held);
        });
        Ok(listed)
    }
}
