//! Terms, the fence that checks them, the gate where runs start and the tickets runs carry.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

/// A term of leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// Counts the terms of one fence; a new one after every lapse.
    pub epoch: u64,
    /// Writes are allowed until then.
    pub until: Instant,
}

impl Term {
    fn open(self, now: Instant) -> bool {
        now < self.until
    }
}

/// Whether this replica may reconcile and write now; cheap to clone.
#[derive(Debug, Clone)]
pub struct Fence {
    /// The current term, `None` while not leading. `None` itself for a host without election.
    terms: Option<watch::Receiver<Option<Term>>>,
    leading: Option<watch::Receiver<bool>>,
    /// The replica's identity in the lease, while electing.
    identity: Option<Arc<str>>,
}

/// A write that was not sent, or was abandoned before its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unanswered {
    /// This replica does not lead (or could not renew its lease in time), or the run that made
    /// the write was admitted in a term that has ended.
    #[error("not the leader: the request was not sent, or abandoned when the lease lapsed")]
    Fenced,
    /// The API server did not answer within [`REQUEST_TIMEOUT`].
    #[error("no answer from the API server within {REQUEST_TIMEOUT:?}: the request was abandoned")]
    TimedOut,
}

/// How long a write waits for its answer at most, fenced or not: the API server's own default
/// request timeout (`--request-timeout`, 60 s) ends a healthy server's slow request by then, so a
/// longer wait can only be a connection that stalled, and the run retries instead of hanging.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Fence {
    /// No leader election: always allowed.
    pub fn unfenced() -> Self {
        Self { terms: None, leading: None, identity: None }
    }

    /// The fence of an election's side: its terms and its leading flag.
    pub(crate) fn elected(
        terms: watch::Receiver<Option<Term>>,
        leading: watch::Receiver<bool>,
        identity: &str,
    ) -> Self {
        Self { terms: Some(terms), leading: Some(leading), identity: Some(identity.into()) }
    }

    /// Whether an election (or a shard membership) decides this fence.
    pub fn is_elected(&self) -> bool {
        self.terms.is_some()
    }

    /// Whether `other` is a clone of this fence: the same election's terms.
    pub fn shares_terms(&self, other: &Fence) -> bool {
        match (&self.terms, &other.terms) {
            (Some(mine), Some(theirs)) => mine.same_channel(theirs),
            (None, None) => true,
            _ => false,
        }
    }

    /// This replica's identity in the lease (it reports its Events as this instance); `None`
    /// without leader election.
    pub fn identity(&self) -> Option<&str> {
        self.identity.as_deref()
    }

    /// Sends `request` as [`Fence::hold`] does, and waits at most [`REQUEST_TIMEOUT`] for its
    /// answer, fenced or not: for requests to the API server.
    pub async fn write<T>(&self, request: impl Future<Output = T>) -> Result<T, Unanswered> {
        let timeout = Instant::now() + REQUEST_TIMEOUT;
        match tokio::time::timeout_at(timeout, self.hold(request)).await {
            Ok(held) => held,
            Err(_) => Err(Unanswered::TimedOut),
        }
    }

    /// Sends `request` if the fence is open for the term it belongs to, and waits for its answer
    /// while that term lasts (renewals extend it); when it ends, the request is dropped (its
    /// connection closed), so nothing this replica sent can still be waiting to go out once
    /// another may lead. The term is the current run's ([`Ticket::scope`]), else the current
    /// one. For calls with deadlines of their own (a plugin's external call under its grant).
    pub async fn hold<T>(&self, request: impl Future<Output = T>) -> Result<T, Unanswered> {
        let Some(terms) = &self.terms else { return Ok(request.await) };
        let ticket = match Ticket::current().filter(|t| t.terms.same_channel(terms)) {
            Some(ticket) => ticket,
            None => self.ticket().ok_or(Unanswered::Fenced)?,
        };
        if !ticket.open() {
            return Err(Unanswered::Fenced);
        }
        tokio::select! {
            biased;
            answer = request => Ok(answer),
            () = ticket.lapsed() => Err(Unanswered::Fenced),
        }
    }

    /// A ticket of the current term, if it is open; always one without election.
    pub(super) fn ticket(&self) -> Option<Ticket> {
        let terms = self.terms.as_ref()?;
        let term = (*terms.borrow()).filter(|t| t.open(Instant::now()))?;
        Some(Ticket { terms: terms.clone(), epoch: term.epoch })
    }

    /// Where schedulers ask whether they may start runs. `None` without leader election.
    pub fn gate(&self) -> Option<Gate> {
        Some(Gate { fence: self.clone(), leading: self.leading.clone()? })
    }
}

