//! Does the cluster already hold what the plugin wants? The comparison JOSDK's
//! `SSABasedGenericKubernetesResourceMatcher` makes: only the fields the host's field manager owns
//! count, as its `Apply` entry in `metadata.managedFields` lists them. Fields the API server
//! defaulted are not owned and do not count; a field someone else took over is no longer owned,
//! so the objects differ and the host applies again. Pure.
//!
//! The desired object is walked together with the field set (`fieldsV1`) and the actual object:
//! every desired field must be owned and hold the desired value, and every owned field must still
//! be desired (else the apply would remove it). Lists the field set records as a leaf are atomic
//! and compare whole; the items of other lists are named by `k:{..}` (associative lists, by their
//! key fields), `v:..` (sets, by value) or `i:n` (by index), and must be the desired ones, in the
//! desired order.
//!
//! Where the API server stores something other than what was applied, and applying the same
//! object again changes nothing (checked against kube-apiserver 1.36), the walk is lenient:
//! - a desired zero value (`false`, `0`, `""`, `[]`, `{}`) may be missing: the server drops
//!   `omitempty` fields (`args: []`, `hostPort: 0`, `paused: false`, an env `value: ""`, an
//!   empty `nodeSelector`, and inside atomic values a selector's `matchExpressions: []`);
//! - a desired empty object whose field set is a leaf matches any object: the server defaults
//!   into it (`strategy: {}` becomes a `RollingUpdate` strategy);
//! - a key field missing from a desired item matches the defaulted one in the item's key (a port
//!   without `protocol` is recorded as `k:{"containerPort":80,"protocol":"TCP"}`), when exactly
//!   one owned item fits;
//! - the values of `requests` and `limits` maps and `sizeLimit` compare as resource quantities
//!   (`0.5` is stored as `500m`, `1024Mi` as `1Gi`, the number `0.25` as `250m`);
//! - numbers compare by value (`1 == 1.0`);
//! - a desired `null` matches a missing or zero value (a `null` label is stored as `""`).
//!
//! Every leniency still needs the field owned: a desired field the manager does not own never
//! matches, even when the value is there (an explicit `protocol: TCP` where the server defaulted
//! it, an empty `annotations: {}` that kube-controller-manager took over by adding its revision
//! annotation): applying takes the field and changes the object. Items compare in order, as
//! applying reorders them (containers applied as `[b, a]` after `[a, b]`).
//!
//! It stays strict elsewhere, also where that costs an apply that changes nothing: a `null`
//! field the server defaults (`replicas: null` is stored as `1`) does not match, because after
//! an explicit value the same apply does reset the field (`progressDeadlineSeconds` 300, then
//! `null`, became 600), and the matcher cannot tell the two apart. Mutating webhooks and other
//! defaults inside atomic values are not anticipated either.

use serde_json::{Map, Number, Value};

/// Top-level fields the API server does not record in `fieldsV1` (`apiVersion`, `kind`), or
/// that a dependent's desired state does not own (`status`).
const IGNORED: [&str; 3] = ["apiVersion", "kind", "status"];
/// Metadata fields the API server does not record in `fieldsV1`.
const IGNORED_METADATA: [&str; 2] = ["name", "namespace"];
/// Maps whose values are resource quantities (`resources.requests`, `resources.limits`).
const QUANTITY_MAPS: [&str; 2] = ["requests", "limits"];
/// Fields holding a resource quantity (`emptyDir.sizeLimit`).
const QUANTITY_FIELDS: [&str; 1] = ["sizeLimit"];

/// Whether `actual` (an object as the API server returns it, with `metadata.managedFields`)
/// already holds every field of `desired` (the object the host would apply) as owned by
/// `manager` through an `Apply` operation, and the manager owns no field `desired` lacks: then
/// applying `desired` would change nothing, and the host skips the request.
pub fn matches(desired: &Value, actual: &Value, manager: &str) -> bool {
    let (Some(desired), Some(mut owned)) = (desired.as_object(), owned_fields(actual, manager)) else {
        return false;
    };
    let mut desired = desired.clone();
    for field in IGNORED {
        desired.remove(field);
        owned.remove(&format!("f:{field}"));
    }
    if let Some(Value::Object(metadata)) = desired.get_mut("metadata") {
        for field in IGNORED_METADATA {
            metadata.remove(field);
        }
        if metadata.is_empty() {
            desired.remove("metadata");
        }
    }
    object(&desired, &owned, actual.as_object(), "")
}

/// The field set (`fieldsV1`) of `manager`'s `Apply` entry for the object itself (not for a
/// subresource).
fn owned_fields(actual: &Value, manager: &str) -> Option<Map<String, Value>> {
    let entry = actual["metadata"]["managedFields"].as_array()?.iter().find(|entry| {
        entry["manager"] == manager
            && entry["operation"] == "Apply"
            && entry.get("subresource").is_none_or(|s| s.is_null() || s == "")
    })?;
    Some(entry.get("fieldsV1").and_then(Value::as_object).cloned().unwrap_or_default())
}

/// The children of a field-set node, without the node's own marker `.`.
fn children(owned: &Value) -> impl Iterator<Item = (&String, &Value)> {
    owned.as_object().into_iter().flatten().filter(|(key, _)| key.as_str() != ".")
}

/// Whether the desired map `want`, owned as `owned`, is what `have` holds. `name` is the map's
/// field name.
fn object(
    want: &Map<String, Value>,
    owned: &Map<String, Value>,
    have: Option<&Map<String, Value>>,
    name: &str,
) -> bool {
    let desired_are_owned = want.iter().all(|(key, value)| {
        owned.get(&format!("f:{key}")).is_some_and(|node| field(value, node, have.and_then(|h| h.get(key)), key, name))
    });
    let owned_are_desired = owned
        .keys()
        .filter(|key| key.as_str() != ".")
        .all(|key| key.strip_prefix("f:").is_some_and(|name| want.contains_key(name)));
    desired_are_owned && owned_are_desired
}

