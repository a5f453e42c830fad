//! How the host words a failed API request in its errors, conditions and Events: the API
//! server's own message (which names the verb and the resource of a refusal), its reason and
//! code, and for a request refused for want of permission, where that permission comes from;
//! and whether it is worth sending again ([`wasmop_core::refusal`] has the rule).

use wasmop_core::refusal::{self, Persistence};

/// Whether `err` can go away if the request is sent again: answers about the object itself
/// cannot ([`refusal::classify`]); transport errors and anything else can.
pub fn persistence(err: &kube::Error) -> Persistence {
    match err {
        kube::Error::Api(status) => refusal::classify(status.code, &status.reason, &status.message),
        _ => Persistence::Transient,
    }
}

/// kube-client's line for every 5xx answer and transport failure (`ERROR
/// kube_client::client::builder: failed with status 500 Internal Server Error`), which names no
/// request: the host logs each failed request itself, with its object and cause.
const KUBE_CLIENT_FAILURES: &str = "kube_client::client::builder=off";

/// The log filter for `rust_log` (the `RUST_LOG` variable; `None`: unset, `info`), without
/// kube-client's own failure line unless the filter names `kube_client`.
pub fn log_filter(rust_log: Option<&str>) -> String {
    let filter = rust_log.map(str::trim).filter(|f| !f.is_empty()).unwrap_or("info");
    if filter.contains("kube_client") { filter.to_string() } else { format!("{filter},{KUBE_CLIENT_FAILURES}") }
}

/// `err` in words for people.
pub fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if status.code == 403 => format!(
            "{} ({}, {}) [RBAC: grant the host's ServiceAccount this verb on this resource, as deploy/rbac.yaml \
             does for the shipped plugins; `wasmop inspect PLUGIN.wasm` lists the kinds a plugin watches and writes]",
            status.message, status.reason, status.code
        ),
        // A typed-patch refusal comes with no reason: `(500)`, not `(, 500)`.
        kube::Error::Api(status) if status.reason.is_empty() => {
            format!("{} ({})", refusal::plain(&status.message), status.code)
        }
        kube::Error::Api(status) => format!("{} ({}, {})", refusal::plain(&status.message), status.reason, status.code),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure("the message", reason).with_code(code)))
    }

    #[test]
    fn an_api_answer_reads_as_its_message_reason_and_code() {
        assert_eq!(describe(&status(404, "NotFound")), "the message (NotFound, 404)");
    }

    #[test]
    fn a_typed_patch_refusal_has_no_empty_reason_and_no_go_values() {
        let message = "failed to create typed patch object (/x; /v1, Kind=ConfigMap): .data.a: expected string, \
            got &value.valueUnstructured{Value:1}";
        let refused = kube::Error::Api(Box::new(kube::core::Status::failure(message, "").with_code(500)));
        assert_eq!(describe(&refused), ".data.a: expected string, got 1 (500)");
        assert_eq!(persistence(&refused), Persistence::Permanent);
        assert_eq!(persistence(&status(500, "InternalError")), Persistence::Transient);
        assert_eq!(persistence(&kube::Error::LinesCodecMaxLineLengthExceeded), Persistence::Transient);
    }

    #[test]
    fn the_log_filter_drops_kube_clients_failure_line_unless_asked_for() {
        assert_eq!(log_filter(None), "info,kube_client::client::builder=off");
        assert_eq!(log_filter(Some("debug")), "debug,kube_client::client::builder=off");
        assert_eq!(log_filter(Some("info,kube_client=debug")), "info,kube_client=debug");
    }

    #[test]
    fn only_a_forbidden_request_gets_the_rbac_hint() {
        let forbidden = describe(&status(403, "Forbidden"));
        assert!(forbidden.starts_with("the message (Forbidden, 403) [RBAC: grant"), "{forbidden}");
        assert!(!describe(&status(422, "Invalid")).contains("RBAC"));
        let other = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(describe(&other), other.to_string());
    }
}
