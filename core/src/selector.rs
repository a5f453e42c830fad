//! Label selectors in Kubernetes syntax: `key=value`, `key==value`, `key!=value`, `key`, `!key`,
//! `key in (a,b)` and `key notin (a,b)`, comma separated. The guest's `list` import, a
//! dependent's watch and the FakeHost all match with this one parser.

use std::collections::BTreeMap;

use serde_json::Value;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<Requirement>);

/// A selector that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorError {
    selector: String,
    term: String,
}

impl std::fmt::Display for SelectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid label selector {:?} at {:?}: expected key=value, key!=value, key, !key, key in (a,b) or key notin (a,b)",
            self.selector, self.term
        )
    }
}

impl std::error::Error for SelectorError {}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(selector: &str) -> Result<Self, Self::Err> {
        split_terms(selector)
            .into_iter()
            .map(str::trim)
            .filter(|term| !term.is_empty())
            .map(|term| {
                Requirement::parse(term)
                    .ok_or_else(|| SelectorError { selector: selector.to_owned(), term: term.to_owned() })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// The comma-separated terms of `text`; commas inside `( )` belong to their term.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0_i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

impl Requirement {
    fn parse(term: &str) -> Option<Self> {
        let key = |s: &str| Some(s.trim()).filter(|k| !k.is_empty() && is_label_text(k)).map(str::to_owned);
        let value = |s: &str| Some(s.trim()).filter(|v| is_label_text(v)).map(str::to_owned);
        if let Some(open) = term.find('(') {
            let inner = term[open + 1..].trim_end().strip_suffix(')')?;
            let values = inner.split(',').map(value).collect::<Option<Vec<_>>>()?;
            let (name, op) = term[..open].trim().split_once(char::is_whitespace)?;
            let name = key(name)?;
            return match op.trim() {
                "in" => Some(Self::In(name, values)),
                "notin" => Some(Self::NotIn(name, values)),
                _ => None,
            };
        }
        if let Some(name) = term.strip_prefix('!') {
            return Some(Self::NotExists(key(name)?));
        }
        if let Some((name, v)) = term.split_once("!=") {
            return Some(Self::NotEquals(key(name)?, value(v)?));
        }
        if let Some((name, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            return Some(Self::Equals(key(name)?, value(v)?));
        }
        Some(Self::Exists(key(term)?))
    }
}

/// Letters, digits and `-_./`: what label keys and values are made of.
fn is_label_text(text: &str) -> bool {
    text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

impl LabelSelector {
    /// Whether the labels `label` looks up satisfy every requirement.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
            Requirement::In(k, values) => label(k).is_some_and(|l| values.iter().any(|v| v == l)),
            Requirement::NotIn(k, values) => !label(k).is_some_and(|l| values.iter().any(|v| v == l)),
        })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// Whether the labels of `object` (JSON) satisfy every requirement.
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.matches_with(|key| labels.get(key).and_then(Value::as_str))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
    fn set_based_requirements() {
        let object = json!({ "metadata": { "labels": { "app": "web", "tier": "front" } } });
        let matches = |selector: &str| selector.parse::<LabelSelector>().unwrap().matches_object(&object);
        assert!(matches("app in (web, db), tier notin (back)"));
        assert!(matches("missing notin (x)"));
        assert!(!matches("app notin (web)"));
        assert!(!matches("missing in (x)"));
        assert!(matches("wasmop.dev/fixture notin (loop),app"));
    }

    #[test]
    fn malformed_selectors_are_refused_naming_the_term() {
        for bad in ["app in web)", "app=a b", "app in (web", "app within (a)", "=x", "a b"] {
            let err = bad.parse::<LabelSelector>().unwrap_err();
            assert!(err.to_string().contains("invalid label selector"), "{bad}: {err}");
        }
    }
}
