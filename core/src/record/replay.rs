//! Replaying a record: the tape a replaying host consults for each import call of the guest,
//! and the check that the guest ended as recorded.
//!
//! - **Exact** ([`Tape::exact`], `wasmop replay RECORD` with the recorded module): the guest's
//!   calls must be the recorded ones, in order, with the same arguments; each is answered with
//!   the recorded answer. The first that differs stops the replay with a [`Divergence`] naming
//!   it (the step, the call's index, what the record holds and what the guest asked), and so
//!   does a guest that ends with recorded calls left. At the end, [`Tape::finish`] compares the
//!   ending's bytes ([`Ending::bytes`]) with the record's.
//! - **Lenient** ([`Tape::lenient`], `--plugin other.wasm`): another version of the plugin may
//!   read in another order, read more than once or log differently. Each call is answered from
//!   the first recorded call with the same import and arguments not yet used (the last one used
//!   when all are, since reads of a cache repeat); logs are accepted whatever they say. Only a
//!   call the record cannot answer stops the replay. The endings are then compared as a diff
//!   ([`crate::record::diff`]), not as bytes.
//!
//! A call matches the recorded one when it has the same import and arguments, with one
//! allowance: a credential that redaction replaced by its marker in an HTTP request
//! ([`crate::record::redact`]: a header's value, a query parameter's value, the user information
//! of the URL) matches any value of the length the marker gives. Outgoing HTTP is answered from
//! the tape like any read: a replay opens no connection. A response the guest marked as
//! sensitive is answered with the recorded status and headers and the marker as its body.
//!
//! A call whose answer was truncated to fit the size cap cannot be replayed: the replay stops
//! there with [`ReplayError::Truncated`].
//!
//! **Following** ([`Follow`], shadow rollouts): a candidate version reads what the live version
//! read at the same moment. Its calls are matched as a lenient tape matches them, against the
//! live call's reads; what the live version did not read (or a log) is left to the host.

use super::format::{Answer, Call, Ending, Import, Step};
use super::redact::{hide_url, marker};

/// How strictly a tape holds the guest to the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The recorded calls, in order.
    Exact,
    /// Any recorded call with the same arguments; logs always.
    Lenient,
}

/// The recorded calls of one step, answering the guest's calls during a replay.
#[derive(Debug)]
pub struct Tape<'r> {
    step: usize,
    export: &'static str,
    calls: &'r [Call],
    recorded: &'r Ending,
    mode: Mode,
    /// The guest's calls so far.
    asked: usize,
    /// Which recorded calls answered (lenient), or the first `n` (exact).
    used: Vec<bool>,
}

/// The first import call where a replay and its record part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The step's index in the record.
    pub step: usize,
    /// The step's export, e.g. `reconcile`.
    pub export: &'static str,
    /// The call's index within the step.
    pub index: usize,
    /// The recorded call; `None` when the guest called more than the record holds.
    pub expected: Option<Import>,
    /// The guest's call; `None` when the guest ended before making the recorded one.
    pub actual: Option<Import>,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (step, export, index) = (self.step, self.export, self.index);
        write!(f, "step {step} ({export}), import call {index}: ")?;
        match (&self.expected, &self.actual) {
            (Some(expected), Some(actual)) => write!(f, "the record has `{expected}`, the guest called `{actual}`"),
            (Some(expected), None) => write!(f, "the record has `{expected}`, the guest returned instead"),
            (None, Some(actual)) => write!(f, "the guest called `{actual}`, which the record does not hold"),
            (None, None) => f.write_str("no call on either side"),
        }
    }
}

/// Why a replay stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// The guest's calls part from the record (boxed: it holds two calls).
    Diverged(Box<Divergence>),
    /// The recorded answer was dropped to fit the size cap.
    Truncated {
        /// The step's index.
        step: usize,
        /// The call's index within the step.
        index: usize,
        /// The answer's size when it was recorded.
        bytes: u64,
    },
    /// The guest made the recorded calls but ended differently.
    Ending {
        /// The step's index.
        step: usize,
        /// The recorded ending, as JSON.
        expected: String,
        /// The replay's ending, as JSON.
        actual: String,
    },
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Diverged(divergence) => write!(f, "diverged at {divergence}"),
            ReplayError::Truncated { step, index, bytes } => write!(
                f,
                "step {step}, import call {index}: the answer ({bytes} bytes) was dropped to fit the record's size cap"
            ),
            ReplayError::Ending { step, expected, actual } => {
                write!(f, "step {step}: the same calls, another ending:\n  recorded {expected}\n  replayed {actual}")
            }
        }
    }
}

