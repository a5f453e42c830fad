// DnsRecord (`sample.wasmop.dev/v1`) in TypeScript: a record in a DNS service, kept in shape as an
// external dependent as the Rust sample (plugins/dnsrecord) keeps it, through the SDK's HTTP client:
// polled every 2 s, put back when changed out of band, deleted with the primary.
import { Config, Desired, External, ExternalDependent, HttpGrant, Inbound, Kind, Origin } from "@wasmop/guest";
import { Outcome, Polling, PrimaryRef, ReconcileError, SecretKey, http, requireFields } from "@wasmop/guest";
import type { Reconciler, Resource } from "@wasmop/guest";

/** What a DnsRecord asks for. */
export interface Spec { zone: string; name: string; type: string; value: string; ttl?: number }

const DNS_API = "http://127.0.0.1:18053";
const records = (spec: Spec, id?: string) => `${DNS_API}/zones/${spec.zone}/records${id ? `/${id}` : ""}`;
const answered = (status: number) => new http.HttpError(`the DNS service answered ${status}`);

/** A record the service returned, as the DnsRecord's external object. */
export function external(spec: Spec, { id, ...record }: Record<string, unknown>): External {
  const found = new External("record", spec.name, record);
  return typeof id === "string" ? found.withId(id) : found;
}

export default {
  config: () =>
    new Config("dnsrecord", Kind.namespaced("sample.wasmop.dev", "v1", "DnsRecord"))
      .http(new HttpGrant().timeout(2_000).origin(
        Origin.parse(DNS_API).secretHeader("authorization", new SecretKey("dns-api-token", "token"), "Bearer ")))
      .polling(Polling.perResource(2_000))
      .externalDependent(new ExternalDependent("record"))
      .inbound(new Inbound(new SecretKey("dns-webhook-token", "token"))),

  decode: requireFields({
    "spec.zone": "string", "spec.name": "string", "spec.type": "string", "spec.value": "string",
  }),

  fetch({ spec }, tracked) {
    const id = tracked.id("record", spec.name); // by its tracked ID, else among the zone's by name
    const response = http.Request.get(records(spec, id)).send();
    if (response.status === 404 && id) return [];
    if (!response.isSuccess()) throw answered(response.status);
    if (id) return [external(spec, response.json())];
    const all = response.json<Record<string, unknown>[]>();
    const named = all.find((r) => r["name"] === spec.name && r["type"] === spec.type);
    return named === undefined ? [] : [external(spec, named)];
  },

  desired: ({ spec: { name, type, value, ttl } }) => [
    Desired.external("record", name, { name, type, value, ttl: ttl ?? 300 }),
  ],

  // ANCHOR: apply
  applyExternal({ spec }, desired) {
    const request = desired.id ? http.Request.put(records(spec, desired.id)) : http.Request.post(records(spec));
    const response = request.json(desired.object).send();
    if (response.status >= 400 && response.status < 500) {
      throw ReconcileError.permanent(`the DNS service refused the record: ${response.text()}`);
    }
    if (response.status !== 200 && response.status !== 201) throw answered(response.status);
    return external(spec, response.json());
  },
  // ANCHOR_END: apply

  deleteExternal({ spec }, actual) {
    const status = actual.id ? http.Request.delete(records(spec, actual.id)).send().status : 204;
    if (![200, 204, 404].includes(status)) throw answered(status);
  },

  // The service's webhook names the DnsRecord: `{"namespace": "...", "name": "..."}`.
  mapInbound(payload) {
    const { namespace, name } = payload as { namespace?: unknown; name?: unknown };
    if (typeof namespace !== "string" || typeof name !== "string") throw "the payload needs a namespace and a name";
    return [PrimaryRef.namespaced(namespace, name)];
  },

  reconcile({ spec }, ctx) {
    const fqdn = `${spec.name}.${spec.zone}`;
    const [found] = ctx.external("record");
    if (found === undefined) return Outcome.notReady(`${fqdn} is not in the DNS service yet`);
    return Outcome.ready(`${fqdn} is served`).status({ id: found.id, fqdn });
  },
} satisfies Reconciler<Resource<Spec>>;
