//! [`Crd`]: the CustomResourceDefinition of a plugin's primary, generated from its Rust spec and
//! status types (as kube-rs's `#[derive(CustomResource)]` does), so the YAML and the types
//! cannot drift: one version, or several of one kind, one of them the hub that is stored.
//!
//! The types derive [`schemars::JsonSchema`]; their schemas are rewritten into Kubernetes
//! structural schemas ([`structural`]), keeping the checks the API server runs itself, declared
//! beside the fields with schemars' attributes: `#[schemars(length(min = 1))]` (`minLength`),
//! `#[schemars(regex(pattern = r"^[a-z]+$"))]` (`pattern`), `#[schemars(range(max = 10))]`
//! (`maximum`), a unit enum (`enum`), and CEL rules with
//! `#[schemars(extend("x-kubernetes-validations" = [{ "rule": "...", "message": "..." }]))]`.
//!
//! The status schema has what the host writes beside the plugin's status: `observedGeneration`
//! and the `conditions` list (unless the plugin's status type has fields of those names). None
//! of its fields is required: the host writes a status without the plugin's fields when a
//! reconcile fails.

mod structural;

use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use self::structural::schema_of;
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
///     /// The greeting's recipient: checked by the API server itself.
///     #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z]"))]
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
/// assert_eq!(spec["properties"]["name"]["minLength"], 1);
/// assert_eq!(spec["properties"]["replicas"]["nullable"], true);
/// ```
///
/// Several versions of the kind, each with its types, are served side by side; the hub (the
/// first, unless [`Crd::hub`] names another) is the one the API server stores. The plugin
/// converts between them with a [`Converter`](crate::Converter), declared with
/// [`Webhook::conversion`](crate::Webhook::conversion); `wasmop crd --plugin x.wasm
/// --webhook-service NAMESPACE/NAME` (or `--webhook-url`) prints the CRD with its conversion
/// section, which the host also writes when it serves the webhook.
///
/// ```
/// use wasmop_guest::schemars::JsonSchema;
/// use wasmop_guest::{Crd, Kind};
///
/// #[derive(JsonSchema)]
/// #[schemars(crate = "wasmop_guest::schemars")]
/// struct SpecV1 {
///     html: String,
/// }
///
/// #[derive(JsonSchema)]
/// #[schemars(crate = "wasmop_guest::schemars")]
/// struct SpecV2 {
///     content: Content,
/// }
///
/// #[derive(JsonSchema)]
/// #[schemars(crate = "wasmop_guest::schemars")]
/// struct Content {
///     html: String,
/// }
///
/// let crd = Crd::of::<SpecV1, ()>(&Kind::namespaced("example.com", "v1", "Page"))
///     .version::<SpecV2, ()>("v2")
///     .hub("v2")
///     .to_value();
/// let versions = &crd["spec"]["versions"];
/// assert_eq!((&versions[0]["name"], &versions[1]["name"]), (&"v1".into(), &"v2".into()));
/// assert_eq!((&versions[0]["served"], &versions[1]["served"]), (&true.into(), &true.into()), "both served");
/// assert_eq!((&versions[0]["storage"], &versions[1]["storage"]), (&false.into(), &true.into()), "v2 stored");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Crd {
    kind: Kind,
    versions: Vec<Version>,
    hub: String,
    columns: Vec<Value>,
    short_names: Vec<String>,
    categories: Vec<String>,
}

/// One served version of the kind: its name and the schemas of its spec and status.
#[derive(Clone, Debug, PartialEq)]
struct Version {
    name: String,
    spec: Value,
    status: Value,
}

impl Version {
    /// The version `name`, with the schemas of `Spec` and `Status`.
    fn of<Spec: JsonSchema, Status: JsonSchema>(name: &str) -> Self {
        Self { name: name.to_owned(), spec: schema_of::<Spec>("spec"), status: status_of::<Status>() }
    }
}

