//! [`Crd`]: the CustomResourceDefinition of a plugin's primary, generated from its Rust spec and
//! status types (as kube-rs's `#[derive(CustomResource)]` does), so the YAML and the types
//! cannot drift.
//!
//! The types derive [`schemars::JsonSchema`]; their schemas are rewritten into a Kubernetes
//! structural schema: every subschema inlined (no `$ref`), `Option<T>` as `nullable: true`
//! rather than `anyOf` with `null`, the variants of a data-carrying enum as one object whose
//! `oneOf` only says which properties each variant requires, `serde_json::Value` fields as
//! `x-kubernetes-preserve-unknown-fields`, sets as `x-kubernetes-list-type: set`, and keywords
//! the API server does not know dropped.
//!
//! The status schema has what the host writes beside the plugin's status: `observedGeneration`
//! and the `conditions` list (unless the plugin's status type has fields of those names). None
//! of its fields is required: the host writes a status without the plugin's fields when a
//! reconcile fails.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::Kind;

/// The CustomResourceDefinition (`apiextensions.k8s.io/v1`) of a primary kind, from its spec
/// and status types, with the status subresource, a `Ready` printer column (the host's `Ready`
/// condition) and the printer columns, short names and categories added.
///
/// Return it from [`Reconciler::crd`](crate::Reconciler::crd); `wasmop crd --plugin x.wasm`
/// prints it as YAML.
///
/// ```
/// use wasmop_guest::schemars::JsonSchema;
/// use wasmop_guest::{Crd, Kind};
///
/// /// What the user asks for.
/// #[derive(JsonSchema)]
/// #[schemars(crate = "wasmop_guest::schemars")] // without a dependency on schemars of its own
/// struct Spec {
///     /// The greeting's recipient.
///     name: String,
///     replicas: Option<i32>,
/// }
///
/// /// What the plugin reports.
/// #[derive(JsonSchema)]
/// #[schemars(crate = "wasmop_guest::schemars")]
/// struct Status {
///     message: Option<String>,
/// }
///
/// let crd = Crd::of::<Spec, Status>(&Kind::namespaced("example.com", "v1", "Hello"))
///     .short_name("hi")
///     .printer_column("Message", "string", ".status.message")
///     .to_value();
/// assert_eq!(crd["metadata"]["name"], "hellos.example.com");
/// let version = &crd["spec"]["versions"][0];
/// assert_eq!(version["subresources"]["status"], serde_json::json!({}));
/// let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
/// assert_eq!(spec["required"], serde_json::json!(["name"]));
/// assert_eq!(spec["properties"]["replicas"]["nullable"], true);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Crd {
    kind: Kind,
    spec: Value,
    status: Value,
    columns: Vec<Value>,
    short_names: Vec<String>,
    categories: Vec<String>,
}

