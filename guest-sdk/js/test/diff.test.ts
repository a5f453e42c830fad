import assert from "node:assert/strict";
import { test } from "node:test";

import vectors from "../../../core/vectors/diff.json" with { type: "json" };
import { changed, diff } from "../src/index.js";

test("diff and changed agree with the shared vectors", () => {
  for (const c of vectors.cases) {
    const found = diff(c.old, c.new).map((d) => [d.op, d.path.join("."), d.old ?? null, d.new ?? null]);
    assert.deepEqual(found, c.diff, JSON.stringify(c));
    for (const [path, expected] of Object.entries(c.changed)) {
      assert.equal(changed(c.old, c.new, path), expected, `${path} in ${JSON.stringify(c)}`);
    }
  }
});
