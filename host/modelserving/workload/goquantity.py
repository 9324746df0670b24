"""A ``resource.Quantity`` as Go's JSON decoding leaves it, for Kthena's revision hashes.

Kthena hashes a go-spew dump of its Role values, and spew prints a Quantity's internal fields,
not its string. ``go_quantity`` returns those fields as k8s.io/apimachinery's
``Quantity.UnmarshalJSON`` sets them (through ``ParseQuantity``): a fast int64 path
(``i``: value and scale, ``s`` kept when the spelling is canonical) or an ``inf.Dec`` (``d``:
the unscaled big integer as ``big.Int`` stores it, neg and 64-bit words, and its scale). So "1",
"1000m" and "1e3" give different values, exactly as in Go. Called by ``modelserving.workload.spew``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

_INT64_MAX = 2**63 - 1
_NANO = -9  # resource.Nano
_MAX_INT64_FACTORS = 18
_WORD_BITS = 64  # big.Word on the 64-bit platforms Kthena ships for

# suffix -> (base, exponent, format), as resource's suffixer interprets it.
_SUFFIXES: dict[str, tuple[int, int, str]] = {
    "": (10, 0, "DecimalSI"),
    "n": (10, -9, "DecimalSI"),
    "u": (10, -6, "DecimalSI"),
    "m": (10, -3, "DecimalSI"),
    "k": (10, 3, "DecimalSI"),
    "M": (10, 6, "DecimalSI"),
    "G": (10, 9, "DecimalSI"),
    "T": (10, 12, "DecimalSI"),
    "P": (10, 15, "DecimalSI"),
    "E": (10, 18, "DecimalSI"),
    "Ki": (2, 10, "BinarySI"),
    "Mi": (2, 20, "BinarySI"),
    "Gi": (2, 30, "BinarySI"),
    "Ti": (2, 40, "BinarySI"),
    "Pi": (2, 50, "BinarySI"),
    "Ei": (2, 60, "BinarySI"),
}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_GO_INT = re.compile(r"[+-]?[0-9]+")
# What Go's strings.TrimSpace removes (unicode.IsSpace) and its JSON encoder writes unescaped.
_GO_SPACE = " \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u202f\u205f\u3000"
# What Go's JSON encoder escapes: UnmarshalJSON then sees the escape, not the character.
_ESCAPED = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029]')


# Beyond these, decoding would take Go (and us) unbounded time and memory (a 1e-999999999 is a
# 10**999999990 division): such a quantity is treated as one Go cannot decode.
_MAX_TEXT = 256
_MAX_SHIFT = 1000


class QuantityError(ValueError):
    """The text is not a quantity Go would decode (Kthena's API server refuses it), or one
    too large to decode in bounded time."""


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: sign, the number as written, numerator and fraction digits
    without leading zeros, and the suffix."""
    positive = True
    pos, end = 0, len(text)
    if text[:1] in ("-", "+"):
        positive = text[0] != "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    if pos >= end:
        return positive, text, text[start:], "", ""
    num = text[start:pos] or "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        fraction = pos
        while pos < end and text[pos].isdigit() and text[pos].isascii():
            pos += 1
        denom = text[fraction:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end:
        if not (text[pos].isdigit() and text[pos].isascii()):
            raise QuantityError(f"quantity {text!r}: unexpected characters after the number")
        pos += 1
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    found = _SUFFIXES.get(suffix)
    if found is not None:
        return found
    if len(suffix) > 1 and suffix[0] in "eE" and _GO_INT.fullmatch(suffix[1:]):
        exponent = int(suffix[1:])
        if -(2**63) <= exponent < 2**63:
            # Go keeps the low 32 bits (int32(parsed)).
            exponent = (exponent + 2**31) % 2**32 - 2**31
            return 10, exponent, "DecimalExponent"
    raise QuantityError(f"quantity suffix {suffix!r} is not recognised")


def _dec_from_string(value: str) -> tuple[int, int]:
    """``inf.Dec.SetString``: (unscaled, scale) of a decimal such as ``-1.50``."""
    match = re.fullmatch(r"([+-]?)([0-9]*)(?:\.([0-9]*))?", value)
    if match is None or not (match.group(2) or match.group(3)):
        raise QuantityError(f"quantity number {value!r} is not a decimal")
    sign, whole, fraction = match.group(1), match.group(2), match.group(3) or ""
    unscaled = int(whole + fraction or "0")
    return (-unscaled if sign == "-" else unscaled), len(fraction) if match.group(
        3
    ) is not None else 0


def _round_up_to_nano(unscaled: int, scale: int) -> tuple[int, int]:
    """``Dec.Round(x, 9, inf.RoundUp)`` of a positive x: the value at scale 9, away from zero."""
    if scale <= 9:
        return unscaled * 10 ** (9 - scale), 9
    divisor = 10 ** (scale - 9)
    quotient, remainder = divmod(unscaled, divisor)
    return quotient + (1 if remainder else 0), 9


def _big_int(unscaled: int) -> dict[str, Any]:
    """A ``big.Int``: its sign and magnitude as little-endian 64-bit words (nil for zero)."""
    magnitude = abs(unscaled)
    words: list[int] | None = None
    if magnitude:
        words = []
        while magnitude:
            words.append(magnitude & (2**_WORD_BITS - 1))
            magnitude >>= _WORD_BITS
    return {"neg": unscaled < 0, "abs": words}


def _fast(value: int, scale: int, fmt: str, canonical: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"i": {"value": value, "scale": scale}, "Format": fmt}
    if canonical is not None:
        out["s"] = canonical
    return out


def parse_quantity(text: str) -> dict[str, Any]:
    """``resource.ParseQuantity``'s result as Go field values (struct fields by Go name)."""
    if not text:
        raise QuantityError("quantity is empty")
    if len(text) > _MAX_TEXT:
        raise QuantityError(f"quantity of {len(text)} characters is too long")
    if text == "0":
        return {"Format": "DecimalSI", "s": "0"}
    positive, value, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)
    precision, scale, mantissa = 0, 0, 1
    if fmt in ("DecimalExponent", "DecimalSI"):
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1
    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = num + denom
            amount = int(shifted)
            product = amount * mantissa
            if product <= _INT64_MAX:
                result = product if positive else -product
                if fmt == "BinarySI":
                    canonical = exponent % 10 == 0 and amount & 0x07 != 0
                else:
                    canonical = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
                return _fast(result, scale, fmt, text if canonical else None)
    unscaled, dec_scale = _dec_from_string(value)
    if base == 10:
        dec_scale -= exponent
        if abs(dec_scale - 9) > _MAX_SHIFT:
            raise QuantityError(f"quantity {text!r}: exponent out of range")
    else:
        unscaled *= 1 << exponent
    negative = unscaled < 0
    unscaled = abs(unscaled)
    if unscaled:
        unscaled, dec_scale = _round_up_to_nano(unscaled, dec_scale)
    if fmt == "BinarySI" and _dec_compare(unscaled, dec_scale, _INT64_MAX, 0) > 0:
        unscaled, dec_scale = _INT64_MAX, 0
    if fmt == "BinarySI" and unscaled and _dec_compare(unscaled, dec_scale, 1, 0) < 0:
        fmt = "DecimalSI"
    if negative:
        unscaled = -unscaled
    return {"d": {"Dec": {"unscaled": _big_int(unscaled), "scale": dec_scale}}, "Format": fmt}


def _dec_compare(a: int, a_scale: int, b: int, b_scale: int) -> int:
    common = max(a_scale, b_scale)
    left, right = a * int(10 ** (common - a_scale)), b * int(10 ** (common - b_scale))
    return int(left > right) - int(left < right)


def go_json_number(value: int | float) -> str:
    """A JSON number as the API server writes it back (Go's encoding/json for int64/float64:
    the shortest digits, fixed notation from 1e-6 to 1e21, else an exponent like ``1e-7``)."""
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise QuantityError(f"quantity {value!r} is not a finite number")
    magnitude = abs(value)
    if magnitude and (magnitude < 1e-6 or magnitude >= 1e21):
        mantissa, _, exponent = repr(value).partition("e")
        if len(exponent) == 3 and exponent.startswith("-0"):
            exponent = "-" + exponent[2]
        return f"{mantissa}e{exponent}"
    if value.is_integer():
        return str(int(value)) if value or math.copysign(1, value) > 0 else "-0"
    return format(Decimal(repr(value)), "f")


@lru_cache(maxsize=4096)
def go_quantity(raw: str | int | float) -> dict[str, Any]:
    """The Quantity ``UnmarshalJSON`` makes of a JSON value: it strips the quotes of the JSON
    text the API server wrote (it does not unescape it) or takes a number's text, trims spaces
    and parses."""
    text = raw if isinstance(raw, str) else go_json_number(raw)
    if _ESCAPED.search(text):
        raise QuantityError(f"quantity {text!r} holds a character JSON escapes")
    return parse_quantity(text.strip(_GO_SPACE))
