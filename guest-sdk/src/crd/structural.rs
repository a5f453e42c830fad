//! Schemas of Rust types as Kubernetes structural schemas: every subschema inlined (no `$ref`),
//! `Option<T>` as `nullable: true` rather than `anyOf` with `null`, the variants of a
//! data-carrying enum as one object whose `oneOf` only says which properties each variant
//! requires, `serde_json::Value` fields as `x-kubernetes-preserve-unknown-fields`, sets as
//! `x-kubernetes-list-type: set`, and keywords the API server does not know dropped. The checks
//! the API server runs itself (`minLength`, `pattern`, `enum`, `x-kubernetes-validations`, ...)
//! are kept.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// The keywords of a Kubernetes `JSONSchemaProps` (besides `x-kubernetes-*`) a generated schema
/// may keep.
pub(super) const KEYWORDS: &[&str] = &[
    "description",
    "type",
    "format",
    "default",
    "maximum",
    "minimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "example",
    "nullable",
];

/// `T`'s schema as a structural schema; `field` names it in a panic.
pub(super) fn schema_of<T: JsonSchema>(field: &str) -> Value {
    let generator = SchemaSettings::openapi3()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Err(reason) = structural(&mut schema, field) {
        panic!("Crd::of: the {field} type cannot be a Kubernetes structural schema: {reason}");
    }
    schema
}

/// Rewrites `schema` (at `path`) into a Kubernetes structural schema, or says why it cannot be.
fn structural(schema: &mut Value, path: &str) -> Result<(), String> {
    let Some(object) = schema.as_object_mut() else { return Err(format!("{path}: not a schema object")) };
    if object.contains_key("$ref") {
        return Err(format!("{path}: a $ref (a recursive type?)"));
    }
    // Option<T>: anyOf/oneOf [T, null] is T, nullable.
    for keyword in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = object.get_mut(keyword) else { continue };
        let before = branches.len();
        branches.retain(|branch| !is_null(branch));
        if branches.len() == before {
            continue;
        }
        let only = if let [only] = branches.as_slice() { Some(only.clone()) } else { None };
        object.insert("nullable".into(), json!(true));
        if let Some(only) = only {
            object.remove(keyword);
            merge_into(object, only);
        }
    }
    // A lone allOf (an inlined reference with a description beside it) is its one branch.
    if let Some(Value::Array(branches)) = object.get("allOf") {
        let [only] = branches.as_slice() else { return Err(format!("{path}: allOf with several schemas")) };
        let only = only.clone();
        object.remove("allOf");
        merge_into(object, only);
    }
    if object.get("type").is_some_and(Value::is_array) {
        return Err(format!("{path}: several types ({})", object["type"]));
    }
    if object.get("nullable") == Some(&json!(true))
        && let Some(Value::Array(values)) = object.get_mut("enum")
    {
        values.retain(|v| !v.is_null());
    }
    if object.remove("uniqueItems") == Some(json!(true)) {
        // The API server refuses uniqueItems; a set of scalars is what it means.
        object.insert("x-kubernetes-list-type".into(), json!("set"));
    }
    object.retain(|key, _| KEYWORDS.contains(&key.as_str()) || key.starts_with("x-kubernetes-"));
    if let Some(rules) = object.get("x-kubernetes-validations") {
        validations(rules, path)?;
    }
    if object.get("additionalProperties") == Some(&json!(false)) {
        object.remove("additionalProperties");
    }
    for keyword in ["oneOf", "anyOf"] {
        let Some(Value::Array(branches)) = object.remove(keyword) else { continue };
        match constants(&branches) {
            // A unit enum whose variants have doc comments: one branch per value.
            Some((type_, values)) => {
                object.insert("type".into(), type_);
                object.insert("enum".into(), Value::Array(values));
            }
            None => variants(object, branches, path)?,
        }
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            structural(property, &format!("{path}.{name}"))?;
        }
    }
    if let Some(items) = object.get_mut("items") {
        structural(items, &format!("{path}[]"))?;
    }
    if let Some(additional) = object.get_mut("additionalProperties") {
        if additional.as_object().is_some_and(Map::is_empty) || additional == &json!(true) {
            *additional = json!({ "x-kubernetes-preserve-unknown-fields": true });
        } else {
            structural(additional, &format!("{path}.*"))?;
        }
    }
    let untyped = !object.contains_key("type")
        && !object.contains_key("x-kubernetes-int-or-string")
        && !object.contains_key("x-kubernetes-preserve-unknown-fields");
    if untyped {
        // Any JSON (a serde_json::Value field): kept as it is.
        object.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
    }
    Ok(())
}

