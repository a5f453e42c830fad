//! Whether a failed API request means the API server could not be reached, as opposed to an
//! answer about the request itself.

/// True for transport errors (connection refused or reset, TLS or HTTP failures, a broken
/// response stream) and for the answers of a server that cannot serve now: 429 Too Many
/// Requests, 503 Service Unavailable and 504 Gateway Timeout. Such a request is worth sending
/// again once the server is back; nothing is wrong with it.
pub fn unreachable(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => matches!(status.code, 429 | 503 | 504),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure("test", "Test").with_code(code)))
    }

    #[test]
    fn transport_errors_and_an_unavailable_server_are_unreachable() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(unreachable(&kube::Error::Service(Box::new(refused))));
        assert!(unreachable(&kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionReset))));
        for code in [429, 503, 504] {
            assert!(unreachable(&status(code)), "{code}");
        }
    }

    #[test]
    fn answers_about_the_request_are_not() {
        for code in [400, 403, 404, 409, 422, 500] {
            assert!(!unreachable(&status(code)), "{code}");
        }
        assert!(!unreachable(&kube::Error::LinesCodecMaxLineLengthExceeded));
    }
}
