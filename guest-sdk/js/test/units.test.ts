import assert from "node:assert/strict";
import { test } from "node:test";

import durations from "../../../core/vectors/duration.json" with { type: "json" };
import quantities from "../../../core/vectors/quantity.json" with { type: "json" };
import { DurationError, Quantity, QuantityError, formatNanos, parseDuration, parseNanos } from "../src/index.js";

test("quantities parse and write back as the shared vectors say", () => {
  for (const c of quantities.valid) {
    const q = Quantity.parse(c.in);
    assert.deepEqual([q.millis, q.value(), q.toString()], [BigInt(c.millis), BigInt(c.value), c.canonical], c.in);
  }
});

test("quantities are refused as the shared vectors say", () => {
  for (const c of quantities.invalid) {
    assert.throws(() => Quantity.parse(c.in), (e: unknown) => e instanceof QuantityError && e.message === c.error, c.in);
  }
});

test("quantities compare as the shared vectors say", () => {
  for (const [a, b, order] of quantities.compare as [string, string, number][]) {
    const [qa, qb] = [Quantity.parse(a), Quantity.parse(b)];
    assert.deepEqual([qa.compare(qb), qa.equals(qb)], [order, order === 0], `${a} vs ${b}`);
  }
});

test("durations parse and write back as the shared vectors say", () => {
  for (const c of durations.valid) {
    const nanos = parseNanos(c.in);
    assert.deepEqual([nanos, formatNanos(nanos)], [BigInt(c.nanos), c.canonical], c.in);
    assert.equal(parseDuration(c.in), Number(nanos / 1_000_000n), c.in);
  }
});

test("durations are refused as the shared vectors say", () => {
  for (const c of durations.invalid) {
    assert.throws(() => parseNanos(c.in), (e: unknown) => e instanceof DurationError && e.message === c.error, c.in);
  }
});
