//! A WebPage's spec converted between `v1` and `v2`, as JSON: the rest of the page (metadata,
//! status) is the same in both.

use serde::Serialize;
use serde::de::DeserializeOwned;
use wasmop_guest::serde_json::{self, Value};

use crate::v1::WebPageSpec;
use crate::v2::{Content, Exposure, Spec};

/// A v1 spec as v2's.
pub fn to_v2(spec: Value) -> Result<Value, String> {
    let v1: WebPageSpec = decode(spec)?;
    let exposure = v1.exposed.map(|exposed| if exposed { Exposure::Public } else { Exposure::Private });
    encode(&Spec { content: Content { html: v1.html }, exposure })
}

/// A v2 spec as v1's.
pub fn to_v1(spec: Value) -> Result<Value, String> {
    let v2: Spec = decode(spec)?;
    encode(&WebPageSpec { html: v2.content.html, exposed: v2.exposure.map(|exposure| exposure == Exposure::Public) })
}

fn decode<T: DeserializeOwned>(spec: Value) -> Result<T, String> {
    serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))
}

fn encode(spec: &impl Serialize) -> Result<Value, String> {
    serde_json::to_value(spec).map_err(|e| format!("spec: {e}"))
}