/// Whether the desired value `want` of the field `name` in the map `parent` (both empty for a
/// list item), owned as `owned`, is what `have` holds.
fn field(want: &Value, owned: &Value, have: Option<&Value>, name: &str, parent: &str) -> bool {
    let have = have.filter(|h| !h.is_null());
    let leaf = children(owned).next().is_none();
    match want {
        Value::Object(want) if !leaf => owned.as_object().is_some_and(|owned| match have {
            None => object(want, owned, None, name),
            Some(Value::Object(have)) => object(want, owned, Some(have), name),
            Some(_) => false,
        }),
        Value::Array(want) if !leaf => list(want, owned, have),
        // The field itself is owned, none of its fields: the server may have defaulted them.
        Value::Object(want) if want.is_empty() => have.is_none_or(Value::is_object),
        _ if leaf => {
            let quantity = QUANTITY_MAPS.contains(&parent) || QUANTITY_FIELDS.contains(&name);
            equal(want, have, quantity)
        }
        _ => false,
    }
}

/// Whether the desired list `want`, its items owned as `owned` (not a leaf), is what `have`
/// holds: each desired item is an owned one, no other item is owned, the actual items are the
/// desired ones and in the desired order.
fn list(want: &[Value], owned: &Value, have: Option<&Value>) -> bool {
    let have: &[Value] = match have {
        None => &[],
        Some(Value::Array(have)) => have,
        Some(_) => return false,
    };
    let Some(items) =
        children(owned).map(|(key, node)| Item::parse(key).map(|item| (item, node))).collect::<Option<Vec<_>>>()
    else {
        return false;
    };
    if items.len() != want.len() {
        return false;
    }
    let Some(assigned) = assign(want, &items) else { return false };
    let mut previous = None;
    want.iter().zip(assigned).all(|(element, chosen)| {
        let (item, node) = &items[chosen];
        let Some(position) = have.iter().enumerate().position(|(index, h)| item.names(index, h)) else {
            return false;
        };
        let in_order = previous.is_none_or(|p| position > p);
        previous = Some(position);
        in_order && field(element, node, Some(&have[position]), "", "")
    })
}

/// Which owned item each desired element is: first the elements that name an item fully, then
/// those lacking key fields (the server defaulted them), each of which must fit exactly one
/// remaining item.
fn assign(want: &[Value], items: &[(Item, &Value)]) -> Option<Vec<usize>> {
    let mut chosen: Vec<Option<usize>> = vec![None; want.len()];
    let mut taken = vec![false; items.len()];
    for pass in [Fit::Exact, Fit::Partial] {
        for (index, element) in want.iter().enumerate() {
            if chosen[index].is_some() {
                continue;
            }
            let candidates: Vec<usize> = (0..items.len())
                .filter(|&i| !taken[i] && items[i].0.fits(index, element) == Some(pass))
                .take(2)
                .collect();
            match candidates[..] {
                [only] => {
                    chosen[index] = Some(only);
                    taken[only] = true;
                }
                _ if pass == Fit::Exact => {}
                _ => return None,
            }
        }
    }
    chosen.into_iter().collect()
}

/// How a desired list element fits an owned item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// It names the item.
    Exact,
    /// It lacks some key fields, and the others agree.
    Partial,
}

/// An item of a list in a field set.
#[derive(Debug)]
enum Item {
    /// `k:{..}`: the item of an associative list with these key fields.
    Key(Map<String, Value>),
    /// `v:..`: the item of a set with this value.
    Value(Value),
    /// `i:n`: the item at this index.
    Index(usize),
}

impl Item {
    /// The item a field-set key names; `None` for a key that names no list item.
    fn parse(key: &str) -> Option<Self> {
        if let Some(fields) = key.strip_prefix("k:") {
            serde_json::from_str(fields).ok().map(Self::Key)
        } else if let Some(value) = key.strip_prefix("v:") {
            serde_json::from_str(value).ok().map(Self::Value)
        } else if let Some(index) = key.strip_prefix("i:") {
            index.parse().ok().map(Self::Index)
        } else {
            None
        }
    }

    /// Whether this is the actual `element` at `index`.
    fn names(&self, index: usize, element: &Value) -> bool {
        match self {
            Self::Key(key) => key.iter().all(|(name, value)| {
                element.get(name).is_some_and(|actual| !actual.is_null() && equal(value, Some(actual), false))
            }),
            Self::Value(value) => equal(value, Some(element), false),
            Self::Index(position) => *position == index,
        }
    }

    /// How the desired `element` at `index` fits this item, if at all.
    fn fits(&self, index: usize, element: &Value) -> Option<Fit> {
        match self {
            Self::Key(key) => {
                let mut fit = Fit::Exact;
                for (name, value) in key {
                    match element.as_object()?.get(name) {
                        None | Some(Value::Null) => fit = Fit::Partial,
                        Some(wanted) if equal(wanted, Some(value), false) => {}
                        Some(_) => return None,
                    }
                }
                Some(fit)
            }
            Self::Value(value) => equal(element, Some(value), false).then_some(Fit::Exact),
            Self::Index(position) => (*position == index).then_some(Fit::Exact),
        }
    }
}

/// Whether `have` is the desired value `want` as a whole (an atomic value, or a scalar): numbers
/// by value, and quantities by amount when `quantity` says the value is one; desired zero values
/// may be missing (the server drops them).
fn equal(want: &Value, have: Option<&Value>, quantity: bool) -> bool {
    let Some(have) = have.filter(|h| !h.is_null()) else { return zero(want) };
    match (want, have) {
        (Value::Null, have) => zero(have),
        (Value::Number(w), Value::Number(h)) if !quantity => same_number(w, h),
        (Value::Object(w), Value::Object(h)) => {
            w.iter().all(|(key, value)| equal(value, h.get(key), false))
                && h.iter().all(|(key, value)| w.contains_key(key) || value.is_null())
        }
        (Value::Array(w), Value::Array(h)) => {
            w.len() == h.len() && w.iter().zip(h).all(|(w, h)| equal(w, Some(h), false))
        }
        _ if quantity => want == have || amount(want).is_some_and(|w| amount(have) == Some(w)),
        _ => want == have,
    }
}

/// Whether a value is what the API server leaves out of a stored object.
fn zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
    }
}

/// Whether two JSON numbers are the same number: integers exactly, others as `f64`.
fn same_number(a: &Number, b: &Number) -> bool {
    let integer = |n: &Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    match (integer(a), integer(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a.as_f64() == b.as_f64(),
    }
}

/// The amount of a resource quantity (`500m`, `1Gi`, `128e6`, or a JSON number), rounded to the
/// nearest `f64`: the same amount in different notations gives the same `f64`.
fn amount(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => parse_quantity(s),
        _ => None,
    }
}

