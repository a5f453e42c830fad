"""The diff against the vectors the Rust and TypeScript SDKs check too."""

import json
from pathlib import Path

import pytest

from wasmop import changed, diff

CASES = json.loads((Path(__file__).resolve().parents[3] / "core" / "vectors" / "diff.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES)
def test_diff_and_changed_agree_with_the_vectors(case):
    found = [[c.op, c.dotted, c.old, c.new] for c in diff(case["old"], case["new"])]
    assert found == case["diff"]
    for path, expected in case["changed"].items():
        assert changed(case["old"], case["new"], path) == expected, path
