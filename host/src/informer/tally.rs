//! A response body that reports its bytes as they arrive and its end, for the client layers
//! that measure what the API server sent (`sharded.rs`; `paging.rs`, for watches and bounded
//! caches' lists).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use kube::client::Body;

/// What a [`Tallied`] body reports to.
pub(super) trait Tally: Send + Unpin + 'static {
    /// `bytes` more of the body arrived.
    fn data(&mut self, bytes: u64);
    /// The body was read to its end (not after an error).
    fn end(&mut self) {}
}

/// `body`, reporting to `tally`.
pub(super) struct Tallied<T> {
    body: Body,
    tally: T,
}

impl<T: Tally> Tallied<T> {
    /// `body`, reporting to `tally`.
    pub(super) fn new(body: Body, tally: T) -> Self {
        Self { body, tally }
    }
}

impl<T: Tally> http_body::Body for Tallied<T> {
    type Data = Bytes;
    type Error = kube::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => this.tally.data(frame.data_ref().map_or(0, |data| data.len() as u64)),
            Poll::Ready(None) => this.tally.end(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
