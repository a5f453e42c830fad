"""Quantities and durations against the vectors the Rust and TypeScript SDKs check too."""

import json
from pathlib import Path

import pytest

from wasmop import DurationError, Quantity, QuantityError, format_nanos, parse_duration, parse_nanos

VECTORS = Path(__file__).resolve().parents[3] / "core" / "vectors"


def vectors(name):
    return json.loads((VECTORS / name).read_text())


@pytest.mark.parametrize("case", vectors("quantity.json")["valid"], ids=lambda c: c["in"])
def test_quantity_parses_and_writes_back(case):
    q = Quantity.parse(case["in"])
    assert (q.millis, q.value, str(q)) == (int(case["millis"]), int(case["value"]), case["canonical"])


@pytest.mark.parametrize("case", vectors("quantity.json")["invalid"], ids=lambda c: c["in"])
def test_quantity_refuses(case):
    with pytest.raises(QuantityError) as error:
        Quantity.parse(case["in"])
    assert str(error.value) == case["error"]


@pytest.mark.parametrize("a,b,order", vectors("quantity.json")["compare"])
def test_quantity_compares(a, b, order):
    a, b = Quantity.parse(a), Quantity.parse(b)
    assert ((a > b) - (a < b), a == b) == (order, order == 0)


@pytest.mark.parametrize("case", vectors("duration.json")["valid"], ids=lambda c: c["in"])
def test_duration_parses_and_writes_back(case):
    nanos = parse_nanos(case["in"])
    assert (nanos, format_nanos(nanos)) == (int(case["nanos"]), case["canonical"])
    assert parse_duration(case["in"]).total_seconds() == pytest.approx(nanos / 1e9, abs=1e-5)


@pytest.mark.parametrize("case", vectors("duration.json")["invalid"], ids=lambda c: c["in"])
def test_duration_refuses(case):
    with pytest.raises(DurationError) as error:
        parse_nanos(case["in"])
    assert str(error.value) == case["error"]
