//! A record to test with: a plugin that reads a Secret and a ConfigMap, lists Pods, reads the
//! clock and a random value, and returns a status, desired objects and an event.

use serde_json::json;

use super::format::*;
use crate::kind::KindRef;

/// The Secret's password, as read.
pub const PASSWORD: &str = "hunter2-very-secret";
/// Its base64 form, as the Secret's `data` holds it.
pub const PASSWORD_BASE64: &str = "aHVudGVyMi12ZXJ5LXNlY3JldA==";
/// A password the plugin generates into a desired Secret's `data`.
pub const GENERATED: &str = "generated-pass-42";
/// Its base64 form.
pub const GENERATED_BASE64: &str = "Z2VuZXJhdGVkLXBhc3MtNDI=";
/// The Secret's `stringData` token.
pub const TOKEN: &str = "tok-abcdef123";

/// A kind of the core group.
pub fn core_kind(kind: &str) -> KindRef {
    KindRef { group: String::new(), version: "v1".into(), kind: kind.into(), plural: None, namespaced: true }
}

/// A `get` of `kind` `ns/name` answered with `object`.
pub fn get(kind: &str, name: &str, object: Option<serde_json::Value>) -> Call {
    Call {
        import: Import::Get { kind: core_kind(kind), namespace: Some("ns".into()), name: name.into() },
        answer: Answer::Object(Ok(object.map(|o| o.to_string()))),
    }
}

/// A log line.
pub fn log(message: &str) -> Call {
    let import = Import::Log { level: "info".into(), message: message.into(), fields: vec![] };
    Call { import, answer: Answer::Nothing }
}

/// A request of `method` to `https://api.example.com/v1/things` with `headers`, answered 200 with a
/// JSON body.
pub fn http(method: &str, headers: Vec<(String, String)>) -> Call {
    let import = Import::Http {
        method: method.into(),
        url: "https://api.example.com/v1/things".into(),
        headers,
        body: Body::default(),
    };
    let response = HttpResponse {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Body::Text(r#"{"things":[]}"#.into()),
    };
    Call { import, answer: Answer::Http(Ok(response)) }
}

/// The primary.
pub fn primary() -> serde_json::Value {
    json!({
        "apiVersion": "example.com/v1", "kind": "App",
        "metadata": { "name": "web", "namespace": "ns", "labels": { "team": "payments" } },
        "spec": { "secretName": "db", "replicas": 2 }
    })
}

/// The Secret the plugin reads.
pub fn secret() -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "db", "namespace": "ns" },
        "data": { "password": PASSWORD_BASE64 },
        "stringData": { "token": TOKEN }
    })
}

/// The recorded reconcile: `desired` then `reconcile`.
pub fn record() -> Record {
    let request = ReconcileRequest {
        object: primary().to_string(),
        attempt: 0,
        last_attempt: false,
        dependents: vec![],
        external: vec![],
        inbound: None,
    };
    let config = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "web", "namespace": "ns" },
        "data": { "index": "a" } });
    let desired_secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "web-db", "namespace": "ns" },
        "data": { "password": GENERATED_BASE64 } });
    let pods = Call {
        import: Import::List {
            kind: core_kind("Pod"),
            namespace: Some("ns".into()),
            label_selector: Some("app=web".into()),
        },
        answer: Answer::Objects(Ok(vec![
            json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "web-1", "namespace": "ns" } })
                .to_string(),
        ])),
    };
    let desired = Step {
        request: Request::Desired(request.clone()),
        calls: vec![get("Secret", "db", Some(secret())), Call { import: Import::RandomU64, answer: Answer::Number(7) }],
        ending: Ending::Desired(vec![
            DesiredObject { dependent: "config".into(), object: config.to_string(), keep: false, key: None },
            DesiredObject { dependent: "secret".into(), object: desired_secret.to_string(), keep: false, key: None },
        ]),
    };
    let reconcile = Step {
        request: Request::Reconcile(request),
        calls: vec![
            get("Secret", "db", Some(secret())),
            log(&format!("connecting with {PASSWORD}")),
            get("ConfigMap", "web", Some(config)),
            pods,
            Call { import: Import::WallClock, answer: Answer::Instant { seconds: 1_764_140_000, nanoseconds: 5 } },
        ],
        ending: Ending::Reconciled(Outcome {
            status: Some(json!({ "phase": "Ready", "pods": 1 }).to_string()),
            reschedule_after_ms: Some(30_000),
            events: vec![Event {
                event_type: "Normal".into(),
                reason: "Reconciled".into(),
                action: "Reconcile".into(),
                note: Some("1 pod".into()),
            }],
            ..Outcome::default()
        }),
    };
    Record {
        version: FORMAT_VERSION,
        recorded_at: "2026-11-26T07:00:00Z".into(),
        reason: Reason::Failed,
        plugin: Plugin { name: "app".into(), digest: format!("sha256:{}", "ab".repeat(32)), settings: json!({}) },
        primary: PrimaryName { namespace: Some("ns".into()), name: "web".into() },
        redacted: false,
        truncated: false,
        steps: vec![desired, reconcile],
    }
}