/// Where schedulers (and pollers, and the inbound listener) ask whether this replica may start
/// work now, and wait for that to change.
#[derive(Debug, Clone)]
pub struct Gate {
    fence: Fence,
    leading: watch::Receiver<bool>,
}

impl Gate {
    /// The ticket to start a run under, when the current term is open by the clock (not only by
    /// the flag that a timer task clears at the deadline).
    pub fn admit(&self) -> Option<Ticket> {
        if !*self.leading.borrow() {
            return None;
        }
        self.fence.ticket()
    }

    /// Whether a run may start now.
    pub fn is_open(&self) -> bool {
        self.admit().is_some()
    }

    /// Waits until the gate opens or closes; `Err` once the election is gone (the gate stays as
    /// it was last: closed, after a release).
    pub async fn changed(&mut self) -> Result<(), watch::error::RecvError> {
        self.leading.changed().await
    }

    /// Waits until the gate is open.
    pub async fn opened(&mut self) -> Result<(), watch::error::RecvError> {
        while !self.is_open() {
            self.changed().await?;
        }
        Ok(())
    }

    /// Waits until the gate is closed (by the flag: the deadline's timer, a loss or a release).
    pub async fn closed(&mut self) -> Result<(), watch::error::RecvError> {
        while *self.leading.borrow_and_update() {
            self.changed().await?;
        }
        Ok(())
    }
}

tokio::task_local! {
    /// The ticket of the run being polled.
    static ADMITTED: Ticket;
}

/// The term a run was admitted in; its writes go out only while that term lasts.
#[derive(Debug, Clone)]
pub struct Ticket {
    terms: watch::Receiver<Option<Term>>,
    epoch: u64,
}

impl Ticket {
    /// The ticket of the run this is called in (set by [`Ticket::scope`]), if any.
    pub fn current() -> Option<Self> {
        ADMITTED.try_with(Clone::clone).ok()
    }

    /// Runs `run` under this ticket: its writes check it.
    pub fn scope<F: Future>(self, run: F) -> impl Future<Output = F::Output> {
        ADMITTED.scope(self, run)
    }

    /// Whether the term is still the current one and within its deadline by the clock.
    pub fn open(&self) -> bool {
        (*self.terms.borrow()).is_some_and(|t| t.epoch == self.epoch && t.open(Instant::now()))
    }

    /// Waits until the term ends: its deadline passes without a renewal, or another term (or
    /// none) replaces it.
    pub async fn lapsed(&self) {
        let mut terms = self.terms.clone();
        loop {
            let term = (*terms.borrow_and_update()).filter(|t| t.epoch == self.epoch);
            let Some(term) = term.filter(|t| t.open(Instant::now())) else { return };
            tokio::select! {
                () = tokio::time::sleep_until(term.until) => {}
                changed = terms.changed() => if changed.is_err() { return },
            }
        }
    }
}

/// The election's side of a fence: renews and closes its terms.
#[derive(Debug)]
pub(crate) struct Terms {
    terms: watch::Sender<Option<Term>>,
    /// The last epoch handed out.
    epoch: std::sync::atomic::AtomicU64,
}

impl Terms {
    /// No term yet, and a receiver of the terms to come.
    pub(crate) fn new() -> (Self, watch::Receiver<Option<Term>>) {
        let (terms, rx) = watch::channel(None);
        (Self { terms, epoch: std::sync::atomic::AtomicU64::new(0) }, rx)
    }

    /// Renewed until `until`: the same term when the current one had not lapsed, a new one
    /// otherwise. A renewal whose deadline already passed (its answer came too late) opens
    /// nothing; whether a term is open after it.
    pub(crate) fn renewed(&self, until: Instant) -> bool {
        let now = Instant::now();
        if until <= now {
            return (*self.terms.borrow()).is_some_and(|t| t.open(now));
        }
        self.terms.send_modify(|term| {
            let epoch = match *term {
                Some(t) if t.open(now) => t.epoch,
                _ => self.epoch.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            };
            *term = Some(Term { epoch, until: until.max(term.map_or(until, |t| t.until)) });
        });
        true
    }

    /// No term any more.
    pub(crate) fn close(&self) {
        self.terms.send_replace(None);
    }

