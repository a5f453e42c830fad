//! How much is recorded: a size cap per record and a budget for the directory, as a pure policy
//! the host carries out (it writes and deletes the files; this decides which).
//!
//! - **A record over its cap is truncated, then refused.** The largest answers go first
//!   (a `list` of thousands of objects, a big HTTP body): each becomes
//!   [`Answer::Truncated`] with the bytes it had, and the record says it was truncated
//!   ([`Record::truncated`]), until the record fits. What a replay needs most stays whole: the
//!   request, the order of the calls and what the guest asked, the ending. A record that still
//!   does not fit (its request or ending alone is too big, or a plugin logged too much) is not
//!   written and counts as dropped for size.
//! - **The directory stays within its budget, oldest records deleted first.** Before a record is
//!   written, the oldest records (by the time they were written, then by name) are deleted until
//!   the new one fits; a record larger than the whole budget is dropped instead, and nothing is
//!   deleted for it.
//! - **The counters are the policy's answers** ([`Counts`]): the host adds each [`Admission`]'s
//!   counts to its metrics (records written, truncated, dropped for size, deleted for budget).

use super::format::{Answer, Record};

/// The limits of one plugin's records, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The size cap of one record.
    pub max_record_bytes: u64,
    /// The total of the records in the directory.
    pub budget_bytes: u64,
}

/// A record already in the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Its file name.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// When it was written, in any unit that orders (e.g. milliseconds since the epoch).
    pub written_at: u64,
}

/// What the policy did, for the host's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records written.
    pub written: u64,
    /// Records written with answers dropped to fit the cap.
    pub truncated: u64,
    /// Records not written: too big even truncated, or bigger than the whole budget.
    pub dropped_for_size: u64,
    /// Older records deleted to stay within the budget.
    pub deleted_for_budget: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, other: Self) {
        self.written += other.written;
        self.truncated += other.truncated;
        self.dropped_for_size += other.dropped_for_size;
        self.deleted_for_budget += other.deleted_for_budget;
    }
}

/// What to do with a new record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The bytes to write; `None` when the record is dropped.
    pub write: Option<Vec<u8>>,
    /// The records to delete first, oldest first.
    pub delete: Vec<String>,
    /// What this admission counts.
    pub counts: Counts,
}

impl Budget {
    /// Decides what happens to `record`, the directory holding `stored`: truncated to the cap if
    /// needed (which changes `record`), then written after the oldest records are deleted to
    /// make room, or dropped.
    pub fn admit(&self, record: &mut Record, stored: &[Stored]) -> Admission {
        let mut counts = Counts::default();
        let mut bytes = record.to_vec();
        if len(&bytes) > self.max_record_bytes {
            truncate(record, self.max_record_bytes);
            bytes = record.to_vec();
            counts.truncated = 1;
        }
        self.admit_bytes(bytes, stored, counts)
    }

    /// Decides what happens to a file of `bytes` that cannot be truncated (a webhook fixture),
    /// the directory holding `stored`: dropped when over the cap, else written after the oldest
    /// files are deleted to make room.
    pub fn admit_whole(&self, bytes: Vec<u8>, stored: &[Stored]) -> Admission {
        self.admit_bytes(bytes, stored, Counts::default())
    }

    fn admit_bytes(&self, bytes: Vec<u8>, stored: &[Stored], mut counts: Counts) -> Admission {
        if len(&bytes) > self.max_record_bytes.min(self.budget_bytes) {
            let counts = Counts { dropped_for_size: 1, ..Counts::default() };
            return Admission { write: None, delete: Vec::new(), counts };
        }
        let delete = evict(stored, len(&bytes), self.budget_bytes);
        counts.written = 1;
        counts.deleted_for_budget = delete.len() as u64;
        Admission { write: Some(bytes), delete, counts }
    }
}

/// The length of `bytes` as a `u64`.
fn len(bytes: &[u8]) -> u64 {
    bytes.len() as u64
}

/// The records of `stored` to delete, oldest first, so that they and `incoming` bytes more stay
/// within `budget`. All of them when `incoming` alone is over the budget.
pub fn evict(stored: &[Stored], incoming: u64, budget: u64) -> Vec<String> {
    let mut oldest_first: Vec<&Stored> = stored.iter().collect();
    oldest_first.sort_by(|a, b| a.written_at.cmp(&b.written_at).then_with(|| a.name.cmp(&b.name)));
    let mut total: u64 = stored.iter().map(|s| s.bytes).sum::<u64>() + incoming;
    let mut delete = Vec::new();
    for record in oldest_first {
        if total <= budget {
            break;
        }
        total -= record.bytes;
        delete.push(record.name.clone());
    }
    delete
}

