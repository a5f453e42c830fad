//! A kind the API server does not serve, in words that help: which kind, in which group and
//! version, and the served kind its name is closest to (a typo such as `ResourceQouta`).

/// The edit distance (Levenshtein: insertions, deletions, substitutions) between `a` and `b`,
/// by characters.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// A served kind: its group/version (`v1`, `apps/v1`) and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// `group/version`, or `version` for the core group.
    pub group_version: String,
    /// The kind.
    pub kind: String,
}

/// The served kind closest to `kind` (ignoring case), if one is close enough to be a typo: at
/// most a third of its letters off (at least one). Among equally close ones, one of
/// `group_version` comes first, then the first served.
pub fn closest<'a>(kind: &str, group_version: &str, served: &'a [Served]) -> Option<&'a Served> {
    let wanted = kind.to_lowercase();
    let limit = (wanted.chars().count() / 3).max(1);
    served
        .iter()
        .map(|s| (distance(&wanted, &s.kind.to_lowercase()), s.group_version != group_version, s))
        .filter(|(d, _, _)| *d <= limit)
        .min_by_key(|(d, other_group, _)| (*d, *other_group))
        .map(|(_, _, s)| s)
}

/// Why `kind` of `group_version` cannot be watched, with the closest served kind, if any.
pub fn not_served(kind: &str, group_version: &str, closest: Option<&Served>) -> String {
    let mut message = format!("{kind} is not served by the API server ({group_version})");
    match closest {
        Some(s) if s.group_version == group_version => message.push_str(&format!("; did you mean {}?", s.kind)),
        Some(s) => message.push_str(&format!("; did you mean {} ({})?", s.kind, s.group_version)),
        None => {}
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(group_version: &str, kind: &str) -> Served {
        Served { group_version: group_version.into(), kind: kind.into() }
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("ResourceQouta", "ResourceQuota"), 2);
        assert_eq!(distance("Widgit", "Widget"), 1);
        assert_eq!(distance("Ü", "U"), 1, "by characters, not bytes");
    }

    #[test]
    fn the_closest_kind_is_a_typos_fix() {
        let kinds = [
            served("v1", "ConfigMap"),
            served("v1", "ResourceQuota"),
            served("example.dev/v1", "ResourceQuota"),
            served("apps/v1", "Deployment"),
        ];
        assert_eq!(closest("ResourceQouta", "v1", &kinds), Some(&kinds[1]));
        assert_eq!(closest("ResourceQouta", "example.dev/v1", &kinds), Some(&kinds[2]), "its own group first");
        assert_eq!(closest("deployment", "v1", &kinds), Some(&kinds[3]), "case is ignored");
        assert_eq!(closest("Gadget", "v1", &kinds), None, "nothing close");
        assert_eq!(closest("Pod", "v1", &[served("v1", "Node")]), None, "2 of 3 letters off is not a typo");
        assert_eq!(closest("Pods", "v1", &[served("v1", "Pod")]), Some(&served("v1", "Pod")));
    }

    #[test]
    fn the_message_names_the_kind_and_the_closest() {
        let quota = served("v1", "ResourceQuota");
        assert_eq!(
            not_served("ResourceQouta", "v1", Some(&quota)),
            "ResourceQouta is not served by the API server (v1); did you mean ResourceQuota?"
        );
        assert_eq!(
            not_served("Widgit", "x.dev/v1", Some(&served("y.dev/v1", "Widget"))),
            "Widgit is not served by the API server (x.dev/v1); did you mean Widget (y.dev/v1)?"
        );
        assert_eq!(not_served("Gadget", "v1", None), "Gadget is not served by the API server (v1)");
    }
}