    /// The current term's deadline, if there is one.
    pub(crate) fn until(&self) -> Option<Instant> {
        self.terms.borrow().map(|t| t.until)
    }

    /// A receiver of the terms.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<Term>> {
        self.terms.subscribe()
    }
}

/// Fences driven by a test.
#[cfg(test)]
pub(crate) mod tests_support {
    use std::time::Duration;

    use super::*;

    /// A fence, its terms and its leading flag, never led yet.
    pub(crate) fn fence() -> (Terms, watch::Sender<bool>, Fence) {
        let (terms, rx) = Terms::new();
        let (leading, leading_rx) = watch::channel(false);
        (terms, leading, Fence::elected(rx, leading_rx, "me"))
    }

    /// Leads (or renews) for `for_` from now.
    pub(crate) fn lead(terms: &Terms, leading: &watch::Sender<bool>, for_: Duration) {
        assert!(terms.renewed(Instant::now() + for_));
        leading.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::tests_support::{fence, lead};
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_run_admitted_before_a_lapse_never_writes_after_it() {
        let (terms, leading, fence) = fence();
        lead(&terms, &leading, Duration::from_secs(10));
        let ticket = fence.gate().unwrap().admit().expect("open");
        let run = ticket.scope(async {
            // Stuck in a read or a long plugin call across the lapse.
            tokio::time::sleep(Duration::from_secs(12)).await;
            fence.write(async { "written" }).await
        });
        let renew_after_the_lapse = async {
            tokio::time::sleep(Duration::from_secs(11)).await;
            lead(&terms, &leading, Duration::from_secs(10));
        };
        let (written, ()) = tokio::join!(run, renew_after_the_lapse);
        assert_eq!(written, Err(Unanswered::Fenced), "the run's term ended at the lapse");
        assert!(fence.gate().unwrap().is_open(), "a new term is open");
        assert_eq!(fence.write(async { "written" }).await, Ok("written"), "a write of the new term goes");
    }

    #[tokio::test(start_paused = true)]
    async fn no_run_starts_past_the_deadline_while_the_flag_is_still_up() {
        let (terms, leading, fence) = fence();
        lead(&terms, &leading, Duration::from_secs(10));
        let gate = fence.gate().unwrap();
        assert!(gate.is_open());
        // Continued after a stop: the timer task that clears the flag has not run yet.
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(*leading.borrow(), "the flag is still up");
        assert!(gate.admit().is_none(), "the deadline itself is checked");
    }

    #[tokio::test(start_paused = true)]
    async fn a_healthy_leaders_long_write_outlasts_the_deadline_it_started_under() {
        let (terms, leading, fence) = fence();
        lead(&terms, &leading, Duration::from_secs(10));
        let renewing = async {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_secs(2)).await;
                assert!(terms.renewed(Instant::now() + Duration::from_secs(10)));
            }
            std::future::pending::<()>().await
        };
        let started = Instant::now();
        let long = async {
            tokio::time::sleep(Duration::from_secs(12)).await;
            "applied"
        };
        tokio::select! {
            written = fence.hold(long) => assert_eq!(written, Ok("applied")),
            () = renewing => unreachable!(),
        }
        assert_eq!(started.elapsed(), Duration::from_secs(12));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_abandoned_when_its_term_lapses() {
        let (terms, leading, fence) = fence();
        lead(&terms, &leading, Duration::from_secs(10));
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        let started = Instant::now();
        let stalled = async move {
            let _dropped = dropped_tx;
            std::future::pending::<()>().await
        };
        assert_eq!(fence.hold(stalled).await, Err(Unanswered::Fenced));
        assert_eq!(started.elapsed(), Duration::from_secs(10), "abandoned at the deadline");
        assert!(dropped_rx.await.is_err(), "the request's future is gone");
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_answered_after_its_deadline_opens_nothing() {
        let (terms, _leading, fence) = fence();
        let started = Instant::now();
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(!terms.renewed(started + Duration::from_secs(10)));
        assert!(fence.ticket().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_ticket_lapses_at_its_deadline_or_when_another_term_starts() {
        let (terms, leading, fence) = fence();
        lead(&terms, &leading, Duration::from_secs(2));
        let ticket = fence.gate().unwrap().admit().unwrap();
        let started = Instant::now();
        ticket.lapsed().await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert!(!ticket.open());
        lead(&terms, &leading, Duration::from_secs(2));
        let ticket = fence.gate().unwrap().admit().unwrap();
        terms.close();
        ticket.lapsed().await;
        assert!(!ticket.open());
    }
}
