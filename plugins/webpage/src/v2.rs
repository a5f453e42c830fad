//! The WebPage's `v2`: the HTML moves into `spec.content.html`, and `spec.exposure` (`Public` or
//! `Private`) says what v1's `spec.exposed` says. The plugin converts a page's spec between the
//! versions; its metadata and status are the same in both.

use serde::{Deserialize, Serialize};
use wasmop_guest::schemars::JsonSchema;
use wasmop_guest::serde_json::{self, Value};

use crate::WebPageSpec;

// ANCHOR: spec
/// A web page served by nginx (`v2`).
#[derive(Deserialize, Serialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
pub struct Spec {
    /// What the page serves.
    content: Content,
    /// Whether an Ingress routes to the page; the mutating webhook makes it `Private` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    exposure: Option<Exposure>,
}

/// What a page serves.
#[derive(Deserialize, Serialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
pub struct Content {
    /// The HTML the page serves.
    #[schemars(extend("x-kubernetes-validations" = [
        { "rule": "size(self) <= 1048576", "message": "the HTML must fit in a ConfigMap (1 MiB)" }
    ]))]
    html: String,
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

/// A v1 spec (JSON) as v2's.
pub fn from_v1(spec: Value) -> Result<Value, String> {
    let v1: WebPageSpec = decode(spec)?;
    let exposure = v1.exposed.map(|exposed| if exposed { Exposure::Public } else { Exposure::Private });
    encode(&Spec { content: Content { html: v1.html }, exposure })
}

/// A v2 spec (JSON) as v1's.
pub fn to_v1(spec: Value) -> Result<Value, String> {
    let v2: Spec = decode(spec)?;
    encode(&WebPageSpec { html: v2.content.html, exposed: v2.exposure.map(|exposure| exposure == Exposure::Public) })
}

fn decode<T: serde::de::DeserializeOwned>(spec: Value) -> Result<T, String> {
    serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))
}

fn encode(spec: &impl Serialize) -> Result<Value, String> {
    serde_json::to_value(spec).map_err(|e| format!("spec: {e}"))
}
