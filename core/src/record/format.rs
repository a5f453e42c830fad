//! The record format: one reconcile, self-contained, as JSON.
//!
//! A record holds what a replay needs and nothing it has to fetch: the plugin (name, module
//! digest, settings), and for each export the host called during the reconcile (`desired`, the
//! external dependents' `apply-external` and `delete-external`, `reconcile`, `cleanup`,
//! `update-error-status`) one [`Step`]: the request as the guest received it, every import call
//! it made in order ([`Call`]: what it asked, [`Import`], and what it was answered, [`Answer`]),
//! and how the export ended ([`Ending`]).
//!
//! Text that crosses the contract as JSON text (objects, status, payloads) is kept as the exact
//! text that crossed, not re-encoded: a replay hands the guest the very bytes it read, and
//! compares the very bytes it returned ([`Ending::bytes`]).
//!
//! A step's calls are its tape: a replay answers the guest's imports from them in order and
//! names the first call that differs ([`crate::record::replay`]). Clock readings and random
//! values are calls like the others, so a guest that reads them replays exactly too.
//!
//! Secret headers the host adds to outgoing HTTP requests are not part of the guest's request
//! and are never recorded.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kind::KindRef;

/// The version of the record format; a reader refuses records of other versions.
pub const FORMAT_VERSION: u32 = 1;

/// One reconcile, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The format's version: [`FORMAT_VERSION`] when written.
    pub version: u32,
    /// When the reconcile ran, RFC 3339 (UTC), as the host's clock read it.
    pub recorded_at: String,
    /// Why it was recorded.
    pub reason: Reason,
    /// The plugin that ran it.
    pub plugin: Plugin,
    /// The primary's namespace and name, for people and file names.
    pub primary: PrimaryName,
    /// Whether Secret data or credentials were replaced by markers ([`crate::record::redact`]):
    /// a replay of a plugin that reads them itself may then not be bit-exact.
    #[serde(default)]
    pub redacted: bool,
    /// Whether answers were dropped to fit the size cap ([`crate::record::budget`]): a replay
    /// stops at the first of them.
    #[serde(default)]
    pub truncated: bool,
    /// The exports the host called, in order.
    pub steps: Vec<Step>,
}

/// Why a reconcile was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Reason {
    /// It failed (an error or a trap).
    Failed,
    /// Its primary matches the recording selector.
    Selected,
    /// The sample rate picked it.
    Sampled,
}

impl Reason {
    /// The reason as a file name says it: `failed`, `selected`, `sampled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Failed => "failed",
            Reason::Selected => "selected",
            Reason::Sampled => "sampled",
        }
    }
}

/// The name of a file recorded at `recorded_at` (RFC 3339) about `primary`: the time, the
/// primary, `what` (why it was recorded, and for a webhook call which webhook) and `sequence`
/// (the host's count of files written) to tell apart files of one instant, with `extension`,
/// e.g. `20261126T070000Z-ns-web-failed-000042.json`. Characters other than letters, digits,
/// `.` and `-` become `_`, so names are safe on any file system and sort by time.
pub fn file_name(recorded_at: &str, primary: &PrimaryName, what: &str, sequence: u64, extension: &str) -> String {
    let time: String = recorded_at.chars().filter(|c| !matches!(c, ':' | '-')).collect();
    let primary = match &primary.namespace {
        Some(namespace) => format!("{namespace}-{}", primary.name),
        None => primary.name.clone(),
    };
    let name = format!("{time}-{primary}-{what}-{sequence:06}");
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') { c } else { '_' }).collect();
    format!("{safe}.{extension}")
}

/// The plugin that ran a reconcile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugin {
    /// Its name.
    pub name: String,
    /// The module's digest, `sha256:<hex>`.
    pub digest: String,
    /// Its effective settings, as `wasmop inspect` shows them.
    pub settings: Value,
}

/// A primary's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrimaryName {
    /// Its namespace; absent for cluster-scoped primaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// One call of an export: what it was given, what it asked the host, how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The export and its arguments.
    pub request: Request,
    /// Its import calls, in order.
    pub calls: Vec<Call>,
    /// How it ended.
    pub ending: Ending,
}

