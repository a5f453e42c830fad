/**
 * The `wasi:http` transport of the HTTP client: sends a {@link Request} through the
 * `wasi:http/outgoing-handler@0.2.12` and `wasi:http/types@0.2.12` imports, as componentize-js
 * provides them to a plugin built against the `operator-http` world (one that declares an `http`
 * grant). It calls `handle`, writes the body through the request's output stream, blocks on the
 * future's pollable, and reads the response body from its input stream to the end; each resource
 * is dropped before the one it came from.
 *
 * Conventions of componentize-js: a function returning `result` throws an object whose `payload`
 * is the `err` value; a nested `result` is `{ tag: "ok" | "err", val }`; `u64` is a `bigint`.
 * @module
 */
import { HttpError, Request, Response, split, type Transport } from "./http.js";

/** A `wasi:http` error code, or any variant: `{ tag, val }`. */
export interface WitVariant {
  tag: string;
  val?: unknown;
}

/** A resource handle: dropped with `[Symbol.dispose]`. */
type Resource = object;

interface OutputStream extends Resource {
  blockingWriteAndFlush(contents: Uint8Array): void;
}

interface InputStream extends Resource {
  blockingRead(len: bigint): Uint8Array;
}

interface Fields extends Resource {
  entries(): [string, Uint8Array][];
}

interface OutgoingBody extends Resource {
  write(): OutputStream;
}

interface OutgoingRequest extends Resource {
  body(): OutgoingBody;
  setMethod(method: WitVariant): void;
  setScheme(scheme: WitVariant | undefined): void;
  setAuthority(authority: string | undefined): void;
  setPathWithQuery(path: string | undefined): void;
}

interface IncomingBody extends Resource {
  stream(): InputStream;
}

interface IncomingResponse extends Resource {
  status(): number;
  headers(): Fields;
  consume(): IncomingBody;
}

interface FutureIncomingResponse extends Resource {
  subscribe(): Resource & { block(): void };
  get(): { tag: string; val: { tag: string; val: unknown } } | undefined;
}

/** The `wasi:http/types@0.2.12` import, as much of it as the client uses. */
export interface WasiHttpTypes {
  Fields: { fromList(entries: [string, Uint8Array][]): Fields };
  OutgoingRequest: new (headers: Fields) => OutgoingRequest;
  OutgoingBody: { finish(body: OutgoingBody, trailers: Fields | undefined): void };
}

/** The `wasi:http/outgoing-handler@0.2.12` import. */
export interface WasiOutgoingHandler {
  handle(request: OutgoingRequest, options: undefined): FutureIncomingResponse;
}

/** The method that drops a resource handle, as componentize-js names it. */
export const DISPOSE: symbol = (Symbol as { dispose?: symbol }).dispose ?? Symbol.for("dispose");
const CHUNK = 64n * 1024n;

/** Drops a resource handle now rather than when it is collected. */
function drop(resource: Resource): void {
  (resource as Record<symbol, (() => void) | undefined>)[DISPOSE]?.();
}

/** The `wasi:http` method named `name`. */
export function method(name: string): WitVariant {
  const known = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];
  return known.includes(name.toUpperCase()) ? { tag: name.toLowerCase() } : { tag: "other", val: name };
}

/** The `wasi:http` scheme named `name` (its cases are `HTTP`, `HTTPS` and `other`). */
export function scheme(name: string): WitVariant {
  const known = name.toUpperCase();
  return known === "HTTP" || known === "HTTPS" ? { tag: known } : { tag: "other", val: name };
}

/** The host's reason for a failed request (a `wasi:http` error code), in words. */
export function describe(error: unknown): string {
  const code = (typeof error === "object" && error !== null && "payload" in error ? error.payload : error) as
    | WitVariant
    | undefined;
  const tag = code?.tag?.toLowerCase() ?? "";
  if (tag === "internal-error" && typeof code?.val === "string" && code.val !== "") return code.val;
  if (tag === "http-response-body-size") {
    return `the response body is larger than the granted ${String(code?.val ?? 0)} bytes`;
  }
  const words: Record<string, string> = {
    "http-request-denied": "denied by the host",
    "connection-refused": "connection refused",
    "connection-timeout": "connect timed out (the http grant's connect timeout)",
    "connection-read-timeout": "timed out reading the response",
    "http-response-timeout": "timed out waiting for the response (the http grant's timeout)",
  };
  return words[tag] ?? (tag === "" ? String(error) : tag);
}

/** The transport over the `wasi:http` imports `handler` and `types`. */
export function wasiHttp(handler: WasiOutgoingHandler, types: WasiHttpTypes): Transport {
  return (request: Request): Response => {
    const fail = (reason: string) => new HttpError(`${request.method} ${request.url}: ${reason}`);
    const attempt = <T>(what: (() => T), reason: (error: unknown) => string): T => {
      try {
        return what();
      } catch (error) {
        throw fail(reason(error));
      }
    };
    const [schemeName, authority, path] = split(request.url);
    const encoder = new TextEncoder();
    const entries = request.headers.map(([name, value]): [string, Uint8Array] => [name.toLowerCase(), encoder.encode(value)]);
    const headers = attempt(() => types.Fields.fromList(entries), (e) => `invalid header: ${describe(e)}`);
    const outgoing = new types.OutgoingRequest(headers);
    attempt(() => outgoing.setMethod(method(request.method)), () => "invalid method");
    attempt(() => outgoing.setScheme(scheme(schemeName)), () => "invalid scheme");
    attempt(() => outgoing.setAuthority(authority), () => "invalid host");
    attempt(() => outgoing.setPathWithQuery(path), () => "invalid path");
    const body = outgoing.body();
    const future = attempt(() => handler.handle(outgoing, undefined), describe);
    if (request.body !== undefined && request.body.length > 0) {
      const stream = body.write();
      for (let at = 0; at < request.body.length; at += 4096) {
        const chunk = request.body.subarray(at, at + 4096);
        attempt(() => stream.blockingWriteAndFlush(chunk), (e) => `writing the body: ${describe(e)}`);
      }
      drop(stream);
    }
    attempt(() => types.OutgoingBody.finish(body, undefined), describe);
    const ready = future.subscribe();
    ready.block();
    drop(ready);
    const answer = future.get();
    if (answer === undefined || answer.tag !== "ok") throw fail("the response was lost");
    if (answer.val.tag !== "ok") throw fail(describe(answer.val.val));
    const response = answer.val.val as IncomingResponse;
    const status = response.status();
    const fields = response.headers();
    const decoder = new TextDecoder();
    const head = fields.entries().map(([name, value]): [string, string] => [name, decoder.decode(value)]);
    drop(fields);
    const incoming = response.consume();
    const stream = incoming.stream();
    const chunks: Uint8Array[] = [];
    for (;;) {
      try {
        chunks.push(stream.blockingRead(CHUNK));
      } catch (error) {
        if ((error as { payload?: WitVariant }).payload?.tag === "closed") break;
        throw fail(`reading the body: ${describe(error)}`);
      }
    }
    drop(stream);
    drop(incoming);
    drop(response);
    drop(future);
    const whole = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    chunks.reduce((at, c) => (whole.set(c, at), at + c.length), 0);
    return new Response(status, head, whole);
  };
}
