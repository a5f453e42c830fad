import assert from "node:assert/strict";
import { test } from "node:test";

import { Config, Kind, Outcome, ReconcileError, type Reconciler, type Retry } from "../src/index.js";
import { FakeHost } from "../src/testing.js";

function failing(error: ReconcileError, retry?: Partial<Retry>): Reconciler<Record<string, unknown>> {
  return {
    config: () => {
      const config = new Config("flaky", Kind.namespaced("", "v1", "ConfigMap"));
      return retry === undefined ? config : config.retry(retry);
    },
    reconcile: (): Outcome => {
      throw error;
    },
  };
}

const object = { metadata: { name: "a", namespace: "default" } };

test("retryAfter takes milliseconds or a Go duration, and only on a transient error", () => {
  assert.equal(ReconcileError.transient("x").retryAfter(1500).delayMs, 1500);
  assert.equal(ReconcileError.transient("x").retryAfter("1m30s").delayMs, 90_000);
  assert.equal(ReconcileError.transient("x").delayMs, undefined);
  assert.equal(ReconcileError.permanent("x").retryAfter(5).delayMs, undefined);
  assert.throws(() => ReconcileError.transient("x").retryAfter("soon"), { message: "soon is not a duration: expected a number at soon" });
  assert.throws(() => ReconcileError.transient("x").retryAfter(-1), RangeError);
});

test("the asked delay reaches the host and replaces the backoff", () => {
  const run = new FakeHost().reconcile(failing(ReconcileError.transient("rate limited").retryAfter("30s")), object);
  assert.equal(run.error.message, "rate limited");
  assert.equal(run.retryAfterMs, 30_000);
});

test("without a delay the backoff of the next attempt applies", () => {
  assert.equal(new FakeHost().reconcile(failing(ReconcileError.transient("down")), object).retryAfterMs, 2_000);
  assert.equal(new FakeHost().withAttempt(2).reconcile(failing(ReconcileError.transient("down")), object).retryAfterMs, 4_500);
});

test("the delay is capped at the max interval, and nothing is retried after the last attempt", () => {
  const capped = failing(ReconcileError.transient("x").retryAfter("1h"), { maxIntervalMs: 60_000 });
  assert.equal(new FakeHost().reconcile(capped, object).retryAfterMs, 60_000);
  assert.equal(new FakeHost().withAttempt(5, true).reconcile(capped, object).retryAfterMs, undefined);
  assert.equal(new FakeHost().reconcile(failing(ReconcileError.permanent("no")), object).retryAfterMs, undefined);
});
