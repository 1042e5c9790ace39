"""The conversion of user data (rows of Python values; pandas, Polars and Arrow frames) into
a batch of a :class:`~ddflow.schema.Schema`, under the invariants stated in
:mod:`ddflow.schema`: exactly the schema's columns and dtypes, lossless, no null in a
non-nullable column (nor in a list), or a :class:`~ddflow.errors.SchemaError` naming the column,
the row and the value."""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import polars as pl

from ddflow.schema.types import DType, Schema, fail, names_text, show

__all__ = ["frame_to_frame", "rows_to_frame"]


# Rows ------------------------------------------------------------------------------------------


def _accepts(kind: str, t: type) -> bool:
    """Whether a Python value of type ``t`` may be stored in a column of the given kind."""
    if t is type(None):
        return True
    # bool is an int subclass in Python, but True in an int64 column is almost always a bug.
    if issubclass(t, (bool, np.bool_)):
        return kind == "bool"
    if kind == "int":
        return issubclass(t, (int, np.integer))
    if kind == "float":
        return issubclass(t, (int, float, np.integer, np.floating))
    if kind == "str":
        return issubclass(t, str)
    if kind == "date":
        return issubclass(t, _dt.date) and not issubclass(t, _dt.datetime)
    if kind == "datetime":
        return issubclass(t, _dt.datetime)
    if kind == "list":
        return issubclass(t, (list, tuple))
    return False


def _column_from_values(name: str, dtype: DType, values: Sequence[Any]) -> pl.Series:
    """One column of Python values as a Series of the column's dtype, or a SchemaError."""
    where = f"column {name!r} ({dtype})"
    bad_types = {t for t in set(map(type, values)) if not _accepts(dtype.kind, t)}
    if bad_types:
        row = next(i for i, v in enumerate(values) if type(v) in bad_types)
        value = values[row]
        raise fail(
            f"{where} at row {row}: expected {dtype.name}, got {type(value).__name__} {show(value)}"
        )
    # float32 is built as float64 first so that a value out of float32's range is noticed
    # instead of silently becoming infinity.
    build = pl.Float64() if dtype.name == "float32" else dtype.polars
    try:
        series = pl.Series(name, values, dtype=build, strict=True)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        row = _first_unbuildable(values, build)
        raise fail(
            f"{where} at row {row}: {show(values[row])} cannot be represented as {dtype.name}"
        ) from None
    if dtype.name == "float32":
        narrow = series.cast(pl.Float32)
        overflow = series.is_finite() & narrow.is_infinite()
        if overflow.any():
            row = int(overflow.arg_max() or 0)
            raise fail(f"{where} at row {row}: {show(values[row])} is out of the range of float32")
        series = narrow
    if dtype.kind == "list":
        _check_elements(where, dtype, values, series)
    if dtype.kind == "datetime":
        # Polars converts time-zone-aware datetimes to UTC (or to a zoned column) instead of
        # refusing them; a naive column must not silently shift some of its values.
        aware = next((i for i, v in enumerate(values) if v is not None and v.tzinfo), None)
        if aware is not None:
            raise fail(
                f"{where} at row {aware}: {show(values[aware])} has a time zone; ddflow datetimes "
                "are naive (convert to UTC and drop tzinfo)"
            )
    _check_nulls(name, dtype, series, "None")
    return series


def _check_elements(where: str, dtype: DType, values: Sequence[Any], series: pl.Series) -> None:
    """Every element of a list column is a non-null value of the element type."""
    element = dtype.element
    assert element is not None
    for row, value in enumerate(values):
        if value is None:
            continue
        for x in value:
            if x is None or not _accepts(element.kind, type(x)):
                raise fail(
                    f"{where} at row {row}: element {show(x)} of {show(value)} is not a "
                    f"{element.name}"
                )


def _first_unbuildable(values: Sequence[Any], dtype: pl.DataType) -> int:
    """The first position whose value Polars refuses, by bisecting on prefixes (O(n) total)."""
    good, bad = 0, len(values)  # values[:good] builds, values[:bad] does not
    while bad - good > 1:
        mid = (good + bad) // 2
        try:
            pl.Series("", values[:mid], dtype=dtype, strict=True)
            good = mid
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
            bad = mid
    return bad - 1


def _check_nulls(name: str, dtype: DType, series: pl.Series, null_word: str) -> None:
    if dtype.nullable or series.null_count() == 0:
        return
    row = int(series.is_null().arg_max() or 0)
    raise fail(
        f"column {name!r} ({dtype}, not nullable) at row {row}: got {null_word}; declare the "
        f"column as {dtype.name + '?'!r} to allow nulls"
    )


