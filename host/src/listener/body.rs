//! Reading a request's body within its size limit: never more than the limit is kept, and
//! an oversized body is refused as soon as it is known to be one (its declared length, or the
//! bytes read so far). The server gives every request body a deadline ([`Timed`]): a body still
//! arriving at it is refused too.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use futures::StreamExt as _;
use http_body::{Frame, SizeHint};

/// How much of an oversized body is read and thrown away before the refusal, so that a client
/// still sending gets the answer rather than a reset connection; a larger one is cut off.
const DRAIN_BYTES: u64 = 8 * 1024 * 1024;

/// How long an oversized body may take to be thrown away.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Larger than the limit.
    #[error("the payload is larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The client did not send the whole body within the time allowed.
    #[error("the payload did not arrive within {}", humantime::format_duration(*limit))]
    TimedOut {
        /// The time allowed.
        limit: Duration,
    },
    /// The connection failed while the body was read.
    #[error("cannot read the payload: {0}")]
    Unreadable(#[source] axum::Error),
}

impl BodyError {
    /// The HTTP status of the refusal: 413 too large, 408 too slow, 400 unreadable.
    pub fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::TimedOut { .. } => StatusCode::REQUEST_TIMEOUT,
            Self::Unreadable(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// A failed read of a chunk: too slow ([`Timed`]'s deadline passed), or anything else.
    fn of(err: axum::Error) -> Self {
        let err = err.into_inner();
        match err.downcast::<TooSlow>() {
            Ok(slow) => Self::TimedOut { limit: slow.limit },
            Err(other) => Self::Unreadable(axum::Error::new(other)),
        }
    }
}

/// A request body's deadline passed before its end.
#[derive(Debug, thiserror::Error)]
#[error("the body did not arrive within {limit:?}")]
pub struct TooSlow {
    limit: Duration,
}

/// A request body that fails with [`TooSlow`] once its deadline passes: the time to send it
/// whole is bounded, however slowly its bytes trickle in.
pub struct Timed {
    inner: hyper::body::Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl Timed {
    /// `inner`, to be read whole within `limit` from now.
    pub fn new(inner: hyper::body::Incoming, limit: Duration) -> Self {
        Self { inner, deadline: Box::pin(tokio::time::sleep(limit)), limit }
    }
}

impl http_body::Body for Timed {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(TooSlow { limit: self.limit }))));
        }
        Pin::new(&mut self.inner).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Reads `body` whole if it is at most `limit` bytes; `declared` is its `Content-Length`, if any.
pub async fn read(body: Body, declared: Option<u64>, limit: usize) -> Result<Bytes, BodyError> {
    let mut stream = body.into_data_stream();
    if declared.is_some_and(|length| length > limit as u64) {
        if declared.is_some_and(|length| length <= DRAIN_BYTES) {
            drain(stream).await;
        }
        return Err(BodyError::TooLarge { limit });
    }
    let mut read = Vec::with_capacity(declared.map_or(0, |length| length as usize));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(BodyError::of)?;
        if read.len() + chunk.len() > limit {
            drain(stream).await;
            return Err(BodyError::TooLarge { limit });
        }
        read.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(read))
}

/// Reads and drops what is left of `stream`, up to [`DRAIN_BYTES`] and [`DRAIN_TIME`].
async fn drain(mut stream: axum::body::BodyDataStream) {
    let thrown = async {
        let mut thrown = 0_u64;
        while let Some(Ok(chunk)) = stream.next().await {
            thrown += chunk.len() as u64;
            if thrown > DRAIN_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, thrown).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body sent in chunks of `chunk` bytes, `total` in all, with no declared length.
    fn streamed(total: usize, chunk: usize) -> Body {
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            (0..total.div_ceil(chunk)).map(|i| Ok(Bytes::from(vec![b'x'; chunk.min(total - i * chunk)]))).collect();
        Body::from_stream(futures::stream::iter(chunks))
    }

    #[tokio::test]
    async fn a_body_up_to_the_limit_is_read_whole() {
        let bytes = read(streamed(1000, 64), None, 1000).await.unwrap();
        assert_eq!(bytes.len(), 1000);
        let bytes = read(Body::from("{}"), Some(2), 1000).await.unwrap();
        assert_eq!(&bytes[..], b"{}");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_while_read() {
        let err = read(streamed(1001, 64), None, 1000).await.unwrap_err();
        assert!(matches!(err, BodyError::TooLarge { limit: 1000 }), "{err}");
        assert_eq!(err.to_string(), "the payload is larger than 1000 bytes");
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_before_reading() {
        // Declared larger than what can be drained: refused without reading a byte.
        let endless = Body::from_stream(futures::stream::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from("x"))));
        let err = read(endless, Some(DRAIN_BYTES + 1), 1024 * 1024).await.unwrap_err();
        assert!(matches!(err, BodyError::TooLarge { .. }));
    }

    #[tokio::test]
    async fn a_failing_connection_is_not_a_payload() {
        let failing = Body::from_stream(futures::stream::iter([
            Ok(Bytes::from("{")),
            Err(std::io::Error::other("connection reset")),
        ]));
        let err = read(failing, None, 1024 * 1024).await.unwrap_err();
        assert!(matches!(err, BodyError::Unreadable(_)), "{err}");
    }
}
