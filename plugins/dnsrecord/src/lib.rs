//! DnsRecord (`sample.wasmop.dev/v1`): a record in an external DNS service, kept in shape as an
//! external dependent. The host polls the service through `fetch` every few seconds (so a record
//! changed out of band is put back), calls `apply_external` only when the record differs,
//! tracks the ID the service gave it in a ConfigMap owned by the DnsRecord, and deletes it
//! through the finalizer. The service's token comes from the Secret `dns-api-token`; the
//! service's webhooks (`POST /plugins/dnsrecord/events` on the host) reconcile the records
//! they name.

use serde::{Deserialize, Serialize};
use wasmop_guest::http::{HttpError, Request};
use wasmop_guest::schemars::JsonSchema;
use wasmop_guest::serde_json::{Value, json};
use wasmop_guest::{
    Config, Context, Crd, Desired, Error, External, ExternalDependent, HttpGrant, Inbound, Kind, Origin, Outcome,
    Polling, PrimaryRef, Reconciler, Resource, SecretKey, Tracked,
};

/// The DNS service the plugin may call (the host refuses every other origin).
pub const DNS_API: &str = "http://127.0.0.1:18053";

/// What a DnsRecord asks for.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
pub struct Spec {
    /// The zone, e.g. `example.com`.
    pub zone: String,
    /// The record's name in the zone, e.g. `www`.
    pub name: String,
    /// `A`, `AAAA`, `CNAME`, `TXT`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The value, e.g. `10.0.0.1`.
    pub value: String,
    /// Time to live in seconds.
    #[serde(default = "default_ttl")]
    pub ttl: u32,
}

fn default_ttl() -> u32 {
    300
}

/// What the plugin reports.
#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
pub struct Status {
    /// The ID the DNS service gave the record.
    pub id: Option<String>,
    /// The record's full name.
    pub fqdn: String,
}

/// The plugin.
pub struct DnsRecordReconciler;

/// The record a DnsRecord wants, as the service holds it (without its ID).
fn record(spec: &Spec) -> Value {
    json!({ "name": spec.name, "type": spec.type_, "value": spec.value, "ttl": spec.ttl })
}

/// A record the service returned, as the external object of the DnsRecord.
fn external(spec: &Spec, found: Value) -> External {
    let id = found["id"].as_str().map(str::to_owned);
    let mut object = found;
    if let Some(fields) = object.as_object_mut() {
        fields.remove("id");
    }
    External { dependent: "record".into(), key: spec.name.clone(), id, object }
}

fn records(spec: &Spec) -> String {
    format!("{DNS_API}/zones/{}/records", spec.zone)
}

impl Reconciler for DnsRecordReconciler {
    type Primary = Resource<Spec>;

    // ANCHOR: config
    fn config() -> Config {
        let token = SecretKey::new("dns-api-token", "token");
        Config::new("dnsrecord", Kind::namespaced("sample.wasmop.dev", "v1", "DnsRecord"))
            .http(
                HttpGrant::new()
                    .origin(Origin::parse(DNS_API).secret_header("authorization", token, Some("Bearer ")))
                    .timeout(std::time::Duration::from_secs(2)),
            )
            .polling(Polling::per_resource(std::time::Duration::from_secs(2)))
            .external_dependent(ExternalDependent::new("record"))
            .inbound(Inbound::new(SecretKey::new("dns-webhook-token", "token")))
    }
    // ANCHOR_END: config

    fn crd() -> Option<Crd> {
        Some(Crd::of::<Spec, Status>(&Self::config().primary))
    }

    /// The record by its tracked ID, else (created before its ID was recorded) by name.
    fn fetch(primary: &Self::Primary, tracked: &Tracked, _: &Context) -> Result<Vec<External>, String> {
        let spec = &primary.spec;
        if let Some(id) = tracked.id("record", &spec.name) {
            let response = Request::get(format!("{}/{id}", records(spec))).send().map_err(|e| e.to_string())?;
            return match response.status {
                200 => Ok(vec![external(spec, response.json().map_err(|e| e.to_string())?)]),
                404 => Ok(Vec::new()),
                status => Err(format!("the DNS service answered {status}: {}", response.text())),
            };
        }
        let response = Request::get(records(spec)).send().map_err(|e| e.to_string())?;
        if !response.is_success() {
            return Err(format!("the DNS service answered {}: {}", response.status, response.text()));
        }
        let all: Vec<Value> = response.json().map_err(|e| e.to_string())?;
        Ok(all
            .into_iter()
            .filter(|r| r["name"] == spec.name && r["type"] == spec.type_)
            .map(|r| external(spec, r))
            .take(1)
            .collect())
    }

    fn desired(primary: &Self::Primary, _: &Context) -> Result<Vec<Desired>, Error> {
        Ok(vec![Desired::external("record", &primary.spec.name, &record(&primary.spec))])
    }

