//! The order in which in-process hosts finished reconciles, from the host's own `reconciled`
//! events inside each run's `reconcile` span (which names the primary): for tests about the order
//! of runs, which no API server write can show when the runs write nothing.

use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The primaries whose reconciles finished, in order, as `namespace/name`.
#[derive(Debug, Default)]
pub struct Runs {
    finished: Mutex<Vec<String>>,
}

impl Runs {
    /// The names of the primaries in `namespace` whose reconciles finished, in the order they
    /// finished (a name appears once per finished run).
    pub fn in_namespace(&self, namespace: &str) -> Vec<String> {
        let prefix = format!("{namespace}/");
        let finished = self.finished.lock().expect("never poisoned");
        finished.iter().filter_map(|key| key.strip_prefix(&prefix)).map(str::to_string).collect()
    }

    fn finished(&self, key: String) {
        self.finished.lock().expect("never poisoned").push(key);
    }
}

/// The primary a `reconcile` span is about.
struct Primary(String);

/// Reads a `reconcile` span's `resource.namespace` and `resource.name`, or an event's message.
#[derive(Default)]
struct Fields {
    namespace: Option<String>,
    name: Option<String>,
    message: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "resource.namespace" => self.namespace = Some(value.to_string()),
            "resource.name" => self.name = Some(value.to_string()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let value = format!("{value:?}");
        match field.name() {
            "message" => self.message = Some(value),
            "resource.namespace" => self.namespace = Some(value.trim_matches('"').to_string()),
            "resource.name" => self.name = Some(value.trim_matches('"').to_string()),
            _ => {}
        }
    }
}

/// The tracing layer that feeds [`Runs`].
pub struct Capture(pub std::sync::Arc<Runs>);

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attributes.metadata().name() != "reconcile" {
            return;
        }
        let mut fields = Fields::default();
        attributes.record(&mut fields);
        if let (Some(namespace), Some(name), Some(span)) = (fields.namespace, fields.name, ctx.span(id)) {
            span.extensions_mut().insert(Primary(format!("{namespace}/{name}")));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "wasmop::controller::reconcile" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message.as_deref() != Some("reconciled") {
            return;
        }
        let primary = ctx
            .event_scope(event)
            .into_iter()
            .flatten()
            .find_map(|span| span.extensions().get::<Primary>().map(|p| p.0.clone()));
        if let Some(primary) = primary {
            self.0.finished(primary);
        }
    }
}
