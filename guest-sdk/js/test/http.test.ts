// The HTTP client: requests and responses, its errors, and how it maps onto the wasi:http imports
// (played here by a fake of them, recording what the client asks).
import assert from "node:assert/strict";
import { test } from "node:test";

import { ReconcileError, http } from "../src/index.js";
import { exportHttp } from "../src/component.js";
import { DISPOSE, describe, method, scheme, wasiHttp, type WasiHttpTypes, type WasiOutgoingHandler } from "../src/wasi-http.js";

const { HttpError, Request, Response, SENSITIVE_RESPONSE } = http;
const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array) => new TextDecoder().decode(data);

test("requests are built as the Rust SDK builds them", () => {
  const request = Request.post("https://api.example.com/v1/records").header("x-trace", "1").json({ name: "www" });
  assert.equal(request.method, "POST");
  assert.deepEqual(request.headers, [["x-trace", "1"], ["content-type", "application/json"]]);
  assert.equal(text(request.body ?? new Uint8Array()), '{"name":"www"}');
  assert.deepEqual(
    [Request.get("u").method, Request.put("u").method, Request.delete("u").method],
    ["GET", "PUT", "DELETE"],
  );
});

test("a request marked sensitive carries the mark once", () => {
  const request = Request.post("https://auth.example.com/token").sensitiveResponse().sensitiveResponse();
  assert.deepEqual(request.headers, [[SENSITIVE_RESPONSE, "1"]]);
  assert.equal(SENSITIVE_RESPONSE, "wasmop-sensitive-response", "the host's name for it");
});

test("urls split into scheme, authority and path", () => {
  assert.deepEqual(http.split("http://127.0.0.1:8080/records?x=1"), ["http", "127.0.0.1:8080", "/records?x=1"]);
  assert.deepEqual(http.split("https://api.example.com"), ["https", "api.example.com", "/"]);
  assert.throws(() => http.split("api.example.com/x"), /not an absolute URL/);
  assert.throws(() => http.split("http:///x"), /has no host/);
});

test("responses decode their body; one that is not JSON is an HttpError", () => {
  const response = new Response(200, [], bytes('{"id":"rec-1"}'));
  assert.deepEqual(response.json(), { id: "rec-1" });
  assert.equal(response.isSuccess(), true);
  assert.equal(new Response(404).isSuccess(), false);
  assert.throws(() => new Response(200, [], bytes("<html>")).json(), (e: unknown) => e instanceof HttpError && /not the JSON expected/.test(e.message));
});

test("an HttpError is a transient ReconcileError: the host retries it", () => {
  const error = new HttpError("GET u: connection refused");
  assert.ok(error instanceof ReconcileError);
  assert.equal(error.kind, "transient");
  assert.equal(ReconcileError.from(error), error);
});

test("natively a request says it needs the host", () => {
  assert.throws(() => Request.get("http://127.0.0.1:1/").send(), (e: unknown) =>
    e instanceof HttpError && e.message.includes("only inside the wasmop host"),
  );
});

test("methods, schemes and error codes map onto wasi:http", () => {
  assert.deepEqual(method("GET"), { tag: "get" });
  assert.deepEqual(method("PROPFIND"), { tag: "other", val: "PROPFIND" });
  assert.deepEqual(scheme("https"), { tag: "HTTPS" });
  assert.deepEqual(scheme("ftp"), { tag: "other", val: "ftp" });
  assert.equal(describe({ payload: { tag: "HTTP-request-denied" } }), "denied by the host");
  assert.equal(describe({ tag: "internal-error", val: "origin not granted" }), "origin not granted");
  assert.equal(describe({ tag: "HTTP-response-body-size", val: 1024n }), "the response body is larger than the granted 1024 bytes");
  assert.equal(describe({ tag: "DNS-timeout" }), "dns-timeout");
});

