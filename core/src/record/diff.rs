//! A readable diff of two endings of one reconcile: the recorded one and a replay's with another
//! version of the plugin (`wasmop replay RECORD --plugin other.wasm`).
//!
//! Each side is first summed up ([`Summary::of`] its steps' endings): the verdict, the status
//! it merges, the labels and annotations it sets, the desired objects by kind, namespace and
//! name, and its events. The diff ([`diff`]) then prints, section by section and only where the
//! sides differ:
//!
//! ```text
//! verdict: reconciled → failed (transient): no quota
//! status:
//!   phase: "Pending" → "Ready"
//!   replicas: added 3
//! desired objects:
//!   + apps/v1 Deployment ns/web
//!   - v1 Service ns/old
//!   ~ v1 ConfigMap ns/web
//!       data.index: "a" → "b"
//! events:
//!   - Normal Reconciled (Reconcile): created
//!   + Warning Failed (Reconcile): no quota
//! ```
//!
//! Fields are named by their path (`spec.containers[0].image`, `metadata.labels["a.b/c"]`) in
//! sorted order, so the same two endings always print the same diff. Long values are shortened
//! to [`MAX_VALUE_CHARS`] characters.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde_json::{Map, Value};

use super::format::{Ending, Event, Failure, Outcome};

/// The longest value a diff line shows whole.
pub const MAX_VALUE_CHARS: usize = 120;

/// One side of a diff: what a reconcile's endings come to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// How it ended, in words: `reconciled`, `failed (transient): …`.
    pub verdict: String,
    /// The status it merges (an object; empty when none).
    pub status: Value,
    /// The labels and annotations it sets (`null` removes one), as `{labels, annotations}`.
    pub metadata: Value,
    /// The desired objects, by `apiVersion Kind namespace/name`.
    pub desired: BTreeMap<String, Value>,
    /// The events, one line each.
    pub events: Vec<String>,
}

impl Summary {
    /// The summary of a reconcile's `endings`, in the order of its steps. The verdict is the
    /// first failure or trap, else the last reconcile or cleanup; the status is the last one
    /// merged (the reconcile's, or `update-error-status`'s).
    pub fn of<'a>(endings: impl IntoIterator<Item = &'a Ending>) -> Self {
        let empty = || Value::Object(Map::new());
        let mut summary = Summary { status: empty(), metadata: empty(), ..Summary::default() };
        let mut failed = false;
        for ending in endings {
            match ending {
                Ending::Desired(objects) => {
                    for (i, desired) in objects.iter().enumerate() {
                        let object = json(&desired.object);
                        let key = object_key(&object).unwrap_or_else(|| format!("{} #{i}", desired.dependent));
                        summary.desired.insert(key, object);
                    }
                }
                Ending::Reconciled(outcome) => {
                    summary.take_outcome(outcome);
                    if !failed {
                        summary.verdict = reconciled(outcome);
                    }
                }
                Ending::CleanedUp(outcome) => {
                    summary.events.extend(outcome.events.iter().map(event_line));
                    if !failed {
                        summary.verdict = match outcome.reschedule_after_ms {
                            Some(ms) => format!("cleaned up, again in {ms} ms"),
                            None => "cleaned up".to_owned(),
                        };
                        if outcome.keep_finalizer {
                            summary.verdict.push_str(", finalizer kept");
                        }
                    }
                }
                Ending::ErrorStatus(Some(status)) => summary.status = json(status),
                Ending::ErrorStatus(None) | Ending::Applied(_) | Ending::Deleted => {}
                Ending::Failed(failure) if !failed => (failed, summary.verdict) = (true, failure_words(failure)),
                Ending::Trapped(cause) if !failed => (failed, summary.verdict) = (true, format!("trapped: {cause}")),
                Ending::Failed(_) | Ending::Trapped(_) => {}
            }
        }
        summary
    }

    fn take_outcome(&mut self, outcome: &Outcome) {
        if let Some(status) = &outcome.status {
            self.status = json(status);
        }
        let entries = |pairs: &[(String, Option<String>)]| {
            pairs.iter().map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String))).collect::<Map<_, _>>()
        };
        let mut metadata = Map::new();
        for (field, pairs) in [("labels", &outcome.labels), ("annotations", &outcome.annotations)] {
            if !pairs.is_empty() {
                metadata.insert(field.to_owned(), Value::Object(entries(pairs)));
            }
        }
        self.metadata = Value::Object(metadata);
        self.events.extend(outcome.events.iter().map(event_line));
    }
}