/// Parses a Kubernetes quantity: a signed decimal number and a binary (`Ki` .. `Ei`), decimal
/// (`n` .. `E`) or exponent (`e3`, `E-2`) suffix.
fn parse_quantity(text: &str) -> Option<f64> {
    let split = text
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '+' || c == '-'))))
        .map_or(text.len(), |(i, _)| i);
    let (number, suffix) = text.split_at(split);
    let digits = number.trim_start_matches(['+', '-']);
    if !digits.contains(|c: char| c.is_ascii_digit()) || digits.matches('.').count() > 1 {
        return None;
    }
    let binary = match suffix {
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        "Ti" => 40,
        "Pi" => 50,
        "Ei" => 60,
        _ => 0,
    };
    if binary > 0 {
        // Scaling by a power of two is exact.
        return number.parse::<f64>().ok().map(|n| n * 2f64.powi(binary));
    }
    let exponent: i32 = match suffix {
        "n" => -9,
        "u" => -6,
        "m" => -3,
        "" => 0,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if unsigned.is_empty() || !unsigned.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            exponent.parse().ok()?
        }
    };
    // One correctly rounded parse of the exact decimal: equal amounts give equal results.
    format!("{number}e{exponent}").parse().ok()
}

#[cfg(test)]
mod tests {
    //! The actual objects are real: kube-apiserver 1.36 returned them (`kubectl get -o json
    //! --show-managed-fields`, trimmed) after `kubectl apply --server-side --field-manager
    //! wasmop-test` of the desired objects below.

    use serde_json::json;

    use super::*;

    const MANAGER: &str = "wasmop-test";

    fn parse(fixture: &str) -> Value {
        serde_json::from_str(fixture).expect("fixture is JSON")
    }

    /// The owner reference the host adds to every dependent.
    fn owner() -> Value {
        json!([{ "apiVersion": "v1", "kind": "ConfigMap", "name": "site-owner",
                 "uid": "3870afaf-fb70-4c65-b4f2-834fe602e7e1", "controller": true, "blockOwnerDeletion": true }])
    }

    fn labels(dependent: &str) -> Value {
        json!({ "app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": "site",
                "wasmop.dev/managed-by": "test", "wasmop.dev/dependent": dependent })
    }