/// An export call and its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "export", rename_all = "camelCase")]
pub enum Request {
    /// `desired(request)`.
    Desired(ReconcileRequest),
    /// `reconcile(request)`.
    Reconcile(ReconcileRequest),
    /// `cleanup(request)`.
    Cleanup(ReconcileRequest),
    /// `update-error-status(request, error)`.
    UpdateErrorStatus {
        /// The request.
        request: ReconcileRequest,
        /// The failure that ended the retries.
        error: Failure,
    },
    /// `apply-external(primary, desired, actual)`.
    ApplyExternal {
        /// The primary, as JSON text.
        primary: String,
        /// The object the plugin wants.
        desired: ExternalObject,
        /// What the last fetch found.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actual: Option<ExternalObject>,
    },
    /// `delete-external(primary, actual)`.
    DeleteExternal {
        /// The primary, as JSON text.
        primary: String,
        /// The object to delete.
        actual: ExternalObject,
    },
}

impl Request {
    /// The export's name in the contract, e.g. `reconcile`.
    pub fn export(&self) -> &'static str {
        match self {
            Request::Desired(_) => "desired",
            Request::Reconcile(_) => "reconcile",
            Request::Cleanup(_) => "cleanup",
            Request::UpdateErrorStatus { .. } => "update-error-status",
            Request::ApplyExternal { .. } => "apply-external",
            Request::DeleteExternal { .. } => "delete-external",
        }
    }
}

/// The contract's `reconcile-request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileRequest {
    /// The primary, as JSON text.
    pub object: String,
    /// 0 on the first attempt.
    pub attempt: u32,
    /// No retry follows if this attempt fails.
    pub last_attempt: bool,
    /// The dependents' states (for `reconcile`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<DependentState>,
    /// The primary's external state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external: Vec<ExternalObject>,
    /// The last inbound payload, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound: Option<String>,
}

/// A dependent's state, as `reconcile` receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DependentState {
    /// The dependent's name.
    pub name: String,
    /// `ready`, `notReady`, `skipped` or `deleted`.
    pub phase: String,
    /// Its objects, as JSON text.
    pub objects: Vec<String>,
}

/// The contract's `external-object`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalObject {
    /// The external dependent.
    pub dependent: String,
    /// Its key among the dependent's objects.
    pub key: String,
    /// The ID the external system gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The object, as JSON text.
    pub object: String,
}

/// What the guest asked the host: an import and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "import", rename_all = "camelCase")]
pub enum Import {
    /// `host.log`.
    #[serde(rename_all = "camelCase")]
    Log {
        /// `trace`, `debug`, `info`, `warn` or `error`.
        level: String,
        /// The message.
        message: String,
        /// Its fields.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        fields: Vec<(String, String)>,
    },
    /// `host.get`.
    #[serde(rename_all = "camelCase")]
    Get {
        /// The kind.
        kind: KindRef,
        /// The namespace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        /// The name.
        name: String,
    },
    /// `host.list`.
    #[serde(rename_all = "camelCase")]
    List {
        /// The kind.
        kind: KindRef,
        /// Only this namespace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        /// Only objects matching this label selector.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label_selector: Option<String>,
    },
    /// `host.secondaries`.
    Secondaries {
        /// The kind.
        kind: KindRef,
    },
    /// `wasi:clocks/wall-clock.now`.
    WallClock,
    /// `wasi:clocks/monotonic-clock.now`.
    MonotonicClock,
    /// `wasi:random/random.get-random-bytes`.
    RandomBytes {
        /// How many bytes.
        len: u64,
    },
    /// `wasi:random/random.get-random-u64`.
    RandomU64,
    /// `wasi:random/insecure.get-insecure-random-bytes`.
    InsecureRandomBytes {
        /// How many bytes.
        len: u64,
    },
    /// `wasi:random/insecure.get-insecure-random-u64`.
    InsecureRandomU64,
    /// `wasi:random/insecure-seed.insecure-seed`.
    InsecureSeed,
    /// An outgoing `wasi:http` request (granted in the external dependents' exports only), as the
    /// guest made it: without the secret headers the host adds.
    Http {
        /// The method, e.g. `GET`.
        method: String,
        /// The whole URL.
        url: String,
        /// Its headers, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        headers: Vec<(String, String)>,
        /// Its body.
        #[serde(default, skip_serializing_if = "Body::is_empty")]
        body: Body,
    },
}

