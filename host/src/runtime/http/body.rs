//! The response body a plugin reads, within its grant: failing once the request's total time
//! is up or past the size cap, holding the request's concurrency permit until it ends, and
//! recording the request's metrics when it does.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Sleep;
use wasmtime_wasi_http::{Error, WasiBody};

use crate::runtime::CallObserver;

/// How a request ended, as the metrics' `code` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// The server answered with this status (and the body, if read, ended well).
    Status(u16),
    /// Refused by the host before a socket was opened.
    Refused,
    /// A connect or total timeout.
    Timeout,
    /// The body was larger than the cap.
    TooLarge,
    /// Anything else: the connection failed, a Secret could not be read, the call ended first.
    Error,
}

impl Code {
    /// The label value: the status code, or `refused`, `timeout`, `too_large`, `error`.
    pub fn label(self) -> String {
        match self {
            Self::Status(status) => status.to_string(),
            Self::Refused => "refused".into(),
            Self::Timeout => "timeout".into(),
            Self::TooLarge => "too_large".into(),
            Self::Error => "error".into(),
        }
    }

    /// The code of a failed request.
    pub fn of(error: &Error) -> Self {
        match error {
            Error::ConnectionTimeout
            | Error::ConnectionReadTimeout
            | Error::ConnectionWriteTimeout
            | Error::HttpResponseTimeout
            | Error::DnsTimeout => Self::Timeout,
            Error::HttpResponseBodySize(_) => Self::TooLarge,
            _ => Self::Error,
        }
    }
}

/// One request's metrics, recorded once: when it fails, when its body ends, or when it is
/// dropped (then with its status if the server answered, `error` if not).
pub struct Record {
    observer: Arc<dyn CallObserver>,
    plugin: Arc<str>,
    origin: String,
    started: Instant,
    code: Code,
    done: bool,
}

impl Record {
    /// Starts the record of a request of `plugin` to `origin` (the granted origin's
    /// `scheme://host:port`, or `undeclared`).
    pub fn start(observer: Arc<dyn CallObserver>, plugin: Arc<str>, origin: String) -> Self {
        Self { observer, plugin, origin, started: Instant::now(), code: Code::Error, done: false }
    }

    /// The code to record if the request ends without another.
    pub fn answered(&mut self, status: u16) {
        self.code = Code::Status(status);
    }

    /// Records the request as ended with `code`, unless it was already.
    pub fn finish(&mut self, code: Code) {
        if !std::mem::replace(&mut self.done, true) {
            self.observer.http_request(&self.plugin, &self.origin, &code.label(), self.started.elapsed());
        }
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        self.finish(self.code);
    }
}

/// A response body within the grant's limits.
pub struct Guarded {
    inner: WasiBody,
    /// Bytes read so far.
    read: u64,
    cap: u64,
    /// The end of the request's total time.
    deadline: Pin<Box<Sleep>>,
    record: Record,
    /// Held until the body is dropped: a request counts against the plugin's concurrency until
    /// its body is done with.
    _permit: OwnedSemaphorePermit,
    /// Set once the body failed or ended: nothing more is read.
    ended: bool,
}

impl Guarded {
    /// Guards `inner`, the body of a response whose status is in `record`.
    pub fn new(
        inner: WasiBody,
        cap: u64,
        deadline: tokio::time::Instant,
        record: Record,
        permit: OwnedSemaphorePermit,
    ) -> Self {
        Self {
            inner,
            read: 0,
            cap,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            record,
            _permit: permit,
            ended: false,
        }
    }

    fn fail(&mut self, error: Error) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        self.ended = true;
        self.record.finish(Code::of(&error));
        Poll::Ready(Some(Err(error)))
    }
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return this.fail(Error::HttpResponseTimeout);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.read = this.read.saturating_add(data.len() as u64);
                    if this.read > this.cap {
                        return this.fail(Error::HttpResponseBodySize(Some(this.cap)));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => this.fail(error),
            Poll::Ready(None) => {
                this.ended = true;
                let code = this.record.code;
                this.record.finish(code);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.ended { SizeHint::with_exact(0) } else { self.inner.size_hint() }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<(String, String)>>);

    impl CallObserver for Seen {
        fn called(&self, _: &str, _: &'static str, _: Duration, _: Option<u64>) {}
        fn http_request(&self, plugin: &str, origin: &str, code: &str, _: Duration) {
            self.0.lock().unwrap().push((format!("{plugin} {origin}"), code.to_string()));
        }
    }

    fn chunks(chunks: Vec<&'static [u8]>) -> WasiBody {
        let frames = chunks.into_iter().map(|c| Ok::<_, Error>(Frame::data(Bytes::from_static(c))));
        StreamBody::new(futures::stream::iter(frames)).boxed_unsync()
    }

    fn guarded(seen: &Arc<Seen>, body: WasiBody, cap: u64, within: Duration) -> Guarded {
        let mut record = Record::start(seen.clone(), "p".into(), "http://a:80".into());
        record.answered(200);
        let permit = Arc::new(tokio::sync::Semaphore::new(1)).try_acquire_owned().unwrap();
        Guarded::new(body, cap, tokio::time::Instant::now() + within, record, permit)
    }

    #[tokio::test]
    async fn a_body_within_the_cap_is_read_whole_and_recorded_with_its_status() {
        let seen = Arc::new(Seen::default());
        let body = guarded(&seen, chunks(vec![b"abc", b"def"]), 6, Duration::from_secs(5));
        assert_eq!(body.collect().await.unwrap().to_bytes(), Bytes::from_static(b"abcdef"));
        assert_eq!(*seen.0.lock().unwrap(), vec![("p http://a:80".to_string(), "200".to_string())]);
    }

    #[tokio::test]
    async fn a_body_past_the_cap_fails_with_the_cap() {
        let seen = Arc::new(Seen::default());
        let body = guarded(&seen, chunks(vec![b"abc", b"def", b"g"]), 6, Duration::from_secs(5));
        let err = body.collect().await.unwrap_err();
        assert!(matches!(err, Error::HttpResponseBodySize(Some(6))), "{err:?}");
        assert_eq!(seen.0.lock().unwrap()[0].1, "too_large");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stalls_fails_at_the_deadline() {
        let seen = Arc::new(Seen::default());
        let stalled = StreamBody::new(futures::stream::pending::<Result<Frame<Bytes>, Error>>()).boxed_unsync();
        let started = tokio::time::Instant::now();
        let err = guarded(&seen, stalled, 6, Duration::from_secs(2)).collect().await.unwrap_err();
        assert!(matches!(err, Error::HttpResponseTimeout), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(seen.0.lock().unwrap()[0].1, "timeout");
    }

    #[test]
    fn a_request_dropped_before_an_answer_is_recorded_once_as_an_error() {
        let seen = Arc::new(Seen::default());
        let mut record = Record::start(seen.clone(), "p".into(), "undeclared".into());
        record.finish(Code::Refused);
        drop(record);
        drop(Record::start(seen.clone(), "p".into(), "http://a:80".into()));
        let seen = seen.0.lock().unwrap();
        assert_eq!(seen.iter().map(|(_, code)| code.as_str()).collect::<Vec<_>>(), ["refused", "error"]);
    }
}