def rows_to_frame(schema: Schema, rows: Iterable[Any]) -> pl.DataFrame:
    if isinstance(rows, (str, bytes, Mapping, pl.DataFrame, pl.LazyFrame)):
        raise fail(
            f"rows must be an iterable of rows (tuples, lists or dicts), got "
            f"{type(rows).__name__}; use frame_to_frame for data frames"
        )
    if not isinstance(rows, Iterable):
        raise fail(
            f"rows must be an iterable of rows (tuples, lists or dicts), got "
            f"{type(rows).__name__} {show(rows)}"
        )
    rows = rows if isinstance(rows, list) else list(rows)
    names = schema.names
    row_types = set(map(type, rows))
    if len(names) == 1 and not any(issubclass(t, (tuple, list, Mapping)) for t in row_types):
        columns: list[Sequence[Any]] = [rows]
    elif row_types and all(issubclass(t, (tuple, list)) for t in row_types):
        if set(map(len, rows)) - {len(names)}:
            row = next(i for i, r in enumerate(rows) if len(r) != len(names))
            raise fail(
                f"row {row} has {len(rows[row])} values but the schema has {len(names)} "
                f"columns ({names_text(names)}): {show(rows[row])}"
            )
        columns = [list(map(itemgetter(i), rows)) for i in range(len(names))]
    elif row_types and all(issubclass(t, Mapping) for t in row_types):
        try:
            if set(map(len, rows)) - {len(names)}:
                raise KeyError
            columns = [list(map(itemgetter(n), rows)) for n in names]
        except KeyError:
            _raise_key_error(names, rows)
            raise
    elif not rows:
        columns = [[] for _ in names]
    else:
        normalized = [_normalize_row(schema, i, r) for i, r in enumerate(rows)]
        columns = [list(map(itemgetter(i), normalized)) for i in range(len(names))]
    return pl.DataFrame(
        [_column_from_values(n, schema[n], c) for n, c in zip(names, columns, strict=True)]
    )


def _normalize_row(schema: Schema, row: int, value: Any) -> tuple[Any, ...]:
    """One row of a mixed batch (tuples and dicts, or bare values) as a tuple in column order."""
    names = schema.names
    if isinstance(value, Mapping):
        _raise_key_error(names, [value], first_row=row)
        return tuple(value[n] for n in names)
    if isinstance(value, (tuple, list)):
        if len(value) != len(names):
            raise fail(
                f"row {row} has {len(value)} values but the schema has {len(names)} columns "
                f"({names_text(names)}): {show(value)}"
            )
        return tuple(value)
    if len(names) == 1:
        return (value,)
    raise fail(
        f"row {row} is {type(value).__name__} {show(value)}; rows must be tuples, lists "
        f"or dicts with the columns {names_text(names)}"
    )


def _raise_key_error(names: Sequence[str], rows: Sequence[Any], first_row: int = 0) -> None:
    """Raise the error for the first dict row whose keys are not exactly ``names``."""
    wanted = set(names)
    for i, r in enumerate(rows, start=first_row):
        if not isinstance(r, Mapping):
            raise fail(f"row {i} is {type(r).__name__} {show(r)} but earlier rows are dicts")
        missing = [n for n in names if n not in r]
        if missing:
            raise fail(f"row {i} is missing column {names_text(map(repr, missing))}: {show(r)}")
        extra = [k for k in r if k not in wanted]
        if extra:
            raise fail(
                f"row {i} has unknown column {names_text(map(repr, extra))}; the schema has "
                f"{names_text(names)}"
            )


# Frames ----------------------------------------------------------------------------------------


def frame_to_frame(schema: Schema, data: Any) -> pl.DataFrame:
    present, read, from_pandas = _source_columns(data)
    names = schema.names
    missing = [n for n in names if n not in present]
    if missing:
        raise fail(
            f"the data is missing column{'s' if len(missing) > 1 else ''} {names_text(missing)}; "
            f"it has {names_text(map(str, present))}"
        )
    extra = [str(n) for n in present if n not in schema]
    if extra:
        raise fail(
            f"the data has column{'s' if len(extra) > 1 else ''} {names_text(extra)} that the "
            f"schema does not ({names_text(names)}); select the schema's columns first"
        )
    return pl.DataFrame([_cast_column(n, schema[n], read(n), from_pandas) for n in names])


def _source_columns(
    data: Any,
) -> tuple[list[Any], Callable[[str], pl.Series | list[Any]], bool]:
    """The source's column names, a reader of one column, and whether the source is pandas.

    Columns are read one at a time, after the names were checked, so that a conversion
    problem names its column and a frame with a missing column is rejected before any work.
    """
    if isinstance(data, pl.LazyFrame):
        data = data.collect()
    if isinstance(data, pl.DataFrame):
        return data.columns, data.get_column, False
    pd = sys.modules.get("pandas")  # if pandas was never imported, data cannot be pandas
    if pd is not None and isinstance(data, pd.DataFrame):
        _check_unique([str(c) for c in data.columns], "pandas")
        return list(data.columns), lambda n: _pandas_series(data[n]), True
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(data, (pa.Table, pa.RecordBatch)):
        _check_unique(data.column_names, "pyarrow")
        return data.column_names, lambda n: _arrow_series(n, data.column(n)), False
    raise fail(
        f"cannot read a {type(data).__name__} as a frame; expected a pandas DataFrame, a Polars "
        "DataFrame or LazyFrame, or a pyarrow Table or RecordBatch (use rows_to_frame for rows)"
    )


