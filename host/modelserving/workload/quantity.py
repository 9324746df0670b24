"""Resource quantities added up as Kubernetes adds them, printed as it prints them.

A PodGroup's ``minResources`` is a sum of container requests. Kthena computes it with
k8s.io/apimachinery's ``Quantity`` (copy, ``Mul`` by a count, ``Add``) and the API receives
the canonical text of the result. The facts this module reproduces:

- parsing: every quantity is a whole number of nano-units; a value with finer digits is rounded
  up (away from zero). The suffix gives the format: ``Ki``..``Ei`` BinarySI, ``e<n>``/``E<n>``
  DecimalExponent, anything else DecimalSI; a BinarySI value strictly between 0 and 1 in
  magnitude is DecimalSI, one above 2^63-1 is capped there;
- arithmetic is exact; a sum takes the format of its first term, and whenever the running total
  is zero, the format of the term added to it;
- canonical text: zero is ``0``. BinarySI is kept when the value is an integer of magnitude at
  least 1024: the value divided by 1024 as often as it divides evenly, with ``Ki``..``Ei`` (no
  suffix beyond). Otherwise decimal: the digits without trailing zeros, the exponent lowered to
  a multiple of three, with ``n u m "" k M G T P E`` (DecimalSI; no suffix outside that range,
  as in Go) or ``e<exponent>`` (DecimalExponent, none for 0).

Checked against Go's own output (tests/unit/workload/data/quantity_sums.json).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

_NANO = 10**9
MAX_TEXT = 256
"""The longest quantity text parsed (as ``goquantity``)."""
MAX_EXPONENT = 1000
"""The largest ``e<n>`` exponent, either way, parsed (as ``goquantity``'s shift)."""
_INT64_MAX = 2**63 - 1
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_SUFFIXES |= {"P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_NAMES = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_NAMES = {e // 10: s for s, e in _BINARY_SUFFIXES.items()}
# A number, then a suffix: what Kubernetes' quantity pattern allows, with an integer exponent.
_SYNTAX = re.compile(
    r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)


class QuantityError(ValueError):
    """Not a quantity Kubernetes would parse."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A value in nano-units (exact) and the format its text is printed in."""

    nanos: int
    format: str = DECIMAL_SI

    def __mul__(self, count: int) -> Quantity:
        return Quantity(self.nanos * count, self.format)

    def __add__(self, other: Quantity) -> Quantity:
        """Go's ``Add``: a zero total takes the format of what is added to it."""
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(self.nanos + other.nanos, fmt)

    def add_times(self, other: Quantity, times: int) -> Quantity:
        """``other`` added ``times`` times, one ``Add`` after another, at the cost of one: the
        format turns to ``other``'s whenever the running total is zero before an addition."""
        if times <= 0:
            return self
        step = other.nanos
        if step == 0:
            crosses_zero = self.nanos == 0
        else:
            j, rest = divmod(-self.nanos, step)
            crosses_zero = rest == 0 and 0 <= j < times
        return Quantity(self.nanos + step * times, other.format if crosses_zero else self.format)

    def __str__(self) -> str:
        return canonical(self)


def costly(value: Any) -> str | None:
    """Why ``value`` would cost the API server long as a quantity (text over ``MAX_TEXT``
    characters, an exponent beyond ``MAX_EXPONENT``: it works the number out in full, and a
    Pod with ``cpu: 1e999999999`` took it more than 30 s); None otherwise, also for what is
    no quantity at all (refused at once)."""
    if not isinstance(value, str):
        return None
    return _beyond_bounds(value.strip())[0]


def _beyond_bounds(text: str) -> tuple[str | None, re.Match[str] | None]:
    """Why ``text`` is beyond the bounds (``costly``), or None; and its match of the syntax
    (None when it does not match, or is too long to be read)."""
    if len(text) > MAX_TEXT:
        return f"a quantity of {len(text):,} characters (at most {MAX_TEXT})", None
    match = _SYNTAX.fullmatch(text)
    suffix = (match.group(3) or "") if match else ""
    if _is_exponent(suffix) and abs(int(suffix[1:])) > MAX_EXPONENT:
        return f"{text!r}: an exponent beyond {MAX_EXPONENT}", match
    return None, match


def _is_exponent(suffix: str) -> bool:
    """Whether a suffix of ``_SYNTAX`` is ``e<n>`` (``Ei`` is a binary one)."""
    return suffix[:1] in ("e", "E") and suffix not in _BINARY_SUFFIXES and len(suffix) > 1


def parse(value: str | int | float) -> Quantity:
    """A quantity as written in a manifest (a JSON number is read as its text).

    Text longer than ``MAX_TEXT`` characters and exponents beyond ``MAX_EXPONENT`` are refused:
    ``1e999999999`` is valid syntax, but its nano-units would take minutes of CPU and gigabytes
    to work out (a Pod template is not checked by the CRD, so such a value reaches us)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        text = repr(value)
    else:
        text = value.strip()
    why, match = _beyond_bounds(text)
    if why is not None:
        raise QuantityError(why)
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity")
    sign, number, suffix = match.group(1), match.group(2), match.group(3) or ""
    magnitude = Fraction(Decimal(number))
    if suffix in _BINARY_SUFFIXES:
        fmt = BINARY_SI
        magnitude *= 2 ** _BINARY_SUFFIXES[suffix]
    elif _is_exponent(suffix):
        fmt = DECIMAL_EXPONENT
        magnitude *= Fraction(10) ** int(suffix[1:])  # within MAX_EXPONENT (_beyond_bounds)
    else:
        fmt = DECIMAL_SI
        magnitude *= Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
    nanos = math.ceil(magnitude * _NANO)
    if fmt == BINARY_SI:
        nanos = min(nanos, _INT64_MAX * _NANO)
        if 0 < nanos < _NANO:
            fmt = DECIMAL_SI
    return Quantity(-nanos if sign == "-" else nanos, fmt)


def canonical(q: Quantity) -> str:
    """The text Kubernetes writes for ``q``."""
    if q.nanos == 0:
        return "0"
    fmt = q.format
    if fmt == BINARY_SI:
        whole, fraction = divmod(abs(q.nanos), _NANO)
        if whole < 1024 or fraction:
            fmt = DECIMAL_SI
        else:
            times = 0
            while whole % 1024 == 0:
                whole //= 1024
                times += 1
            digits = f"-{whole}" if q.nanos < 0 else str(whole)
            return digits + _BINARY_NAMES.get(times, "")
    amount, exponent = abs(q.nanos), -9
    while amount % 10 == 0:
        amount //= 10
        exponent += 1
    lower = exponent % 3
    amount, exponent = amount * 10**lower, exponent - lower
    digits = f"-{amount}" if q.nanos < 0 else str(amount)
    if fmt == DECIMAL_EXPONENT:
        return digits + (f"e{exponent}" if exponent else "")
    return digits + _DECIMAL_NAMES.get(exponent, "")


def total(terms: list[tuple[str | int | float, int]]) -> str:
    """The canonical text of ``sum(quantity * count)``, terms added in order (for tests)."""
    acc: Quantity | None = None
    for value, count in terms:
        term = parse(value) * count
        acc = term if acc is None else acc + term
    return canonical(acc if acc is not None else Quantity(0))
