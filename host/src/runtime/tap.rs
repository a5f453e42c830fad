//! The import calls of one export call, recorded or replayed (`wasmop run --record`,
//! `wasmop replay`; the format and rules are `wasmop_core::record`'s).
//!
//! A call made with a [`Tap`] has every import it makes seen by it: the host imports (`log`,
//! `get`, `list`, `secondaries`), the WASI clocks (through the clocks its `WasiCtx` is built
//! with), `wasi:random` (the host's own implementation, which shadows `wasmtime-wasi`'s) and
//! outgoing `wasi:http` requests (through the call's HTTP hooks, `super::http`). A
//! recording tap keeps each call with the host's answer; a replaying tap answers from a
//! [`Tape`] instead, keeping the first divergence; a following tap (a shadow candidate's) answers
//! what the live version read as it read it ([`Follow`]) and leaves the rest to the host. A call
//! without a tap (the usual case) pays one `Option` check per import.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use wasmop_core::record::replay::{Follow, ReplayError, Tape};
use wasmop_core::record::{Answer, Call, Ending, Import, Request, Step};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

/// Sees the import calls of one export call.
#[derive(Debug)]
pub enum Tap {
    /// Recording: the calls so far, with the host's answers.
    Record(Mutex<Vec<Call>>),
    /// Replaying: answers from a tape.
    Replay(Mutex<Replaying>),
    /// Following the live version's calls; the host answers what they do not hold.
    Follow(Mutex<Follow>),
}

/// A replay in progress.
#[derive(Debug)]
pub struct Replaying {
    tape: Tape<'static>,
    /// The first divergence; nothing is answered after it.
    error: Option<ReplayError>,
}

impl Tap {
    /// A tap that records.
    pub fn recording() -> Arc<Self> {
        Arc::new(Tap::Record(Mutex::new(Vec::new())))
    }

    /// A tap that answers from `tape`.
    pub fn replaying(tape: Tape<'static>) -> Arc<Self> {
        Arc::new(Tap::Replay(Mutex::new(Replaying { tape, error: None })))
    }

    /// A tap that answers what the live version's `calls` answered.
    pub fn following(calls: Vec<Call>) -> Arc<Self> {
        Arc::new(Tap::Follow(Mutex::new(Follow::new(calls))))
    }

    /// The recorded answer to `import` when replaying (after a divergence: [`Answer::Nothing`],
    /// which the import turns into an error or an empty value), or the live version's when
    /// following; `None` when recording, or following a call that did not make it: the host
    /// answers and tells [`Tap::answered`].
    pub(crate) fn replayed(&self, import: &Import) -> Option<Answer> {
        let replaying = match self {
            Tap::Record(_) => return None,
            Tap::Follow(follow) => return follow.lock().expect("never poisoned").answer(import).cloned(),
            Tap::Replay(replaying) => replaying,
        };
        let mut replaying = replaying.lock().expect("never poisoned");
        if replaying.error.is_some() {
            return Some(Answer::Nothing);
        }
        match replaying.tape.answer(import) {
            Ok(answer) => Some(answer.clone()),
            Err(error) => {
                replaying.error = Some(error);
                Some(Answer::Nothing)
            }
        }
    }

    /// The host answered `import` with `answer`: kept when recording.
    pub(crate) fn answered(&self, import: Import, answer: Answer) {
        if let Tap::Record(calls) = self {
            calls.lock().expect("never poisoned").push(Call { import, answer });
        }
    }

    /// The calls recorded so far, taken out of the tap.
    pub fn take_calls(&self) -> Vec<Call> {
        match self {
            Tap::Record(calls) => std::mem::take(&mut *calls.lock().expect("never poisoned")),
            Tap::Replay(_) | Tap::Follow(_) => Vec::new(),
        }
    }

    /// The end of a replay that ended with `ending`: the first divergence, or else (`exact`)
    /// the tape's check that every recorded call was made and the ending has the recorded
    /// bytes.
    pub fn finish(&self, ending: &Ending, exact: bool) -> Result<(), ReplayError> {
        let Tap::Replay(replaying) = self else { return Ok(()) };
        let replaying = replaying.lock().expect("never poisoned");
        match &replaying.error {
            Some(error) => Err(error.clone()),
            None if exact => replaying.tape.finish(ending),
            None => Ok(()),
        }
    }
}

/// The error a guest's import gets for a call the replay cannot answer.
pub(crate) fn unanswered(import: &str) -> String {
    format!("the record holds no answer to this {import} call")
}

/// The export calls of one reconcile, recorded: a [`Tap`] per call, a [`Step`] once it ended.
#[derive(Debug, Default)]
pub struct Recorder {
    steps: Mutex<Vec<Step>>,
}

impl Recorder {
    /// Adds the step of an export call that was given `request`, made the calls `tap` kept,
    /// and ended with `ending`.
    pub(crate) fn step(&self, request: Request, tap: &Tap, ending: Ending) {
        let step = Step { request, calls: tap.take_calls(), ending };
        self.steps.lock().expect("never poisoned").push(step);
    }

    /// The import calls of the last step so far, copied (a shadow candidate follows them).
    pub fn last_calls(&self) -> Vec<Call> {
        let steps = self.steps.lock().expect("never poisoned");
        steps.last().map(|step| step.calls.clone()).unwrap_or_default()
    }

    /// The steps so far, in order.
    pub fn take_steps(&self) -> Vec<Step> {
        std::mem::take(&mut *self.steps.lock().expect("never poisoned"))
    }
}

/// The wall clock of a tapped call.
pub(crate) struct WallClock(pub(crate) Arc<Tap>);

impl HostWallClock for WallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        match self.0.replayed(&Import::WallClock) {
            Some(Answer::Instant { seconds, nanoseconds }) => Duration::new(seconds, nanoseconds),
            Some(_) => Duration::ZERO,
            None => {
                let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
                let answer = Answer::Instant { seconds: now.as_secs(), nanoseconds: now.subsec_nanos() };
                self.0.answered(Import::WallClock, answer);
                now
            }
        }
    }
}

/// The monotonic clock of a tapped call: nanoseconds since the call's store was made.
pub(crate) struct MonotonicClock {
    pub(crate) tap: Arc<Tap>,
    pub(crate) start: Instant,
}

impl HostMonotonicClock for MonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        match self.tap.replayed(&Import::MonotonicClock) {
            Some(Answer::Number(nanos)) => nanos,
            Some(_) => 0,
            None => {
                let nanos = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.tap.answered(Import::MonotonicClock, Answer::Number(nanos));
                nanos
            }
        }
    }
}
