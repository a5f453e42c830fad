// A status-only plugin: greets `spec.name` in `status.message`; the host keeps `Ready`.
import { Config, Kind, Outcome, requireFields, type Reconciler, type Resource } from "@wasmop/guest";

/** Whom to greet. */
export interface Spec {
  name: string;
}

export default {
  // The host caches only what the plugin reads: the spec (and the status it keeps).
  config: () => new Config("greeting", Kind.namespaced("example.wasmop.dev", "v1", "Greeting")).project(["spec"]),

  decode: requireFields({ "spec.name": "string" }),

  reconcile: (greeting) => Outcome.ready("greeted").status({ message: `Hello, ${greeting.spec.name}!` }),
} satisfies Reconciler<Resource<Spec>>;