/** A fake of the wasi:http imports: records the request, answers with `answer`. */
function fakeWasiHttp(answer: { status: number; headers: [string, string][]; body: string } | { error: unknown }) {
  const seen: { method?: unknown; scheme?: unknown; authority?: string; path?: string; headers?: [string, string][]; body: string; finished: boolean } = {
    body: "",
    finished: false,
  };
  const dropped: string[] = [];
  const resource = <T extends object>(name: string, methods: T): T => Object.assign(methods, { [DISPOSE]: () => dropped.push(name) });
  const types: WasiHttpTypes = {
    Fields: {
      fromList: (entries) => {
        seen.headers = entries.map(([n, v]) => [n, text(v)]);
        return resource("fields", { entries: () => [] });
      },
    },
    OutgoingRequest: class {
      setMethod(m: unknown) {
        seen.method = m;
      }
      setScheme(s: unknown) {
        seen.scheme = s;
      }
      setAuthority(a: string) {
        seen.authority = a;
      }
      setPathWithQuery(p: string) {
        seen.path = p;
      }
      body() {
        return resource("outgoing-body", {
          write: () => resource("output-stream", { blockingWriteAndFlush: (c: Uint8Array) => void (seen.body += text(c)) }),
        });
      }
    } as unknown as WasiHttpTypes["OutgoingRequest"],
    OutgoingBody: {
      finish: () => {
        assert.ok(!seen.body || dropped.includes("output-stream"), "the stream is dropped before the body is finished");
        seen.finished = true;
      },
    },
  };
  let read = false;
  const handler: WasiOutgoingHandler = {
    handle: () => {
      if ("error" in answer) throw { payload: answer.error };
      const response = resource("response", {
        status: () => answer.status,
        headers: () => resource("headers", { entries: () => answer.headers.map(([n, v]): [string, Uint8Array] => [n, bytes(v)]) }),
        consume: () =>
          resource("incoming-body", {
            stream: () =>
              resource("input-stream", {
                blockingRead: () => {
                  if (read) throw { payload: { tag: "closed" } };
                  read = true;
                  return bytes(answer.body);
                },
              }),
          }),
      });
      return resource("future", {
        subscribe: () => resource("pollable", { block: () => undefined }),
        get: () => ({ tag: "ok", val: { tag: "ok", val: response } }),
      });
    },
  };
  return { seen, dropped, transport: wasiHttp(handler, types) };
}

test("a request goes out through wasi:http and its whole response comes back", () => {
  const fake = fakeWasiHttp({ status: 201, headers: [["content-type", "application/json"]], body: '{"id":"rec-1"}' });
  const request = Request.put("http://127.0.0.1:18053/zones/a/records/rec-1?x=1").header("X-Trace", "7").json({ value: "v" });
  const response = fake.transport(request);
  assert.deepEqual(fake.seen, {
    method: { tag: "put" },
    scheme: { tag: "HTTP" },
    authority: "127.0.0.1:18053",
    path: "/zones/a/records/rec-1?x=1",
    headers: [["x-trace", "7"], ["content-type", "application/json"]],
    body: '{"value":"v"}',
    finished: true,
  });
  assert.equal(response.status, 201);
  assert.deepEqual(response.headers, [["content-type", "application/json"]]);
  assert.deepEqual(response.json(), { id: "rec-1" });
  assert.deepEqual(fake.dropped.slice(-4), ["input-stream", "incoming-body", "response", "future"], "each before the one it came from");
});

test("a request the host refuses fails with the host's reason, worth a retry", () => {
  const fake = fakeWasiHttp({ error: { tag: "internal-error", val: "http://evil.example is not granted" } });
  assert.throws(() => fake.transport(Request.get("http://evil.example/")), (e: unknown) =>
    e instanceof HttpError && e.kind === "transient" && e.message === "GET http://evil.example/: http://evil.example is not granted",
  );
});

// Last: it installs the transport of a component built without wasi:http for the rest of the file.
test("a component without an http grant says so", () => {
  exportHttp();
  assert.throws(() => Request.get("http://127.0.0.1:1/").send(), /declares no http grant/);
});
