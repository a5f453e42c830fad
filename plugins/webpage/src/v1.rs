//! The WebPage's `v1`, the version stored and reconciled.

use serde::{Deserialize, Serialize};
use wasmop_guest::schemars::JsonSchema;

// ANCHOR: spec
/// A web page served by nginx (`v1`).
#[derive(Deserialize, Serialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
pub struct WebPageSpec {
    /// The HTML the page serves.
    #[schemars(extend("x-kubernetes-validations" = [
        { "rule": "size(self) <= 1048576", "message": "the HTML must fit in a ConfigMap (1 MiB)" }
    ]))]
    pub html: String,
    /// Whether an Ingress routes to the page; the mutating webhook makes it `false` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposed: Option<bool>,
}
// ANCHOR_END: spec