/// The type and values of `branches` when each admits constants of one type only (`const`, or
/// `enum`), as schemars gives the variants of a unit enum that have doc comments.
fn constants(branches: &[Value]) -> Option<(Value, Vec<Value>)> {
    let mut type_ = None;
    let mut values = Vec::new();
    for branch in branches {
        let of = branch.get("type")?;
        if type_.get_or_insert_with(|| of.clone()) != of {
            return None;
        }
        match (branch.get("const"), branch.get("enum")) {
            (Some(value), _) => values.push(value.clone()),
            (None, Some(Value::Array(more))) => values.extend(more.iter().cloned()),
            _ => return None,
        }
    }
    Some((type_?, values))
}

/// Whether `branch` only admits `null`.
fn is_null(branch: &Value) -> bool {
    branch.get("type") == Some(&json!("null"))
        || branch.get("const") == Some(&Value::Null)
        || branch.get("enum") == Some(&json!([null]))
}

/// Adds the keywords of `from` that `into` does not have (its own description wins).
fn merge_into(into: &mut Map<String, Value>, from: Value) {
    if let Value::Object(from) = from {
        for (key, value) in from {
            into.entry(key).or_insert(value);
        }
    }
}

/// The variants of an enum (`oneOf`/`anyOf` branches, each an object) as one object schema:
/// every variant's properties at the top, and a `oneOf` saying which each variant requires.
/// Properties of the same name in several variants (an internally tagged enum's tag) merge
/// their `enum` values.
fn variants(object: &mut Map<String, Value>, branches: Vec<Value>, path: &str) -> Result<(), String> {
    let mut properties = match object.remove("properties") {
        Some(Value::Object(properties)) => properties,
        _ => Map::new(),
    };
    let mut required = Vec::new();
    for branch in branches {
        if branch.get("type") != Some(&json!("object")) {
            return Err(format!(
                "{path}: an enum mixing unit and data variants (give it #[serde(tag = \"...\")]), or a value of \
                 several types"
            ));
        }
        for (name, mut property) in branch["properties"].as_object().cloned().unwrap_or_default() {
            property.as_object_mut().map(|p| p.remove("description"));
            match properties.get_mut(&name) {
                None => {
                    properties.insert(name, property);
                }
                Some(existing) => merge_variant(existing, property, &format!("{path}.{name}"))?,
            }
        }
        required.push(json!({ "required": branch.get("required").cloned().unwrap_or_else(|| json!([])) }));
    }
    object.insert("type".into(), json!("object"));
    object.insert("properties".into(), Value::Object(properties));
    // Variants that require nothing cannot be told apart: no oneOf then.
    if required.iter().all(|r| r["required"].as_array().is_some_and(|r| !r.is_empty())) {
        object.insert("oneOf".into(), Value::Array(required));
    }
    Ok(())
}

/// `property` of another variant into `existing`: the same schema, or the same but for `enum`.
fn merge_variant(existing: &mut Value, property: Value, path: &str) -> Result<(), String> {
    let without_enum = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().map(|o| o.remove("enum"));
        v
    };
    if without_enum(existing) != without_enum(&property) {
        return Err(format!("{path}: variants give this field different schemas"));
    }
    if let (Some(Value::Array(values)), Some(Value::Array(more))) = (existing.get_mut("enum"), property.get("enum")) {
        for value in more {
            if !values.contains(value) {
                values.push(value.clone());
            }
        }
    }
    Ok(())
}

/// Checks the CEL rules of `x-kubernetes-validations` at `path` have the shape the API server
/// takes: a list of objects, each with a `rule` (and optionally a `message`, `messageExpression`,
/// `reason`, `fieldPath`, `optionalOldSelf`), so a slip shows in the plugin's tests rather than
/// at `kubectl apply`.
fn validations(rules: &Value, path: &str) -> Result<(), String> {
    const FIELDS: &[&str] = &["rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"];
    let Some(rules) = rules.as_array() else {
        return Err(format!("{path}: x-kubernetes-validations is not a list of rules"));
    };
    for (i, rule) in rules.iter().enumerate() {
        let Some(rule) = rule.as_object() else { return Err(format!("{path}: validation {i} is not an object")) };
        if !rule.get("rule").is_some_and(Value::is_string) {
            return Err(format!("{path}: validation {i} has no rule"));
        }
        if let Some(unknown) = rule.keys().find(|key| !FIELDS.contains(&key.as_str())) {
            return Err(format!("{path}: validation {i} has an unknown field {unknown:?}"));
        }
    }
    Ok(())
}
