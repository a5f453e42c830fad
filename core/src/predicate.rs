//! Predicates on watch events (controller-runtime's `predicate.Funcs` combined with `And`, `Or`,
//! `Not`), in the postfix form plugins declare them: the built-in terms are decided here, plugin
//! terms by a callback (the plugin's `filter` export, or the FakeHost's call of it).

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// First seen: created, or listed at start.
    Create,
    /// A new version.
    Update,
    /// Marked for deletion, or deleted.
    Delete,
    /// Anything else (a resync, a timer, an inbound event).
    Generic,
}

/// What changed in an update; for other events every field is ignored (built-in terms hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Changes {
    /// The generation or the finalizers changed (for kinds without a generation: the
    /// resourceVersion).
    pub generation: bool,
    /// The labels changed.
    pub labels: bool,
    /// The annotations changed.
    pub annotations: bool,
}

/// One term, in postfix order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Term {
    /// The plugin decides; the name tells it which predicate.
    Plugin(String),
    /// Not an update, or the generation changed.
    GenerationChanged,
    /// Not an update, or the labels changed.
    LabelsChanged,
    /// Not an update, or the annotations changed.
    AnnotationsChanged,
    /// Pops two, pushes whether both hold.
    And,
    /// Pops two, pushes whether either holds.
    Or,
    /// Pops one, pushes its negation.
    Not,
}

/// A checked predicate: its terms leave exactly one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicate {
    terms: Vec<Term>,
    /// For each term, the `and`/`or` whose left operand ends there: once that operand's value
    /// decides the operator, its right operand is skipped (short circuit).
    left_of: Vec<Option<usize>>,
}

impl Predicate {
    /// Checks `terms`: each operator has its operands and one value is left; an error says
    /// what is wrong, for the load-time error naming the plugin.
    pub fn new(terms: Vec<Term>) -> Result<Self, String> {
        let mut depth: usize = 0;
        for (i, term) in terms.iter().enumerate() {
            let (pops, name) = match term {
                Term::And => (2, "and"),
                Term::Or => (2, "or"),
                Term::Not => (1, "not"),
                Term::Plugin(name) if name.is_empty() => {
                    return Err(format!("term {i} is a plugin predicate without a name"));
                }
                _ => (0, ""),
            };
            if depth < pops {
                return Err(format!("term {i} ({name}) needs {pops} operands, has {depth}"));
            }
            depth = depth - pops + 1;
        }
        match depth {
            1 => {}
            0 => return Err("the predicate has no terms".into()),
            n => return Err(format!("the predicate leaves {n} values; combine them with and/or")),
        }
        // Where the subexpression ending at each term starts, and so where each operator's left
        // operand ends (just before its right operand starts).
        let mut starts = Vec::with_capacity(terms.len());
        let mut left_of = vec![None; terms.len()];
        for (i, term) in terms.iter().enumerate() {
            let start = match term {
                Term::Not => starts[i - 1],
                Term::And | Term::Or => {
                    let left_end = starts[i - 1] - 1;
                    left_of[left_end] = Some(i);
                    starts[left_end]
                }
                _ => i,
            };
            starts.push(start);
        }
        Ok(Self { terms, left_of })
    }

    /// The terms.
    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// Whether it asks the plugin.
    pub fn asks_plugin(&self) -> bool {
        self.terms.iter().any(|t| matches!(t, Term::Plugin(_)))
    }

    /// Whether it has `term` (a built-in term), for what a driver must remember of each object.
    pub fn uses(&self, term: &Term) -> bool {
        self.terms.contains(term)
    }

