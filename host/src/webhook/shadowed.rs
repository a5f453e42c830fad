//! A shadow candidate's answers to the webhook requests its live version answered
//! ([`crate::shadow`]): asked the same review, once the live answer is made, through the same
//! path ([`super::call`]), compared and counted, never returned.

use std::sync::Arc;

use bytes::Bytes;

use super::call::{self, Path, Plugin};
use super::{conversion, review};
use crate::object::ObjectKey;
use crate::shadow::Shadow;

/// Has `plugin`'s candidate in `shadow`, if it has one, answer `body` too, and compares with
/// the review `live` the live version answered.
pub fn compare(shadow: &Arc<Shadow>, plugin: &Plugin<'_>, path: Path, body: Bytes, live: &str) {
    if shadow.candidate().is_none() {
        return;
    }
    let Some(key) = about(path, &body) else { return };
    let (name, cache) = (plugin.name.to_string(), plugin.cache.clone());
    let webhook = format!("{}/{name}", path.prefix());
    shadow.compare_answer((webhook, key), live.to_string(), move |module| async move {
        let candidate = Plugin { name: &name, module: &module, cache };
        if !call::serves(candidate.module, path) {
            return None;
        }
        let answered = match path {
            Path::Convert => call::convert(&candidate, &body).await,
            Path::Validate | Path::Mutate => call::admit(&candidate, path, &body).await,
        };
        answered.ok()
    });
}

/// The object a review is about: the admitted one, or a conversion's first.
fn about(path: Path, body: &[u8]) -> Option<ObjectKey> {
    match path {
        Path::Convert => {
            let request = conversion::parse(body).ok()?;
            let first = request.objects.first()?;
            let metadata = &first["metadata"];
            let namespace = metadata["namespace"].as_str().map(str::to_string);
            Some(ObjectKey { namespace, name: metadata["name"].as_str().unwrap_or_default().to_string() })
        }
        Path::Validate | Path::Mutate => {
            let request = review::parse(body).ok()?;
            Some(ObjectKey { namespace: request.namespace, name: request.name })
        }
    }
}