    fn apply_external(
        primary: &Self::Primary,
        desired: &External,
        _actual: Option<&External>,
        _: &Context,
    ) -> Result<External, Error> {
        let spec = &primary.spec;
        let request = match &desired.id {
            Some(id) => Request::put(format!("{}/{id}", records(spec))),
            None => Request::post(records(spec)),
        };
        let response = request.json(&desired.object).send()?;
        match response.status {
            200 | 201 => Ok(external(spec, response.json()?)),
            400..=499 => Err(Error::permanent(format!("the DNS service refused the record: {}", response.text()))),
            status => Err(HttpError(format!("the DNS service answered {status}")).into()),
        }
    }

    fn delete_external(primary: &Self::Primary, actual: &External, _: &Context) -> Result<(), Error> {
        let Some(id) = &actual.id else { return Ok(()) };
        let response = Request::delete(format!("{}/{id}", records(&primary.spec))).send()?;
        match response.status {
            200 | 204 | 404 => Ok(()),
            status => Err(HttpError(format!("the DNS service answered {status} to a delete")).into()),
        }
    }

    /// The service's webhook names the DnsRecord: `{"namespace": "...", "name": "..."}`.
    fn map_inbound(payload: &Value, _: &Context) -> Result<Vec<PrimaryRef>, String> {
        match (payload["namespace"].as_str(), payload["name"].as_str()) {
            (Some(namespace), Some(name)) => Ok(vec![PrimaryRef::namespaced(namespace, name)]),
            _ => Err("the payload needs a namespace and a name".into()),
        }
    }

    fn reconcile(primary: Self::Primary, ctx: &Context) -> Result<Outcome, Error> {
        let fqdn = format!("{}.{}", primary.spec.name, primary.spec.zone);
        match ctx.external("record").next() {
            Some(record) => {
                Ok(Outcome::ready(format!("{fqdn} is served")).status(Status { id: record.id.clone(), fqdn }))
            }
            None => Ok(Outcome::not_ready(format!("{fqdn} is not in the DNS service yet"))),
        }
    }
}

wasmop_guest::export!(DnsRecordReconciler);

#[cfg(test)]
mod tests {
    use wasmop_guest::testing::FakeHost;

    use super::*;

    fn www(value: &str) -> Value {
        json!({ "metadata": { "name": "www", "namespace": "a", "generation": 1 },
                "spec": { "zone": "example.com", "name": "www", "type": "A", "value": value } })
    }

    #[test]
    fn crd_yaml_is_the_crd_the_types_generate() {
        let checked_in: Value = serde_saphyr::from_str(include_str!("../crd.yaml")).expect("crd.yaml is YAML");
        let generated = DnsRecordReconciler::crd().expect("a CRD").to_value();
        assert!(checked_in == generated, "regenerate crd.yaml: wasmop crd --plugin plugins/dist/dnsrecord.wasm");
    }

    #[test]
    fn creates_the_record_then_reports_its_id() {
        let mut host = FakeHost::new();
        let stable = host.run_until_stable::<DnsRecordReconciler>(&www("10.0.0.1"));
        let record = &host.external()[0];
        assert_eq!(record.object, json!({ "name": "www", "type": "A", "value": "10.0.0.1", "ttl": 300 }));
        assert_eq!(stable.primary()["status"]["id"], json!(record.id.clone().unwrap()));
        assert_eq!(stable.primary()["status"]["fqdn"], "www.example.com");
        // The ID is tracked where a restarted host finds it.
        let tracking = host.objects_of(&Kind::namespaced("", "v1", "ConfigMap"));
        assert_eq!(tracking[0]["metadata"]["name"], "www-dnsrecord-ext");
        assert_eq!(tracking[0]["data"]["record"], format!(r#"{{"www":"{}"}}"#, record.id.clone().unwrap()));
    }

    #[test]
    fn puts_back_a_record_changed_out_of_band_keeping_its_id() {
        let drifted =
            External::new("record", "www", &json!({ "name": "www", "type": "A", "value": "6.6.6.6", "ttl": 300 }))
                .with_id("rec-7");
        let mut host = FakeHost::new().with_external(&[drifted]);
        host.run_until_stable::<DnsRecordReconciler>(&www("10.0.0.1"));
        assert_eq!(host.external().len(), 1);
        assert_eq!(host.external()[0].id.as_deref(), Some("rec-7"));
        assert_eq!(host.external()[0].object["value"], "10.0.0.1");
    }

    #[test]
    fn the_services_webhook_names_the_record_to_reconcile() {
        let host = FakeHost::new();
        let named = host.map_inbound::<DnsRecordReconciler>(&json!({ "namespace": "a", "name": "www" }));
        assert_eq!(named.unwrap(), [PrimaryRef::namespaced("a", "www")]);
        assert!(host.map_inbound::<DnsRecordReconciler>(&json!({ "zone": "example.com" })).is_err());
    }
}
