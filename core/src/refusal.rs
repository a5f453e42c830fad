//! Which failed API requests can succeed if sent again, and how the API server's refusal of an
//! object's shape reads for people.
//!
//! A request the API server refuses for the object it carries (400 BadRequest, 422 Invalid,
//! 413 too large, a server-side apply whose object does not fit the kind's schema, a kind it
//! does not serve) fails the same way every time: retrying cannot fix it, only a new object
//! can, which for a dependent means a new generation of its primary. Everything else (409
//! conflicts, 429, 5xx from an overloaded or restarting server, transport errors, RBAC that
//! may be granted meanwhile, a namespace that may appear) is worth another try.

/// Whether a failed request can succeed if sent again unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// It may succeed later: retry with backoff.
    Transient,
    /// The API server refuses the object itself: it fails the same way until the object changes.
    Permanent,
}

/// What the API server says when a server-side apply's object does not fit the kind's schema
/// (it answers 500 with no reason): `failed to create typed patch object (...): .data.a:
/// expected string, got ...`.
const TYPED_PATCH: &str = "failed to create typed patch object";

/// Messages of a 404 for a path the API server does not serve at all (a kind it does not know),
/// as opposed to a missing object or namespace.
const NOT_SERVED: [&str; 2] = ["404 page not found", "the server could not find the requested resource"];

/// Whether an API answer with HTTP `code`, `reason` and `message` is worth retrying.
pub fn classify(code: u16, reason: &str, message: &str) -> Persistence {
    let permanent = match code {
        400 | 413 | 415 | 422 => true,
        // A namespace or object that is missing may appear; a path that is not served will not
        // until a CRD is installed, which the host notices on its own.
        404 => NOT_SERVED.iter().any(|m| message.trim() == *m),
        // ServerTimeout, InternalError and the like are the server's trouble; a typed-patch
        // failure is the object's.
        500 => reason.is_empty() && message.starts_with(TYPED_PATCH),
        _ => false,
    };
    if permanent { Persistence::Permanent } else { Persistence::Transient }
}

/// The API server's refusal `message` in plain words: without the typed-patch preamble (which
/// names the object the caller names anyway) and with Go's rendering of a value
/// (`&value.valueUnstructured{Value:1}`) replaced by the value.
pub fn plain(message: &str) -> String {
    let message = match message.strip_prefix(TYPED_PATCH) {
        // `failed to create typed patch object (/x; /v1, Kind=ConfigMap): .data.a: ...`
        Some(rest) => rest.split_once("): ").map_or(rest, |(_, cause)| cause),
        None => message,
    };
    const GO_VALUE: &str = "&value.valueUnstructured{Value:";
    let mut plain = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find(GO_VALUE) {
        let after = &rest[start + GO_VALUE.len()..];
        let Some(end) = after.find('}') else { break };
        plain.push_str(&rest[..start]);
        plain.push_str(&after[..end]);
        rest = &after[end + 1..];
    }
    plain.push_str(rest);
    plain.trim().to_string()
}

/// The error of an object of `kind` at `key` the API server refused for good.
pub fn refused(kind: &str, key: &str, message: &str) -> String {
    format!("the {kind} {key:?} was refused by the API server: {}", plain(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    // As kube-apiserver 1.36 answers server-side applies (recorded with curl).
    const NUMBER_IN_DATA: &str = "failed to create typed patch object (/x; /v1, Kind=ConfigMap): .data.a: \
        expected string, got &value.valueUnstructured{Value:1}";
    const STRING_REPLICAS: &str = "failed to create typed patch object (/x; apps/v1, Kind=Deployment): \
        .spec.replicas: expected numeric (int or float), got string";
    const UNKNOWN_FIELD: &str =
        "failed to create typed patch object (/y; /v1, Kind=ConfigMap): .dta: field not declared in schema";

    #[test]
    fn shape_errors_are_permanent() {
        for message in [NUMBER_IN_DATA, STRING_REPLICAS, UNKNOWN_FIELD] {
            assert_eq!(classify(500, "", message), Persistence::Permanent, "{message}");
        }
        assert_eq!(classify(422, "Invalid", "ConfigMap \"X\" is invalid: metadata.name"), Persistence::Permanent);
        let mismatch = "the name of the object (other) does not match the name on the URL (z)";
        assert_eq!(classify(400, "BadRequest", mismatch), Persistence::Permanent);
        assert_eq!(classify(413, "RequestEntityTooLarge", "limit is 3145728"), Persistence::Permanent);
        assert_eq!(classify(404, "Failed to parse error data", "404 page not found"), Persistence::Permanent);
        let unserved = "the server could not find the requested resource";
        assert_eq!(classify(404, "NotFound", unserved), Persistence::Permanent);
    }

    #[test]
    fn conflicts_overload_and_missing_things_are_transient() {
        assert_eq!(classify(409, "Conflict", "the object has been modified"), Persistence::Transient);
        assert_eq!(classify(429, "TooManyRequests", "slow down"), Persistence::Transient);
        for code in [502, 503, 504] {
            assert_eq!(classify(code, "ServiceUnavailable", "try later"), Persistence::Transient, "{code}");
        }
        assert_eq!(classify(500, "InternalError", "etcdserver: request timed out"), Persistence::Transient);
        assert_eq!(classify(500, "ServerTimeout", "the server cannot complete the request"), Persistence::Transient);
        assert_eq!(classify(500, "", "Internal error occurred: webhook down"), Persistence::Transient);
        assert_eq!(classify(404, "NotFound", "namespaces \"gone\" not found"), Persistence::Transient);
        assert_eq!(classify(403, "Forbidden", "cannot patch configmaps"), Persistence::Transient);
        assert_eq!(classify(410, "Expired", "too old resource version"), Persistence::Transient);
    }

    #[test]
    fn a_typed_patch_refusal_reads_without_its_preamble_and_go_values() {
        assert_eq!(plain(NUMBER_IN_DATA), ".data.a: expected string, got 1");
        assert_eq!(plain(STRING_REPLICAS), ".spec.replicas: expected numeric (int or float), got string");
        assert_eq!(plain(UNKNOWN_FIELD), ".dta: field not declared in schema");
        let two = "a: got &value.valueUnstructured{Value:true}, b: got &value.valueUnstructured{Value:2.5}";
        assert_eq!(plain(two), "a: got true, b: got 2.5");
        assert_eq!(plain("unclosed &value.valueUnstructured{Value:1"), "unclosed &value.valueUnstructured{Value:1");
        let invalid = "ConfigMap \"X\" is invalid: metadata.name: Invalid value";
        assert_eq!(plain(invalid), invalid, "other messages are plain already");
    }

    #[test]
    fn a_refusal_names_the_kind_and_the_object() {
        assert_eq!(
            refused("ConfigMap", "ns/x", NUMBER_IN_DATA),
            "the ConfigMap \"ns/x\" was refused by the API server: .data.a: expected string, got 1"
        );
    }
}
