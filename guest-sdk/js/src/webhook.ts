/**
 * Admission and conversion webhooks the plugin serves through the host: {@link Webhook}
 * (declared in the {@link Config}), what the plugin's `validate` is given
 * ({@link AdmissionRequest}) and what it answers ({@link Verdict}). `default` is given the
 * primary itself and `convert` the objects (see {@link Reconciler}).
 * @module
 */
import { Kind } from "./kind.js";

/** What an admission request does to its object. */
export type Operation = "Create" | "Update" | "Delete" | "Connect";

/**
 * What the API server does when a call of the webhook fails (the plugin throws, or runs out of
 * time): `Fail` refuses the request (the default), `Ignore` admits it.
 */
export type FailurePolicy = "Fail" | "Ignore";

/**
 * Which of the plugin's functions a webhook calls: `validate` (`Validating`), `default`
 * (`Mutating`) or `convert` (`Conversion`).
 */
export type WebhookType = "Validating" | "Mutating" | "Conversion";

/** The operations of a webhook that declares none. */
export const DEFAULT_OPERATIONS: readonly Operation[] = ["Create", "Update"];

/**
 * A webhook the host serves for the plugin, with kubebuilder's defaults: the primary kind,
 * creates and updates, the failure policy `Fail` and a timeout of 10 seconds.
 *
 * @example
 * ```ts
 * new Config("web", Kind.namespaced("example.com", "v1", "Web")).webhook(Webhook.validating().failurePolicy("Ignore"));
 * ```
 */
export class Webhook {
  /** The kinds it is called for; empty: the primary. */
  kindList: Kind[] = [];
  /** The operations it is called for; empty: create and update. */
  operationList: Operation[] = [];
  /** What the API server does when a call fails. */
  failurePolicyValue: FailurePolicy = "Fail";
  /** How long the API server waits for an answer, in milliseconds (1 to 30 s); absent: 10 s. */
  timeoutMs: number | undefined = undefined;

  private constructor(
    /** Which of the plugin's functions it calls. */
    readonly webhookType: WebhookType,
  ) {}

  /** A validating webhook: the plugin's `validate` admits or denies each create and update. */
  static validating(): Webhook {
    return new Webhook("Validating");
  }

  /**
   * A mutating webhook: the plugin's `default` fills in the defaults of each primary created or
   * updated, and the host answers with the patch.
   */
  static mutating(): Webhook {
    return new Webhook("Mutating");
  }

  /**
   * The conversion webhook of the primary's CustomResourceDefinition: the plugin's `convert`
   * turns an object of one version into another. Only for a custom resource primary.
   */
  static conversion(): Webhook {
    return new Webhook("Conversion");
  }

  /**
   * Calls the webhook for these kinds instead of the primary (a validating or mutating webhook
   * only); name the primary too to keep it.
   */
  kinds(...kinds: Kind[]): this {
    this.kindList = kinds;
    return this;
  }

  /**
   * Calls the webhook for these operations instead of creates and updates. A mutating webhook
   * takes creates and updates only.
   */
  operations(...operations: Operation[]): this {
    this.operationList = operations;
    return this;
  }

  /** What the API server does when a call fails (default: refuse the request). */
  failurePolicy(policy: FailurePolicy): this {
    this.failurePolicyValue = policy;
    return this;
  }

  /** How long the API server waits for an answer: 1 to 30 seconds (default 10). */
  timeout(ms: number): this {
    this.timeoutMs = ms;
    return this;
  }

  /**
   * Whether the host calls this webhook for a request of `kind` doing `operation` (the host's
   * rule: its kinds, else the primary; its operations, else create and update).
   */
  serves(primary: Kind, kind: Kind, operation: Operation): boolean {
    const kinds = this.kindList.length === 0 ? [primary] : this.kindList;
    const operations = this.operationList.length === 0 ? DEFAULT_OPERATIONS : this.operationList;
    return operations.includes(operation) && kinds.some((k) => k.sameType(kind));
  }
}

