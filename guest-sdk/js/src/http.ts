/**
 * Outgoing HTTP for the calls that may reach outside the cluster (`fetch`, `fetchAll`,
 * `applyExternal`, `deleteExternal`), over `wasi:http`: the host sends the request if the
 * plugin's `HttpGrant` names its origin, adds the secret headers, and enforces the timeouts
 * and the response-size cap. Anywhere else, or to another origin, the request fails with the
 * host's reason and no connection is made. The client blocks until the whole response is read
 * (the exports are synchronous; the global `fetch` of componentize-js returns a promise, which
 * no export can wait for).
 *
 * @example
 * ```ts
 * import { http } from "@wasmop/guest";
 *
 * const response = http.Request.get("http://127.0.0.1:8080/records/www").send();
 * if (response.status === 200) console.log(response.json());
 * ```
 *
 * A failed request throws an {@link HttpError}, a transient {@link ReconcileError}: thrown out of
 * a call, the host retries with backoff. In plain Node (tests) there is no `wasi:http`: `send`
 * throws an `HttpError` saying so; test the external client behind a function of your own, or
 * through the host.
 *
 * A recorded call (`wasmop run --record`) keeps each request and the response the plugin read,
 * without the values of headers and query parameters named like credentials; mark responses that
 * carry credentials themselves with {@link Request.sensitiveResponse}.
 * @module
 */
import { ReconcileError } from "./errors.js";

/** The request header that marks a response as sensitive; the host takes it off before the request leaves. */
export const SENSITIVE_RESPONSE = "wasmop-sensitive-response";

/**
 * A failed request: refused by the host, a connection or protocol failure, a timeout, or a body
 * that does not decode. A transient {@link ReconcileError}, so the host retries.
 */
export class HttpError extends ReconcileError {
  constructor(message: string) {
    super("transient", message);
    this.name = "HttpError";
  }
}

/** A response, read whole. */
export class Response {
  constructor(
    /** The status code. */
    readonly status: number,
    /** Response headers, as `[name, value]` pairs. */
    readonly headers: [string, string][] = [],
    /** The body. */
    readonly body: Uint8Array = new Uint8Array(),
  ) {}

  /** The body as JSON; throws an {@link HttpError} when it is not JSON. */
  json<T = unknown>(): T {
    try {
      return JSON.parse(this.text()) as T;
    } catch (error) {
      throw new HttpError(`the response body is not the JSON expected: ${(error as Error).message}`);
    }
  }

  /** The body as text (invalid UTF-8 replaced). */
  text(): string {
    return new TextDecoder().decode(this.body);
  }

  /** Whether the status is 2xx. */
  isSuccess(): boolean {
    return this.status >= 200 && this.status < 300;
  }
}

/** An HTTP request: build it with {@link Request.get} and its siblings, add headers and a body, then {@link Request.send} it. */
export class Request {
  /** Request headers, as `[name, value]` pairs. */
  readonly headers: [string, string][] = [];
  /** The body. */
  body: Uint8Array | undefined = undefined;

  constructor(
    /** `GET`, `POST`, ... */
    readonly method: string,
    /** The absolute URL. */
    readonly url: string,
  ) {}

  /** `GET url`. */
  static get(url: string): Request {
    return new Request("GET", url);
  }

  /** `POST url`. */
  static post(url: string): Request {
    return new Request("POST", url);
  }

  /** `PUT url`. */
  static put(url: string): Request {
    return new Request("PUT", url);
  }

  /** `DELETE url`. */
  static delete(url: string): Request {
    return new Request("DELETE", url);
  }

  /** Adds a header. */
  header(name: string, value: string): this {
    this.headers.push([name, value]);
    return this;
  }

  /** `body` as JSON, with `content-type: application/json`. */
  json(body: unknown): this {
    this.body = new TextEncoder().encode(JSON.stringify(body));
    return this.header("content-type", "application/json");
  }

  /**
   * Marks the response as sensitive: a record of the call (`wasmop run --record`) keeps its
   * status and headers and only the length of its body, and scrubs what the body held from what
   * the plugin writes. Mark the responses that carry credentials: a token endpoint's, a secret
   * store's. The mark is the request header {@link SENSITIVE_RESPONSE}, which the host takes off
   * before the request leaves.
   */
  sensitiveResponse(): this {
    if (this.headers.some(([name]) => name.toLowerCase() === SENSITIVE_RESPONSE)) return this;
    return this.header(SENSITIVE_RESPONSE, "1");
  }

  /** Sends the request and reads the whole response; throws an {@link HttpError}. */
  send(): Response {
    split(this.url);
    return transport(this);
  }
}

/** The URL's scheme, authority and path with query; throws an {@link HttpError} when it is not absolute. */
export function split(url: string): [scheme: string, authority: string, pathWithQuery: string] {
  const at = url.indexOf("://");
  if (at < 0) throw new HttpError(`${JSON.stringify(url)} is not an absolute URL`);
  const rest = url.slice(at + 3);
  const end = rest.search(/[/?]/);
  const authority = end < 0 ? rest : rest.slice(0, end);
  if (authority === "") throw new HttpError(`${JSON.stringify(url)} has no host`);
  const path = end < 0 ? "" : rest.slice(end);
  return [url.slice(0, at), authority, path === "" ? "/" : path];
}

/** What sends a request: `wasi:http` inside a component granted HTTP. */
export type Transport = (request: Request) => Response;

let transport: Transport = (request) => {
  throw new HttpError(
    `${request.method} ${request.url}: outgoing HTTP runs only inside the wasmop host (wasi:http); this is a native build`,
  );
};

/** Sends every request through `through`; the component glue installs `wasi:http`. */
export function useTransport(through: Transport): void {
  transport = through;
}