/// `text` as JSON; text that is not JSON stays a string.
fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `apiVersion Kind namespace/name` of an object.
fn object_key(object: &Value) -> Option<String> {
    let metadata = &object["metadata"];
    let name = metadata["name"].as_str()?;
    let at = match metadata["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    };
    Some(format!("{} {} {at}", object["apiVersion"].as_str()?, object["kind"].as_str()?))
}

/// The verdict of a successful reconcile.
fn reconciled(outcome: &Outcome) -> String {
    let mut words = "reconciled".to_owned();
    if let Some(readiness) = &outcome.readiness {
        let state = if readiness.ready { "ready" } else { "not ready" };
        let _ = write!(words, ", {state}: {}", readiness.message);
    }
    if let Some(ms) = outcome.reschedule_after_ms {
        let _ = write!(words, ", again in {ms} ms");
    }
    words
}

/// The verdict of a failed export.
fn failure_words(failure: &Failure) -> String {
    match failure {
        Failure::Transient(message) => format!("failed (transient): {message}"),
        Failure::Permanent(message) => format!("failed (permanent): {message}"),
        Failure::Invalid(message) => format!("failed (invalid): {message}"),
    }
}

/// One event on one line.
fn event_line(event: &Event) -> String {
    let mut line = format!("{} {} ({})", event.event_type, event.reason, event.action);
    if let Some(note) = &event.note {
        let _ = write!(line, ": {note}");
    }
    line
}

/// The differences between two summaries, ready to print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// The verdicts, when they differ.
    pub verdict: Option<(String, String)>,
    /// Changed status fields, one line each.
    pub status: Vec<String>,
    /// Changed labels and annotations, one line each.
    pub metadata: Vec<String>,
    /// Desired objects added (`+`), removed (`-`) and changed (`~`, with their fields).
    pub desired: Vec<String>,
    /// Events only the recorded side has (`-`) and only the replay has (`+`).
    pub events: Vec<String>,
}

impl Diff {
    /// Whether the two sides are the same.
    pub fn is_empty(&self) -> bool {
        self == &Diff::default()
    }
}

/// The differences from `recorded` to `replayed`.
pub fn diff(recorded: &Summary, replayed: &Summary) -> Diff {
    let verdict = (recorded.verdict != replayed.verdict).then(|| (recorded.verdict.clone(), replayed.verdict.clone()));
    let mut status = Vec::new();
    changes("", &recorded.status, &replayed.status, &mut status);
    let mut metadata = Vec::new();
    changes("", &recorded.metadata, &replayed.metadata, &mut metadata);
    Diff {
        verdict,
        status,
        metadata,
        desired: desired_changes(&recorded.desired, &replayed.desired),
        events: event_changes(&recorded.events, &replayed.events),
    }
}

/// The desired objects added, removed and changed.
fn desired_changes(old: &BTreeMap<String, Value>, new: &BTreeMap<String, Value>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut lines = Vec::new();
    for key in keys {
        match (old.get(key), new.get(key)) {
            (Some(_), None) => lines.push(format!("- {key}")),
            (None, Some(_)) => lines.push(format!("+ {key}")),
            (Some(before), Some(after)) if before != after => {
                lines.push(format!("~ {key}"));
                let mut fields = Vec::new();
                changes("", before, after, &mut fields);
                lines.extend(fields.into_iter().map(|field| format!("    {field}")));
            }
            _ => {}
        }
    }
    lines
}

