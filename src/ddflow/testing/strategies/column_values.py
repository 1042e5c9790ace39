"""Hypothesis strategies of column values and records: :func:`values` of one ddflow type,
:func:`records` of a schema.

Values are skewed: a few hot values most of the time (so that keys collide and joins match),
the type's special values often (NaN, ``-0.0``, ``±inf``, the int64 and int32 extremes, the
first and last dates, nulls in a nullable column), and any value of the type now and then.

Invariants:

* a drawn value is valid for its column and unchanged by the conversion into a batch (a
  ``float32`` value is exactly representable; a ``datetime`` has microsecond precision);
* a drawn record holds NaN only as the one object :data:`NAN`, so that records compare and hash
  as equal records do (``float("nan") != float("nan")``, and Python hashes NaN by identity).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from ddflow.schema import DType, Schema

__all__ = ["NAN", "TYPES", "records", "values"]


#: The one NaN object that drawn records hold (see the module's invariants).
NAN = math.nan
#: The ddflow column types, without nullability.
TYPES = ("int64", "int32", "float64", "float32", "bool", "str", "date", "datetime")


_D = datetime.date
_DT = datetime.datetime
_F32_MAX = 3.4028234663852886e38
_HOT: dict[str, list[Any]] = {
    "int": [0, 1, 2, -1],
    "float": [0.0, 1.0, -1.5, 2.5],
    "bool": [True, False],
    "str": ["", "a", "b", "ab"],
    "date": [_D(2000, 1, 1), _D(2000, 1, 2), _D(1999, 12, 31)],
    "datetime": [_DT(2000, 1, 1), _DT(2000, 1, 1, 12, 30), _DT(1999, 12, 31, 23, 59, 59, 999999)],
}
_SPECIAL: dict[str, list[Any]] = {
    "int64": [-(2**63), 2**63 - 1, -(2**63) + 1, 2**31],
    "int32": [-(2**31), 2**31 - 1, -(2**31) + 1],
    "float64": [NAN, -0.0, math.inf, -math.inf, 0.1, 5e-324, 1.7976931348623157e308, 2.0**60],
    "float32": [NAN, -0.0, math.inf, -math.inf, _F32_MAX, 1.401298464324817e-45, 0.5],
    "bool": [True],
    "str": ["A", "Σ", " a", "1", "-2", "ab\u00e9", "ß"],
    "date": [_D(1, 1, 1), _D(9999, 12, 31), _D(1970, 1, 1), _D(2000, 2, 29)],
    "datetime": [_DT(1, 1, 1), _DT(9999, 12, 31, 23, 59, 59, 999999), _DT(1970, 1, 1)],
}
_TAME_SPECIAL: dict[str, list[Any]] = {
    "int64": [1000, -1000, 7],
    "int32": [1000, -1000, 7],
    "float64": [NAN, -0.0, math.inf, -math.inf, 0.1],
    "float32": [NAN, -0.0, math.inf, -math.inf, 0.5],
    "bool": [True],
    "str": ["A", "Σ", " a", "1", "-2"],
    "date": [_D(1970, 1, 1), _D(2000, 2, 29), _D(2030, 12, 31)],
    "datetime": [_DT(1970, 1, 1), _DT(2030, 12, 31, 23, 59, 59, 999999)],
}
_ALPHABET = "abAB Σé1-"


def _canonical(v: Any) -> Any:
    return NAN if isinstance(v, float) and math.isnan(v) else v


def _any_value(dtype: DType, extremes: bool) -> st.SearchStrategy[Any]:
    name = dtype.name
    if name in ("int64", "int32"):
        bits = 63 if name == "int64" else 31
        lo, hi = (-(2**bits), 2**bits - 1) if extremes else (-1000, 1000)
        return st.integers(lo, hi)
    if name in ("float64", "float32"):
        width = 64 if name == "float64" else 32
        if extremes:
            return st.floats(width=width)
        return st.floats(-1e6, 1e6, width=width) | st.integers(-20, 20).map(float)
    if name == "bool":
        return st.booleans()
    if name == "str":
        return st.text(alphabet=_ALPHABET, max_size=3)
    if name == "date":
        return st.dates() if extremes else st.dates(_D(1970, 1, 1), _D(2030, 12, 31))
    if extremes:
        return st.datetimes()
    return st.datetimes(_DT(1970, 1, 1), _DT(2030, 12, 31))


def values(dtype: str | DType, extremes: bool = True) -> st.SearchStrategy[Any]:
    """Values of a ddflow column type (``"int64"``, ``"str?"``, ...), skewed towards a few hot
    values, with the type's special values (NaN, ``-0.0``, ``±inf``, integer extremes, the first
    and last dates) and nulls for a nullable type. ``extremes=False`` keeps numbers small and
    dates near 2000 (no integer overflow in arithmetic; NaN and infinities stay).

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=20, database=None)
    ... @given(values("int32?"))
    ... def test(v):
    ...     assert v is None or -(2**31) <= v < 2**31
    >>> test()
    """
    t = DType.parse(dtype)
    hot = st.sampled_from(_HOT[t.kind])
    special = st.sampled_from((_SPECIAL if extremes else _TAME_SPECIAL)[t.name])
    if t.name == "float32":  # hot values are float32-exact already
        hot = st.sampled_from(_HOT["float"])
    branches = [hot, hot, hot, special, _any_value(t, extremes)]
    if t.nullable:
        branches.append(st.none())
    return st.one_of(branches).map(_canonical)


def records(
    schema: Mapping[str, Any] | Schema, extremes: bool = True
) -> st.SearchStrategy[tuple[Any, ...]]:
    """Records (tuples in column order) of a schema, each column drawn with :func:`values`.

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=10, database=None)
    ... @given(records({"k": "int64", "s": "str?"}))
    ... def test(r):
    ...     assert len(r) == 2 and isinstance(r[0], int)
    >>> test()
    """
    s = schema if isinstance(schema, Schema) else Schema(schema)
    return st.tuples(*(values(t, extremes) for t in s.dtypes))
