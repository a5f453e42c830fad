//! The WebPage's `v2`: the HTML moves into `spec.content.html`, and `spec.exposure` (`Public` or
//! `Private`) says what v1's `spec.exposed` says. Its metadata and status are v1's.

use serde::{Deserialize, Serialize};
use wasmop_guest::schemars::JsonSchema;

// ANCHOR: spec
/// A web page served by nginx (`v2`).
#[derive(Deserialize, Serialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
pub struct Spec {
    /// What the page serves.
    pub content: Content,
    /// Whether an Ingress routes to the page; the mutating webhook makes it `Private` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposure: Option<Exposure>,
}

/// What a page serves.
#[derive(Deserialize, Serialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
pub struct Content {
    /// The HTML the page serves.
    #[schemars(extend("x-kubernetes-validations" = [
        { "rule": "size(self) <= 1048576", "message": "the HTML must fit in a ConfigMap (1 MiB)" }
    ]))]
    pub html: String,
}

/// Who reaches the page.
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[schemars(crate = "wasmop_guest::schemars")]
pub enum Exposure {
    /// An Ingress routes to the page.
    Public,
    /// Only the page's Service reaches it.
    Private,
}
// ANCHOR_END: spec
