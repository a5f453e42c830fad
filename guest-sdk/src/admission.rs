//! What the admission functions ([`Validator`](crate::Validator),
//! [`Defaulter`](crate::Defaulter)) are given, [`Admission`], and what a validation answers,
//! [`Verdict`]; and how a default's changes reach the object the API server sent.

use serde::Serialize;
use serde_json::Value;

use crate::bindings::wasmop::plugin::types as wit;
use crate::kind::Kind;
use crate::webhook::{Operation, operation_from_wit};

/// One object's admission, as the API server asks for it: `T` is the plugin's primary type for
/// requests about the primary, JSON for the other kinds a webhook declares.
///
/// In tests, [`Admission::create`], [`Admission::update`] and [`Admission::delete`] make one for
/// [`FakeHost::validate`](crate::testing::FakeHost::validate) and
/// [`FakeHost::default_object`](crate::testing::FakeHost::default_object).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Admission<T = Value> {
    /// The request's UID.
    pub uid: String,
    /// The object's kind, as the request names it.
    pub kind: Kind,
    /// What the request does.
    pub operation: Operation,
    /// The object's namespace, if it has one.
    pub namespace: Option<String>,
    /// The object's name (empty on a create that asks the server to generate it).
    pub name: String,
    /// The object as it would be stored; `None` for a delete.
    pub object: Option<T>,
    /// The object as it is stored, for an update and a delete.
    pub old_object: Option<T>,
    /// Who makes the request.
    pub username: String,
    /// The groups of who makes the request.
    pub groups: Vec<String>,
    /// The request changes nothing (`kubectl apply --dry-run=server`): have no side effects.
    pub dry_run: bool,
}

impl Admission {
    /// The creation of `object`, by user `test`: the kind, namespace and name are the object's
    /// (`apiVersion`, `kind`, `metadata`). Panics if `object` does not serialize to a JSON object
    /// with an `apiVersion` and a `kind`, which the API server always sends.
    ///
    /// ```
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::{Admission, Operation};
    ///
    /// let page = json!({ "apiVersion": "example.com/v1", "kind": "Page", "metadata": { "name": "a" } });
    /// let request = Admission::create(&page);
    /// assert_eq!((request.operation, request.kind.kind.as_str(), request.name.as_str()), (Operation::Create, "Page", "a"));
    /// ```
    pub fn create(object: &impl Serialize) -> Self {
        let object = serde_json::to_value(object).expect("the object serializes");
        Self { object: Some(object.clone()), ..Self::about(Operation::Create, &object) }
    }

    /// The update of `old` to `object`, by user `test`; see [`Admission::create`].
    pub fn update(object: &impl Serialize, old: &impl Serialize) -> Self {
        let object = serde_json::to_value(object).expect("the object serializes");
        let old = serde_json::to_value(old).expect("the old object serializes");
        Self { object: Some(object.clone()), old_object: Some(old), ..Self::about(Operation::Update, &object) }
    }

    /// The deletion of `old`, by user `test`; see [`Admission::create`].
    pub fn delete(old: &impl Serialize) -> Self {
        let old = serde_json::to_value(old).expect("the old object serializes");
        Self { old_object: Some(old.clone()), ..Self::about(Operation::Delete, &old) }
    }

    /// A request about `object` without the objects.
    fn about(operation: Operation, object: &Value) -> Self {
        let (Some(api_version), Some(kind)) = (object["apiVersion"].as_str(), object["kind"].as_str()) else {
            panic!("an admission request's object has an apiVersion and a kind, as the API server sends it: {object}");
        };
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
        let kind = if namespace.is_some() {
            Kind::namespaced(group, version, kind)
        } else {
            Kind::cluster(group, version, kind)
        };
        Self {
            uid: "test-uid".into(),
            kind,
            operation,
            namespace,
            name: object["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
            object: None,
            old_object: None,
            username: "test".into(),
            groups: Vec::new(),
            dry_run: false,
        }
    }

    /// The same request made by `username`, member of `groups`.
    ///
    /// ```
    /// # use wasmop_guest::serde_json::json;
    /// # use wasmop_guest::Admission;
    /// # let page = json!({ "apiVersion": "example.com/v1", "kind": "Page", "metadata": { "name": "a" } });
    /// let request = Admission::create(&page).by("alice", ["editors"]);
    /// assert_eq!(request.groups, ["editors"]);
    /// ```
    #[must_use]
    pub fn by<G: Into<String>>(mut self, username: impl Into<String>, groups: impl IntoIterator<Item = G>) -> Self {
        self.username = username.into();
        self.groups = groups.into_iter().map(Into::into).collect();
        self
    }

    /// The same request as a dry run (`kubectl apply --dry-run=server`).
    #[must_use]
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
}

impl<T> Admission<T> {
    /// The same request with its objects turned into `U`s by `decode`, or its error.
    pub(crate) fn try_map<U, E>(self, decode: impl Fn(T) -> Result<U, E>) -> Result<Admission<U>, E> {
        Ok(Admission {
            object: self.object.map(&decode).transpose()?,
            old_object: self.old_object.map(&decode).transpose()?,
            uid: self.uid,
            kind: self.kind,
            operation: self.operation,
            namespace: self.namespace,
            name: self.name,
            username: self.username,
            groups: self.groups,
            dry_run: self.dry_run,
        })
    }
}

impl Admission<String> {
    /// The request the host sends, with its objects as JSON text.
    pub(crate) fn from_wit(request: wit::AdmissionRequest) -> Self {
        let kind = &request.kind;
        Self {
            kind: Kind {
                plural: kind.plural.clone(),
                namespaced: kind.namespaced,
                ..Kind::namespaced(kind.group.clone(), kind.version.clone(), kind.kind.clone())
            },
            uid: request.uid,
            operation: operation_from_wit(request.operation),
            namespace: request.namespace,
            name: request.name,
            object: request.object,
            old_object: request.old_object,
            username: request.username,
            groups: request.groups,
            dry_run: request.dry_run,
        }
    }
}

/// A validating webhook's answer: admit or deny, with a message, the field at fault and
/// warnings.
///
/// ```
/// use wasmop_guest::Verdict;
///
/// let verdict = Verdict::deny("html must not be empty").at("spec.html").warn("pages are public");
/// assert!(!verdict.is_allowed());
/// assert_eq!(verdict.field(), Some("spec.html"));
/// assert!(Verdict::allow().is_allowed());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    allowed: bool,
    message: Option<String>,
    field: Option<String>,
    warnings: Vec<String>,
}