def _check_unique(names: list[str], source: str) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise fail(f"the {source} data has duplicate column names: {names_text(dupes)}")


def _arrow_series(name: str, array: Any) -> pl.Series:
    try:
        series = pl.from_arrow(array)
    except Exception as e:  # pyarrow and polars raise many types for unsupported arrays
        raise fail(f"column {name!r}: cannot read arrow type {array.type}: {e}") from None
    assert isinstance(series, pl.Series)
    return series.alias(name)


def _pandas_series(column: Any) -> pl.Series | list[Any]:
    """A pandas column as a Polars Series, or as Python values when it holds objects."""
    if column.dtype == object:
        # Object columns hold arbitrary Python values; they are checked value by value, as
        # rows are, with pandas' missing markers (None, NaN, NaT, pd.NA) read as null.
        values: list[Any] = column.tolist()
        for i in np.flatnonzero(column.isna().to_numpy()):
            values[i] = None
        return values
    try:
        series = pl.from_pandas(column, nan_to_null=True)
    except Exception as e:  # pyarrow and polars raise many types for unsupported dtypes
        raise fail(
            f"column {column.name!r}: cannot read pandas dtype {column.dtype}: {e}"
        ) from None
    assert isinstance(series, pl.Series)
    return series


# The source families each target type family may be cast from; the cast must still be lossless.
_CASTABLE: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "float"}),
    "float": frozenset({"int", "float"}),
    "bool": frozenset({"bool"}),
    "str": frozenset({"str"}),
    "date": frozenset({"date", "datetime"}),
    "datetime": frozenset({"date", "datetime"}),
    "list": frozenset({"list"}),
}


def _family(dtype: pl.DataType) -> str:
    if dtype.is_integer():
        return "int"
    if dtype.is_float():
        return "float"
    if isinstance(dtype, (pl.String, pl.Categorical, pl.Enum)):
        return "str"
    if isinstance(dtype, pl.Datetime):
        return "datetime" if dtype.time_zone is None else "zoned datetime"
    for family, cls in (
        ("bool", pl.Boolean),
        ("date", pl.Date),
        ("null", pl.Null),
        ("list", pl.List),
    ):
        if isinstance(dtype, cls):
            return family
    return str(dtype)


def _cast_column(
    name: str, dtype: DType, source: pl.Series | list[Any], from_pandas: bool
) -> pl.Series:
    """One source column as the column's dtype; every changed value or forbidden null raises."""
    null_word = "a null (None or NaN)" if from_pandas else "a null"
    if isinstance(source, list):
        return _column_from_values(name, dtype, source)
    source = source.alias(name)
    if source.dtype == dtype.polars:
        _check_nulls(name, dtype, source, null_word)
        _check_no_null_elements(name, dtype, source)
        return source
    family = _family(source.dtype)
    if family != "null" and family not in _CASTABLE[dtype.kind]:
        hint = "; ddflow datetimes are naive (no time zone)" if family == "zoned datetime" else ""
        raise fail(
            f"column {name!r} has type {source.dtype}, which cannot be converted to "
            f"{dtype.name} without changing values{hint}"
        )
    cast = source.cast(dtype.polars, strict=False)
    lost = cast.is_null() & source.is_not_null()
    if dtype.kind in ("int", "date", "datetime", "list"):
        # A cast that truncates (1.5 -> 1, 10:30 -> the date, ns -> us) does not round-trip.
        lost = lost | (cast.cast(source.dtype, strict=False) != source).fill_null(False)
    elif dtype.name == "float32":
        lost = lost | (source.cast(pl.Float64).is_finite() & cast.is_infinite())
    if lost.any():
        row = int(lost.arg_max() or 0)
        # Python datetimes stop at microseconds, so temporal values are shown as Polars prints them.
        value = source[row] if family != "datetime" else source.cast(pl.String)[row]
        value = value.to_list() if isinstance(value, pl.Series) else value
        raise fail(
            f"column {name!r} ({dtype}) at row {row}: {show(value)} cannot be represented "
            f"as {dtype.name} (source type {source.dtype})"
        )
    _check_nulls(name, dtype, cast, null_word)
    _check_no_null_elements(name, dtype, cast)
    return cast


def _check_no_null_elements(name: str, dtype: DType, series: pl.Series) -> None:
    if dtype.kind != "list":
        return
    holes = series.list.eval(pl.element().is_null()).list.any().fill_null(False)
    if holes.any():
        row = int(holes.arg_max() or 0)
        raise fail(
            f"column {name!r} ({dtype}) at row {row}: {show(series[row].to_list())} holds a "
            "null element"
        )
