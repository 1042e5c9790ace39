"""Values converted between ddflow types in plain Python: casts (``cast``), and the
conversions the typing rules (:mod:`~ddflow.testing.values.typer`) call for: a value widened to
the type its operands are combined in, a contextual literal materialized in its type, a
``clip`` bound in its input's type. Numbers are written as text and read from text here too.

**Casts** (a value that does not convert becomes null):

* between integers: null when out of range; integer to float: rounded to nearest (ties to even)
  directly in the target type; ``float64`` to ``float32``: rounded, ``inf`` beyond its range;
  float to integer: truncated toward zero, null for NaN, ``±inf`` and out of range;
* ``bool`` to a number is 1/0; a number to ``bool`` is ``x != 0`` (NaN is True);
* to ``str``: integers in decimal; ``true``/``false``; dates ``YYYY-MM-DD``; datetimes
  ``YYYY-MM-DD HH:MM:SS.ffffff``; floats as the shortest digits that read back to the same value,
  in positional notation when the decimal exponent ``e`` (``x = d.ddd × 10^e``) is in
  ``-5 <= e < 16`` (``-6 <= e < 13`` for ``float32``), else ``d.ddde+XX``/``d.ddde-X``; an
  integral value ends in ``.0``; ``-0.0``, ``NaN``, ``inf``, ``-inf``;
* ``str`` to an integer: ``[+-]?[0-9]+`` in range, else null; ``str`` to a float: a decimal
  number (``1``, ``-1.5``, ``.5``, ``5.``, ``1e-3``) or ``inf``/``infinity``/``nan`` in any case
  with an optional sign, rounded correctly to the target type (overflow is ``inf``), else null;
  no white space. ``str`` to ``bool``, ``date`` or ``datetime`` is accepted when the dataflow is
  built but fails when the local runtime runs it: :func:`~ddflow.testing.values.evaluate`
  refuses it;
* ``date`` to ``datetime`` is midnight; ``datetime`` to ``date`` drops the time of day.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ddflow.schema import DType
from ddflow.testing.values.arithmetic import _FLOATS, _INT_RANGE, _f32, _f32_exact
from ddflow.testing.values.errors import ValueRuleError
from ddflow.testing.values.typer import _literal_name

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)


def _shortest(x: float, single: bool) -> tuple[str, int]:
    """The shortest digits ``d`` that read back to ``x > 0`` and ``k``, with ``x = 0.d × 10^k``."""
    if single:
        for p in range(1, 10):
            text = f"{x:.{p - 1}e}"
            if _f32_exact(Fraction(text)) == x:
                break
    else:
        text = repr(x)
    _, digits, exponent = Decimal(text).normalize().as_tuple()
    assert isinstance(exponent, int)
    d = "".join(map(str, digits))
    return d, len(d) + exponent


def _float_text(x: float, single: bool) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0.0"
    d, k = _shortest(abs(x), single)
    low, high = (-6, 13) if single else (-5, 16)
    if len(d) <= k <= high:
        return f"{sign}{d}{'0' * (k - len(d))}.0"
    if 0 < k <= high:
        return f"{sign}{d[:k]}.{d[k:]}"
    if low < k <= 0:
        return f"{sign}0.{'0' * -k}{d}"
    e = k - 1
    mantissa = d[0] + ("." + d[1:] if len(d) > 1 else "")
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _text(value: Any, name: str) -> str:
    if name in _FLOATS:
        return _float_text(value, name == "float32")
    if name == "bool":
        return "true" if value else "false"
    if name == "datetime":
        return f"{value.date().isoformat()} {value:%H:%M:%S}.{value.microsecond:06d}"
    if name == "date":
        return str(value.isoformat())
    return str(value)


def _parse_float(text: str, single: bool) -> float | None:
    if not _FLOAT_TEXT.fullmatch(text):
        return None
    word = text.lstrip("+-").lower()
    if word in ("inf", "infinity", "nan"):
        value = math.nan if word == "nan" else math.inf
        return -value if text.startswith("-") and word != "nan" else value
    d = float(text)
    if not single or d == 0 or math.isinf(d):
        return d if not single else _f32(d)
    return _f32_exact(Fraction(Decimal(text)))


def _convert(value: Any, source: str, target: str) -> Any:
    """A value of type ``source`` in the type ``target``: a widening, a contextual literal's
    materialization or a ``clip`` bound (an integer target that the value does not fit is an
    error: the local runtime fails at run time)."""
    if value is None or source == target:
        return value
    if target in _INT_RANGE:
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueRuleError(f"{value!r} cannot be converted to {target}")
            value = math.trunc(value)
        low, high = _INT_RANGE[target]
        if not low <= value <= high:
            raise ValueRuleError(f"{value!r} does not fit in {target}")
        return value
    if target == "float32":
        return _f32_exact(value) if isinstance(value, int) else _f32(value)
    if target == "float64":
        return float(value)
    return value


def _literal(value: Any, dtype: DType | None, name: str) -> Any:
    """A literal's value in its type."""
    return _convert(value, _literal_name(value, None), name)


def _cast(value: Any, source: str, target: DType) -> Any:
    name = target.name
    if value is None or source == name or source == "null":
        return value
    if name == "str":
        return _text(value, source)
    if source == "str":
        if name in _INT_RANGE:
            if not _INT_TEXT.fullmatch(value):
                return None
            low, high = _INT_RANGE[name]
            n = int(value)
            return n if low <= n <= high else None
        if name in _FLOATS:
            return _parse_float(value, name == "float32")
        raise ValueRuleError(
            f"cast from str to {name} is accepted when a dataflow is built but fails when the "
            "local runtime runs it; it has no value rule"
        )
    if name == "bool":
        return value != 0
    if source == "bool":
        return _convert(int(value), "int64", name)
    if name == "date":
        return value.date()
    if name == "datetime":
        return _dt.datetime(value.year, value.month, value.day)
    if name in _INT_RANGE:
        if isinstance(value, float):
            if not math.isfinite(value):
                return None
            value = math.trunc(value)
        low, high = _INT_RANGE[name]
        return value if low <= value <= high else None
    return _convert(value, source, name)
