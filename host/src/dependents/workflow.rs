//! The dependents' workflow (JOSDK's workflows): dependents run in dependency order; one whose
//! dependencies are not all ready is skipped; one whose reconcile condition is false is deleted.
//! Pure: the controller carries out the steps.

use std::collections::HashMap;

use crate::runtime::bindings::wasmop::plugin::types::{Dependent, DependentPhase};

/// The dependents of a plugin in an order where each comes after those it depends on.
#[derive(Debug, Clone)]
pub struct Workflow {
    order: Vec<usize>,
}

/// What to do with one dependent in this reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A dependency is not ready: leave the objects as they are.
    Skip,
    /// The reconcile condition is false: delete the objects.
    Delete,
    /// Apply (or observe) the desired objects.
    Reconcile,
}

impl Workflow {
    /// Orders `dependents`; an error names a duplicate name, an unknown dependency or a cycle.
    pub fn new(dependents: &[Dependent]) -> Result<Self, String> {
        let mut index = HashMap::new();
        for (i, d) in dependents.iter().enumerate() {
            if index.insert(d.name.as_str(), i).is_some() {
                return Err(format!("two dependents are named {:?}", d.name));
            }
        }
        for d in dependents {
            if let Some(unknown) = d.depends_on.iter().find(|n| !index.contains_key(n.as_str())) {
                return Err(format!("dependent {:?} depends on {unknown:?}, which is not declared", d.name));
            }
        }
        // Kahn's algorithm, keeping the declaration order among independent dependents.
        let mut waiting: Vec<usize> = dependents.iter().map(|d| d.depends_on.len()).collect();
        let mut order = Vec::with_capacity(dependents.len());
        let mut placed = vec![false; dependents.len()];
        while order.len() < dependents.len() {
            let Some(next) = (0..dependents.len()).find(|&i| !placed[i] && waiting[i] == 0) else {
                let stuck: Vec<&str> =
                    (0..dependents.len()).filter(|&i| !placed[i]).map(|i| dependents[i].name.as_str()).collect();
                return Err(format!("the dependents {stuck:?} depend on each other in a cycle"));
            };
            placed[next] = true;
            order.push(next);
            for (i, d) in dependents.iter().enumerate() {
                waiting[i] -= d.depends_on.iter().filter(|n| **n == dependents[next].name).count();
            }
        }
        Ok(Self { order })
    }

    /// Indexes into the dependents, dependencies first.
    pub fn order(&self) -> &[usize] {
        &self.order
    }
}

/// What to do with `dependent`, given the phases of the dependents before it and whether its
/// reconcile condition holds (`None`: it has none).
pub fn step(dependent: &Dependent, phases: &HashMap<String, DependentPhase>, condition: Option<bool>) -> Step {
    let ready = |name: &String| matches!(phases.get(name), Some(DependentPhase::Ready));
    if !dependent.depends_on.iter().all(ready) {
        Step::Skip
    } else if condition == Some(false) {
        Step::Delete
    } else {
        Step::Reconcile
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::{KindRef, Ownership};

    fn dependent(name: &str, depends_on: &[&str]) -> Dependent {
        Dependent {
            name: name.into(),
            kind: KindRef {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: None,
                namespaced: true,
            },
            read_only: false,
            depends_on: depends_on.iter().map(|s| s.to_string()).collect(),
            ready_when: None,
            reconcile_when: None,
            ownership: Ownership::OwnerReference,
        }
    }

    fn names(dependents: &[Dependent]) -> Vec<&str> {
        Workflow::new(dependents).unwrap().order().iter().map(|&i| dependents[i].name.as_str()).collect()
    }

    #[test]
    fn dependencies_come_first_and_independent_ones_keep_their_order() {
        let deps = [
            dependent("ingress", &["service"]),
            dependent("configmap", &[]),
            dependent("service", &["configmap"]),
            dependent("deployment", &["configmap"]),
        ];
        assert_eq!(names(&deps), ["configmap", "service", "ingress", "deployment"]);
    }

    #[test]
    fn unknown_dependencies_duplicates_and_cycles_are_refused() {
        let unknown = Workflow::new(&[dependent("a", &["b"])]).unwrap_err();
        assert!(unknown.contains("\"b\", which is not declared"), "{unknown}");
        let twice = Workflow::new(&[dependent("a", &[]), dependent("a", &[])]).unwrap_err();
        assert!(twice.contains("two dependents"), "{twice}");
        let cycle = Workflow::new(&[dependent("a", &["b"]), dependent("b", &["a"]), dependent("c", &[])]).unwrap_err();
        assert!(cycle.contains("[\"a\", \"b\"]") && cycle.contains("cycle"), "{cycle}");
    }

    #[test]
    fn a_dependent_runs_only_when_its_dependencies_are_ready() {
        let ingress = dependent("ingress", &["service"]);
        let mut phases = HashMap::new();
        assert_eq!(step(&ingress, &phases, None), Step::Skip);
        phases.insert("service".to_string(), DependentPhase::NotReady);
        assert_eq!(step(&ingress, &phases, Some(true)), Step::Skip);
        phases.insert("service".to_string(), DependentPhase::Ready);
        assert_eq!(step(&ingress, &phases, None), Step::Reconcile);
        assert_eq!(step(&ingress, &phases, Some(false)), Step::Delete);
    }
}
