//! Detects an object reconciled by two runs at once, from the `swap begin <ns>/<name>` and
//! `swap end <ns>/<name>` lines `fixture-swap` logs around each reconcile: in-process through a
//! tracing layer on the host's `wasmop::plugin` events (installed by the `in_process` module), or from
//! a host process's log lines.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

/// Per object, whether a reconcile is running; how many began, and how many began while
/// another of the same object was running.
#[derive(Default)]
pub struct Overlaps {
    running: Mutex<HashMap<String, bool>>,
    begun: AtomicU64,
    overlapping: AtomicU64,
}

impl Overlaps {
    /// Feeds one log message; only `swap begin`/`swap end` lines count.
    pub fn line(&self, message: &str) {
        let (begin, key) = if let Some(key) = message.strip_prefix("swap begin ") {
            (true, key)
        } else if let Some(key) = message.strip_prefix("swap end ") {
            (false, key)
        } else {
            return;
        };
        let mut running = self.running.lock().expect("never poisoned");
        let was = running.insert(key.to_string(), begin).unwrap_or(false);
        if begin {
            self.begun.fetch_add(1, Ordering::SeqCst);
            if was {
                self.overlapping.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Feeds one line of a host process's log: the plugin's message is found anywhere in it.
    pub fn log_line(&self, line: &str) {
        if let Some(at) = line.find("swap begin ").or_else(|| line.find("swap end ")) {
            let message = &line[at..];
            let end = message.match_indices(' ').nth(2).map_or(message.len(), |(i, _)| i);
            self.line(&message[..end]);
        }
    }

    /// Reconciles begun so far.
    pub fn begun(&self) -> u64 {
        self.begun.load(Ordering::SeqCst)
    }

    /// Reconciles that began while another of the same object was running.
    pub fn overlapping(&self) -> u64 {
        self.overlapping.load(Ordering::SeqCst)
    }
}

/// The tracing layer that feeds the plugin's log lines to [`Overlaps`].
pub struct Capture(pub Arc<Overlaps>);

struct Message(Option<String>);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() == "wasmop::plugin" {
            let mut message = Message(None);
            event.record(&mut message);
            if let Some(message) = message.0 {
                self.0.line(&message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overlap_detector_counts_a_begin_during_a_run_of_the_same_object() {
        let overlaps = Overlaps::default();
        for line in ["swap begin a/x", "swap begin a/y", "swap end a/x", "swap begin a/x", "swap begin a/y", "other"] {
            overlaps.line(line);
        }
        assert_eq!(overlaps.begun(), 4);
        assert_eq!(overlaps.overlapping(), 1, "a/y began twice without ending");
    }

    #[test]
    fn a_host_process_log_line_yields_the_plugin_message() {
        let overlaps = Overlaps::default();
        overlaps.log_line(
            "2025-01-01T00:00:00Z  INFO reconcile{plugin=\"fixture-swap\"}: wasmop::plugin: swap begin a/x plugin=x",
        );
        overlaps.log_line("INFO wasmop::plugin: swap begin a/x");
        assert_eq!((overlaps.begun(), overlaps.overlapping()), (2, 1));
    }
}