impl Crd {
    /// The CRD of `kind`, whose objects have a `spec` of type `Spec` and a `status` of type
    /// `Status` (`()` for a plugin that writes no status of its own: the status then has the
    /// host's fields only). `kind`'s version is the first, and the hub until [`Crd::hub`] names
    /// another.
    ///
    /// Panics when a type's schema cannot be a structural schema: a recursive type, an enum
    /// mixing unit and data variants (give it `#[serde(tag = "...")]`), or a CEL rule without
    /// its `rule`.
    pub fn of<Spec: JsonSchema, Status: JsonSchema>(kind: &Kind) -> Self {
        let ready = json!({
            "name": "Ready",
            "type": "string",
            "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status",
        });
        Self {
            kind: kind.clone(),
            versions: vec![Version::of::<Spec, Status>(&kind.version)],
            hub: kind.version.clone(),
            columns: vec![ready],
            short_names: Vec::new(),
            categories: Vec::new(),
        }
    }

    /// Adds the version `name` of the kind (`v2`), whose objects have a `spec` of type `Spec`
    /// and a `status` of type `Status`; it is served beside the others, in the order added.
    ///
    /// Panics when the kind already has a version of that name, or as [`Crd::of`] does.
    ///
    /// ```
    /// # use wasmop_guest::{Crd, Kind};
    /// let crd = Crd::of::<(), ()>(&Kind::namespaced("example.com", "v1", "Hello")).version::<(), ()>("v2").to_value();
    /// assert_eq!(crd["spec"]["versions"][1]["name"], "v2");
    /// assert_eq!(crd["spec"]["versions"][0]["storage"], true, "the first is the hub by default");
    /// ```
    #[must_use]
    pub fn version<Spec: JsonSchema, Status: JsonSchema>(mut self, name: &str) -> Self {
        assert!(
            !self.versions.iter().any(|v| v.name == name),
            "Crd::version: {} already has a version {name}",
            self.kind.kind
        );
        self.versions.push(Version::of::<Spec, Status>(name));
        self
    }

    /// Makes `version` the hub: the version the API server stores (`storage: true`), which the
    /// plugin's [`Converter`](crate::Converter) converts the others to and from.
    ///
    /// Panics when the kind has no such version (add it with [`Crd::version`] first).
    #[must_use]
    pub fn hub(mut self, version: &str) -> Self {
        assert!(
            self.versions.iter().any(|v| v.name == version),
            "Crd::hub: {} has no version {version}",
            self.kind.kind
        );
        version.clone_into(&mut self.hub);
        self
    }

    /// Adds a printer column (`kubectl get` shows it) to every version: its name, its type
    /// (`string`, `integer`, `number`, `boolean` or `date`) and the JSON path of its value.
    /// Columns follow the `Ready` column, in the order added.
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
        let versions: Vec<Value> = self
            .versions
            .iter()
            .map(|version| {
                json!({
                    "name": version.name,
                    "served": true,
                    "storage": version.name == self.hub,
                    "subresources": { "status": {} },
                    "additionalPrinterColumns": self.columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": { "spec": version.spec, "status": version.status },
                        },
                    },
                })
            })
            .collect();
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": format!("{plural}.{}", kind.group) },
            "spec": {
                "group": kind.group,
                "names": names,
                "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
                "versions": versions,
            },
        })
    }
}

