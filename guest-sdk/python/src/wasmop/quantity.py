"""Kubernetes quantities (``500m``, ``2Gi``, ``1.5``, ``1e3``): parsed to thousandths of the base
unit, compared by value, and written back in apimachinery's canonical form.

The syntax is apimachinery's ``resource.Quantity``: an optional sign, a decimal number, and a
binary (``Ki`` .. ``Ei``), decimal (``n`` ``u`` ``m`` none ``k`` ``M`` ``G`` ``T`` ``P`` ``E``)
or exponent (``e3``) suffix. Values are kept to the thousandth, as apimachinery's ``MilliValue``:
a finer value is rounded away from zero (``1n`` is ``1m``). The same rules as the Rust SDK's
``wasmop_guest::Quantity``; both check themselves against ``core/vectors/quantity.json``.

>>> Quantity.parse("1.5Gi") > Quantity.parse("1G")
True
>>> str(Quantity.parse("1.5Gi")), Quantity.parse("500m").millis
('1536Mi', 500)
"""

from __future__ import annotations

import functools
import re

#: Decimal suffixes and their powers of ten.
DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: Binary suffixes, by power of 1024.
BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
#: The formats a quantity is written in, as apimachinery names them.
FORMATS = ("BinarySI", "DecimalSI", "DecimalExponent")

_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+")
#: Beyond this many thousandths the Rust SDK (an i128) cannot hold a quantity: refused everywhere.
_LIMIT = 2**127 - 1


class QuantityError(ValueError):
    """A text that is not a quantity; the message names it and why
    (``2Qi is not a quantity: unknown suffix Qi``)."""

    def __init__(self, text: str, reason: str):
        super().__init__(f"{text} is not a quantity: {reason}")
        self.text = text
        self.reason = reason


@functools.total_ordering
class Quantity:
    """A Kubernetes quantity: a whole number of thousandths of the base unit (:attr:`millis`)
    and the format it was written in. Equality and order compare values only (``1Ki == 1024``)."""

    __slots__ = ("millis", "format")

    def __init__(self, millis: int, format: str = "DecimalSI"):
        if format not in FORMATS:
            raise ValueError(f"a quantity's format is one of {', '.join(FORMATS)}, not {format!r}")
        self.millis = millis
        self.format = format

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parses ``text``, e.g. ``"500m"``, ``"2Gi"``, ``"1e3"``; raises :class:`QuantityError`."""
        if text == "":
            raise QuantityError(text, "empty")
        number = _NUMBER.match(text)
        sign, whole, fraction = number.group(1), number.group(2), number.group(3) or ""
        suffix = text[number.end():]
        if not whole and not fraction:
            raise QuantityError(text, "no number")
        binary = 0
        if suffix in DECIMAL_SUFFIXES:
            fmt, exp10 = "DecimalSI", DECIMAL_SUFFIXES[suffix]
        elif suffix in BINARY_SUFFIXES:
            fmt, exp10, binary = "BinarySI", 0, BINARY_SUFFIXES.index(suffix)
        elif _EXPONENT.fullmatch(suffix):
            fmt, exp10 = "DecimalExponent", int(suffix[1:])
        else:
            raise QuantityError(text, f"unknown suffix {suffix}")
        if exp10 > 400:
            raise QuantityError(text, "too large")
        digits = str(int(whole + fraction) * 1024**binary).lstrip("0")
        exponent = exp10 + 3 - len(fraction)
        if not digits:
            millis = 0
        elif exponent >= 0:
            millis = int(digits) * 10**exponent
        else:
            kept = max(len(digits) + exponent, 0)
            millis = int(digits[:kept] or "0") + (1 if digits[kept:].strip("0") else 0)
        if millis > _LIMIT:
            raise QuantityError(text, "too large")
        return cls(-millis if sign == "-" else millis, fmt)

    @property
    def value(self) -> int:
        """The value in base units, rounded away from zero (apimachinery's ``Value``)."""
        whole = abs(self.millis) // 1000 + (1 if abs(self.millis) % 1000 else 0)
        return -whole if self.millis < 0 else whole

    def __float__(self) -> float:
        return self.millis / 1000

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.millis == other.millis

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.millis < other.millis

    def __hash__(self) -> int:
        return hash(self.millis)

    def __repr__(self) -> str:
        return f"Quantity.parse({str(self)!r})"

    def __str__(self) -> str:
        """The canonical form, as apimachinery writes it: the format it was written in, the
        largest suffix that keeps the number whole; a binary quantity below 1024 or with a
        fraction is written in decimal."""
        m = self.millis
        if self.format == "BinarySI" and abs(m) >= 1_024_000 and m % 1000 == 0:
            number, power = m // 1000, 0
            while number % 1024 == 0 and power < len(BINARY_SUFFIXES) - 1:
                number //= 1024
                power += 1
            return f"{number}{BINARY_SUFFIXES[power]}"
        if m == 0:
            return "0"
        mantissa, exponent = m, -3
        while mantissa % 10 == 0:
            mantissa //= 10
            exponent += 1
        aligned = (exponent // 3) * 3
        mantissa *= 10 ** (exponent - aligned)
        exponent = aligned
        if self.format == "DecimalExponent":
            return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"
        if exponent > 18:
            mantissa *= 10 ** (exponent - 18)
            exponent = 18
        suffix = next(s for s, e in DECIMAL_SUFFIXES.items() if e == exponent)
        return f"{mantissa}{suffix}"
