//! Equality-based label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`, comma separated), as the
//! guest's `list` import accepts them. Set-based selectors are refused with a clear error.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<Requirement>);

/// A selector that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported label selector {selector:?}: {reason}")]
pub struct SelectorError {
    selector: String,
    reason: &'static str,
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(selector: &str) -> Result<Self, Self::Err> {
        let error = |reason| SelectorError { selector: selector.to_string(), reason };
        let mut requirements = Vec::new();
        for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if term.contains(" in ") || term.contains(" notin ") || term.contains('(') {
                return Err(error("set-based requirements are not supported; use key=value, key!=value, key or !key"));
            }
            let requirement = if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = term.strip_prefix('!') {
                Requirement::NotExists(k.trim().into())
            } else {
                Requirement::Exists(term.into())
            };
            let key = match &requirement {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::Exists(k)
                | Requirement::NotExists(k) => k,
            };
            if key.is_empty() || key.contains(char::is_whitespace) {
                return Err(error("every requirement needs a key without spaces"));
            }
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }
}

impl LabelSelector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn equality_requirements_match_labels() {
        let s: LabelSelector = "app=web, tier!=db,team,!legacy".parse().unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("team", "x"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "web")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("team", "x"), ("legacy", "")])));
        assert!(!s.matches(&labels(&[("app", "api"), ("team", "x")])));
    }

    #[test]
    fn double_equals_is_equals_and_empty_matches_all() {
        let s: LabelSelector = "app==web".parse().unwrap();
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!("".parse::<LabelSelector>().unwrap().matches(&labels(&[])));
    }

    #[test]
    fn set_based_selectors_are_refused_with_a_reason() {
        let err = "env in (a,b)".parse::<LabelSelector>().unwrap_err();
        assert!(err.to_string().contains("set-based"), "{err}");
    }
}
