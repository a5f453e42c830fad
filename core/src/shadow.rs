//! Shadow rollouts: the pure part. A candidate version of a plugin runs beside
//! the live one on the same requests; the host never applies what it returns. This says how the
//! two endings of one reconcile compare ([`compare`], with the record's diff,
//! [`crate::record::diff`]) and what the plugin's status sums up ([`Tally`]).

use std::collections::VecDeque;
use std::fmt::Write as _;

use serde::Serialize;

use crate::record::diff::{Diff, Summary, diff};
use crate::record::format::Ending;

/// How many of the last objects that differed a [`Tally`] keeps.
pub const LAST_DIFFERENCES: usize = 5;

/// The most lines of a diff a log line shows ([`short`]).
pub const SHORT_DIFF_LINES: usize = 12;

/// What differs between the live version's ending and the candidate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// How the reconcile ended: reconciled (and when again), or the error.
    Verdict,
    /// The status merged, or the labels and annotations set on the primary.
    Status,
    /// The desired dependents.
    Desired,
    /// The Events.
    Events,
}

impl Kind {
    /// The kind as a metric label and in the status: `verdict`, `status`, `desired`, `events`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Verdict => "verdict",
            Kind::Status => "status",
            Kind::Desired => "desired",
            Kind::Events => "events",
        }
    }
}

/// The endings of one reconcile compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The differences, live on the left, candidate on the right.
    pub diff: Diff,
    /// The kinds of differences, in order; empty when the two agree.
    pub kinds: Vec<Kind>,
}

/// Compares the live version's endings of one reconcile (its `desired` and `reconcile` calls, in
/// order) with the candidate's on the same requests.
pub fn compare(live: &[Ending], candidate: &[Ending]) -> Comparison {
    let diff = diff(&Summary::of(live), &Summary::of(candidate));
    let mut kinds = Vec::new();
    if diff.verdict.is_some() {
        kinds.push(Kind::Verdict);
    }
    if !diff.status.is_empty() || !diff.metadata.is_empty() {
        kinds.push(Kind::Status);
    }
    if !diff.desired.is_empty() {
        kinds.push(Kind::Desired);
    }
    if !diff.events.is_empty() {
        kinds.push(Kind::Events);
    }
    Comparison { diff, kinds }
}

/// `diff` as a log shows it: at most [`SHORT_DIFF_LINES`] lines, then how many more there are.
pub fn short(diff: &Diff) -> String {
    let text = diff.to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut shown = lines.iter().take(SHORT_DIFF_LINES).copied().collect::<Vec<_>>().join("\n");
    if lines.len() > SHORT_DIFF_LINES {
        let _ = write!(shown, "\n… {} more lines", lines.len() - SHORT_DIFF_LINES);
    }
    shown
}

/// An object whose reconcile the candidate ended differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Differed {
    /// The primary's namespace; `None` for a cluster-scoped primary.
    pub namespace: Option<String>,
    /// The primary's name.
    pub name: String,
    /// What differed ([`Kind::as_str`]).
    pub kinds: Vec<&'static str>,
    /// When, as an RFC 3339 time.
    pub at: String,
}

/// The summary of a candidate's shadow runs, as the plugin's status shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// Reconciles the candidate ran and the host compared.
    pub compared: u64,
    /// Of those, the reconciles it ended differently.
    pub differences: u64,
    /// Runs of the candidate that failed (a trap, its deadline) or were not run (too many
    /// waiting); not compared.
    pub failures: u64,
    /// The last [`LAST_DIFFERENCES`] objects that differed, the latest last.
    pub last_differences: VecDeque<Differed>,
}

impl Tally {
    /// Counts a compared reconcile, and the object if it differed.
    pub fn compared(&mut self, differed: Option<Differed>) {
        self.compared += 1;
        let Some(differed) = differed else { return };
        self.differences += 1;
        if self.last_differences.len() == LAST_DIFFERENCES {
            self.last_differences.pop_front();
        }
        self.last_differences.push_back(differed);
    }

    /// Counts a failed or skipped run of the candidate.
    pub fn failed(&mut self) {
        self.failures += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::format::{Event, Failure, Outcome};

    fn reconciled(status: &str, events: Vec<Event>) -> Ending {
        Ending::Reconciled(Outcome { status: Some(status.into()), events, ..Outcome::default() })
    }

    #[test]
    fn the_same_endings_do_not_differ() {
        let live = [reconciled(r#"{"a":1}"#, Vec::new())];
        let comparison = compare(&live, &live.clone());
        assert!(comparison.kinds.is_empty());
        assert!(comparison.diff.is_empty());
    }

    #[test]
    fn each_kind_of_difference_is_named() {
        let event =
            Event { event_type: "Normal".into(), reason: "Done".into(), action: "Reconcile".into(), note: None };
        let live = [reconciled(r#"{"a":1}"#, vec![event])];
        let status = compare(&live, &[reconciled(r#"{"a":2}"#, live_events(&live))]);
        assert_eq!(status.kinds, [Kind::Status]);
        assert!(short(&status.diff).contains("a: 1 → 2"), "{}", short(&status.diff));
        let events = compare(&live, &[reconciled(r#"{"a":1}"#, Vec::new())]);
        assert_eq!(events.kinds, [Kind::Events]);
        let failed = compare(&live, &[Ending::Failed(Failure::Transient("no".into()))]);
        assert_eq!(failed.kinds[0], Kind::Verdict);
    }

    fn live_events(live: &[Ending]) -> Vec<Event> {
        match &live[0] {
            Ending::Reconciled(outcome) => outcome.events.clone(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn a_long_diff_is_shortened() {
        let many: String = (0..30).map(|i| format!(r#""f{i:02}":{i}"#)).collect::<Vec<_>>().join(",");
        let comparison = compare(&[reconciled("{}", Vec::new())], &[reconciled(&format!("{{{many}}}"), Vec::new())]);
        let shown = short(&comparison.diff);
        assert_eq!(shown.lines().count(), SHORT_DIFF_LINES + 1);
        assert!(shown.ends_with("more lines"), "{shown}");
    }

    #[test]
    fn the_tally_keeps_the_last_objects_that_differed() {
        let mut tally = Tally::default();
        for i in 0..8 {
            let differed = (i % 2 == 1).then(|| Differed {
                namespace: Some("ns".into()),
                name: format!("o{i}"),
                kinds: vec!["status"],
                at: "t".into(),
            });
            tally.compared(differed);
        }
        tally.failed();
        assert_eq!((tally.compared, tally.differences, tally.failures), (8, 4, 1));
        tally.compared(Some(Differed { namespace: None, name: "o9".into(), kinds: vec!["events"], at: "t".into() }));
        tally.compared(Some(Differed { namespace: None, name: "o11".into(), kinds: vec!["events"], at: "t".into() }));
        let names: Vec<&str> = tally.last_differences.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["o3", "o5", "o7", "o9", "o11"]);
        let json = serde_json::to_value(&tally).unwrap();
        assert_eq!(json["lastDifferences"][4]["name"], "o11");
    }
}