/// The events only `old` has (`-`), then those only `new` has (`+`), each in its order; an event
/// both have as often is no difference.
fn event_changes(old: &[String], new: &[String]) -> Vec<String> {
    let only = |these: &[String], those: &[String], sign: char| {
        let mut left: Vec<&String> = those.iter().collect();
        let mut lines = Vec::new();
        for event in these {
            match left.iter().position(|other| *other == event) {
                Some(at) => {
                    left.remove(at);
                }
                None => lines.push(format!("{sign} {event}")),
            }
        }
        lines
    };
    let mut lines = only(old, new, '-');
    lines.extend(only(new, old, '+'));
    lines
}

/// The fields that differ between `old` and `new` below `path`, one line each: objects field by
/// field in sorted order, lists item by item, anything else as a whole.
fn changes(path: &str, old: &Value, new: &Value, lines: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(before), Value::Object(after)) => {
            let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
            for key in keys {
                let field = field_path(path, key);
                side_by_side(&field, before.get(key), after.get(key), lines);
            }
        }
        (Value::Array(before), Value::Array(after)) => {
            for i in 0..before.len().max(after.len()) {
                side_by_side(&format!("{path}[{i}]"), before.get(i), after.get(i), lines);
            }
        }
        _ if old != new => {
            let at = if path.is_empty() { "(all)" } else { path };
            lines.push(format!("{at}: {} → {}", shown(old), shown(new)));
        }
        _ => {}
    }
}

/// The line for a field one side may lack.
fn side_by_side(path: &str, old: Option<&Value>, new: Option<&Value>, lines: &mut Vec<String>) {
    match (old, new) {
        (Some(before), Some(after)) => changes(path, before, after, lines),
        (Some(before), None) => lines.push(format!("{path}: removed {}", shown(before))),
        (None, Some(after)) => lines.push(format!("{path}: added {}", shown(after))),
        (None, None) => {}
    }
}

/// `path.key`, or `path["key"]` when the key is not a plain word.
fn field_path(path: &str, key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (plain, path.is_empty()) {
        (true, true) => key.to_owned(),
        (true, false) => format!("{path}.{key}"),
        (false, _) => format!("{path}[{}]", Value::String(key.to_owned())),
    }
}