impl Import {
    /// The import's name, e.g. `get`.
    pub fn name(&self) -> &'static str {
        match self {
            Import::Log { .. } => "log",
            Import::Get { .. } => "get",
            Import::List { .. } => "list",
            Import::Secondaries { .. } => "secondaries",
            Import::WallClock => "wall-clock",
            Import::MonotonicClock => "monotonic-clock",
            Import::RandomBytes { .. } => "random-bytes",
            Import::RandomU64 => "random-u64",
            Import::InsecureRandomBytes { .. } => "insecure-random-bytes",
            Import::InsecureRandomU64 => "insecure-random-u64",
            Import::InsecureSeed => "insecure-seed",
            Import::Http { .. } => "http",
        }
    }
}

impl std::fmt::Display for Import {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let or_all = |namespace: &Option<String>| namespace.clone().unwrap_or_else(|| "*".to_owned());
        match self {
            Import::Log { level, message, .. } => write!(f, "log {level} {message:?}"),
            Import::Get { kind, namespace, name } => match namespace {
                Some(ns) => write!(f, "get {kind} {ns}/{name}"),
                None => write!(f, "get {kind} {name}"),
            },
            Import::List { kind, namespace, label_selector } => {
                write!(f, "list {kind} in {}", or_all(namespace))?;
                label_selector.iter().try_for_each(|s| write!(f, " matching {s:?}"))
            }
            Import::Secondaries { kind } => write!(f, "secondaries {kind}"),
            Import::RandomBytes { len } | Import::InsecureRandomBytes { len } => write!(f, "{} {len}", self.name()),
            Import::Http { method, url, .. } => write!(f, "http {method} {url}"),
            _ => f.write_str(self.name()),
        }
    }
}

/// A body of bytes: text when it is UTF-8, so that records stay readable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Body {
    /// UTF-8 text.
    Text(String),
    /// Anything else.
    Bytes(Vec<u8>),
}

impl Default for Body {
    fn default() -> Self {
        Body::Text(String::new())
    }
}

impl Body {
    /// The body of `bytes`: text when they are UTF-8.
    pub fn of(bytes: Vec<u8>) -> Self {
        String::from_utf8(bytes).map_or_else(|e| Body::Bytes(e.into_bytes()), Body::Text)
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Body::Text(text) => text.as_bytes(),
            Body::Bytes(bytes) => bytes,
        }
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes().is_empty()
    }
}

/// What the host answered an import.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Answer {
    /// Nothing (`log`).
    Nothing,
    /// `get`: the object as JSON text, none, or the error.
    Object(Result<Option<String>, String>),
    /// `list`, `secondaries`: the objects as JSON text, or the error.
    Objects(Result<Vec<String>, String>),
    /// The wall clock.
    Instant {
        /// Seconds since the Unix epoch.
        seconds: u64,
        /// Nanoseconds within the second.
        nanoseconds: u32,
    },
    /// A number: the monotonic clock's nanoseconds, a random `u64`.
    Number(u64),
    /// Random bytes.
    Bytes(Vec<u8>),
    /// The insecure seed.
    Seed(u64, u64),
    /// An HTTP response, or the error the guest saw.
    Http(Result<HttpResponse, String>),
    /// Dropped to fit the record's size cap: the answer had this many bytes.
    Truncated(u64),
}

/// An HTTP response, as the guest read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Its headers, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// Its body.
    #[serde(default, skip_serializing_if = "Body::is_empty")]
    pub body: Body,
}