impl std::error::Error for ReplayError {}

/// Whether the guest's call `asked` is the `recorded` one: the same, or an HTTP request whose
/// redacted credentials (headers, query parameters, user information) have the lengths their
/// markers give.
fn matches(recorded: &Import, asked: &Import) -> bool {
    match (recorded, asked) {
        (Import::Http { method, url, headers, body }, Import::Http { method: m, url: u, headers: h, body: b }) => {
            let same_header = |((name, value), (n, v)): (&(String, String), &(String, String))| {
                name == n && (value == v || *value == marker(v.len()))
            };
            let same_url = url == u || *url == hide_url(u).0;
            (method, body) == (m, b) && same_url && headers.len() == h.len() && headers.iter().zip(h).all(same_header)
        }
        _ => recorded == asked,
    }
}

/// The index of the first of `calls` that is `import` and not `used` yet.
fn unused(calls: &[Call], used: &[bool], import: &Import) -> Option<usize> {
    (0..calls.len()).find(|&i| !used[i] && matches(&calls[i].import, import))
}

/// The index of the last of `calls` that is `import` and `used` already.
fn last_used(calls: &[Call], used: &[bool], import: &Import) -> Option<usize> {
    (0..calls.len()).rev().find(|&i| used[i] && matches(&calls[i].import, import))
}

/// The calls one export call of the live version made, answering the same calls of a shadow
/// candidate: the candidate reads the caches, clocks and random values as the live version read
/// them, not as they are once the live version's writes were sent.
#[derive(Debug)]
pub struct Follow {
    calls: Vec<Call>,
    used: Vec<bool>,
}

impl Follow {
    /// Follows the live version's `calls`.
    pub fn new(calls: Vec<Call>) -> Self {
        let used = vec![false; calls.len()];
        Self { calls, used }
    }

    /// The live version's answer to `import`: the first of its calls with the same import and
    /// arguments not used yet, or else the last one used (reads of a cache repeat). `None` for a
    /// log, a call the live version did not make, or one whose answer was not kept: the host
    /// answers those.
    pub fn answer(&mut self, import: &Import) -> Option<&Answer> {
        if matches!(import, Import::Log { .. }) {
            return None;
        }
        let index = unused(&self.calls, &self.used, import).or_else(|| last_used(&self.calls, &self.used, import))?;
        self.used[index] = true;
        Some(&self.calls[index].answer).filter(|answer| !matches!(answer, Answer::Truncated(_)))
    }
}

/// The answer to a log: nothing.
static NOTHING: Answer = Answer::Nothing;

impl<'r> Tape<'r> {
    /// The tape of `step`, the `index`th of its record, holding the guest to its calls in order.
    pub fn exact(index: usize, step: &'r Step) -> Self {
        Self::new(index, step, Mode::Exact)
    }

    /// The tape of `step`, the `index`th of its record, answering any recorded call.
    pub fn lenient(index: usize, step: &'r Step) -> Self {
        Self::new(index, step, Mode::Lenient)
    }

    fn new(index: usize, step: &'r Step, mode: Mode) -> Self {
        let calls = step.calls.as_slice();
        let used = vec![false; calls.len()];
        Self { step: index, export: step.request.export(), calls, recorded: &step.ending, mode, asked: 0, used }
    }