/// The keywords of a Kubernetes `JSONSchemaProps` (besides `x-kubernetes-*`) a generated schema
/// may keep.
const KEYWORDS: &[&str] = &[
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

impl Crd {
    /// The CRD of `kind`, whose objects have a `spec` of type `Spec` and a `status` of type
    /// `Status` (`()` for a plugin that writes no status of its own: the status then has the
    /// host's fields only).
    ///
    /// Panics when a type's schema cannot be a structural schema: a recursive type, or an enum
    /// mixing unit and data variants (give it `#[serde(tag = "...")]`).
    pub fn of<Spec: JsonSchema, Status: JsonSchema>(kind: &Kind) -> Self {
        let mut status = schema_of::<Status>("status");
        if status.get("type") != Some(&json!("object")) {
            status = json!({ "type": "object" });
        }
        // The host writes the status without the plugin's fields when a reconcile fails: none of
        // them can be required.
        status.as_object_mut().map(|status| status.remove("required"));
        let properties = status["properties"].as_object_mut().map(std::mem::take).unwrap_or_default();
        let mut host = Map::new();
        host.insert(
            "observedGeneration".into(),
            json!({
                "type": "integer",
                "format": "int64",
                "description": "The metadata.generation the host last reconciled (written by the host).",
            }),
        );
        host.insert("conditions".into(), conditions());
        let mut merged = host;
        merged.extend(properties);
        status["properties"] = Value::Object(merged);
        let ready = json!({
            "name": "Ready",
            "type": "string",
            "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status",
        });
        Self {
            kind: kind.clone(),
            spec: schema_of::<Spec>("spec"),
            status,
            columns: vec![ready],
            short_names: Vec::new(),
            categories: Vec::new(),
        }
    }

    /// Adds a printer column (`kubectl get` shows it): its name, its type (`string`,
    /// `integer`, `number`, `boolean` or `date`) and the JSON path of its value. Columns follow
    /// the `Ready` column, in the order added.
    ///
    /// ```
    /// # use wasmop_guest::{Crd, Kind};
    /// let crd = Crd::of::<(), ()>(&Kind::namespaced("example.com", "v1", "Hello"))
    ///     .printer_column("Age", "date", ".metadata.creationTimestamp")
    ///     .to_value();
    /// let columns = &crd["spec"]["versions"][0]["additionalPrinterColumns"];
    /// assert_eq!((&columns[0]["name"], &columns[1]["name"]), (&"Ready".into(), &"Age".into()));
    /// ```
    #[must_use]
    pub fn printer_column(mut self, name: &str, type_: &str, json_path: &str) -> Self {
        self.columns.push(json!({ "name": name, "type": type_, "jsonPath": json_path }));
        self
    }

    /// Adds a short name (`kubectl get hi`).
    #[must_use]
    pub fn short_name(mut self, name: &str) -> Self {
        self.short_names.push(name.to_owned());
        self
    }

    /// Adds a category (`kubectl get all` lists the kinds of category `all`).
    #[must_use]
    pub fn category(mut self, category: &str) -> Self {
        self.categories.push(category.to_owned());
        self
    }

    /// The CustomResourceDefinition as JSON.
    pub fn to_value(&self) -> Value {
        let kind = &self.kind;
        let singular = kind.kind.to_lowercase();
        let plural = kind.plural.clone().unwrap_or_else(|| format!("{singular}s"));
        let mut names = json!({
            "kind": kind.kind,
            "listKind": format!("{}List", kind.kind),
            "plural": plural,
            "singular": singular,
        });
        if !self.short_names.is_empty() {
            names["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            names["categories"] = json!(self.categories);
        }
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": format!("{plural}.{}", kind.group) },
            "spec": {
                "group": kind.group,
                "names": names,
                "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
                "versions": [{
                    "name": kind.version,
                    "served": true,
                    "storage": true,
                    "subresources": { "status": {} },
                    "additionalPrinterColumns": self.columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": { "spec": self.spec, "status": self.status },
                        },
                    },
                }],
            },
        })
    }
}

/// The schema of the host's conditions, as `wasmop_guest::conditions::Condition` has them: a
/// list keyed by `type`.
fn conditions() -> Value {
    let string = |description: &str| json!({ "type": "string", "description": description });
    json!({
        "type": "array",
        "description": "The conditions: the host's (Ready, Degraded) and any other controller's.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": string("The condition's type, e.g. Ready."),
                "status": { "type": "string", "enum": ["True", "False", "Unknown"] },
                "reason": string("Why, in CamelCase."),
                "message": string("Why, for a person."),
                "lastTransitionTime": { "type": "string", "format": "date-time" },
                "observedGeneration": { "type": "integer", "format": "int64" },
            },
        },
    })
}