/// One import call: what the guest asked and what it was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The import and its arguments.
    #[serde(flatten)]
    pub import: Import,
    /// The answer.
    pub answer: Answer,
}

/// How an export call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Ending {
    /// `desired` returned these objects.
    Desired(Vec<DesiredObject>),
    /// `reconcile` returned this outcome.
    Reconciled(Outcome),
    /// `cleanup` returned this outcome.
    CleanedUp(CleanupOutcome),
    /// `update-error-status` returned this status (JSON text), or none.
    ErrorStatus(Option<String>),
    /// `apply-external` returned the object as it now is.
    Applied(ExternalObject),
    /// `delete-external` succeeded.
    Deleted,
    /// The export returned an error.
    Failed(Failure),
    /// The call trapped or was stopped (deadline, memory cap, panic), in the host's words.
    Trapped(String),
}

impl Ending {
    /// The ending as the bytes a bit-exact replay compares: its JSON form.
    pub fn bytes(&self) -> Vec<u8> {
        // A value of these types always serializes: no map has non-string keys.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The contract's `desired-object`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredObject {
    /// The dependent's name.
    pub dependent: String,
    /// The object, as JSON text.
    pub object: String,
    /// Left as the cluster holds it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep: bool,
    /// An external dependent's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// The contract's `outcome`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Whether the primary is ready, and the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Readiness>,
    /// The status to merge, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Labels to set (`Some`) or remove (`None`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<(String, Option<String>)>,
    /// Annotations to set (`Some`) or remove (`None`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<(String, Option<String>)>,
    /// Reconcile again after this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_after_ms: Option<u64>,
    /// Events to record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
}

/// The contract's `readiness`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    /// Ready, or still progressing.
    pub ready: bool,
    /// The conditions' message.
    pub message: String,
}

/// The contract's `cleanup-outcome`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupOutcome {
    /// Keep the finalizer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_finalizer: bool,
    /// Run `cleanup` again after this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_after_ms: Option<u64>,
    /// Events to record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
}

/// The contract's `event`: the one the settle loop publishes.
pub use crate::settle::Event;

/// The contract's `reconcile-error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Failure {
    /// Retried with backoff.
    Transient(String),
    /// Not retried until the object changes.
    Permanent(String),
    /// The primary is invalid.
    Invalid(String),
}

/// A record that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Not a record: the JSON error.
    Malformed(String),
    /// A record of another format version.
    Version(u32),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Malformed(error) => write!(f, "not a wasmop record: {error}"),
            ReadError::Version(v) => {
                write!(f, "a record of format version {v}; this wasmop reads version {FORMAT_VERSION}")
            }
        }
    }
}

impl std::error::Error for ReadError {}

impl Record {
    /// The record in `bytes` (JSON), refused unless it is of [`FORMAT_VERSION`].
    pub fn from_slice(bytes: &[u8]) -> Result<Self, ReadError> {
        #[derive(Deserialize)]
        struct Version {
            version: u32,
        }
        let Version { version } = serde_json::from_slice(bytes).map_err(|e| ReadError::Malformed(e.to_string()))?;
        if version != FORMAT_VERSION {
            return Err(ReadError::Version(version));
        }
        serde_json::from_slice(bytes).map_err(|e| ReadError::Malformed(e.to_string()))
    }

    /// The record's file name ([`file_name`]): when it was recorded, the primary, why, and
    /// `sequence`, e.g. `20261126T070000Z-ns-web-failed-000042.json`.
    pub fn file_name(&self, sequence: u64) -> String {
        file_name(&self.recorded_at, &self.primary, self.reason.as_str(), sequence, "json")
    }

    /// The record as JSON bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        // A value of these types always serializes: no map has non-string keys.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::record::sample;

    #[test]
    fn a_record_reads_back_as_it_was_written() {
        let record = sample::record();
        assert_eq!(Record::from_slice(&record.to_vec()), Ok(record));
    }

