//! Keeps a status's `conditions` the Kubernetes way (`metav1.Condition`): one condition per
//! type, and `lastTransitionTime` only moves when the condition's status changes.
//!
//! ```
//! use wasmop_guest::conditions::{self, Condition};
//!
//! let mut current: Vec<Condition> = Vec::new();
//! let ready = Condition {
//!     observed_generation: Some(2),
//!     ..conditions::new("Ready", true, "Reconciled", "the page is served")
//! };
//! assert!(conditions::set(&mut current, ready), "a new condition is a transition");
//! assert!(conditions::is_true(&current, "Ready"));
//! ```

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// A status condition, `metav1.Condition`'s fields, read leniently: other controllers write
/// conditions into the same list, and a CRD may accept them without `lastTransitionTime`,
/// `reason` or `message`, or with fields of their own (`lastProbeTime`...). Every field but
/// `type` may be missing, and fields it does not know are kept in `extra`, so another
/// controller's condition is written back as it was, except that `reason` and `message` are
/// always written (empty when missing), as `metav1.Condition` requires them.
///
/// ```
/// use wasmop_guest::conditions::Condition;
///
/// let foreign = serde_json::json!({ "type": "Synced", "status": "True", "lastProbeTime": null });
/// let parsed: Condition = serde_json::from_value(foreign).unwrap();
/// assert!(parsed.last_transition_time.is_none());
/// let written = serde_json::to_value(&parsed).unwrap();
/// assert_eq!(written["lastProbeTime"], serde_json::Value::Null);
/// assert!(written.get("lastTransitionTime").is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown` ([`Status`]).
    #[serde(default)]
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// A CamelCase reason (always written: CRDs generated for `metav1.Condition` require it).
    #[serde(default)]
    pub reason: String,
    /// A message for humans, maybe empty (always written, like `reason`).
    #[serde(default)]
    pub message: String,
    /// The `metadata.generation` the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Fields of another controller's condition that this type does not know, kept as they were.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The status of a condition: `True`, `False` or `Unknown`. A `bool` converts into it.
///
/// ```
/// use wasmop_guest::conditions::Status;
///
/// assert_eq!(Status::from(true).as_str(), "True");
/// assert_eq!(Status::Unknown.as_str(), "Unknown");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The controller cannot tell.
    Unknown,
}

impl Status {
    /// The string Kubernetes uses: `True`, `False` or `Unknown`.
    ///
    /// ```
    /// assert_eq!(wasmop_guest::conditions::Status::False.as_str(), "False");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// `true` is [`Status::True`], `false` is [`Status::False`].
///
/// ```
/// use wasmop_guest::conditions::Status;
///
/// assert_eq!(Status::from(false), Status::False);
/// ```
impl From<bool> for Status {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// A condition of type `type_` whose `lastTransitionTime` is now and `observedGeneration` unset
/// (set it with struct update syntax, see the [module docs](self)).
///
/// `reason` is a short CamelCase word; `message` is for humans and may be empty.
///
/// ```
/// use wasmop_guest::conditions::{self, Status};
///
/// let degraded = conditions::new("Degraded", Status::Unknown, "Probing", "");
/// assert_eq!(degraded.status, "Unknown");
/// ```
pub fn new(type_: &str, status: impl Into<Status>, reason: &str, message: impl Into<String>) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.into().as_str().to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation: None,
        last_transition_time: Some(now()),
        extra: BTreeMap::new(),
    }
}

/// Puts `condition` into `conditions`, replacing the one of the same type.
///
/// When the status did not change, the existing `lastTransitionTime` is kept and everything else
/// (reason, message, observed generation) is taken from `condition`. Returns whether this is a
/// transition: the type was absent or its status changed.
///
/// ```
/// use wasmop_guest::conditions::{self, Condition};
///
/// let mut current: Vec<Condition> = Vec::new();
/// assert!(conditions::set(&mut current, conditions::new("Ready", false, "Starting", "")));
/// let first = current[0].last_transition_time.clone();
///
/// // Same status, new reason: not a transition, the time stays.
/// assert!(!conditions::set(&mut current, conditions::new("Ready", false, "Waiting", "")));
/// assert_eq!(current[0].last_transition_time, first);
/// assert_eq!(current[0].reason, "Waiting");
///
/// // New status: a transition.
/// assert!(conditions::set(&mut current, conditions::new("Ready", true, "Reconciled", "")));
/// ```
pub fn set(conditions: &mut Vec<Condition>, mut condition: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            let transition = existing.status != condition.status;
            if !transition {
                condition.last_transition_time =
                    existing.last_transition_time.clone().or(condition.last_transition_time);
            }
            *existing = condition;
            transition
        }
        None => {
            conditions.push(condition);
            true
        }
    }
}

/// The condition of type `type_`, if present.
///
/// ```
/// use wasmop_guest::conditions::{self, Condition};
///
/// let current = vec![conditions::new("Ready", true, "Reconciled", "")];
/// assert_eq!(conditions::get(&current, "Ready").map(|c| c.reason.as_str()), Some("Reconciled"));
/// assert!(conditions::get(&current, "Degraded").is_none());
/// ```
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `True`.
///
/// ```
/// use wasmop_guest::conditions;
///
/// let current = vec![conditions::new("Ready", false, "Starting", "")];
/// assert!(!conditions::is_true(&current, "Ready"));
/// ```
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == Status::True.as_str())
}

/// The current time, to the second (as the API server stores it), from the system clock (WASI's
/// wall clock in the guest).
///
/// ```
/// let time = wasmop_guest::conditions::now();
/// ```
pub fn now() -> Time {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
    let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}
