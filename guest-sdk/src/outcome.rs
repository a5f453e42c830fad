//! What a reconcile returns: [`Outcome`] on success, [`Error`] on failure.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::bindings::wasmop::plugin::types as wit;
use crate::wire::millis;

/// What the host should do after a successful reconcile: write a status, record events,
/// reconcile again later.
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::{Event, Outcome};
/// use wasmop_guest::serde_json::json;
///
/// let outcome = Outcome::done()
///     .status(json!({ "phase": "Running" }))
///     .event(Event::normal("Started", "Reconcile"))
///     .reschedule_after(Duration::from_secs(30));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[must_use = "an Outcome does nothing unless returned from reconcile"]
pub struct Outcome {
    /// The status to merge into `.status`, already checked to be a JSON object.
    pub(crate) status: Option<Value>,
    /// Why `status` is unusable, when it is.
    pub(crate) status_error: Option<String>,
    pub(crate) reschedule_after: Option<Duration>,
    pub(crate) events: Vec<Event>,
    pub(crate) labels: Vec<(String, Option<String>)>,
    pub(crate) annotations: Vec<(String, Option<String>)>,
    /// Whether the primary is ready, and the conditions' message.
    pub(crate) readiness: Option<(bool, String)>,
}

impl Outcome {
    /// Nothing more to do: no status, no events, no reschedule beyond the host's own interval.
    ///
    /// ```
    /// # use wasmop_guest::{Context, Error, Outcome};
    /// fn reconcile(_ctx: &Context) -> Result<Outcome, Error> {
    ///     Ok(Outcome::done())
    /// }
    /// ```
    pub fn done() -> Self {
        Self::default()
    }

    /// Done, and the primary is ready: the host sets its `Ready` condition True with `message`,
    /// and `Reconciling` and `Degraded` False (unless the plugin keeps its own conditions).
    ///
    /// ```
    /// use wasmop_guest::Outcome;
    ///
    /// let outcome = Outcome::ready("serving 3 pages");
    /// assert_eq!(outcome.readiness(), Some((true, "serving 3 pages")));
    /// ```
    pub fn ready(message: impl Into<String>) -> Self {
        Self { readiness: Some((true, message.into())), ..Self::default() }
    }

    /// Done for now, but the primary is not ready yet: `Ready` False (reason `NotReady`) and
    /// `Reconciling` True, with `message`. Pair it with a reschedule or a watch.
    ///
    /// ```
    /// use wasmop_guest::Outcome;
    ///
    /// let outcome = Outcome::not_ready("waiting for the database");
    /// assert_eq!(outcome.readiness(), Some((false, "waiting for the database")));
    /// ```
    pub fn not_ready(message: impl Into<String>) -> Self {
        Self { readiness: Some((false, message.into())), ..Self::default() }
    }

    /// The readiness stated, if any: whether ready, and the message.
    pub fn readiness(&self) -> Option<(bool, &str)> {
        self.readiness.as_ref().map(|(ready, message)| (*ready, message.as_str()))
    }

    /// Merges `status` into the primary's `.status` through the status subresource (a JSON merge
    /// patch: `null` fields are removed, arrays are replaced whole).
    ///
    /// `status` must serialize to a JSON object; otherwise the reconcile fails with
    /// [`Error::Permanent`] saying why. The primary's CRD needs the status subresource.
    /// Conditions of the types the host keeps (`Ready`, `Reconciling`, `Degraded`) in
    /// `status.conditions` are replaced by the host's (it logs a warning once); declare
    /// [`Config::own_conditions`](crate::Config::own_conditions) to keep them yourself.
    ///
    /// ```
    /// use wasmop_guest::Outcome;
    ///
    /// #[derive(serde::Serialize)]
    /// #[serde(rename_all = "camelCase")]
    /// struct Status {
    ///     observed_generation: Option<i64>,
    /// }
    ///
    /// let outcome = Outcome::done().status(Status { observed_generation: Some(3) });
    /// ```
    pub fn status(mut self, status: impl Serialize) -> Self {
        match serde_json::to_value(status) {
            Ok(Value::Object(object)) => {
                self.status = Some(Value::Object(object));
                self.status_error = None;
            }
            Ok(other) => {
                self.status = None;
                self.status_error = Some(format!("the status must be a JSON object, got {other}"));
            }
            Err(e) => {
                self.status = None;
                self.status_error = Some(format!("the status does not serialize: {e}"));
            }
        }
        self
    }

    /// Reconcile again after `delay` unless an event comes first.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let outcome = wasmop_guest::Outcome::done().reschedule_after(Duration::from_secs(60));
    /// ```
    pub fn reschedule_after(mut self, delay: Duration) -> Self {
        self.reschedule_after = Some(delay);
        self
    }

    /// Records `event` on the primary. May be called more than once.
    ///
    /// ```
    /// use wasmop_guest::{Event, Outcome};
    ///
    /// let outcome = Outcome::done()
    ///     .event(Event::normal("Created", "Reconcile").note("created the Service"))
    ///     .event(Event::warning("Degraded", "Reconcile").note("1 of 3 replicas ready"));
    /// ```
    pub fn event(mut self, event: Event) -> Self {
        self.events.push(event);
        self
    }

