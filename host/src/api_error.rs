//! How the host words a failed API request in its errors, conditions and Events: the API
//! server's own message (which names the verb and the resource of a refusal), its reason and
//! code, and for a request refused for want of permission, where that permission comes from.

/// `err` in words for people.
pub fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if status.code == 403 => format!(
            "{} ({}, {}) [RBAC: grant the host's ServiceAccount this verb on this resource, as deploy/rbac.yaml \
             does for the shipped plugins; `wasmop inspect PLUGIN.wasm` lists the kinds a plugin watches and writes]",
            status.message, status.reason, status.code
        ),
        kube::Error::Api(status) => format!("{} ({}, {})", status.message, status.reason, status.code),
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
    fn only_a_forbidden_request_gets_the_rbac_hint() {
        let forbidden = describe(&status(403, "Forbidden"));
        assert!(forbidden.starts_with("the message (Forbidden, 403) [RBAC: grant"), "{forbidden}");
        assert!(!describe(&status(422, "Invalid")).contains("RBAC"));
        let other = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(describe(&other), other.to_string());
    }
}