/// A value as compact JSON, shortened past [`MAX_VALUE_CHARS`] characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(MAX_VALUE_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(
                f,
                "no differences: same verdict, status, labels, annotations, desired objects and events"
            );
        }
        if let Some((recorded, replayed)) = &self.verdict {
            writeln!(f, "verdict: {recorded} → {replayed}")?;
        }
        for (title, lines) in [
            ("status", &self.status),
            ("labels and annotations", &self.metadata),
            ("desired objects", &self.desired),
            ("events", &self.events),
        ] {
            if !lines.is_empty() {
                writeln!(f, "{title}:")?;
                lines.iter().try_for_each(|line| writeln!(f, "  {line}"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::record::format::{DesiredObject, Readiness};
    use crate::record::sample;

    fn recorded() -> Vec<Ending> {
        sample::record().steps.into_iter().map(|step| step.ending).collect()
    }

    fn desired(object: Value) -> DesiredObject {
        DesiredObject { dependent: "d".into(), object: object.to_string(), keep: false, key: None }
    }

    fn event(event_type: &str, reason: &str, note: &str) -> Event {
        let (event_type, reason) = (event_type.into(), reason.into());
        Event { event_type, reason, action: "Reconcile".into(), note: Some(note.into()) }
    }

    #[test]
    fn the_same_endings_make_no_diff() {
        let diff = diff(&Summary::of(&recorded()), &Summary::of(&recorded()));
        assert!(diff.is_empty());
        assert_eq!(
            diff.to_string(),
            "no differences: same verdict, status, labels, annotations, desired objects and events\n"
        );
    }

    #[test]
    fn a_fixed_plugin_shows_what_it_changes_section_by_section() {
        let mut fixed = recorded();
        fixed[0] = Ending::Desired(vec![
            desired(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "web", "namespace": "ns" },
                "data": { "index": "b", "extra.key": "1" } })),
            desired(json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web", "namespace": "ns" },
                "spec": { "ports": [{ "port": 80 }] } })),
        ]);
        fixed[1] = Ending::Reconciled(Outcome {
            readiness: Some(Readiness { ready: true, message: "all pods up".into() }),
            status: Some(json!({ "phase": "Running", "pods": 1, "urls": ["http://web"] }).to_string()),
            labels: vec![("tier".into(), Some("web".into())), ("old".into(), None)],
            events: vec![event("Normal", "Reconciled", "1 pod"), event("Normal", "Exposed", "port 80")],
            ..Outcome::default()
        });
        let printed = diff(&Summary::of(&recorded()), &Summary::of(&fixed)).to_string();
        assert_eq!(
            printed,
            "verdict: reconciled, again in 30000 ms → reconciled, ready: all pods up
status:
  phase: \"Ready\" → \"Running\"
  urls: added [\"http://web\"]
labels and annotations:
  labels: added {\"old\":null,\"tier\":\"web\"}
desired objects:
  ~ v1 ConfigMap ns/web
      data[\"extra.key\"]: added \"1\"
      data.index: \"a\" → \"b\"
  - v1 Secret ns/web-db
  + v1 Service ns/web
events:
  + Normal Exposed (Reconcile): port 80
"
        );
    }

    #[test]
    fn lists_differ_item_by_item() {
        let mut lines = Vec::new();
        changes("", &json!({ "a": [1, { "b": 2 }, 3] }), &json!({ "a": [1, { "b": 4 }] }), &mut lines);
        assert_eq!(lines, ["a[1].b: 2 → 4", "a[2]: removed 3"]);
    }

    #[test]
    fn a_failure_is_the_verdict_whatever_follows_it() {
        let mut failed = recorded();
        failed.insert(1, Ending::Failed(Failure::Transient("quota exceeded".into())));
        failed.push(Ending::ErrorStatus(Some(json!({ "phase": "Failed" }).to_string())));
        let replayed = Summary::of(&failed);
        assert_eq!(replayed.verdict, "failed (transient): quota exceeded");
        let printed = diff(&Summary::of(&recorded()), &replayed).to_string();
        assert!(printed.starts_with("verdict: reconciled, again in 30000 ms → failed (transient): quota exceeded\n"));
        assert!(printed.contains("  phase: \"Ready\" → \"Failed\"\n  pods: removed 1\n"), "{printed}");
    }

    #[test]
    fn events_only_one_side_has_are_listed_as_often_as_they_differ() {
        let events =
            |notes: &[&str]| notes.iter().map(|n| event_line(&event("Warning", "Slow", n))).collect::<Vec<_>>();
        let lines = event_changes(&events(&["a", "a", "b"]), &events(&["a", "c"]));
        assert_eq!(
            lines,
            ["- Warning Slow (Reconcile): a", "- Warning Slow (Reconcile): b", "+ Warning Slow (Reconcile): c"]
        );
    }

    #[test]
    fn long_values_are_shortened() {
        let long = Value::String("x".repeat(500));
        assert_eq!(shown(&long).chars().count(), MAX_VALUE_CHARS + 1);
        assert!(shown(&long).ends_with('…'));
    }

    #[test]
    fn text_that_is_not_json_is_compared_as_text() {
        let mut broken = recorded();
        broken[1] = Ending::Reconciled(Outcome { status: Some("{oops".into()), ..Outcome::default() });
        let printed = diff(&Summary::of(&recorded()), &Summary::of(&broken)).to_string();
        assert!(printed.contains("status:\n  (all): {\"phase\":\"Ready\",\"pods\":1} → \"{oops\"\n"), "{printed}");
    }
}