    /// The recorded answer to the guest's next call, `import`.
    pub fn answer(&mut self, import: &Import) -> Result<&'r Answer, ReplayError> {
        let asked = self.asked;
        self.asked += 1;
        let found = match self.mode {
            Mode::Exact => self.calls.get(asked).map(|call| (asked, call)),
            Mode::Lenient if matches!(import, Import::Log { .. }) => return Ok(&NOTHING),
            Mode::Lenient => self.unused(import).or_else(|| self.last_used(import)),
        };
        let Some((index, call)) = found.filter(|(_, call)| matches(&call.import, import)) else {
            let expected = found.map(|(_, call)| call.import.clone());
            return Err(self.diverged(asked, expected, Some(import.clone())));
        };
        self.used[index] = true;
        match &call.answer {
            Answer::Truncated(bytes) => Err(ReplayError::Truncated { step: self.step, index, bytes: *bytes }),
            answer => Ok(answer),
        }
    }

    /// The first recorded call of `import` not used yet.
    fn unused(&self, import: &Import) -> Option<(usize, &'r Call)> {
        unused(self.calls, &self.used, import).map(|i| (i, &self.calls[i]))
    }

    /// The last recorded call of `import` used already.
    fn last_used(&self, import: &Import) -> Option<(usize, &'r Call)> {
        last_used(self.calls, &self.used, import).map(|i| (i, &self.calls[i]))
    }

    fn diverged(&self, index: usize, expected: Option<Import>, actual: Option<Import>) -> ReplayError {
        ReplayError::Diverged(Box::new(Divergence { step: self.step, export: self.export, index, expected, actual }))
    }

    /// Checks the end of an exact replay: every recorded call was made (lenient tapes do not
    /// ask), and `ending` has the recorded bytes.
    pub fn finish(&self, ending: &Ending) -> Result<(), ReplayError> {
        if self.mode == Mode::Exact
            && let Some(call) = self.calls.get(self.asked)
        {
            return Err(self.diverged(self.asked, Some(call.import.clone()), None));
        }
        let (expected, actual) = (self.recorded.bytes(), ending.bytes());
        if expected == actual {
            return Ok(());
        }
        let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
        Err(ReplayError::Ending { step: self.step, expected: text(expected), actual: text(actual) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::format::{Failure, Outcome};
    use crate::record::sample;

    /// Plays `imports` against `tape`, returning the answers until the first error.
    fn play<'r>(tape: &mut Tape<'r>, imports: &[Import]) -> Result<Vec<&'r Answer>, ReplayError> {
        imports.iter().map(|import| tape.answer(import)).collect()
    }

    fn imports(step: &Step) -> Vec<Import> {
        step.calls.iter().map(|call| call.import.clone()).collect()
    }

    /// A candidate following the live version gets its answers, a repeated read the last one,
    /// and the host answers logs and reads the live version did not make.
    #[test]
    fn a_follower_reads_what_the_live_call_read_and_leaves_the_rest_to_the_host() {
        let record = sample::record();
        let step = &record.steps[1];
        let mut follow = Follow::new(step.calls.clone());
        for call in step.calls.iter().filter(|call| !matches!(call.import, Import::Log { .. })) {
            assert_eq!(follow.answer(&call.import), Some(&call.answer), "{}", call.import);
        }
        let read = step.calls.iter().find(|call| matches!(call.import, Import::Get { .. })).expect("a get");
        assert_eq!(follow.answer(&read.import), Some(&read.answer), "a repeated read");
        assert_eq!(follow.answer(&sample::get("ConfigMap", "never-read", None).import), None);
        let log = Import::Log { level: "info".into(), message: "other words".into(), fields: Vec::new() };
        assert_eq!(follow.answer(&log), None);
    }

    #[test]
    fn the_same_calls_are_answered_as_recorded_and_the_same_ending_passes() {
        let record = sample::record();
        for (i, step) in record.steps.iter().enumerate() {
            let mut tape = Tape::exact(i, step);
            let answers = play(&mut tape, &imports(step)).unwrap();
            assert_eq!(answers, step.calls.iter().map(|call| &call.answer).collect::<Vec<_>>());
            assert_eq!(tape.finish(&step.ending.clone()), Ok(()));
        }
    }

    #[test]
    fn the_first_call_with_other_arguments_is_named() {
        let record = sample::record();
        let step = &record.steps[1];
        let mut calls = imports(step);
        calls[2] = sample::get("ConfigMap", "other", None).import;
        let error = play(&mut Tape::exact(1, step), &calls).unwrap_err();
        let ReplayError::Diverged(divergence) = &error else { panic!("{error}") };
        assert_eq!((divergence.step, divergence.export, divergence.index), (1, "reconcile", 2));
        assert_eq!(divergence.expected.as_ref(), Some(&step.calls[2].import));
        assert_eq!(
            error.to_string(),
            "diverged at step 1 (reconcile), import call 2: the record has `get v1/ConfigMap ns/web`, \
             the guest called `get v1/ConfigMap ns/other`"
        );
    }

    #[test]
    fn a_guest_that_calls_more_or_fewer_times_diverges() {
        let record = sample::record();
        let step = &record.steps[0];
        let mut more = imports(step);
        more.push(Import::WallClock);
        let error = play(&mut Tape::exact(0, step), &more).unwrap_err();
        assert_eq!(
            error.to_string(),
            "diverged at step 0 (desired), import call 2: the guest called `wall-clock`, which the record does not hold"
        );
        let mut tape = Tape::exact(0, step);
        play(&mut tape, &imports(step)[..1]).unwrap();
        assert_eq!(
            tape.finish(&step.ending).unwrap_err().to_string(),
            "diverged at step 0 (desired), import call 1: the record has `random-u64`, the guest returned instead"
        );
    }

    #[test]
    fn the_same_calls_with_another_ending_are_not_bit_exact() {
        let record = sample::record();
        let step = &record.steps[1];
        let mut tape = Tape::exact(1, step);
        play(&mut tape, &imports(step)).unwrap();
        let Ending::Reconciled(outcome) = &step.ending else { panic!("reconciled") };
        let requeue_later = Ending::Reconciled(Outcome { reschedule_after_ms: Some(30_001), ..outcome.clone() });
        let error = tape.finish(&requeue_later).unwrap_err();
        let ReplayError::Ending { step: 1, expected, actual } = &error else { panic!("{error}") };
        assert!(expected.contains("30000") && actual.contains("30001"));
        assert!(tape.finish(&Ending::Failed(Failure::Transient("x".into()))).is_err());
    }

    #[test]
    fn a_truncated_answer_stops_the_replay_where_it_was_dropped() {
        let mut record = sample::record();
        record.steps[1].calls[3].answer = Answer::Truncated(12_345);
        let step = &record.steps[1];
        let error = play(&mut Tape::exact(1, step), &imports(step)).unwrap_err();
        assert_eq!(error, ReplayError::Truncated { step: 1, index: 3, bytes: 12_345 });
    }

    #[test]
    fn a_lenient_tape_answers_reads_in_any_order_and_any_logs() {
        let record = sample::record();
        let step = &record.steps[1];
        let mut calls = imports(step);
        calls.reverse();
        calls.insert(0, sample::log("a new log line").import);
        calls.push(step.calls[2].import.clone());
        let mut tape = Tape::lenient(1, step);
        let answers = play(&mut tape, &calls).unwrap();
        assert_eq!(answers[0], &Answer::Nothing);
        assert_eq!(answers[1], &step.calls[4].answer);
        assert_eq!(answers.last().unwrap(), &&step.calls[2].answer);
        let unknown = sample::get("ConfigMap", "other", None).import;
        let ReplayError::Diverged(divergence) = tape.answer(&unknown).unwrap_err() else { panic!("diverged") };
        assert_eq!((divergence.index, divergence.expected), (calls.len(), None));
    }

    #[test]
    fn http_is_answered_from_the_tape_and_a_request_to_another_url_is_named() {
        let mut record = sample::record();
        let headers = vec![("accept".to_owned(), "application/json".to_owned())];
        record.steps[1].calls = vec![sample::http("GET", headers.clone())];
        let step = &record.steps[1];
        let answers = play(&mut Tape::exact(1, step), &imports(step)).unwrap();
        let Answer::Http(Ok(response)) = answers[0] else { panic!("{:?}", answers[0]) };
        assert_eq!((response.status, response.body.bytes()), (200, &br#"{"things":[]}"#[..]));

        let Import::Http { method, headers, body, .. } = step.calls[0].import.clone() else { panic!("http") };
        let other = Import::Http { method, url: "https://api.example.com/v1/others".into(), headers, body };
        let error = Tape::exact(1, step).answer(&other).unwrap_err();
        assert_eq!(
            error.to_string(),
            "diverged at step 1 (reconcile), import call 0: the record has \
             `http GET https://api.example.com/v1/things`, the guest called `http GET https://api.example.com/v1/others`"
        );
    }

    #[test]
    fn a_redacted_credential_header_matches_a_value_of_its_length_only() {
        let mut record = sample::record();
        record.steps.remove(0);
        let sent = |token: &str| vec![("authorization".to_owned(), format!("Bearer {token}"))];
        record.steps[0].calls = vec![sample::http("POST", sent("t0ken"))];
        crate::record::redact::redact(&mut record).unwrap();
        let step = &record.steps[0];
        let asked = |token| sample::http("POST", sent(token)).import;
        assert!(Tape::exact(0, step).answer(&asked("t0ken")).is_ok());
        assert!(Tape::exact(0, step).answer(&asked("other")).is_ok(), "the same length");
        assert!(Tape::exact(0, step).answer(&asked("longer")).is_err());
        let mut unredacted = sample::record();
        unredacted.steps[1].calls = vec![sample::http("POST", sent("t0ken"))];
        assert!(Tape::exact(1, &unredacted.steps[1]).answer(&asked("other")).is_err(), "only markers match by length");
    }

    /// The record of one GET of `url` with the guest's `headers`, answered with `body`, redacted.
    fn redacted_exchange(url: &str, headers: &[(&str, &str)], body: &str) -> crate::record::Record {
        let mut record = sample::record();
        record.steps.remove(0);
        let mut call = sample::http("GET", headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect());
        let Import::Http { url: recorded, .. } = &mut call.import else { panic!("http") };
        *recorded = url.to_owned();
        let Answer::Http(Ok(response)) = &mut call.answer else { panic!("a response") };
        response.body = crate::record::format::Body::Text(body.to_owned());
        record.steps[0].calls = vec![call];
        crate::record::redact::redact(&mut record).unwrap();
        record
    }

    /// The guest's GET of `url` with `headers`.
    fn asked(url: &str, headers: &[(&str, &str)]) -> Import {
        let mut call = sample::http("GET", headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect());
        let Import::Http { url: asked, .. } = &mut call.import else { panic!("http") };
        *asked = url.to_owned();
        call.import
    }

    #[test]
    fn a_redacted_query_parameter_matches_a_value_of_its_length_only() {
        let url = |token: &str, page: u8| format!("https://api.example.com/v1?page={page}&access_token={token}");
        let record = redacted_exchange(&url("t0ken", 1), &[], "{}");
        let step = &record.steps[0];
        let answer = |url: String| Tape::exact(0, step).answer(&asked(&url, &[])).map(|_| ());
        assert_eq!(answer(url("t0ken", 1)), Ok(()));
        assert_eq!(answer(url("other", 1)), Ok(()), "the same length");
        assert!(answer(url("longer", 1)).is_err());
        assert!(answer(url("t0ken", 2)).is_err(), "other parameters as recorded");
        let user = redacted_exchange("https://me:pw@api.example.com/v1", &[], "{}");
        let answer = |url: &str| Tape::exact(0, &user.steps[0]).answer(&asked(url, &[])).map(|_| ());
        assert_eq!(answer("https://me:pw@api.example.com/v1"), Ok(()));
        assert!(answer("https://me:pw@api.example.com/v2").is_err());
        let mut unredacted = sample::record();
        unredacted.steps[1].calls = vec![sample::http("GET", vec![])];
        let Import::Http { url, .. } = &mut unredacted.steps[1].calls[0].import else { panic!("http") };
        *url = "https://api.example.com/v1?token=t0ken".into();
        let other = asked("https://api.example.com/v1?token=other", &[]);
        assert!(Tape::exact(1, &unredacted.steps[1]).answer(&other).is_err(), "only markers match by length");
    }

    #[test]
    fn a_sensitive_response_replays_as_the_marker_of_its_length() {
        use crate::record::redact::SENSITIVE_RESPONSE;
        let body = r#"{"access_token":"eyJhbGciOiJIUzI1NiJ9"}"#;
        let record = redacted_exchange("https://auth.example.com/token", &[(SENSITIVE_RESPONSE, "1")], body);
        let step = &record.steps[0];
        let answer =
            Tape::exact(0, step).answer(&asked("https://auth.example.com/token", &[(SENSITIVE_RESPONSE, "1")]));
        let Ok(Answer::Http(Ok(response))) = answer else { panic!("{answer:?}") };
        assert_eq!(response.body.bytes(), marker(body.len()).as_bytes());
        let unmarked = Tape::exact(0, step).answer(&asked("https://auth.example.com/token", &[]));
        assert!(unmarked.is_err(), "the mark is part of the request");
    }

    #[test]
    fn a_lenient_tape_hands_out_repeated_readings_in_order() {
        let clock = |seconds| Call { import: Import::WallClock, answer: Answer::Instant { seconds, nanoseconds: 0 } };
        let mut record = sample::record();
        record.steps[1].calls = vec![clock(1), clock(2)];
        let step = &record.steps[1];
        let mut tape = Tape::lenient(1, step);
        let seconds: Vec<u64> = (0..3)
            .map(|_| match tape.answer(&Import::WallClock).unwrap() {
                Answer::Instant { seconds, .. } => *seconds,
                _ => 0,
            })
            .collect();
        assert_eq!(seconds, [1, 2, 2]);
        assert_eq!(tape.finish(&step.ending), Ok(()));
    }
}
