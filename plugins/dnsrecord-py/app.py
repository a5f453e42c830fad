"""DnsRecord (sample.wasmop.dev/v1) in Python: a record in a DNS service, kept in shape as an external dependent
as the Rust sample (plugins/dnsrecord) keeps it: polled every 2 s, put back when changed, deleted with the primary."""

from dataclasses import dataclass

from wasmop import (Config, Desired, Error, External, ExternalDependent, HttpGrant, Inbound, Kind, Origin, Outcome,
                    Polling, PrimaryRef, Resource, SecretKey, Tracked, export)
from wasmop.http import HttpError, Request

DNS_API = "http://127.0.0.1:18053"


@dataclass
class Spec:
    zone: str
    name: str
    type: str
    value: str
    ttl: int = 300


def records(spec: Spec, id: str | None = None) -> str:
    return f"{DNS_API}/zones/{spec.zone}/records" + (f"/{id}" if id else "")


def external(spec: Spec, found: dict) -> External:
    return External("record", spec.name, {k: v for k, v in found.items() if k != "id"}, found.get("id"))


class DnsRecordReconciler:
    config = (Config("dnsrecord", Kind.namespaced("sample.wasmop.dev", "v1", "DnsRecord"))
              .http(HttpGrant().timeout(2).origin(Origin.parse(DNS_API).secret_header(
                  "authorization", SecretKey("dns-api-token", "token"), "Bearer ")))
              .polling(Polling.per_resource(2)).external_dependent(ExternalDependent("record"))
              .inbound(Inbound(SecretKey("dns-webhook-token", "token"))))

    def fetch(self, record: Resource[Spec], tracked: Tracked, ctx) -> list[External]:
        s, id = record.spec, tracked.id("record", record.spec.name)
        response = Request.get(records(s, id)).send()  # by its tracked ID, else among the zone's by name
        if response.status == 404 and id:
            return []
        if not response.is_success():
            raise HttpError(f"the DNS service answered {response.status}: {response.text()}")
        found = [response.json()] if id else [r for r in response.json() if (r["name"], r["type"]) == (s.name, s.type)]
        return [external(s, r) for r in found[:1]]

    def desired(self, record: Resource[Spec], ctx) -> list[Desired]:
        s = record.spec
        return [Desired.external("record", s.name, {"name": s.name, "type": s.type, "value": s.value, "ttl": s.ttl})]

    # ANCHOR: apply
    def apply_external(self, record: Resource[Spec], desired: External, actual, ctx) -> External:
        request = Request("PUT" if desired.id else "POST", records(record.spec, desired.id))
        response = request.json(desired.object).send()
        if 400 <= response.status < 500:
            raise Error.permanent(f"the DNS service refused the record: {response.text()}")
        if response.status not in (200, 201):
            raise HttpError(f"the DNS service answered {response.status}")
        return external(record.spec, response.json())
    # ANCHOR_END: apply

    def delete_external(self, record: Resource[Spec], actual: External, ctx) -> None:
        status = Request.delete(records(record.spec, actual.id)).send().status if actual.id else 204
        if status not in (200, 204, 404):
            raise HttpError(f"the DNS service answered {status} to a delete")

    def map_inbound(self, payload: dict, ctx) -> list[PrimaryRef]:  # the service's webhook names the record
        return [PrimaryRef.namespaced(payload["namespace"], payload["name"])]

    def reconcile(self, record: Resource[Spec], ctx) -> Outcome:
        fqdn = f"{record.spec.name}.{record.spec.zone}"
        if not (found := ctx.external("record")):
            return Outcome.not_ready(f"{fqdn} is not in the DNS service yet")
        return Outcome.ready(f"{fqdn} is served").status({"id": found[0].id, "fqdn": fqdn})


Reconciler = export(DnsRecordReconciler)