/**
 * One object's admission, as the API server asks for it: `object` and `oldObject` are the
 * primary (as `decode` gives it) for the primary's kind, plain JSON for other kinds.
 */
export interface AdmissionRequest<P = unknown> {
  /** The request's UID. */
  readonly uid: string;
  /** The object's kind, as the request names it. */
  readonly kind: Kind;
  /** What the request does. */
  readonly operation: Operation;
  /** The object's namespace, if it has one. */
  readonly namespace: string | undefined;
  /** The object's name (empty on a create that asks the server to generate it). */
  readonly name: string;
  /** The object as it would be stored; absent for a delete. */
  readonly object: P | undefined;
  /** The object as it is stored, for an update and a delete. */
  readonly oldObject: P | undefined;
  /** Who makes the request. */
  readonly username: string;
  /** The groups of who makes the request. */
  readonly groups: readonly string[];
  /** The request changes nothing (`kubectl apply --dry-run=server`): have no side effects. */
  readonly dryRun: boolean;
}

/** Requests for tests, made from the objects (each with `apiVersion`, `kind` and `metadata`). */
export const AdmissionRequest = {
  /** The creation of `object`. */
  create(object: Record<string, unknown>): AdmissionRequest<Record<string, unknown>> {
    return { ...about("Create", object), object };
  },
  /** The update of `old` to `object`. */
  update(object: Record<string, unknown>, old: Record<string, unknown>): AdmissionRequest<Record<string, unknown>> {
    return { ...about("Update", object), object, oldObject: old };
  },
  /** The deletion of `old`. */
  delete(old: Record<string, unknown>): AdmissionRequest<Record<string, unknown>> {
    return { ...about("Delete", old), oldObject: old };
  },
};

function about(operation: Operation, object: Record<string, unknown>): AdmissionRequest<Record<string, unknown>> {
  const apiVersion = object["apiVersion"];
  const kindName = object["kind"];
  if (typeof apiVersion !== "string" || typeof kindName !== "string") {
    throw new TypeError(`an admission request's object has an apiVersion and a kind: ${JSON.stringify(object)}`);
  }
  const slash = apiVersion.lastIndexOf("/");
  const [group, version] = slash < 0 ? ["", apiVersion] : [apiVersion.slice(0, slash), apiVersion.slice(slash + 1)];
  const metadata = (object["metadata"] ?? {}) as { name?: string; namespace?: string };
  const kind = metadata.namespace === undefined ? Kind.cluster(group, version, kindName) : Kind.namespaced(group, version, kindName);
  return {
    uid: "test-uid",
    kind,
    operation,
    namespace: metadata.namespace,
    name: metadata.name ?? "",
    object: undefined,
    oldObject: undefined,
    username: "test",
    groups: [],
    dryRun: false,
  };
}

/**
 * A validating webhook's answer: admit or deny, with a message, the field at fault and warnings.
 *
 * @example
 * ```ts
 * Verdict.deny("html must not be empty").at("spec.html");
 * ```
 */
export class Verdict {
  private constructor(
    /** Whether the request is admitted. */
    readonly allowed: boolean,
    /** Why it is denied, in the user's words: `kubectl` shows it. */
    readonly message: string | undefined,
    /** The field a denial is about (`spec.html`). */
    readonly field: string | undefined,
    /** Warnings for the client, returned whether the request is admitted or not. */
    readonly warnings: readonly string[],
  ) {}

  /** Admits the request. */
  static allow(): Verdict {
    return new Verdict(true, undefined, undefined, []);
  }

  /** Denies the request with `message`. */
  static deny(message: string): Verdict {
    return new Verdict(false, message, undefined, []);
  }

  /** The same verdict about `field`. */
  at(field: string): Verdict {
    return new Verdict(this.allowed, this.message, field, this.warnings);
  }

  /** The same verdict with one more warning. */
  warn(warning: string): Verdict {
    return new Verdict(this.allowed, this.message, this.field, [...this.warnings, warning]);
  }
}
