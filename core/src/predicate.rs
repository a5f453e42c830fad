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
pub struct Predicate(Vec<Term>);

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
            1 => Ok(Self(terms)),
            0 => Err("the predicate has no terms".into()),
            n => Err(format!("the predicate leaves {n} values; combine them with and/or")),
        }
    }

    /// The terms.
    pub fn terms(&self) -> &[Term] {
        &self.0
    }

    /// Whether it asks the plugin.
    pub fn asks_plugin(&self) -> bool {
        self.0.iter().any(|t| matches!(t, Term::Plugin(_)))
    }

    /// Evaluates the predicate on an event; `plugin(name)` answers the plugin terms. Plugin
    /// terms are asked only when their value can still change the result (short circuit), so a
    /// rejecting built-in term costs no plugin call.
    pub fn holds(&self, event: EventKind, changes: Changes, plugin: &mut dyn FnMut(&str) -> bool) -> bool {
        self.eval(event, changes, plugin, self.0.len()).0
    }

    /// Evaluates the subexpression ending just before `end` (postfix, read from the right);
    /// returns its value and where it starts. Plugin terms in a branch whose value cannot
    /// matter are skipped, not asked.
    fn eval(
        &self,
        event: EventKind,
        changes: Changes,
        plugin: &mut dyn FnMut(&str) -> bool,
        end: usize,
    ) -> (bool, usize) {
        let at = end - 1;
        let update = event == EventKind::Update;
        match &self.0[at] {
            Term::Plugin(name) => (plugin(name), at),
            Term::GenerationChanged => (!update || changes.generation, at),
            Term::LabelsChanged => (!update || changes.labels, at),
            Term::AnnotationsChanged => (!update || changes.annotations, at),
            Term::Not => {
                let (value, start) = self.eval(event, changes, plugin, at);
                (!value, start)
            }
            op @ (Term::And | Term::Or) => {
                // The right operand ends at `at`; the left one ends where the right starts.
                let right_start = self.start_of(at);
                let (left, start) = self.eval(event, changes, plugin, right_start);
                let decided = match op {
                    Term::And => !left,
                    _ => left,
                };
                if decided {
                    return (left, start);
                }
                let (right, _) = self.eval(event, changes, plugin, at);
                (right, start)
            }
        }
    }

    /// Where the subexpression ending just before `end` starts.
    fn start_of(&self, end: usize) -> usize {
        let mut need = 1usize;
        let mut i = end;
        while need > 0 {
            i -= 1;
            need -= 1;
            need += match self.0[i] {
                Term::And | Term::Or => 2,
                Term::Not => 1,
                _ => 0,
            };
        }
        i
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
}