/// `T`'s schema as a structural schema; `field` names it in a panic.
fn schema_of<T: JsonSchema>(field: &str) -> Value {
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
    if object.get("additionalProperties") == Some(&json!(false)) {
        object.remove("additionalProperties");
    }
    for keyword in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = object.remove(keyword) {
            variants(object, branches, path)?;
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::{Value, json};

    use super::Crd;
    use crate::Kind;

    /// The spec of a test kind, with every shape a CRD schema must handle.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)] // Only its schema is used.
    struct Spec {
        /// How many.
        replicas: i32,
        size: Option<u32>,
        ports: Vec<u16>,
        tags: BTreeSet<String>,
        labels: BTreeMap<String, String>,
        backend: Backend,
        maybe_backend: Option<Backend>,
        mode: Mode,
        maybe_mode: Option<Mode>,
        source: Source,
        tagged: Tagged,
        extra: Value,
        #[serde(default)]
        flag: bool,
    }

    /// A nested struct.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[allow(dead_code)] // Only its schema is used.
    struct Backend {
        /// The host.
        host: String,
        port: Option<u16>,
    }

    /// A unit enum.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[allow(dead_code)] // Only its schema is used.
    enum Mode {
        Fast,
        Safe,
    }

    /// An externally tagged enum with data.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)] // Only its schema is used.
    enum Source {
        /// From a URL.
        Url(String),
        /// From a ConfigMap.
        ConfigMap { name: String, key: Option<String> },
    }

    /// An internally tagged enum.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    #[allow(dead_code)] // Only its schema is used.
    enum Tagged {
        A { a: String },
        B { b: i64 },
    }

    /// What a plugin reports.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[allow(dead_code)] // Only its schema is used.
    struct Status {
        message: Option<String>,
        phase: String,
    }

    fn crd() -> Value {
        Crd::of::<Spec, Status>(&Kind::namespaced("example.com", "v1", "Thing"))
            .printer_column("Message", "string", ".status.message")
            .short_name("th")
            .category("all")
            .to_value()
    }

    fn schema(crd: &Value) -> &Value {
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    }

    /// Every violation of the structural-schema rules the API server enforces that a generated
    /// schema could have, with its path.
    fn violations(schema: &Value, path: &str, in_junctor: bool, out: &mut Vec<String>) {
        let Some(object) = schema.as_object() else {
            out.push(format!("{path}: not an object"));
            return;
        };
        for (key, value) in object {
            let known = super::KEYWORDS.contains(&key.as_str()) || key.starts_with("x-kubernetes-");
            if !known {
                out.push(format!("{path}: unknown keyword {key}"));
            }
            if matches!(key.as_str(), "anyOf" | "oneOf" | "allOf") {
                for (i, branch) in value.as_array().into_iter().flatten().enumerate() {
                    if branch.get("type") == Some(&json!("null")) || branch.get("nullable").is_some() {
                        out.push(format!("{path}.{key}[{i}]: a null branch"));
                    }
                    violations(branch, &format!("{path}.{key}[{i}]"), true, out);
                }
            }
        }
        let preserved = object.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
        if in_junctor {
            for key in ["type", "description", "default", "nullable", "additionalProperties"] {
                if object.contains_key(key) {
                    out.push(format!("{path}: {key} inside a junctor"));
                }
            }
        } else if !object.get("type").is_some_and(Value::is_string) && !preserved {
            out.push(format!("{path}: no single type"));
        }
        if object.contains_key("properties") && object.contains_key("additionalProperties") {
            out.push(format!("{path}: properties and additionalProperties"));
        }
        if let Some(Value::Array(values)) = object.get("enum")
            && values.contains(&Value::Null)
        {
            out.push(format!("{path}: null in enum"));
        }
        for (name, property) in object.get("properties").and_then(Value::as_object).into_iter().flatten() {
            violations(property, &format!("{path}.{name}"), in_junctor, out);
        }
        if let Some(items) = object.get("items") {
            violations(items, &format!("{path}[]"), in_junctor, out);
        }
        if let Some(additional) = object.get("additionalProperties").filter(|a| a.is_object()) {
            violations(additional, &format!("{path}.*"), in_junctor, out);
        }
    }

    #[test]
    fn the_schema_is_structural_at_every_depth() {
        let crd = crd();
        let text = crd.to_string();
        assert!(!text.contains("$ref") && !text.contains("$schema") && !text.contains("$defs"), "{text}");
        let mut out = Vec::new();
        violations(schema(&crd), "", false, &mut out);
        assert!(out.is_empty(), "{out:#?}\n{:#}", schema(&crd));
    }

    #[test]
    fn fields_keep_their_shapes() {
        let crd = crd();
        let spec = &schema(&crd)["properties"]["spec"];
        let properties = &spec["properties"];
        assert_eq!(spec["type"], "object");
        let mut required: Vec<&str> =
            spec["required"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
        required.sort_unstable();
        assert_eq!(required, ["backend", "extra", "labels", "mode", "ports", "replicas", "source", "tagged", "tags"]);
        assert_eq!(properties["replicas"], json!({ "type": "integer", "format": "int32", "description": "How many." }));
        assert_eq!((&properties["size"]["type"], &properties["size"]["nullable"]), (&json!("integer"), &json!(true)));
        assert_eq!(properties["ports"]["items"]["type"], "integer");
        assert_eq!(properties["tags"]["x-kubernetes-list-type"], "set");
        assert_eq!(properties["labels"]["additionalProperties"], json!({ "type": "string" }));
        assert_eq!(properties["backend"]["properties"]["host"]["description"], "The host.");
        assert_eq!(properties["maybeBackend"]["nullable"], true);
        assert_eq!(properties["maybeBackend"]["properties"]["port"]["nullable"], true);
        assert_eq!(properties["mode"]["enum"], json!(["Fast", "Safe"]));
        assert_eq!(properties["maybeMode"]["enum"], json!(["Fast", "Safe"]));
        assert_eq!(properties["maybeMode"]["nullable"], true);
        let source = &properties["source"];
        assert_eq!(source["properties"]["url"]["type"], "string");
        assert_eq!(source["properties"]["configMap"]["properties"]["name"]["type"], "string");
        assert_eq!(source["oneOf"], json!([{ "required": ["url"] }, { "required": ["configMap"] }]));
        assert_eq!(properties["tagged"]["properties"]["kind"]["enum"], json!(["A", "B"]));
        assert_eq!(properties["extra"], json!({ "x-kubernetes-preserve-unknown-fields": true }));
        assert_eq!(properties["flag"]["default"], false);
    }

    #[test]
    fn the_status_has_the_host_s_fields_and_the_crd_its_subresource_and_columns() {
        let crd = crd();
        let version = &crd["spec"]["versions"][0];
        assert_eq!(crd["metadata"]["name"], "things.example.com");
        assert_eq!(
            crd["spec"]["names"],
            json!({ "kind": "Thing", "listKind": "ThingList", "plural": "things", "singular": "thing", "shortNames": ["th"], "categories": ["all"] })
        );
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(
            (&version["name"], &version["served"], &version["storage"]),
            (&json!("v1"), &json!(true), &json!(true))
        );
        assert_eq!(version["subresources"], json!({ "status": {} }));
        assert_eq!(
            version["additionalPrinterColumns"],
            json!([
                { "name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status" },
                { "name": "Message", "type": "string", "jsonPath": ".status.message" },
            ])
        );
        let status = &schema(&crd)["properties"]["status"]["properties"];
        assert_eq!(status["message"]["type"], "string");
        assert_eq!(status["observedGeneration"]["type"], "integer");
        let condition = &status["conditions"]["items"]["properties"];
        for field in ["type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"] {
            assert!(condition[field].is_object(), "conditions[].{field}: {condition}");
        }
        assert_eq!(status["conditions"]["x-kubernetes-list-map-keys"], json!(["type"]));
        let status_schema = &schema(&crd)["properties"]["status"];
        assert_eq!(status_schema.get("required"), None, "a failed reconcile writes no plugin fields");
        assert_eq!(schema(&crd)["required"], json!(["spec"]));
    }

    #[test]
    fn a_plugin_without_a_status_type_and_a_cluster_kind() {
        let crd = Crd::of::<Backend, ()>(&Kind::cluster("example.com", "v2", "Policy").plural("policies")).to_value();
        assert_eq!(crd["metadata"]["name"], "policies.example.com");
        assert_eq!(crd["spec"]["scope"], "Cluster");
        let status = &schema(&crd)["properties"]["status"];
        assert_eq!(status["type"], "object");
        let mut fields: Vec<&String> = status["properties"].as_object().unwrap().keys().collect();
        fields.sort();
        assert_eq!(fields, ["conditions", "observedGeneration"]);
    }

    /// Recursive: cannot be inlined.
    #[derive(JsonSchema)]
    #[allow(dead_code)] // Only its schema is used.
    struct Tree {
        children: Vec<Tree>,
    }

    #[test]
    #[should_panic(
        expected = "Crd::of: the spec type cannot be a Kubernetes structural schema: spec.children[]: a $ref"
    )]
    fn a_recursive_type_is_refused() {
        let _ = Crd::of::<Tree, ()>(&Kind::namespaced("example.com", "v1", "Tree"));
    }

    /// Unit and data variants: a string or an object.
    #[derive(JsonSchema)]
    #[allow(dead_code)] // Only its schema is used.
    enum Mixed {
        Off,
        On { level: u8 },
    }

    #[test]
    #[should_panic(expected = "spec: an enum mixing unit and data variants")]
    fn an_enum_mixing_unit_and_data_variants_is_refused() {
        let _ = Crd::of::<Mixed, ()>(&Kind::namespaced("example.com", "v1", "Mixed"));
    }
}