/// The status schema of `Status`, with the host's fields, none of them required.
fn status_of<Status: JsonSchema>() -> Value {
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
    status
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
            let known = super::structural::KEYWORDS.contains(&key.as_str()) || key.starts_with("x-kubernetes-");
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

    /// A spec with the checks the API server runs itself declared beside its fields.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(extend("x-kubernetes-validations" = [
        { "rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas" }
    ]))]
    #[allow(dead_code)] // Only its schema is used.
    struct Checked {
        #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9-]*$"))]
        name: String,
        #[schemars(range(min = 0))]
        min_replicas: i32,
        max_replicas: i32,
        mode: Mode,
        level: Option<Level>,
        #[schemars(extend("x-kubernetes-validations" = [{ "rule": "self == oldSelf", "message": "immutable" }]))]
        zone: Option<String>,
        #[schemars(length(min = 1))]
        tags: Vec<String>,
    }

    /// A unit enum whose variants have doc comments.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[allow(dead_code)] // Only its schema is used.
    enum Level {
        /// The lowest.
        Low,
        /// The highest.
        High,
    }

    #[test]
    fn the_checks_the_api_server_runs_itself_are_kept() {
        let crd = Crd::of::<Checked, ()>(&Kind::namespaced("example.com", "v1", "Checked")).to_value();
        let mut out = Vec::new();
        violations(schema(&crd), "", false, &mut out);
        assert!(out.is_empty(), "{out:#?}");
        let spec = &schema(&crd)["properties"]["spec"];
        let name = &spec["properties"]["name"];
        assert_eq!((&name["minLength"], &name["maxLength"]), (&json!(1), &json!(63)));
        assert_eq!(name["pattern"], "^[a-z][a-z0-9-]*$");
        assert_eq!(spec["properties"]["minReplicas"]["minimum"], 0);
        assert_eq!(spec["properties"]["mode"]["enum"], json!(["Fast", "Safe"]));
        let level = &spec["properties"]["level"];
        assert_eq!(
            (&level["type"], &level["enum"], &level["nullable"]),
            (&json!("string"), &json!(["Low", "High"]), &json!(true))
        );
        assert_eq!(spec["properties"]["tags"]["minItems"], 1);
        assert_eq!(
            spec["x-kubernetes-validations"],
            json!([{ "rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas" }])
        );
        let zone = &spec["properties"]["zone"];
        assert_eq!((&zone["type"], &zone["nullable"]), (&json!("string"), &json!(true)));
        assert_eq!(zone["x-kubernetes-validations"], json!([{ "rule": "self == oldSelf", "message": "immutable" }]));
    }

    /// A CEL rule without its rule.
    #[derive(JsonSchema)]
    #[schemars(extend("x-kubernetes-validations" = [{ "message": "no rule" }]))]
    #[allow(dead_code)] // Only its schema is used.
    struct Ruleless {
        name: String,
    }

    #[test]
    #[should_panic(expected = "spec: validation 0 has no rule")]
    fn a_validation_without_its_rule_is_refused() {
        let _ = Crd::of::<Ruleless, ()>(&Kind::namespaced("example.com", "v1", "Ruleless"));
    }

    #[test]
    fn versions_are_served_with_their_own_schemas_and_the_hub_is_stored() {
        let crd = Crd::of::<Backend, Status>(&Kind::namespaced("example.com", "v1", "Thing"))
            .version::<Checked, ()>("v2")
            .version::<Spec, Status>("v3")
            .hub("v2")
            .printer_column("Age", "date", ".metadata.creationTimestamp")
            .to_value();
        let versions = crd["spec"]["versions"].as_array().unwrap();
        let shown: Vec<(&Value, &Value, &Value)> =
            versions.iter().map(|v| (&v["name"], &v["served"], &v["storage"])).collect();
        assert_eq!(
            shown,
            [
                (&json!("v1"), &json!(true), &json!(false)),
                (&json!("v2"), &json!(true), &json!(true)),
                (&json!("v3"), &json!(true), &json!(false)),
            ]
        );
        let spec = |i: usize| &versions[i]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec(0)["host"]["description"], "The host.");
        assert_eq!(spec(1)["name"]["minLength"], 1);
        assert_eq!(spec(2)["replicas"]["type"], "integer");
        for version in versions {
            assert_eq!(version["subresources"], json!({ "status": {} }));
            assert_eq!(version["additionalPrinterColumns"][1]["name"], "Age", "columns are every version's");
            let status = &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
            assert_eq!(status["observedGeneration"]["type"], "integer", "the host's status fields in {version}");
        }
        let mut out = Vec::new();
        for version in versions {
            violations(&version["schema"]["openAPIV3Schema"], "", false, &mut out);
        }
        assert!(out.is_empty(), "{out:#?}");
    }

    #[test]
    #[should_panic(expected = "Crd::hub: Thing has no version v9")]
    fn a_hub_that_is_not_a_version_is_refused() {
        let _ = Crd::of::<(), ()>(&Kind::namespaced("example.com", "v1", "Thing")).hub("v9");
    }

    #[test]
    #[should_panic(expected = "Crd::version: Thing already has a version v1")]
    fn a_version_declared_twice_is_refused() {
        let _ = Crd::of::<(), ()>(&Kind::namespaced("example.com", "v1", "Thing")).version::<(), ()>("v1");
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
