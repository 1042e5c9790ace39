"""Records conformed to their schema in plain Python (:func:`conform`), as the engine stores
them.

**Records** (:func:`conform`): a row function's result as the record the engine stores. A
one-column schema takes a bare value or a 1-tuple; otherwise a tuple or list of one value per
column, or a dict with exactly the column names. Integer columns take ``int`` (not ``bool``,
not ``float``) within their range; float columns take ``int`` or ``float`` (not ``bool``),
converted to ``float64`` (an ``int`` beyond its range is an error) and then, for ``float32``,
rounded to ``float32`` (a finite value beyond ``float32``'s range is an error); ``bool``
columns take ``bool``; ``str`` columns ``str`` (encodable as UTF-8); ``date`` columns a date
that is not a datetime; ``datetime`` columns a naive datetime. NumPy numbers and booleans count
as the Python values they hold. ``None`` only in a nullable column; NaN is a float, not a null.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import Any

from ddflow.schema import DType, Schema
from ddflow.testing.values.arithmetic import _INT_RANGE, _f32
from ddflow.testing.values.errors import ValueRuleError

__all__ = ["conform"]


def _plain(value: Any) -> Any:
    """A NumPy number or boolean as the Python value it holds (NumPy is not imported)."""
    t = type(value)
    if t.__module__ != "numpy":
        return value
    names = {c.__name__ for c in t.__mro__}
    if "integer" in names:
        return int(value)
    if "floating" in names:
        return float(value)
    if names & {"bool", "bool_"}:
        return bool(value)
    if "str_" in names:
        return str(value)
    return value


def _conform_value(column: str, dtype: DType, value: Any) -> Any:
    where = f"column {column!r} ({dtype})"
    value = _plain(value)
    if value is None:
        if not dtype.nullable:
            raise ValueRuleError(f"{where}: got None, but the column is not nullable")
        return None
    kind, t = dtype.kind, type(value)
    element = dtype.element
    if element is not None:  # a list: a tuple here (a record is a dict key), never null inside
        if not issubclass(t, (list, tuple)):
            raise ValueRuleError(f"{where}: expected {dtype.name}, got {t.__name__} {value!r}")
        return tuple(_conform_value(f"{column}[{i}]", element, x) for i, x in enumerate(value))
    ok = {
        "int": issubclass(t, int) and not issubclass(t, bool),
        "float": issubclass(t, (int, float)) and not issubclass(t, bool),
        "bool": issubclass(t, bool),
        "str": issubclass(t, str),
        "date": issubclass(t, _dt.date) and not issubclass(t, _dt.datetime),
        "datetime": issubclass(t, _dt.datetime),
    }[kind]
    if not ok:
        raise ValueRuleError(f"{where}: expected {dtype.name}, got {t.__name__} {value!r}")
    if kind == "int":
        low, high = _INT_RANGE[dtype.name]
        if not low <= value <= high:
            raise ValueRuleError(f"{where}: {value!r} does not fit in {dtype.name}")
        return int(value)
    if kind == "float":
        try:
            x = float(value)
        except OverflowError:
            raise ValueRuleError(f"{where}: {value!r} is out of the range of float64") from None
        if dtype.name == "float32":
            narrow = _f32(x)
            if math.isinf(narrow) and math.isfinite(x):
                raise ValueRuleError(f"{where}: {value!r} is out of the range of float32")
            return narrow
        return x
    if kind == "str":
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueRuleError(f"{where}: {value!r} is not valid text (UTF-8)") from None
        return str(value)
    if kind == "date":
        return _dt.date(value.year, value.month, value.day)
    if kind == "datetime":
        if value.tzinfo is not None:
            raise ValueRuleError(f"{where}: {value!r} has a time zone; datetimes are naive")
        return _dt.datetime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        )
    return value


def conform(schema: Schema, value: Any) -> tuple[Any, ...]:
    """A row function's result as the record the engine stores for ``schema``, or a
    :class:`ValueRuleError` naming the column and the value.

    >>> s = Schema({"n": "int64", "w": "float64?"})
    >>> conform(s, (1, 2)), conform(s, {"w": None, "n": 3}), conform(Schema({"x": "int32"}), 5)
    ((1, 2.0), (3, None), (5,))
    >>> conform(s, (True, 1.0))
    Traceback (most recent call last):
    ...
    ddflow.testing.values.errors.ValueRuleError: column 'n' (int64): expected int64, got bool True
    """
    names = schema.names
    if len(names) == 1 and not isinstance(value, tuple):
        values: tuple[Any, ...] | list[Any] = (value,)
    elif isinstance(value, (tuple, list)):
        values = value
    elif isinstance(value, Mapping):
        if set(value) != set(names) or len(value) != len(names):
            raise ValueRuleError(
                f"record {value!r} does not have exactly the columns {', '.join(names)}"
            )
        values = [value[n] for n in names]
    else:
        raise ValueRuleError(
            f"record {value!r} is a {type(value).__name__}; expected a tuple, list or dict of "
            f"the columns {', '.join(names)}"
        )
    if len(values) != len(names):
        raise ValueRuleError(
            f"record {value!r} has {len(values)} values but the schema has {len(names)} "
            f"columns ({', '.join(names)})"
        )
    return tuple(
        _conform_value(n, t, v) for n, t, v in zip(names, schema.dtypes, values, strict=True)
    )
