/**
 * What the host grants a plugin beyond its caches: outgoing HTTP to declared origins
 * ({@link HttpGrant}) and inbound events ({@link Inbound}); secrets for both stay with the host
 * ({@link SecretKey}).
 * @module
 */

/**
 * A key of a Kubernetes Secret the host reads for the plugin; the plugin never sees the value.
 *
 * Naming a Secret here grants nothing: the host reads it only when the plugin's own
 * ServiceAccount may get it, or when the operator allowed it for this plugin (`allowedSecrets` in
 * its ReconcilerPlugin's `spec.overrides`, or in the configuration file for a plugin loaded from a
 * file); otherwise the plugin is refused at load, naming the Secret. A secret header goes to an
 * `http` origin only when the operator lists it in `allowPlainHttpSecrets`.
 */
export class SecretKey {
  /** The Secret's namespace; absent: the namespace the host watches primaries in, else `default`. */
  namespace: string | undefined = undefined;

  constructor(
    /** The Secret's name. */
    readonly name: string,
    /** The key in the Secret's `data`. */
    readonly key: string,
  ) {}

  /** The Secret lives in `namespace`. */
  inNamespace(namespace: string): this {
    this.namespace = namespace;
    return this;
  }
}

/** A header whose value the host takes from a Secret. */
export interface SecretHeader {
  /** Header name, e.g. `authorization`. */
  readonly header: string;
  /** Where the value is. */
  readonly secret: SecretKey;
  /** Text put before the value, e.g. `Bearer `. */
  readonly prefix: string | undefined;
}

/**
 * An origin the plugin may call.
 *
 * @example
 * ```ts
 * Origin.parse("https://api.example.com").secretHeader("authorization", new SecretKey("api", "token"), "Bearer ");
 * ```
 */
export class Origin {
  /** Headers the host adds to every request to this origin. */
  readonly secretHeaders: SecretHeader[] = [];

  private constructor(
    /** `http` or `https`. */
    readonly scheme: string,
    /** Host name or IP address. */
    readonly host: string,
    /** Port; absent: the scheme's default. */
    readonly port: number | undefined,
  ) {}

  /** The origin of `url` (`scheme://host[:port]`; a path is ignored). */
  static parse(url: string): Origin {
    const separator = url.indexOf("://");
    const scheme = separator < 0 ? "" : url.slice(0, separator);
    const authority = (separator < 0 ? url : url.slice(separator + 3)).split(/[/?#]/)[0] ?? "";
    const match = /^\[([^\]]*)\](?::(\d+))?$/.exec(authority) ?? /^([^:]*)(?::(\d+))?$/.exec(authority);
    const port = match?.[2] === undefined ? undefined : Number(match[2]);
    return new Origin(scheme, match?.[1] ?? authority, port);
  }

  /** The host adds header `header`, its value `prefix` + the Secret's value. */
  secretHeader(header: string, secret: SecretKey, prefix?: string): this {
    this.secretHeaders.push({ header, secret, prefix });
    return this;
  }
}

/** The outgoing HTTP the host grants the plugin (in `fetch`, `fetchAll`, `applyExternal`, `deleteExternal`). */
export class HttpGrant {
  /** The origins the plugin may call. */
  readonly origins: Origin[] = [];
  /** Connect timeout per request in milliseconds; absent: the host default. */
  connectTimeoutMs: number | undefined = undefined;
  /** Total time per request in milliseconds; absent: the host default. */
  timeoutMs: number | undefined = undefined;
  /** Largest response body in bytes; absent: the host default. */
  responseLimit: number | undefined = undefined;
  /** Requests in flight at once; absent: the host default. */
  maxConcurrentRequests: number | undefined = undefined;

  /** Grants `origin`. */
  origin(origin: Origin): this {
    this.origins.push(origin);
    return this;
  }

  /** Connect timeout per request, in milliseconds. */
  connectTimeout(ms: number): this {
    this.connectTimeoutMs = ms;
    return this;
  }

  /** Total time per request, in milliseconds. */
  timeout(ms: number): this {
    this.timeoutMs = ms;
    return this;
  }

  /** Largest response body, in bytes. */
  maxResponseBytes(bytes: number): this {
    this.responseLimit = bytes;
    return this;
  }

  /** Requests in flight at once. */
  maxConcurrent(requests: number): this {
    this.maxConcurrentRequests = requests;
    return this;
  }
}

/** Inbound events: `POST /plugins/<name>/events`, mapped to primaries by `mapInbound`. */
export class Inbound {
  /** Keep the last payload per primary and give it to `reconcile` (`ctx.inbound`). */
  isCaching = false;

  constructor(
    /** The bearer token callers must present. */
    readonly token: SecretKey,
  ) {}

  /** Keeps the last payload per primary for `reconcile`. */
  caching(): this {
    this.isCaching = true;
    return this;
  }
}