    /// Sets the label `key` of the primary to `value` (a metadata merge patch, with optimistic
    /// locking).
    ///
    /// ```
    /// let outcome = wasmop_guest::Outcome::done().label("tier", "frontend").remove_label("legacy");
    /// assert_eq!(outcome.labels(), [("tier".into(), Some("frontend".into())), ("legacy".into(), None)]);
    /// ```
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push((key.into(), Some(value.into())));
        self
    }

    /// Removes the label `key` of the primary.
    pub fn remove_label(mut self, key: impl Into<String>) -> Self {
        self.labels.push((key.into(), None));
        self
    }

    /// Sets the annotation `key` of the primary to `value`.
    ///
    /// ```
    /// let outcome = wasmop_guest::Outcome::done().annotation("example.com/seen", "yes");
    /// assert_eq!(outcome.annotations().len(), 1);
    /// ```
    pub fn annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.push((key.into(), Some(value.into())));
        self
    }

    /// Removes the annotation `key` of the primary.
    pub fn remove_annotation(mut self, key: impl Into<String>) -> Self {
        self.annotations.push((key.into(), None));
        self
    }

    /// The label changes, in order; `None` removes.
    pub fn labels(&self) -> &[(String, Option<String>)] {
        &self.labels
    }

    /// The annotation changes, in order; `None` removes.
    pub fn annotations(&self) -> &[(String, Option<String>)] {
        &self.annotations
    }

    /// Fails when the status set was unusable: a plugin bug that a retry will not fix.
    pub(crate) fn check(&self) -> Result<(), Error> {
        match &self.status_error {
            Some(reason) => Err(Error::permanent(reason.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn into_wit(self) -> wit::Outcome {
        wit::Outcome {
            status: self.status.map(|status| status.to_string()),
            reschedule_after_ms: self.reschedule_after.map(millis),
            events: self.events.into_iter().map(Event::into_wit).collect(),
            labels: self.labels,
            annotations: self.annotations,
            readiness: self.readiness.map(|(ready, message)| wit::Readiness { ready, message }),
        }
    }
}

/// Normal or Warning: the type of a Kubernetes Event.
///
/// ```
/// use wasmop_guest::{Event, EventType};
///
/// assert_eq!(Event::warning("Failed", "Reconcile").event_type, EventType::Warning);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something the user should look at.
    Warning,
}

/// A Kubernetes Event the host records on the primary.
///
/// ```
/// use wasmop_guest::Event;
///
/// let event = Event::normal("Reconciled", "Reconcile").note("the page is served");
/// assert_eq!(event.reason, "Reconciled");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// Normal or Warning.
    pub event_type: EventType,
    /// Short CamelCase reason, e.g. `Reconciled`.
    pub reason: String,
    /// What was done, e.g. `Reconcile`.
    pub action: String,
    /// Human readable detail.
    pub note: Option<String>,
}

impl Event {
    /// A Normal event: something expected happened.
    ///
    /// ```
    /// let event = wasmop_guest::Event::normal("Ready", "Reconcile");
    /// ```
    pub fn normal(reason: impl Into<String>, action: impl Into<String>) -> Self {
        Self { event_type: EventType::Normal, reason: reason.into(), action: action.into(), note: None }
    }

    /// A Warning event: something the user should look at.
    ///
    /// ```
    /// let event = wasmop_guest::Event::warning("InvalidSpec", "Reconcile").note("spec.html is empty");
    /// ```
    pub fn warning(reason: impl Into<String>, action: impl Into<String>) -> Self {
        Self { event_type: EventType::Warning, ..Self::normal(reason, action) }
    }

    /// Adds human readable detail.
    ///
    /// ```
    /// let event = wasmop_guest::Event::normal("Ready", "Reconcile").note("all replicas are up");
    /// assert_eq!(event.note.as_deref(), Some("all replicas are up"));
    /// ```
    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    pub(crate) fn into_wit(self) -> wit::Event {
        wit::Event {
            event_type: match self.event_type {
                EventType::Normal => wit::EventType::Normal,
                EventType::Warning => wit::EventType::Warning,
            },
            reason: self.reason,
            action: self.action,
            note: self.note,
        }
    }
}

/// A failed reconcile. The variant tells the host whether to retry.
///
/// `?` converts a [`serde_json::Error`] into [`Error::Invalid`]: in a reconciler it nearly always
/// means some part of the primary does not have the expected shape, which a retry will not fix.
///
/// ```
/// use wasmop_guest::Error;
/// use wasmop_guest::serde_json::{self, Value};
///
/// fn replicas(spec: Value) -> Result<u32, Error> {
///     let replicas: u32 = serde_json::from_value(spec["replicas"].clone())?;
///     if replicas > 100 {
///         return Err(Error::permanent("more than 100 replicas"));
///     }
///     Ok(replicas)
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Something that may succeed later (a dependency is not ready, the host's cache lags):
    /// retried with backoff.
    Transient(String),
    /// Something that may succeed later, retried after this delay instead of the backoff
    /// (kopf's `TemporaryError(delay=)`): made by [`Error::retry_after`]. The retry policy still
    /// bounds it: the delay is capped at [`Retry::max_interval`](crate::Retry::max_interval), and
    /// the retry counts toward [`Retry::max_attempts`](crate::Retry::max_attempts).
    TransientAfter(String, Duration),
    /// Retrying will not help: no retry until the primary changes.
    Permanent(String),
    /// The primary itself is invalid (e.g. does not match the plugin's type): not retried.
    Invalid(String),
}

impl Error {
    /// Something that may succeed later: the host retries with backoff.
    ///
    /// ```
    /// let error = wasmop_guest::Error::transient("the Secret does not exist yet");
    /// ```
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Transient(message.into())
    }

    /// This transient error retried after `delay` instead of the retry policy's backoff, e.g.
    /// the `Retry-After` of a rate-limited API. Permanent and invalid errors are not retried,
    /// so it leaves them as they are.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wasmop_guest::Error;
    ///
    /// let error = Error::transient("the DNS API is rate limited").retry_after(Duration::from_secs(30));
    /// assert_eq!(error.retry_delay(), Some(Duration::from_secs(30)));
    /// assert_eq!(Error::permanent("no").retry_after(Duration::from_secs(1)).retry_delay(), None);
    /// ```
    #[must_use]
    pub fn retry_after(self, delay: Duration) -> Self {
        match self {
            Self::Transient(message) | Self::TransientAfter(message, _) => Self::TransientAfter(message, delay),
            other => other,
        }
    }

    /// The delay this error asks before its retry, if it asks for one.
    pub fn retry_delay(&self) -> Option<Duration> {
        match self {
            Self::TransientAfter(_, delay) => Some(*delay),
            _ => None,
        }
    }

    /// Whether the host retries this error: [`Error::Transient`] or [`Error::TransientAfter`].
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient(_) | Self::TransientAfter(..))
    }

    /// Retrying will not help: the host waits until the primary changes.
    ///
    /// ```
    /// let error = wasmop_guest::Error::permanent("the referenced class is unknown");
    /// ```
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::Permanent(message.into())
    }

    /// The primary itself is invalid: the host does not retry.
    ///
    /// ```
    /// let error = wasmop_guest::Error::invalid("spec.html must not be empty");
    /// ```
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }

    /// The message, whatever the variant.
    ///
    /// ```
    /// assert_eq!(wasmop_guest::Error::transient("later").message(), "later");
    /// ```
    pub fn message(&self) -> &str {
        match self {
            Self::Transient(message)
            | Self::TransientAfter(message, _)
            | Self::Permanent(message)
            | Self::Invalid(message) => message,
        }
    }

    pub(crate) fn from_wit(error: wit::ReconcileError) -> Self {
        match error {
            wit::ReconcileError::Transient(message) => Self::Transient(message),
            wit::ReconcileError::Permanent(message) => Self::Permanent(message),
            wit::ReconcileError::Invalid(message) => Self::Invalid(message),
        }
    }

    /// The error as the export returns it, after asking the real host (`retry-after`) for the
    /// delay it carries. Only for the component's exports: the native stubs panic.
    pub(crate) fn into_host(self) -> wit::ReconcileError {
        if let Some(delay) = self.retry_delay() {
            crate::bindings::wasmop::plugin::host::retry_after(millis(delay));
        }
        self.into_wit()
    }

    pub(crate) fn into_wit(self) -> wit::ReconcileError {
        match self {
            Self::Transient(message) | Self::TransientAfter(message, _) => wit::ReconcileError::Transient(message),
            Self::Permanent(message) => wit::ReconcileError::Permanent(message),
            Self::Invalid(message) => wit::ReconcileError::Invalid(message),
        }
    }
}

/// `transient: <message>`, `permanent: <message>` or `invalid: <message>`.
///
/// ```
/// assert_eq!(wasmop_guest::Error::invalid("bad").to_string(), "invalid: bad");
/// ```
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Self::Transient(_) | Self::TransientAfter(..) => "transient",
            Self::Permanent(_) => "permanent",
            Self::Invalid(_) => "invalid",
        };
        write!(f, "{kind}: {}", self.message())
    }
}

impl std::error::Error for Error {}

/// Converts to [`Error::Invalid`]: a JSON value that does not have the expected shape will not
/// get one by retrying.
///
/// ```
/// use wasmop_guest::Error;
///
/// fn port(text: &str) -> Result<u16, Error> {
///     Ok(wasmop_guest::serde_json::from_str(text)?)
/// }
/// assert!(matches!(port("\"eighty\""), Err(Error::Invalid(_))));
/// ```
impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Self {
        Self::Invalid(error.to_string())
    }
}