    fn config_map() -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "site-html", "namespace": "matcher-fixtures", "ownerReferences": owner(),
                          "labels": { "wasmop.dev/managed-by": "test", "wasmop.dev/dependent": "configmap" } },
            "data": { "index.html": "<h1>hello</h1>" }
        })
    }

    fn deployment() -> Value {
        let selector = json!({ "app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": "site" });
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "site", "namespace": "matcher-fixtures", "labels": labels("deployment"),
                          "ownerReferences": owner() },
            "spec": {
                "replicas": 1,
                "selector": { "matchLabels": selector },
                "template": {
                    "metadata": { "labels": selector },
                    "spec": {
                        "containers": [{
                            "name": "nginx", "image": "nginx:1.27-alpine", "args": ["nginx", "-g", "daemon off;"],
                            "ports": [{ "name": "http", "containerPort": 80 },
                                      { "name": "metrics", "containerPort": 9113, "protocol": "TCP" }],
                            "env": [{ "name": "MODE", "value": "static" }],
                            "volumeMounts": [{ "name": "html", "mountPath": "/usr/share/nginx/html" }]
                        }],
                        "volumes": [{ "name": "html", "configMap": { "name": "site-html" } }]
                    }
                }
            }
        })
    }

    fn service() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": "site", "namespace": "matcher-fixtures", "labels": labels("service"),
                          "ownerReferences": owner() },
            "spec": {
                "selector": { "app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": "site" },
                "ports": [
                    { "name": "http", "port": 80, "targetPort": "http" },
                    { "name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353 },
                    { "name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353 }
                ]
            }
        })
    }

    fn finalizers() -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "fin", "namespace": "matcher-fixtures",
                          "finalizers": ["wasmop.dev/cleanup", "example.com/keep"] },
            "data": { "n": "1" }
        })
    }

    /// Values the API server stores otherwise, or not at all.
    fn defaults() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "defaults", "namespace": "matcher-fixtures",
                          "labels": { "app": "defaults", "tier": null }, "annotations": {} },
            "spec": {
                "replicas": 2, "minReadySeconds": 0, "paused": false, "strategy": {},
                "selector": { "matchLabels": { "app": "defaults" }, "matchExpressions": [] },
                "template": {
                    "metadata": { "labels": { "app": "defaults" } },
                    "spec": {
                        "hostNetwork": false, "nodeSelector": {},
                        "containers": [
                            { "name": "app", "image": "busybox:1.37", "args": [], "workingDir": "",
                              "env": [{ "name": "DEBUG", "value": "" }],
                              "resources": { "requests": { "cpu": 0.25, "memory": "1024Mi" },
                                             "limits": { "cpu": "1000m", "memory": "1.5Gi" } },
                              "ports": [{ "containerPort": 8080, "hostPort": 0 }],
                              "securityContext": { "capabilities": { "add": ["NET_BIND_SERVICE"], "drop": [] } } },
                            { "name": "sidecar", "image": "busybox:1.37" }
                        ],
                        "volumes": [{ "name": "scratch", "emptyDir": { "sizeLimit": "1024Mi" } }],
                        "tolerations": [{ "key": "dedicated", "operator": "Exists", "value": "", "effect": "" }]
                    }
                }
            }
        })
    }

    /// Applied with `progressDeadlineSeconds: 300` first, then this.
    fn nulls() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "nulls", "namespace": "matcher-fixtures" },
            "spec": {
                "progressDeadlineSeconds": null,
                "selector": { "matchLabels": { "app": "nulls" } },
                "template": { "metadata": { "labels": { "app": "nulls" } },
                              "spec": { "containers": [{ "name": "app", "image": "busybox:1.37" }] } }
            }
        })
    }

    fn container(object: &mut Value) -> &mut Value {
        &mut object["spec"]["template"]["spec"]["containers"][0]
    }

    fn remove(object: &mut Value, field: &str) {
        object.as_object_mut().expect("an object").remove(field).expect("the field is there");
    }

    #[test]
    fn freshly_applied_objects_match() {
        assert!(matches(&config_map(), &parse(CONFIG_MAP), MANAGER));
        assert!(matches(&deployment(), &parse(DEPLOYMENT), MANAGER));
        assert!(matches(&service(), &parse(SERVICE), MANAGER));
        assert!(matches(&finalizers(), &parse(FINALIZERS), MANAGER));
    }

    #[test]
    fn a_changed_desired_value_does_not_match() {
        let mut html = config_map();
        html["data"]["index.html"] = json!("<h1>bye</h1>");
        assert!(!matches(&html, &parse(CONFIG_MAP), MANAGER));

        let mut image = deployment();
        container(&mut image)["image"] = json!("nginx:1.28-alpine");
        assert!(!matches(&image, &parse(DEPLOYMENT), MANAGER));
        let mut replicas = deployment();
        replicas["spec"]["replicas"] = json!(2);
        assert!(!matches(&replicas, &parse(DEPLOYMENT), MANAGER));
        let mut args = deployment();
        container(&mut args)["args"] = json!(["nginx", "-g", "daemon on;"]);
        assert!(!matches(&args, &parse(DEPLOYMENT), MANAGER), "an atomic list compares whole");
        let mut selector = deployment();
        selector["spec"]["selector"]["matchLabels"]["tier"] = json!("web");
        assert!(!matches(&selector, &parse(DEPLOYMENT), MANAGER), "an atomic map compares whole");

        let mut target = service();
        target["spec"]["ports"][0]["targetPort"] = json!(8080);
        assert!(!matches(&target, &parse(SERVICE), MANAGER));
    }

    #[test]
    fn numbers_compare_by_value() {
        let mut replicas = deployment();
        replicas["spec"]["replicas"] = json!(1.0);
        assert!(matches(&replicas, &parse(DEPLOYMENT), MANAGER));
    }

    #[test]
    fn a_field_another_manager_took_over_does_not_match() {
        // `kubectl patch deployment site --type merge --field-manager hand -p
        // '{"spec":{"replicas":3}}'`: `f:replicas` moved from wasmop-test's entry to hand's.
        let mut replicas = parse(DEPLOYMENT);
        replicas["spec"]["replicas"] = json!(3);
        replicas["metadata"]["managedFields"] = parse(HAND_REPLICAS);
        assert!(!matches(&deployment(), &replicas, MANAGER));
        let mut agreeing = deployment();
        agreeing["spec"]["replicas"] = json!(3);
        assert!(!matches(&agreeing, &replicas, MANAGER), "the value agrees, but applying takes the field back");

        // Then `kubectl patch deployment site --type strategic --field-manager hand -p
        // '{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28-alpine"}]}}}}'`.
        let mut image = replicas.clone();
        container(&mut image)["image"] = json!("nginx:1.28-alpine");
        image["metadata"]["managedFields"] = parse(HAND_IMAGE);
        let mut want = deployment();
        want["spec"]["replicas"] = json!(3);
        assert!(!matches(&want, &image, MANAGER));
        container(&mut want)["image"] = json!("nginx:1.28-alpine");
        assert!(!matches(&want, &image, MANAGER));
    }

    #[test]
    fn a_dropped_field_the_manager_owns_does_not_match() {
        let mut label = deployment();
        remove(&mut label["metadata"]["labels"], "wasmop.dev/dependent");
        assert!(!matches(&label, &parse(DEPLOYMENT), MANAGER));
        let mut replicas = deployment();
        remove(&mut replicas["spec"], "replicas");
        assert!(!matches(&replicas, &parse(DEPLOYMENT), MANAGER));
        let mut env = deployment();
        remove(container(&mut env), "env");
        assert!(!matches(&env, &parse(DEPLOYMENT), MANAGER));
        let mut port = deployment();
        container(&mut port)["ports"].as_array_mut().expect("ports").pop();
        assert!(!matches(&port, &parse(DEPLOYMENT), MANAGER));
        let mut data = config_map();
        data["data"] = json!({});
        assert!(!matches(&data, &parse(CONFIG_MAP), MANAGER));
        let mut finalizer = finalizers();
        finalizer["metadata"]["finalizers"] = json!(["wasmop.dev/cleanup"]);
        assert!(!matches(&finalizer, &parse(FINALIZERS), MANAGER));
    }

    #[test]
    fn an_added_field_does_not_match() {
        let mut label = deployment();
        label["metadata"]["labels"]["tier"] = json!("web");
        assert!(!matches(&label, &parse(DEPLOYMENT), MANAGER));
        let mut defaulted = deployment();
        container(&mut defaulted)["imagePullPolicy"] = json!("IfNotPresent");
        assert!(!matches(&defaulted, &parse(DEPLOYMENT), MANAGER), "the value is there, but not owned");
        let mut port = service();
        port["spec"]["ports"].as_array_mut().expect("ports").push(json!({ "name": "https", "port": 443 }));
        assert!(!matches(&port, &parse(SERVICE), MANAGER));
        let mut finalizer = finalizers();
        finalizer["metadata"]["finalizers"].as_array_mut().expect("finalizers").push(json!("x.dev/more"));
        assert!(!matches(&finalizer, &parse(FINALIZERS), MANAGER));
    }

    #[test]
    fn server_defaults_do_not_prevent_a_match() {
        let actual = parse(DEPLOYMENT);
        let spec = &actual["spec"];
        let pod = &spec["template"]["spec"];
        assert_eq!(spec["strategy"]["type"], "RollingUpdate");
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(pod["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(pod["volumes"][0]["configMap"]["defaultMode"], 420);
        assert!(matches(&deployment(), &actual, MANAGER));
        let service_ports = &parse(SERVICE)["spec"]["ports"];
        assert_eq!(service_ports[0]["protocol"], "TCP");
        assert!(matches(&service(), &parse(SERVICE), MANAGER));
    }

    #[test]
    fn values_the_server_stores_otherwise_match() {
        // Stored: no `args`, `workingDir`, env `value`, `hostPort`, `minReadySeconds`, `paused`,
        // `hostNetwork`, `nodeSelector`, `capabilities.drop`, nor the atomic selector's
        // `matchExpressions` and the tolerations' empty `value` and `effect`; a defaulted
        // `strategy`; the label `tier: ""`; quantities `250m`, `1Gi`, `1`, `1536Mi` and a
        // `sizeLimit` of `1Gi`. Applying `defaults()` again did not change the resourceVersion.
        let actual = parse(DEFAULTS);
        assert_eq!(actual["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"], "250m");
        assert!(matches(&defaults(), &actual, MANAGER));

        let mut cpu = defaults();
        container(&mut cpu)["resources"]["requests"]["cpu"] = json!("300m");
        assert!(!matches(&cpu, &actual, MANAGER));
        let mut memory = defaults();
        container(&mut memory)["resources"]["limits"]["memory"] = json!("1536M");
        assert!(!matches(&memory, &actual, MANAGER), "M is 10^6, Mi 2^20");
        let mut size = defaults();
        size["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = json!("1G");
        assert!(!matches(&size, &actual, MANAGER));
        let mut host_port = defaults();
        container(&mut host_port)["ports"][0]["hostPort"] = json!(8080);
        assert!(!matches(&host_port, &actual, MANAGER));
        let mut toleration = defaults();
        toleration["spec"]["template"]["spec"]["tolerations"][0]["effect"] = json!("NoSchedule");
        assert!(!matches(&toleration, &actual, MANAGER));
        let mut tier = defaults();
        tier["metadata"]["labels"]["tier"] = json!("web");
        assert!(!matches(&tier, &actual, MANAGER));
    }

    #[test]
    fn quantities_compare_by_amount_only_where_they_are_quantities() {
        let mut actual = parse(CONFIG_MAP);
        actual["data"]["index.html"] = json!("1");
        let mut desired = config_map();
        desired["data"]["index.html"] = json!("1000m");
        assert!(!matches(&desired, &actual, MANAGER));
    }

    #[test]
    fn a_null_matches_only_nothing() {
        // Applied with `progressDeadlineSeconds: 300`, then `null`: the server reset it to the
        // default 600 and the manager still owns it. From the object alone, 600 cannot be told
        // from a value left over, so the host applies again (which changes nothing here).
        let actual = parse(NULLS);
        assert_eq!(actual["spec"]["progressDeadlineSeconds"], 600);
        assert!(!matches(&nulls(), &actual, MANAGER));
        let mut explicit = nulls();
        explicit["spec"]["progressDeadlineSeconds"] = json!(600);
        assert!(matches(&explicit, &actual, MANAGER));
        let mut absent = nulls();
        remove(&mut absent["spec"], "progressDeadlineSeconds");
        assert!(!matches(&absent, &actual, MANAGER), "the manager owns it: applying without it releases it");
    }

    #[test]
    fn an_empty_map_the_manager_no_longer_owns_does_not_match() {
        // After the first apply of `defaults()` kube-controller-manager's revision annotation
        // took `metadata.annotations` (`.`) and wasmop-test's entry lacked `f:annotations`;
        // applying again took it back and changed the resourceVersion.
        let mut actual = parse(DEFAULTS);
        remove(&mut actual["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"], "f:annotations");
        assert!(!matches(&defaults(), &actual, MANAGER));
    }

    #[test]
    fn items_of_lists_keyed_by_several_fields_are_told_apart() {
        // `k:{"port":53,"protocol":"TCP"}` and `k:{"port":53,"protocol":"UDP"}`; port 80 without
        // `protocol` is `k:{"port":80,"protocol":"TCP"}`.
        let actual = parse(SERVICE);
        let mut explicit = service();
        explicit["spec"]["ports"][0]["protocol"] = json!("TCP");
        // Applying this added `f:protocol` to the entry and changed the resourceVersion.
        assert!(!matches(&explicit, &actual, MANAGER), "the value is there, but not owned");
        let mut udp = service();
        udp["spec"]["ports"][2]["targetPort"] = json!(53);
        assert!(!matches(&udp, &actual, MANAGER));
        let mut renamed = service();
        renamed["spec"]["ports"][1]["name"] = json!("dns-udp");
        renamed["spec"]["ports"][2]["name"] = json!("dns-tcp");
        assert!(!matches(&renamed, &actual, MANAGER));
        let mut protocol = service();
        protocol["spec"]["ports"][0]["protocol"] = json!("UDP");
        assert!(!matches(&protocol, &actual, MANAGER));
        let mut both_tcp = service();
        both_tcp["spec"]["ports"][2]["protocol"] = json!("TCP");
        assert!(!matches(&both_tcp, &actual, MANAGER));

        // Container ports: `k:{"containerPort":80,"protocol":"TCP"}`.
        let mut port = deployment();
        container(&mut port)["ports"][0]["containerPort"] = json!(8080);
        assert!(!matches(&port, &parse(DEPLOYMENT), MANAGER));
        let mut sctp = deployment();
        container(&mut sctp)["ports"][1]["protocol"] = json!("SCTP");
        assert!(!matches(&sctp, &parse(DEPLOYMENT), MANAGER));
    }

    #[test]
    fn a_reordered_list_does_not_match() {
        // Applying a Deployment's containers as [b, a] after [a, b] reordered them (generation
        // 2), so the order is part of what the host applies.
        let mut ports = deployment();
        container(&mut ports)["ports"].as_array_mut().expect("ports").reverse();
        assert!(!matches(&ports, &parse(DEPLOYMENT), MANAGER));
        let mut service_ports = service();
        service_ports["spec"]["ports"].as_array_mut().expect("ports").swap(1, 2);
        assert!(!matches(&service_ports, &parse(SERVICE), MANAGER));
    }

    #[test]
    fn without_an_apply_entry_of_the_manager_nothing_matches() {
        assert!(!matches(&deployment(), &parse(DEPLOYMENT), "wasmop-other"));
        assert!(!matches(&deployment(), &parse(DEPLOYMENT), "kube-controller-manager"), "an Update entry");
        let mut unmanaged = parse(DEPLOYMENT);
        remove(&mut unmanaged["metadata"], "managedFields");
        assert!(!matches(&deployment(), &unmanaged, MANAGER));
        let mut status = parse(DEPLOYMENT);
        status["metadata"]["managedFields"][0]["subresource"] = json!("status");
        assert!(!matches(&deployment(), &status, MANAGER), "an entry for the status subresource");
        let mut updated = parse(DEPLOYMENT);
        updated["metadata"]["managedFields"][0]["operation"] = json!("Update");
        assert!(!matches(&deployment(), &updated, MANAGER));
    }

    #[test]
    fn status_and_identity_are_ignored() {
        let mut desired = deployment();
        desired["status"] = json!({ "replicas": 7 });
        assert!(matches(&desired, &parse(DEPLOYMENT), MANAGER));
        let bare = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "x" } });
        let actual = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "x",
            "managedFields": [{ "manager": MANAGER, "operation": "Apply", "fieldsV1": {} }] } });
        assert!(matches(&bare, &actual, MANAGER));
        assert!(!matches(&json!("not an object"), &actual, MANAGER));
    }

    #[test]
    fn index_items_are_found_by_position() {
        let actual = json!({
            "metadata": { "managedFields": [{ "manager": "m", "operation": "Apply",
                "fieldsV1": { "f:spec": { "f:items": { "i:0": { "f:x": {} }, "i:1": { "f:x": {} } } } } }] },
            "spec": { "items": [{ "x": 1, "y": 2 }, { "x": 3 }] }
        });
        assert!(matches(&json!({ "spec": { "items": [{ "x": 1 }, { "x": 3 }] } }), &actual, "m"));
        assert!(!matches(&json!({ "spec": { "items": [{ "x": 3 }, { "x": 1 }] } }), &actual, "m"));
        assert!(!matches(&json!({ "spec": { "items": [{ "x": 1 }] } }), &actual, "m"));
    }

    #[test]
    fn quantities_parse() {
        assert_eq!(parse_quantity("500m"), Some(0.5));
        assert_eq!(parse_quantity("0.5"), Some(0.5));
        assert_eq!(parse_quantity(".5"), Some(0.5));
        assert_eq!(parse_quantity("+1.5Gi"), parse_quantity("1536Mi"));
        assert_eq!(parse_quantity("1Gi"), Some(1_073_741_824.0));
        assert_eq!(parse_quantity("128e6"), parse_quantity("128M"));
        assert_eq!(parse_quantity("1E"), Some(1e18));
        assert_eq!(parse_quantity("1E-3"), parse_quantity("1m"));
        assert_eq!(parse_quantity("100n"), parse_quantity("0.1u"));
        assert_eq!(parse_quantity("-2k"), Some(-2000.0));
        for invalid in ["", "Gi", "1.2.3", "1X", "1e", "1e+", "--1", "1 Gi", "inf", "NaN", "0x10"] {
            assert_eq!(parse_quantity(invalid), None, "{invalid}");
        }
    }

    /// `config_map()` as applied.
    const CONFIG_MAP: &str = r#"{
      "apiVersion": "v1",
      "data": {"index.html": "<h1>hello</h1>"},
      "kind": "ConfigMap",
      "metadata": {
        "labels": {"wasmop.dev/dependent": "configmap", "wasmop.dev/managed-by": "test"},
        "managedFields": [
          {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
              "f:data": {"f:index.html": {}},
              "f:metadata": {
                "f:labels": {"f:wasmop.dev/dependent": {}, "f:wasmop.dev/managed-by": {}},
                "f:ownerReferences": {"k:{\"uid\":\"3870afaf-fb70-4c65-b4f2-834fe602e7e1\"}": {}}
              }
            },
            "manager": "wasmop-test",
            "operation": "Apply",
            "time": "2026-11-22T10:19:43Z"
          }
        ],
        "name": "site-html",
        "namespace": "matcher-fixtures",
        "ownerReferences": [
          {
            "apiVersion": "v1",
            "blockOwnerDeletion": true,
            "controller": true,
            "kind": "ConfigMap",
            "name": "site-owner",
            "uid": "3870afaf-fb70-4c65-b4f2-834fe602e7e1"
          }
        ],
        "resourceVersion": "12299",
        "uid": "f13693b1-8f1c-40ff-9909-428ec5324c21"
      }
    }"#;

    /// `deployment()` as applied, with kube-controller-manager's status entry.
    const DEPLOYMENT: &str = r#"{
      "apiVersion": "apps/v1",
      "kind": "Deployment",
      "metadata": {
        "annotations": {"deployment.kubernetes.io/revision": "1"},
        "generation": 1,
        "labels": {
          "app.kubernetes.io/instance": "site",
          "app.kubernetes.io/name": "webpage",
          "wasmop.dev/dependent": "deployment",
          "wasmop.dev/managed-by": "test"
        },
        "managedFields": [
          {
            "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
              "f:metadata": {
                "f:labels": {
                  "f:app.kubernetes.io/instance": {},
                  "f:app.kubernetes.io/name": {},
                  "f:wasmop.dev/dependent": {},
                  "f:wasmop.dev/managed-by": {}
                },
                "f:ownerReferences": {"k:{\"uid\":\"3870afaf-fb70-4c65-b4f2-834fe602e7e1\"}": {}}
              },
              "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                  "f:metadata": {"f:labels": {"f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/name": {}}},
                  "f:spec": {
                    "f:containers": {
                      "k:{\"name\":\"nginx\"}": {
                        ".": {},
                        "f:args": {},
                        "f:env": {"k:{\"name\":\"MODE\"}": {".": {}, "f:name": {}, "f:value": {}}},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {
                          "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}},
                          "k:{\"containerPort\":9113,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}
                        },
                        "f:volumeMounts": {
                          "k:{\"mountPath\":\"/usr/share/nginx/html\"}": {".": {}, "f:mountPath": {}, "f:name": {}}
                        }
                      }
                    },
                    "f:volumes": {"k:{\"name\":\"html\"}": {".": {}, "f:configMap": {"f:name": {}}, "f:name": {}}}
                  }
                }
              }
            },
            "manager": "wasmop-test",
            "operation": "Apply",
            "time": "2026-11-22T10:19:43Z"
          },
          {
            "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
              "f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}},
              "f:status": {
                "f:observedGeneration": {},
                "f:replicas": {},
                "f:terminatingReplicas": {},
                "f:unavailableReplicas": {},
                "f:updatedReplicas": {}
              }
            },
            "manager": "kube-controller-manager",
            "operation": "Update",
            "subresource": "status",
            "time": "2026-11-22T10:19:43Z"
          }
        ],
        "name": "site",
        "namespace": "matcher-fixtures",
        "ownerReferences": [
          {
            "apiVersion": "v1",
            "blockOwnerDeletion": true,
            "controller": true,
            "kind": "ConfigMap",
            "name": "site-owner",
            "uid": "3870afaf-fb70-4c65-b4f2-834fe602e7e1"
          }
        ],
        "resourceVersion": "12309",
        "uid": "8d735dfe-4dba-4971-bf49-079db88b0df6"
      },
      "spec": {
        "progressDeadlineSeconds": 600,
        "replicas": 1,
        "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app.kubernetes.io/instance": "site", "app.kubernetes.io/name": "webpage"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
        "template": {
          "metadata": {"labels": {"app.kubernetes.io/instance": "site", "app.kubernetes.io/name": "webpage"}},
          "spec": {
            "containers": [
              {
                "args": ["nginx", "-g", "daemon off;"],
                "env": [{"name": "MODE", "value": "static"}],
                "image": "nginx:1.27-alpine",
                "imagePullPolicy": "IfNotPresent",
                "name": "nginx",
                "ports": [
                  {"containerPort": 80, "name": "http", "protocol": "TCP"},
                  {"containerPort": 9113, "name": "metrics", "protocol": "TCP"}
                ],
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"mountPath": "/usr/share/nginx/html", "name": "html"}]
              }
            ],
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30,
            "volumes": [{"configMap": {"defaultMode": 420, "name": "site-html"}, "name": "html"}]
          }
        }
      },
      "status": {
        "observedGeneration": 1,
        "replicas": 1,
        "terminatingReplicas": 0,
        "unavailableReplicas": 1,
        "updatedReplicas": 1
      }
    }"#;

    /// `service()` as applied.
    const SERVICE: &str = r#"{
      "apiVersion": "v1",
      "kind": "Service",
      "metadata": {
        "labels": {
          "app.kubernetes.io/instance": "site",
          "app.kubernetes.io/name": "webpage",
          "wasmop.dev/dependent": "service",
          "wasmop.dev/managed-by": "test"
        },
        "managedFields": [
          {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
              "f:metadata": {
                "f:labels": {
                  "f:app.kubernetes.io/instance": {},
                  "f:app.kubernetes.io/name": {},
                  "f:wasmop.dev/dependent": {},
                  "f:wasmop.dev/managed-by": {}
                },
                "f:ownerReferences": {"k:{\"uid\":\"3870afaf-fb70-4c65-b4f2-834fe602e7e1\"}": {}}
              },
              "f:spec": {
                "f:ports": {
                  "k:{\"port\":53,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}},
                  "k:{\"port\":53,\"protocol\":\"UDP\"}": {".": {}, "f:name": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}},
                  "k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}, "f:targetPort": {}}
                },
                "f:selector": {}
              }
            },
            "manager": "wasmop-test",
            "operation": "Apply",
            "time": "2026-11-22T10:19:44Z"
          }
        ],
        "name": "site",
        "namespace": "matcher-fixtures",
        "ownerReferences": [
          {
            "apiVersion": "v1",
            "blockOwnerDeletion": true,
            "controller": true,
            "kind": "ConfigMap",
            "name": "site-owner",
            "uid": "3870afaf-fb70-4c65-b4f2-834fe602e7e1"
          }
        ],
        "resourceVersion": "12311",
        "uid": "065d9619-90c4-498e-baa8-acd7e7fd279b"
      },
      "spec": {
        "clusterIP": "10.0.0.131",
        "clusterIPs": ["10.0.0.131"],
        "internalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "ports": [
          {"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"},
          {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353},
          {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353}
        ],
        "selector": {"app.kubernetes.io/instance": "site", "app.kubernetes.io/name": "webpage"},
        "sessionAffinity": "None",
        "type": "ClusterIP"
      }
    }"#;

    /// `finalizers()` as applied: a set, `v:` items.
    const FINALIZERS: &str = r#"{
      "apiVersion": "v1",
      "data": {"n": "1"},
      "kind": "ConfigMap",
      "metadata": {
        "finalizers": ["wasmop.dev/cleanup", "example.com/keep"],
        "managedFields": [
          {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
              "f:data": {"f:n": {}},
              "f:metadata": {"f:finalizers": {"v:\"example.com/keep\"": {}, "v:\"wasmop.dev/cleanup\"": {}}}
            },
            "manager": "wasmop-test",
            "operation": "Apply",
            "time": "2026-11-22T10:20:50Z"
          }
        ],
        "name": "fin",
        "namespace": "matcher-fixtures",
        "resourceVersion": "12367",
        "uid": "777fd474-1f49-48ed-bfeb-ba73c60cefbc"
      }
    }"#;

    /// `defaults()` as applied twice (see `an_empty_map_the_manager_no_longer_owns_does_not_match`).
    const DEFAULTS: &str = r#"{
      "apiVersion": "apps/v1",
      "kind": "Deployment",
      "metadata": {
        "annotations": {"deployment.kubernetes.io/revision": "1"},
        "generation": 1,
        "labels": {"app": "defaults", "tier": ""},
        "managedFields": [
          {
            "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
              "f:metadata": {"f:annotations": {}, "f:labels": {"f:app": {}, "f:tier": {}}},
              "f:spec": {
                "f:minReadySeconds": {},
                "f:paused": {},
                "f:replicas": {},
                "f:selector": {},
                "f:strategy": {},
                "f:template": {
                  "f:metadata": {"f:labels": {"f:app": {}}},
                  "f:spec": {
                    "f:containers": {
                      "k:{\"name\":\"app\"}": {
                        ".": {},
                        "f:args": {},
                        "f:env": {"k:{\"name\":\"DEBUG\"}": {".": {}, "f:name": {}, "f:value": {}}},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {
                          "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:hostPort": {}}
                        },
                        "f:resources": {
                          "f:limits": {"f:cpu": {}, "f:memory": {}},
                          "f:requests": {"f:cpu": {}, "f:memory": {}}
                        },
                        "f:securityContext": {"f:capabilities": {"f:add": {}, "f:drop": {}}},
                        "f:workingDir": {}
                      },
                      "k:{\"name\":\"sidecar\"}": {".": {}, "f:image": {}, "f:name": {}}
                    },
                    "f:hostNetwork": {},
                    "f:nodeSelector": {},
                    "f:tolerations": {},
                    "f:volumes": {
                      "k:{\"name\":\"scratch\"}": {".": {}, "f:emptyDir": {"f:sizeLimit": {}}, "f:name": {}}
                    }
                  }
                }
              }
            },
            "manager": "wasmop-test",
            "operation": "Apply",
            "time": "2026-11-22T10:22:50Z"
          }
        ],
        "name": "defaults",
        "namespace": "matcher-fixtures",
        "resourceVersion": "12491",
        "uid": "3a37fdb4-a407-4f13-896f-70744d3ace05"
      },
      "spec": {
        "progressDeadlineSeconds": 600,
        "replicas": 2,
        "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "defaults"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
        "template": {
          "metadata": {"labels": {"app": "defaults"}},
          "spec": {
            "containers": [
              {
                "env": [{"name": "DEBUG"}],
                "image": "busybox:1.37",
                "imagePullPolicy": "IfNotPresent",
                "name": "app",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {
                  "limits": {"cpu": "1", "memory": "1536Mi"},
                  "requests": {"cpu": "250m", "memory": "1Gi"}
                },
                "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
              },
              {
                "image": "busybox:1.37",
                "imagePullPolicy": "IfNotPresent",
                "name": "sidecar",
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
              }
            ],
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "volumes": [{"emptyDir": {"sizeLimit": "1Gi"}, "name": "scratch"}]
          }
        }
      }
    }"#;

    /// `nulls()` as applied after the same with `progressDeadlineSeconds: 300`.
    const NULLS: &str = r#"{
      "apiVersion": "apps/v1",
      "kind": "Deployment",
      "metadata": {
        "annotations": {"deployment.kubernetes.io/revision": "1"},
        "generation": 2,
        "managedFields": [
          {
            "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
              "f:spec": {
                "f:progressDeadlineSeconds": {},
                "f:selector": {},
                "f:template": {
                  "f:metadata": {"f:labels": {"f:app": {}}},
                  "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}
                }
              }
            },
            "manager": "wasmop-test",
            "operation": "Apply",
            "time": "2026-11-22T10:21:59Z"
          }
        ],
        "name": "nulls",
        "namespace": "matcher-fixtures",
        "resourceVersion": "12426",
        "uid": "356ba968-f758-4d67-b059-640c2f310aa4"
      },
      "spec": {
        "progressDeadlineSeconds": 600,
        "replicas": 1,
        "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "nulls"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
        "template": {
          "metadata": {"labels": {"app": "nulls"}},
          "spec": {
            "containers": [
              {
                "image": "busybox:1.37",
                "imagePullPolicy": "IfNotPresent",
                "name": "app",
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
              }
            ],
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30
          }
        }
      }
    }"#;

    /// `metadata.managedFields` of `DEPLOYMENT` after hand's merge patch of `spec.replicas` to 3
    /// (kube-controller-manager's entry left out).
    const HAND_REPLICAS: &str = r#"[
      {
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
          "f:metadata": {
            "f:labels": {
              "f:app.kubernetes.io/instance": {},
              "f:app.kubernetes.io/name": {},
              "f:wasmop.dev/dependent": {},
              "f:wasmop.dev/managed-by": {}
            },
            "f:ownerReferences": {"k:{\"uid\":\"3870afaf-fb70-4c65-b4f2-834fe602e7e1\"}": {}}
          },
          "f:spec": {
            "f:selector": {},
            "f:template": {
              "f:metadata": {"f:labels": {"f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/name": {}}},
              "f:spec": {
                "f:containers": {
                  "k:{\"name\":\"nginx\"}": {
                    ".": {},
                    "f:args": {},
                    "f:env": {"k:{\"name\":\"MODE\"}": {".": {}, "f:name": {}, "f:value": {}}},
                    "f:image": {},
                    "f:name": {},
                    "f:ports": {
                      "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}},
                      "k:{\"containerPort\":9113,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}
                    },
                    "f:volumeMounts": {
                      "k:{\"mountPath\":\"/usr/share/nginx/html\"}": {".": {}, "f:mountPath": {}, "f:name": {}}
                    }
                  }
                },
                "f:volumes": {"k:{\"name\":\"html\"}": {".": {}, "f:configMap": {"f:name": {}}, "f:name": {}}}
              }
            }
          }
        },
        "manager": "wasmop-test",
        "operation": "Apply",
        "time": "2026-11-22T10:19:43Z"
      },
      {
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
        "manager": "hand",
        "operation": "Update",
        "time": "2026-11-22T10:19:50Z"
      }
    ]"#;

    /// `metadata.managedFields` after hand's strategic merge patch of the image to
    /// `nginx:1.28-alpine`, after `HAND_REPLICAS` (kube-controller-manager's entry left out).
    const HAND_IMAGE: &str = r#"[
      {
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
          "f:metadata": {
            "f:labels": {
              "f:app.kubernetes.io/instance": {},
              "f:app.kubernetes.io/name": {},
              "f:wasmop.dev/dependent": {},
              "f:wasmop.dev/managed-by": {}
            },
            "f:ownerReferences": {"k:{\"uid\":\"3870afaf-fb70-4c65-b4f2-834fe602e7e1\"}": {}}
          },
          "f:spec": {
            "f:selector": {},
            "f:template": {
              "f:metadata": {"f:labels": {"f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/name": {}}},
              "f:spec": {
                "f:containers": {
                  "k:{\"name\":\"nginx\"}": {
                    ".": {},
                    "f:args": {},
                    "f:env": {"k:{\"name\":\"MODE\"}": {".": {}, "f:name": {}, "f:value": {}}},
                    "f:name": {},
                    "f:ports": {
                      "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}},
                      "k:{\"containerPort\":9113,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}
                    },
                    "f:volumeMounts": {
                      "k:{\"mountPath\":\"/usr/share/nginx/html\"}": {".": {}, "f:mountPath": {}, "f:name": {}}
                    }
                  }
                },
                "f:volumes": {"k:{\"name\":\"html\"}": {".": {}, "f:configMap": {"f:name": {}}, "f:name": {}}}
              }
            }
          }
        },
        "manager": "wasmop-test",
        "operation": "Apply",
        "time": "2026-11-22T10:19:43Z"
      },
      {
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
          "f:spec": {
            "f:replicas": {},
            "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {"f:image": {}}}}}
          }
        },
        "manager": "hand",
        "operation": "Update",
        "time": "2026-11-22T10:19:56Z"
      }
    ]"#;
}