/// Replaces the largest answers of `record` by [`Answer::Truncated`] until its JSON has at most
/// `cap` bytes or no answer is left to drop; returns how many it replaced. Ties go to the
/// earlier call, so the result does not depend on anything but the record.
pub fn truncate(record: &mut Record, cap: u64) -> usize {
    let mut total = len(&record.to_vec());
    let mut answers: Vec<(u64, usize, usize)> = record
        .steps
        .iter()
        .enumerate()
        .flat_map(|(s, step)| step.calls.iter().enumerate().map(move |(c, call)| (answer_len(&call.answer), s, c)))
        .collect();
    answers.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| (a.1, a.2).cmp(&(b.1, b.2))));
    let mut dropped = 0;
    for (bytes, s, c) in answers {
        let marker = Answer::Truncated(bytes);
        let saved = bytes.saturating_sub(answer_len(&marker));
        if total <= cap || saved == 0 {
            break;
        }
        record.steps[s].calls[c].answer = marker;
        total -= saved;
        dropped += 1;
    }
    record.truncated |= dropped > 0;
    dropped
}

/// The bytes of `answer` in a record's JSON.
fn answer_len(answer: &Answer) -> u64 {
    // An answer always serializes: it holds no map with non-string keys.
    serde_json::to_vec(answer).map_or(0, |bytes| len(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::format::{Body, Call, Import};
    use crate::record::replay::{ReplayError, Tape};
    use crate::record::sample;

    fn stored(name: &str, bytes: u64, written_at: u64) -> Stored {
        Stored { name: name.into(), bytes, written_at }
    }

    /// The sample with a `list` answer of `items` objects of 100 bytes each.
    fn with_big_list(items: usize) -> Record {
        let mut record = sample::record();
        let import = Import::List { kind: sample::core_kind("Pod"), namespace: None, label_selector: None };
        let objects = (0..items).map(|i| format!("{{\"n\":\"{i:0>92}\"}}")).collect();
        record.steps[1].calls.push(Call { import, answer: Answer::Objects(Ok(objects)) });
        record
    }

    #[test]
    fn a_whole_file_is_written_within_the_budget_or_dropped_over_the_cap() {
        let budget = Budget { max_record_bytes: 100, budget_bytes: 150 };
        let kept = [stored("old", 80, 1), stored("new", 50, 2)];
        let admitted = budget.admit_whole(vec![b'x'; 60], &kept);
        assert_eq!(admitted.write.map(|w| w.len()), Some(60));
        assert_eq!(admitted.delete, ["old"], "the oldest goes to make room");
        let dropped = budget.admit_whole(vec![b'x'; 101], &kept);
        assert_eq!((dropped.write, dropped.counts.dropped_for_size), (None, 1));
    }

    #[test]
    fn a_record_within_its_cap_and_the_budget_is_written_whole() {
        let mut record = sample::record();
        let budget = Budget { max_record_bytes: 1 << 20, budget_bytes: 1 << 30 };
        let admission = budget.admit(&mut record, &[stored("old", 10, 1)]);
        assert_eq!(admission.write, Some(sample::record().to_vec()));
        assert_eq!(admission.delete, Vec::<String>::new());
        assert_eq!(admission.counts, Counts { written: 1, ..Counts::default() });
        assert!(!record.truncated);
    }

    #[test]
    fn a_record_over_its_cap_loses_its_largest_answer_first() {
        let mut record = with_big_list(100);
        let whole = record.to_vec().len() as u64;
        let budget = Budget { max_record_bytes: whole - 1000, budget_bytes: 1 << 30 };
        let admission = budget.admit(&mut record, &[]);
        let written = admission.write.unwrap();
        assert!(written.len() as u64 <= budget.max_record_bytes);
        assert_eq!(admission.counts, Counts { written: 1, truncated: 1, ..Counts::default() });
        assert!(record.truncated);
        assert!(matches!(record.steps[1].calls.last().unwrap().answer, Answer::Truncated(bytes) if bytes > 10_000));
        // Everything else stays, the smaller answers and what the guest asked included.
        assert_eq!(record.steps[1].calls[..5], sample::record().steps[1].calls[..]);
        assert_eq!(Record::from_slice(&written), Ok(record));
    }

    #[test]
    fn a_big_http_body_is_dropped_to_fit_and_a_replay_stops_at_that_request() {
        let mut record = sample::record();
        let mut http = sample::http("GET", vec![]);
        let Answer::Http(Ok(response)) = &mut http.answer else { panic!("a response") };
        response.body = Body::Text("x".repeat(50_000));
        record.steps[1].calls.push(http.clone());
        let budget = Budget { max_record_bytes: 20_000, budget_bytes: 1 << 30 };
        let admission = budget.admit(&mut record, &[]);
        assert_eq!(admission.counts, Counts { written: 1, truncated: 1, ..Counts::default() });
        let kept = record.steps[1].calls.last().unwrap();
        assert_eq!(kept.import, http.import, "what the guest asked stays");
        assert!(matches!(kept.answer, Answer::Truncated(bytes) if bytes > 50_000));
        let mut tape = Tape::exact(1, &record.steps[1]);
        let asked: Vec<Import> = record.steps[1].calls.iter().map(|call| call.import.clone()).collect();
        let error = asked.iter().map(|import| tape.answer(import)).find_map(Result::err).unwrap();
        assert!(matches!(error, ReplayError::Truncated { step: 1, index: 5, .. }), "{error}");
    }

    #[test]
    fn a_record_that_cannot_fit_its_cap_is_dropped_and_counted() {
        let mut record = sample::record();
        let budget = Budget { max_record_bytes: 200, budget_bytes: 1 << 30 };
        let admission = budget.admit(&mut record, &[stored("old", 10, 1)]);
        assert_eq!(admission.write, None);
        assert_eq!(admission.delete, Vec::<String>::new());
        assert_eq!(admission.counts, Counts { dropped_for_size: 1, ..Counts::default() });
    }

    #[test]
    fn a_record_larger_than_the_whole_budget_deletes_nothing() {
        let mut record = sample::record();
        let budget = Budget { max_record_bytes: 1 << 20, budget_bytes: 100 };
        let admission = budget.admit(&mut record, &[stored("old", 10, 1)]);
        assert_eq!((admission.write, admission.delete), (None, vec![]));
        assert_eq!(admission.counts.dropped_for_size, 1);
    }

    #[test]
    fn the_oldest_records_are_deleted_until_the_new_one_fits() {
        let dir = [stored("c", 30, 3), stored("a", 30, 1), stored("b2", 30, 2), stored("b1", 30, 2)];
        assert_eq!(evict(&dir, 10, 130), Vec::<String>::new());
        assert_eq!(evict(&dir, 11, 130), ["a"]);
        assert_eq!(evict(&dir, 70, 130), ["a", "b1"]);
        assert_eq!(evict(&dir, 200, 130), ["a", "b1", "b2", "c"]);
    }

    #[test]
    fn a_burst_of_a_thousand_records_stays_within_the_budget_at_every_step() {
        let budget = Budget { max_record_bytes: 16 << 10, budget_bytes: 256 << 10 };
        let mut dir: Vec<Stored> = Vec::new();
        let mut counts = Counts::default();
        let mut seed: u64 = 29;
        for i in 0..1000_u64 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let mut record = with_big_list((seed >> 33) as usize % 250);
            let admission = budget.admit(&mut record, &dir);
            dir.retain(|s| !admission.delete.contains(&s.name));
            if let Some(bytes) = &admission.write {
                assert!(bytes.len() as u64 <= budget.max_record_bytes);
                dir.push(stored(&format!("{i:04}.json"), bytes.len() as u64, i));
            }
            counts += admission.counts;
            assert!(dir.iter().map(|s| s.bytes).sum::<u64>() <= budget.budget_bytes, "over budget after {i}");
        }
        assert_eq!((counts.written, counts.dropped_for_size), (1000, 0));
        assert_eq!(counts.written - counts.deleted_for_budget, dir.len() as u64);
        assert!(counts.truncated > 0 && counts.deleted_for_budget > 0, "{counts:?}");
        // What is left is the newest records.
        let oldest_left = dir.iter().map(|s| s.written_at).min().unwrap();
        assert_eq!(dir.len() as u64, 1000 - oldest_left);
    }
}
