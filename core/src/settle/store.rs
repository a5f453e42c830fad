//! The in-memory store as the workflow's driver: server-side apply played by a merge, and the
//! fake external system.

use std::cell::{Cell, RefCell};

use serde_json::{Value, json};

use super::world::Write;
use crate::dependent::{self, DependentSpec, MANAGED_BY_LABEL, PrimaryRef};
use crate::external::ExternalObject;
use crate::kind::{KindRef, ObjectKey};
use crate::workflow::{self, Driver};

/// A failed write of the store: only an object someone else manages can refuse one.
#[derive(Debug)]
pub(super) struct Conflict(String);

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The store during one run of the workflow.
pub(super) struct Store<'a> {
    pub(super) objects: RefCell<Vec<(KindRef, Value)>>,
    /// The fake external system.
    pub(super) external: RefCell<Vec<ExternalObject>>,
    /// IDs given out.
    pub(super) ids: Cell<u64>,
    pub(super) revision: Cell<u64>,
    pub(super) primary: &'a PrimaryRef,
    pub(super) primary_json: String,
    pub(super) check: &'a dyn Fn(&str, &str, Option<&str>) -> bool,
    /// What the workflow wrote, in order.
    pub(super) writes: RefCell<Vec<Write>>,
}

impl Store<'_> {
    fn matches(kind: &KindRef, object: &Value, spec: &DependentSpec, key: &ObjectKey) -> bool {
        kind.same_type(&spec.kind) && ObjectKey::of_json(object).as_ref() == Some(key)
    }

    fn next_revision(&self) -> String {
        self.revision.set(self.revision.get() + 1);
        self.revision.get().to_string()
    }
}

/// Everything but `metadata` and `status`: what bumps `metadata.generation` when it changes.
pub fn spec_of(object: &Value) -> Vec<(&String, &Value)> {
    object.as_object().into_iter().flatten().filter(|(k, _)| *k != "metadata" && *k != "status").collect()
}

impl Driver for Store<'_> {
    type Object = Value;
    type Error = Conflict;

    fn fetched(&self, spec: &DependentSpec) -> Vec<ExternalObject> {
        self.external.borrow().iter().filter(|o| o.dependent == spec.name).cloned().collect()
    }

    async fn apply_external(
        &self,
        _: &DependentSpec,
        desired: ExternalObject,
        _: Option<ExternalObject>,
    ) -> Result<ExternalObject, Conflict> {
        let id = desired.id.clone().unwrap_or_else(|| {
            self.ids.set(self.ids.get() + 1);
            format!("fake-{}", self.ids.get())
        });
        let applied = ExternalObject { id: Some(id), ..desired };
        let mut external = self.external.borrow_mut();
        external.retain(|o| o.dependent != applied.dependent || o.key != applied.key);
        external.push(applied.clone());
        self.writes.borrow_mut().push(Write::ApplyExternal {
            dependent: applied.dependent.clone(),
            key: applied.key.clone(),
            object: applied.object.clone(),
        });
        Ok(applied)
    }

    async fn delete_external(&self, _: &DependentSpec, actual: &ExternalObject) -> Result<(), Conflict> {
        self.external.borrow_mut().retain(|o| o.dependent != actual.dependent || o.key != actual.key);
        self.writes
            .borrow_mut()
            .push(Write::DeleteExternal { dependent: actual.dependent.clone(), key: actual.key.clone() });
        Ok(())
    }

    fn current(&self, spec: &DependentSpec) -> Vec<Value> {
        let mut objects: Vec<Value> = self
            .objects
            .borrow()
            .iter()
            .filter(|(kind, object)| kind.same_type(&spec.kind) && dependent::belongs(spec, self.primary, object))
            .filter(|_| !spec.read_only)
            .map(|(_, object)| object.clone())
            .collect();
        objects.sort_by_key(ObjectKey::of_json);
        objects
    }

    fn cached(&self, spec: &DependentSpec, key: &ObjectKey) -> Option<Value> {
        let objects = self.objects.borrow();
        objects.iter().find(|(kind, object)| Self::matches(kind, object, spec, key)).map(|(_, object)| object.clone())
    }

    fn key(&self, object: &Value) -> Option<ObjectKey> {
        ObjectKey::of_json(object)
    }

    fn json(&self, object: &Value) -> Value {
        object.clone()
    }

    fn observe(&self, _: &DependentSpec, _: &[ObjectKey]) {}

    async fn apply(
        &self,
        spec: &DependentSpec,
        key: &ObjectKey,
        object: Value,
        actual: Option<Value>,
    ) -> Result<Value, Conflict> {
        let mut objects = self.objects.borrow_mut();
        let plugin = object["metadata"]["labels"][MANAGED_BY_LABEL].clone();
        let written = match actual {
            Some(actual) if actual["metadata"]["labels"][MANAGED_BY_LABEL] != plugin && !spec.adopt => {
                return Err(Conflict(workflow::conflict(spec, key)));
            }
            Some(actual) => {
                let mut merged = actual.clone();
                crate::status::merge(&mut merged, &object);
                if merged == actual {
                    return Ok(actual);
                }
                if spec_of(&merged) != spec_of(&actual) {
                    merged["metadata"]["generation"] =
                        json!(actual["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
                }
                merged["metadata"]["resourceVersion"] = json!(self.next_revision());
                objects.retain(|(kind, o)| !Self::matches(kind, o, spec, key));
                merged
            }
            None => {
                let mut created = object;
                created["metadata"]["uid"] = json!(format!("uid-{}", key.name));
                created["metadata"]["generation"] = json!(1);
                created["metadata"]["resourceVersion"] = json!(self.next_revision());
                created
            }
        };
        objects.push((spec.kind.clone(), written.clone()));
        self.writes.borrow_mut().push(Write::Apply { kind: spec.kind.to_string(), object: written.clone() });
        Ok(written)
    }

    async fn delete(&self, spec: &DependentSpec, object: &Value) -> Result<(), Conflict> {
        let Some(key) = ObjectKey::of_json(object) else { return Ok(()) };
        let before = self.objects.borrow().len();
        self.objects.borrow_mut().retain(|(kind, o)| !Self::matches(kind, o, spec, &key));
        if self.objects.borrow().len() != before {
            self.writes.borrow_mut().push(Write::Delete {
                kind: spec.kind.to_string(),
                namespace: key.namespace.clone(),
                name: key.name.clone(),
            });
        }
        Ok(())
    }

    async fn check(&self, name: &str, object: Option<&Value>) -> bool {
        let object = object.map(Value::to_string);
        (self.check)(name, &self.primary_json, object.as_deref())
    }

    fn is_conflict(&self, _: &Conflict) -> bool {
        true
    }
}

/// Standard base64 with padding, as a Secret's `data` holds its values.
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_pads_as_the_api_server_expects() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
    }
}