    /// Evaluates the predicate on an event; `plugin(name)` answers the plugin terms. Plugin
    /// terms are asked only when their value can still change the result (short circuit), so a
    /// rejecting built-in term costs no plugin call.
    pub fn holds(&self, event: EventKind, changes: Changes, plugin: &mut dyn FnMut(&str) -> bool) -> bool {
        let evaluation = self
            .holds_async(event, changes, |name| std::future::ready(Ok::<bool, std::convert::Infallible>(plugin(name))));
        // Every plugin answer is ready: the evaluation completes on its first poll.
        let mut evaluation = std::pin::pin!(evaluation);
        match evaluation.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(Ok(holds)) => holds,
            std::task::Poll::Ready(Err(never)) => match never {},
            std::task::Poll::Pending => unreachable!("no plugin answer waits"),
        }
    }

    /// [`Predicate::holds`] with a plugin that answers asynchronously (the host's call of the
    /// plugin's `filter` export) and may fail: the first failure ends the evaluation.
    pub async fn holds_async<'p, E, F, Fut>(
        &'p self,
        event: EventKind,
        changes: Changes,
        mut plugin: F,
    ) -> Result<bool, E>
    where
        F: FnMut(&'p str) -> Fut,
        Fut: Future<Output = Result<bool, E>>,
    {
        let update = event == EventKind::Update;
        let mut stack: Vec<bool> = Vec::with_capacity(self.terms.len());
        let pop = |stack: &mut Vec<bool>| stack.pop().expect("checked by Predicate::new");
        let mut at = 0;
        while at < self.terms.len() {
            let value = match &self.terms[at] {
                Term::Plugin(name) => plugin(name).await?,
                Term::GenerationChanged => !update || changes.generation,
                Term::LabelsChanged => !update || changes.labels,
                Term::AnnotationsChanged => !update || changes.annotations,
                Term::Not => !pop(&mut stack),
                // Reached only when the left operand did not decide: the right one does.
                Term::And | Term::Or => {
                    let right = pop(&mut stack);
                    pop(&mut stack);
                    right
                }
            };
            // A value that decides the operator it is the left operand of is that operator's
            // value: the right operand is skipped, and so on up.
            let mut end = at;
            while let Some(op) = self.left_of[end] {
                let decides = if self.terms[op] == Term::And { !value } else { value };
                if !decides {
                    break;
                }
                end = op;
            }
            stack.push(value);
            at = end + 1;
        }
        Ok(pop(&mut stack))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(terms: Vec<Term>) -> Predicate {
        Predicate::new(terms).unwrap()
    }

    fn plugin(name: &str) -> Term {
        Term::Plugin(name.into())
    }

    #[test]
    fn malformed_predicates_are_refused_with_the_reason() {
        assert!(Predicate::new(vec![]).unwrap_err().contains("no terms"));
        assert!(Predicate::new(vec![Term::And]).unwrap_err().contains("needs 2 operands"));
        assert!(Predicate::new(vec![plugin("a"), plugin("b")]).unwrap_err().contains("leaves 2 values"));
        assert!(Predicate::new(vec![Term::Plugin(String::new())]).is_err());
    }

    #[test]
    fn built_in_terms_hold_for_everything_but_an_update_without_that_change() {
        let generation = p(vec![Term::GenerationChanged]);
        let none = &mut |_: &str| unreachable!();
        assert!(generation.holds(EventKind::Create, Changes::default(), none));
        assert!(generation.holds(EventKind::Delete, Changes::default(), none));
        assert!(!generation.holds(EventKind::Update, Changes::default(), none));
        assert!(generation.holds(EventKind::Update, Changes { generation: true, ..Changes::default() }, none));
        let labels = p(vec![Term::LabelsChanged, Term::Not]);
        assert!(labels.holds(EventKind::Update, Changes::default(), none));
        assert!(!labels.holds(EventKind::Update, Changes { labels: true, ..Changes::default() }, none));
    }

    #[test]
    fn and_or_not_combine_and_short_circuit_the_plugin() {
        // generation-changed or (labels-changed and not plugin("tier"))
        let pred =
            p(vec![Term::GenerationChanged, Term::LabelsChanged, plugin("tier"), Term::Not, Term::And, Term::Or]);
        let mut asked = Vec::new();
        let spec = Changes { generation: true, ..Changes::default() };
        assert!(pred.holds(EventKind::Update, spec, &mut |n| {
            asked.push(n.to_owned());
            true
        }));
        assert!(asked.is_empty(), "a generation change decides without the plugin");
        let labels = Changes { labels: true, ..Changes::default() };
        assert!(!pred.holds(EventKind::Update, labels, &mut |n| {
            asked.push(n.to_owned());
            true
        }));
        assert!(pred.holds(EventKind::Update, labels, &mut |_| false));
        assert_eq!(asked, ["tier"]);
        let neither = Changes::default();
        assert!(!pred.holds(EventKind::Update, neither, &mut |_| panic!("labels did not change: not asked")));
    }

    /// The value of `terms` (postfix) evaluated in full, without short circuit.
    fn naive(terms: &[Term], event: EventKind, changes: Changes, plugin: &dyn Fn(&str) -> bool) -> bool {
        let mut stack: Vec<bool> = Vec::new();
        let update = event == EventKind::Update;
        for term in terms {
            let value = match term {
                Term::Plugin(name) => plugin(name),
                Term::GenerationChanged => !update || changes.generation,
                Term::LabelsChanged => !update || changes.labels,
                Term::AnnotationsChanged => !update || changes.annotations,
                Term::Not => !stack.pop().unwrap(),
                Term::And => {
                    let (r, l) = (stack.pop().unwrap(), stack.pop().unwrap());
                    l && r
                }
                Term::Or => {
                    let (r, l) = (stack.pop().unwrap(), stack.pop().unwrap());
                    l || r
                }
            };
            stack.push(value);
        }
        stack.pop().unwrap()
    }

    /// Every well-formed predicate of up to `size` terms over two built-in and two plugin terms.
    fn predicates(size: usize) -> Vec<Vec<Term>> {
        let leaves = [Term::GenerationChanged, Term::LabelsChanged, plugin("a"), plugin("b")];
        let mut done = Vec::new();
        let mut partial: Vec<(Vec<Term>, usize)> = vec![(Vec::new(), 0)];
        for _ in 0..size {
            let mut next = Vec::new();
            for (terms, depth) in partial {
                let mut extend = |term: Term, depth: usize| {
                    let mut terms = terms.clone();
                    terms.push(term);
                    if depth == 1 {
                        done.push(terms.clone());
                    }
                    next.push((terms, depth));
                };
                for leaf in &leaves {
                    extend(leaf.clone(), depth + 1);
                }
                if depth >= 1 {
                    extend(Term::Not, depth);
                }
                if depth >= 2 {
                    extend(Term::And, depth - 1);
                    extend(Term::Or, depth - 1);
                }
            }
            partial = next;
        }
        done
    }

    #[test]
    fn short_circuit_evaluation_agrees_with_full_evaluation_and_asks_only_when_the_answer_matters() {
        let all = predicates(7);
        assert!(all.len() > 10_000, "{}", all.len());
        let events = [EventKind::Create, EventKind::Update, EventKind::Delete, EventKind::Generic];
        for terms in all {
            let pred = Predicate::new(terms.clone()).unwrap();
            for event in events {
                for bits in 0..16u8 {
                    let changes = Changes { generation: bits & 1 != 0, labels: bits & 2 != 0, annotations: false };
                    let answer = |name: &str| if name == "a" { bits & 4 != 0 } else { bits & 8 != 0 };
                    let mut asked = Vec::new();
                    let value = pred.holds(event, changes, &mut |name| {
                        asked.push(name.to_owned());
                        answer(name)
                    });
                    assert_eq!(value, naive(&terms, event, changes, &answer), "{terms:?} {event:?} {bits:b}");
                    // A plugin term left unasked could not have changed the result.
                    for name in ["a", "b"] {
                        if !asked.iter().any(|n| n == name) {
                            let flipped = |n: &str| if n == name { !answer(n) } else { answer(n) };
                            assert_eq!(value, naive(&terms, event, changes, &flipped), "{terms:?}: {name} mattered");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_failing_plugin_ends_the_evaluation_with_its_error() {
        let pred = p(vec![plugin("x"), plugin("y"), Term::Or]);
        let mut asked = Vec::new();
        let poll = {
            let evaluation = pred.holds_async(EventKind::Update, Changes::default(), |name| {
                asked.push(name);
                std::future::ready(Err::<bool, _>(format!("{name} trapped")))
            });
            let mut evaluation = std::pin::pin!(evaluation);
            evaluation.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
        };
        assert_eq!(poll, std::task::Poll::Ready(Err("x trapped".to_string())));
        assert_eq!(asked, ["x"]);
    }
}