    #[test]
    fn a_record_of_another_version_is_refused_naming_both() {
        let mut record = serde_json::to_value(sample::record()).unwrap();
        record["version"] = json!(2);
        let error = Record::from_slice(record.to_string().as_bytes()).unwrap_err();
        assert_eq!(error, ReadError::Version(2));
        assert_eq!(error.to_string(), "a record of format version 2; this wasmop reads version 1");
        assert!(matches!(Record::from_slice(b"{}"), Err(ReadError::Malformed(_))));
    }

    #[test]
    fn calls_read_as_the_import_its_arguments_and_the_answer() {
        let call = sample::get("ConfigMap", "web", None);
        assert_eq!(
            serde_json::to_value(&call).unwrap(),
            json!({ "import": "get", "kind": { "version": "v1", "kind": "ConfigMap", "namespaced": true },
                "namespace": "ns", "name": "web", "answer": { "object": { "Ok": null } } })
        );
        let clock = Call { import: Import::WallClock, answer: Answer::Instant { seconds: 1, nanoseconds: 2 } };
        assert_eq!(
            serde_json::to_value(&clock).unwrap(),
            json!({ "import": "wallClock", "answer": { "instant": { "seconds": 1, "nanoseconds": 2 } } })
        );
    }

    #[test]
    fn an_http_call_reads_as_the_guests_request_and_the_response_it_read() {
        let call = sample::http("POST", vec![("content-type".into(), "application/json".into())]);
        let value = serde_json::to_value(&call).unwrap();
        assert_eq!(
            value,
            json!({ "import": "http", "method": "POST", "url": "https://api.example.com/v1/things",
                "headers": [["content-type", "application/json"]],
                "answer": { "http": { "Ok": { "status": 200, "headers": [["content-type", "application/json"]],
                    "body": { "text": "{\"things\":[]}" } } } } })
        );
        assert_eq!(serde_json::from_value::<Call>(value).unwrap(), call);
        let refused =
            json!({ "import": "http", "method": "GET", "url": "http://a/", "answer": { "http": { "Err": "no" } } });
        let refused: Call = serde_json::from_value(refused).unwrap();
        assert_eq!(refused.answer, Answer::Http(Err("no".into())));
        assert_eq!(refused.import.to_string(), "http GET http://a/");
    }

    #[test]
    fn file_names_sort_by_time_and_say_whose_and_why() {
        let mut record = sample::record();
        assert_eq!(record.file_name(42), "20261126T070000Z-ns-web-failed-000042.json");
        record.primary = PrimaryName { namespace: None, name: "a/b c".into() };
        record.reason = Reason::Sampled;
        record.recorded_at = "2026-11-26T07:00:00.123Z".into();
        assert_eq!(record.file_name(1), "20261126T070000.123Z-a_b_c-sampled-000001.json");
    }

    #[test]
    fn requests_name_their_export() {
        let step = &sample::record().steps[1];
        assert_eq!(step.request.export(), "reconcile");
        assert_eq!(serde_json::to_value(&step.request).unwrap()["export"], "reconcile");
    }

    #[test]
    fn bodies_are_text_when_they_are_utf8_and_bytes_otherwise() {
        assert_eq!(Body::of(b"{\"ok\":true}".to_vec()), Body::Text("{\"ok\":true}".into()));
        assert_eq!(Body::of(vec![0xff, 0]), Body::Bytes(vec![0xff, 0]));
        assert_eq!(Body::of(vec![0xff, 0]).bytes(), &[0xff, 0]);
        assert!(Body::default().is_empty());
    }

    #[test]
    fn imports_print_as_a_person_reads_them() {
        let list =
            Import::List { kind: sample::core_kind("Pod"), namespace: None, label_selector: Some("app=web".into()) };
        assert_eq!(list.to_string(), "list v1/Pod in * matching \"app=web\"");
        assert_eq!(sample::get("Secret", "db", None).import.to_string(), "get v1/Secret ns/db");
        assert_eq!(Import::RandomBytes { len: 16 }.to_string(), "random-bytes 16");
        assert_eq!(Import::MonotonicClock.to_string(), "monotonic-clock");
    }
}
