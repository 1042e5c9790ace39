"""Numbers of the ddflow types in plain Python: the integer types' ranges and wrap-around at
their width, ``float32`` rounding (to nearest, ties to even, once: ``_f32_exact``), IEEE 754
division, floor, ceiling and rounding that keep the sign of zero, C's ``pow`` and the C
library's ``sqrt``, ``log``, ``log1p`` and ``exp`` (IEEE results where Python raises), and the
total order of floats (NaN equal to NaN and above every number), as the value rules
(:mod:`~ddflow.testing.values.evaluation`) state them.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Any

_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


_FLOATS = ("float32", "float64")
_F32_MAX = struct.unpack("f", struct.pack("I", 0x7F7FFFFF))[0]


def _f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (ties to even); beyond its range, ``±inf``."""
    try:
        return float(struct.unpack("f", struct.pack("f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


#: ``ln`` of ``e`` rounded to float32, in float32: the divisor of a float32 ``log``
_LN_E32 = _f32(math.log(_f32(math.e)))


def _f32_next(x: float, up: bool) -> float:
    bits = struct.unpack("I", struct.pack("f", x))[0]
    if x == 0:
        bits = 1 if up else 0x80000001
    elif (x > 0) == up:
        bits += 1
    else:
        bits -= 1
    return float(struct.unpack("f", struct.pack("I", bits))[0])


def _f32_exact(q: Fraction | int) -> float:
    """The float32 nearest the exact number ``q`` (ties to even), rounding once."""
    d = float(q)  # correctly rounded to float64
    c = _f32(d)
    if math.isinf(d) or Fraction(d) == q:
        return c
    # Rounding to float64 first errs only when it lands exactly halfway between two float32.
    other = math.copysign(_F32_MAX, d) if math.isinf(c) else _f32_next(c, up=d > c)
    if math.isinf(c) or math.isinf(other):  # between the largest float32 and "2**128"
        halfway = math.copysign(float(2**128 - 2**103), d)
    else:
        halfway = float((Fraction(c) + Fraction(other)) / 2)
    if d != halfway:
        return c
    below, above = (c, other) if c < other else (other, c)
    return above if q > Fraction(d) else below


def _wrap(n: int, name: str) -> int:
    bits = 32 if name == "int32" else 64
    n &= (1 << bits) - 1
    return n - (1 << bits) if n >> (bits - 1) else n


def _div(a: float, b: float) -> float:
    """IEEE division."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _floor(x: float) -> float:
    if not math.isfinite(x) or x == 0:
        return x
    return float(math.floor(x))


def _ceil(x: float) -> float:
    if not math.isfinite(x) or x == 0:
        return x
    r = float(math.ceil(x))
    return -0.0 if r == 0 and x < 0 else r


def _round_half_away(x: float) -> float:
    if not math.isfinite(x) or abs(x) >= 2.0**52:
        return x
    t = float(math.trunc(x))
    if abs(x - t) >= 0.5:
        t += math.copysign(1.0, x)
    return math.copysign(t, x) if t == 0 else t


def _powi(x: float, n: int) -> float:
    """``x ** n`` by repeated squaring, as the C runtime's ``__powidf2``."""
    y = x if n % 2 else 1.0
    n >>= 1
    while n:
        x = x * x
        if n % 2:
            y = y * x
        n >>= 1
    return y


def _round(x: float, decimals: int, single: bool) -> float:
    if decimals == 0:
        return _round_half_away(x)
    if decimals >= 326:
        return x
    if decimals >= 300 and not single:
        mul2, mul5 = math.ldexp(1.0, decimals), _powi(5.0, decimals)
        out = _round_half_away(x * mul2 * mul5) / mul5 * (1.0 / mul2)
    else:
        m = _powi(10.0, decimals)
        out = _div(_round_half_away(x * m), m)
        out = _f32(out) if single else out
    return out if math.isfinite(out) else x


def _pow(x: float, y: float) -> float:
    """C's ``pow``."""
    try:
        return math.pow(x, y)
    except OverflowError:
        odd = y.is_integer() and y % 2 == 1
        return -math.inf if x < 0 and odd else math.inf
    except ValueError:
        if x == 0 and y < 0:
            odd = y.is_integer() and y % 2 == 1
            return math.copysign(math.inf, x) if odd else math.inf
        return math.nan


def _math(name: str, x: float) -> float:
    """The C library's sqrt, log, log1p, exp, with IEEE results where Python raises."""
    if math.isnan(x):
        return x
    if name == "sqrt":
        return math.sqrt(x) if x >= 0 or x == 0 else math.nan
    if name == "exp":
        try:
            return math.exp(x)
        except OverflowError:
            return math.inf
    if name == "log":
        return -math.inf if x == 0 else math.nan if x < 0 else math.log(x)
    return -math.inf if x == -1 else math.nan if x < -1 else math.log1p(x)


def _feq(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _flt(a: Any, b: Any) -> bool:
    """``a < b`` in the total order of floats (NaN above every number)."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a):
            return False
        if math.isnan(b):
            return True
    return bool(a < b)
