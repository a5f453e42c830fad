//! What `wasmop test` prints of a fixture: the writes the host would make, the events and the
//! requeue of every pass, then `ok` or `FAILED` with the unmet expectations; with `--output
//! json`, also the store and the external system as the loop left them ([`End`]), which the Python and TypeScript SDKs'
//! `FakeHost.run_until_stable` read.

use std::collections::BTreeMap;

use serde::Serialize;
use wasmop_core::KindRef;
use wasmop_core::fixture::{self, Scenario};
use wasmop_core::settle::{Event, Failure, Pass, Write};

/// One pass as shown: its writes, events, requeue and error.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownPass<'a> {
    /// `initial`, or the change that led to it.
    pub stage: &'a str,
    /// Its number within the stage, from 1.
    pub pass: usize,
    /// What the host would write.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub writes: &'a [Write],
    /// The events it would record.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub events: &'a [Event],
    /// The reschedule the reconcile asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_ms: Option<u64>,
    /// How the reconcile failed (`transient`, `permanent` or `invalid`, and the message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<BTreeMap<&'static str, &'a str>>,
}

impl<'a> ShownPass<'a> {
    fn of(stage: &'a str, number: usize, pass: &'a Pass) -> Self {
        let mut shown =
            ShownPass { stage, pass: number, writes: &pass.writes, events: &[], requeue_ms: None, error: None };
        match &pass.result {
            Ok(outcome) => {
                shown.events = &outcome.events;
                shown.requeue_ms = outcome.reschedule_after_ms;
            }
            Err(failure) => {
                let kind = match failure {
                    Failure::Transient(_) => "transient",
                    Failure::Permanent(_) => "permanent",
                    Failure::Invalid(_) => "invalid",
                };
                shown.error = Some(BTreeMap::from([(kind, failure.message())]));
            }
        }
        shown
    }
}

/// A fixture's run as shown: its name and description, every pass of every stage, and the
/// verdict (`ok`, `FAILED` with the unmet expectations, or none for a fixture that expects
/// nothing).
#[derive(Debug, Serialize)]
pub struct Shown<'a> {
    /// The fixture's file name, without `.yaml`.
    pub fixture: &'a str,
    /// What it shows.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub description: &'a str,
    /// Every pass of every stage.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub passes: Vec<ShownPass<'a>>,
    /// A webhook fixture's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<&'a serde_json::Value>,
    /// `ok` or `FAILED`; absent when the fixture expects nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'static str>,
    /// The unmet expectations.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub failures: &'a [String],
    /// The store as the loop left it (shown with `--output json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<End<'a>>,
}

/// The store and the external system as a fixture's loop left them.
#[derive(Debug, Serialize)]
pub struct End<'a> {
    /// The primary.
    pub primary: &'a serde_json::Value,
    /// Every stored object (the primary's too), with its kind.
    pub objects: Vec<Stored<'a>>,
    /// The external system's objects.
    pub external: Vec<ShownExternal<'a>>,
}

/// An object of the external system.
#[derive(Debug, Serialize)]
pub struct ShownExternal<'a> {
    /// Its external dependent.
    pub dependent: &'a str,
    /// Its key among the dependent's objects.
    pub key: &'a str,
    /// The ID the external system gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a str>,
    /// The object.
    pub object: &'a serde_json::Value,
}

/// A stored object and its kind.
#[derive(Debug, Serialize)]
pub struct Stored<'a> {
    /// The object's kind.
    pub kind: &'a KindRef,
    /// The object.
    pub object: &'a serde_json::Value,
}

impl<'a> End<'a> {
    /// The end of `outcome`'s loop.
    pub fn of(outcome: &'a fixture::Outcome) -> Self {
        let objects = outcome.objects.iter().map(|(kind, object)| Stored { kind, object }).collect();
        let external = outcome
            .external
            .iter()
            .map(|o| ShownExternal { dependent: &o.dependent, key: &o.key, id: o.id.as_deref(), object: &o.object })
            .collect();
        End { primary: &outcome.primary, objects, external }
    }
}

/// Shows `scenario`'s run.
pub fn render<'a>(scenario: &'a Scenario, outcome: &'a fixture::Outcome) -> Shown<'a> {
    let passes = outcome
        .stages
        .iter()
        .flat_map(|stage| stage.passes.iter().enumerate().map(|(i, p)| ShownPass::of(&stage.title, i + 1, p)))
        .collect();
    let expects = scenario.expect.is_some() || !scenario.changes.is_empty();
    Shown {
        fixture: &scenario.name,
        description: &scenario.description,
        passes,
        answer: None,
        result: expects.then_some(if outcome.failures.is_empty() { "ok" } else { "FAILED" }),
        failures: &outcome.failures,
        end: None,
    }
}