impl Verdict {
    /// Admits the request.
    pub fn allow() -> Self {
        Self { allowed: true, message: None, field: None, warnings: Vec::new() }
    }

    /// Denies the request with `message`, in the user's words: `kubectl` shows it.
    pub fn deny(message: impl Into<String>) -> Self {
        Self { allowed: false, message: Some(message.into()), ..Self::allow() }
    }

    /// Names the field a denial is about (`spec.html`): the API server reports it as the cause
    /// of the denial, in front of the message.
    #[must_use]
    pub fn at(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Adds a warning, returned to the client whether the request is admitted or not (`kubectl`
    /// prints it).
    #[must_use]
    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Whether the request is admitted.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// Why the request is denied.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The field a denial is about.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The warnings for the client.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The WIT form.
    pub(crate) fn into_wit(self) -> wit::Verdict {
        wit::Verdict { allowed: self.allowed, message: self.message, field: self.field, warnings: self.warnings }
    }
}

/// Whether `kind` is `primary`'s group and kind (in any of its versions).
pub(crate) fn is_primary(kind: &Kind, primary: &Kind) -> bool {
    kind.group == primary.group && kind.kind == primary.kind
}

/// A denial naming the field of an object that does not decode.
pub(crate) fn undecodable((field, message): (Option<String>, String)) -> Verdict {
    let verdict = Verdict::deny(message);
    match field {
        Some(field) => verdict.at(field),
        None => verdict,
    }
}

/// Makes in `target` the changes that turn `before` into `after` (as a JSON merge patch from one
/// to the other would): changed values are set, fields that became `null` or went are removed,
/// and what did not change, or what `before` never had, is left as `target` has it.
pub(crate) fn apply_changes(target: &mut Value, before: &Value, after: &Value) {
    if before == after {
        return;
    }
    let (before, after, fields) = match (before, after, target) {
        (Value::Object(before), Value::Object(after), Value::Object(fields)) => (before, after, fields),
        (_, after, target) => {
            *target = after.clone();
            return;
        }
    };
    for (key, now) in after {
        match before.get(key) {
            Some(was) if was == now => {}
            _ if now.is_null() => {
                fields.remove(key);
            }
            Some(was) => apply_changes(fields.entry(key.clone()).or_insert(Value::Null), was, now),
            None => {
                fields.insert(key.clone(), now.clone());
            }
        }
    }
    for key in before.keys().filter(|key| !after.contains_key(*key)) {
        fields.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_what_the_default_changed_is_changed_in_the_object_sent() {
        let mut sent = json!({ "spec": { "html": "x", "unknown": 1, "list": [{ "a": 1, "b": 2 }] }, "status": {} });
        // The type knows `html`, `exposed`, `replicas` and `list` items' `a`.
        let before = json!({ "spec": { "html": "x", "exposed": null, "replicas": 3, "list": [{ "a": 1 }] } });
        let after = json!({ "spec": { "html": "x", "exposed": false, "list": [{ "a": 1 }] } });
        apply_changes(&mut sent, &before, &after);
        assert_eq!(
            sent,
            json!({ "spec": { "html": "x", "unknown": 1, "list": [{ "a": 1, "b": 2 }], "exposed": false }, "status": {} })
        );
        let before = json!({ "spec": { "exposed": true } });
        apply_changes(&mut sent, &before, &json!({ "spec": { "exposed": null } }));
        assert_eq!(sent["spec"].get("exposed"), None, "null removes");
        apply_changes(&mut sent, &json!({ "spec": { "list": [{ "a": 1 }] } }), &json!({ "spec": { "list": [] } }));
        assert_eq!(sent["spec"]["list"], json!([]), "a changed list is the type's list");
    }

    #[test]
    fn requests_made_for_tests_take_the_objects_kind_namespace_and_name() {
        let page =
            json!({ "apiVersion": "example.com/v1", "kind": "Page", "metadata": { "name": "a", "namespace": "ns" } });
        let request = Admission::update(&page, &page).by("alice", ["editors"]).dry_run();
        assert_eq!(request.kind, Kind::namespaced("example.com", "v1", "Page"));
        assert_eq!((request.namespace.as_deref(), request.name.as_str()), (Some("ns"), "a"));
        assert!(request.object.is_some() && request.old_object.is_some() && request.dry_run);
        let node = json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "n" } });
        let request = Admission::delete(&node);
        assert_eq!((request.kind, request.object), (Kind::cluster("", "v1", "Node"), None));
    }
}
