"""The typed schema of a collection, and the conversion of user data into batches that fit it.

A :class:`Schema` is an immutable, ordered mapping from column name to :class:`DType`. Every
batch of a collection is a Polars DataFrame whose data columns are exactly the schema's columns,
in the schema's order, with the schema's Polars dtypes; ddflow appends its own bookkeeping
columns (``__t0``, ``__t1``, ..., ``__diff``) after them, which is why user column names may not
start with ``"__"``.

The type system is small on purpose, so that every runtime (Polars locally, Spark on a
cluster) represents each type exactly:

============  ==================  =================  =====================================
ddflow type   Polars dtype        Spark type         Python values accepted in rows
============  ==================  =================  =====================================
``int64``     ``Int64``           ``bigint``         ``int`` and NumPy integers (not bool)
``int32``     ``Int32``           ``int``            ``int`` and NumPy integers (not bool)
``float64``   ``Float64``         ``double``         ``float``, ``int`` (converted)
``float32``   ``Float32``         ``float``          ``float``, ``int`` (converted)
``bool``      ``Boolean``         ``boolean``        ``bool``
``str``       ``String``          ``string``         ``str``
``date``      ``Date``            ``date``           ``datetime.date`` (not a datetime)
``datetime``  ``Datetime("us")``  ``timestamp_ntz``  naive ``datetime.datetime``
``list[T]``   ``List(T)``         ``array<T>``       a ``list`` or ``tuple`` of ``T`` values
============  ==================  =================  =====================================

``T`` in ``list[T]`` is one of the types above (``list[str]``); the elements are never null.
Lists are values, not keys: a list column can be carried, compared and output (``dd.top_k``
gives one), but not joined or grouped on.

Invariants:

* a column admits nulls iff its type was declared with a trailing ``"?"`` (``"str?"``);
* a conversion either returns a frame whose columns are exactly ``schema.names`` with exactly
  ``schema.polars_schema()`` and no null in a non-nullable column, or raises
  :class:`~ddflow.errors.SchemaError` naming the column, the row (0-based position) and the
  value; it never returns a partially converted frame;
* a conversion is lossless: a value that would change (``1.5`` into ``int64``, an overflowing
  integer, a datetime with a time of day into ``date``) is an error, never silently rounded,
  except that numbers are rounded into float columns: a Python ``int`` row value becomes the
  nearest ``float64`` (``2**53 + 1`` is ``2**53``; beyond ``float64``'s range it is an error),
  and a ``float32`` column then rounds that ``float64`` to the nearest ``float32`` (so an
  ``int`` is rounded twice; a finite value beyond ``float32``'s range is an error, ``inf``
  stays). :func:`ddflow.testing.values.conform` states these row rules in plain Python.

NaN is a float value, not a null, except in pandas input, where NaN is pandas' marker of a
missing value and therefore becomes null.

>>> s = Schema({"src": "int64", "name": "str?", "w": float})
>>> s
Schema({'src': 'int64', 'name': 'str?', 'w': 'float64'})
>>> s.rows_to_frame([(1, "a", 0.5), (2, None, 1)]).rows()
[(1, 'a', 0.5), (2, None, 1.0)]
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeAlias

import numpy as np
import polars as pl

from ddflow.errors import SchemaError, call_site

__all__ = ["DType", "Schema", "TypeSpec"]

#: What a user may write as a column type: a type name (``"int64"``, ``"str?"``), a
#: :class:`DType`, a Polars dtype (``pl.Int64``) or a Python type (``int``).
TypeSpec: TypeAlias = "str | DType | type | pl.DataType"


@dataclass(frozen=True)
class _TypeInfo:
    polars: pl.DataType
    spark: str
    kind: str  # the family the type belongs to: int, float, bool, str, date, datetime


_TYPES: dict[str, _TypeInfo] = {
    "int64": _TypeInfo(pl.Int64(), "bigint", "int"),
    "int32": _TypeInfo(pl.Int32(), "int", "int"),
    "float64": _TypeInfo(pl.Float64(), "double", "float"),
    "float32": _TypeInfo(pl.Float32(), "float", "float"),
    "bool": _TypeInfo(pl.Boolean(), "boolean", "bool"),
    "str": _TypeInfo(pl.String(), "string", "str"),
    "date": _TypeInfo(pl.Date(), "date", "date"),
    # Spark's plain ``timestamp`` is an instant shown in the session time zone; a naive
    # datetime only round-trips through ``timestamp_ntz``.
    "datetime": _TypeInfo(pl.Datetime("us", None), "timestamp_ntz", "datetime"),
}
_ALIASES = {"string": "str", "utf8": "str", "boolean": "bool", "timestamp": "datetime"}
_PYTHON_TYPES: dict[type, str] = {
    int: "int64",
    float: "float64",
    str: "str",
    bool: "bool",
    _dt.date: "date",
    _dt.datetime: "datetime",
}
_ACCEPTED = (
    ", ".join([*_TYPES, *_ALIASES])
    + ", list[T] of one of them (a trailing '?' makes a column nullable)"
)


def _element_name(name: str) -> str | None:
    """``T`` for a type name ``list[T]`` whose ``T`` is a base type, else None."""
    if name.startswith("list[") and name.endswith("]"):
        inner = name[5:-1].strip()
        inner = _ALIASES.get(inner, inner)
        return inner if inner in _TYPES else None
    return None


@dataclass(frozen=True)
class DType:
    """The type of one column: a ddflow type name and whether the column admits nulls.

    >>> t = DType.parse("int64?")
    >>> t, t.nullable, t.polars, t.spark_type_name
    (DType('int64?'), True, Int64, 'bigint')
    >>> DType.parse(float), DType.parse(pl.String)
    (DType('float64'), DType('str'))
    """

    name: str
    nullable: bool = False

    def __post_init__(self) -> None:
        if self.name not in _TYPES and _element_name(self.name) is None:
            raise SchemaError(f"unknown type {self.name!r}; accepted: {_ACCEPTED}")

    @classmethod
    def parse(cls, spec: TypeSpec) -> DType:
        """Read a type as users write it: a name, a Polars dtype, a Python type or a DType.

        >>> DType.parse("utf8?"), DType.parse(pl.Datetime("us")), DType.parse(bool)
        (DType('str?'), DType('datetime'), DType('bool'))
        """
        if isinstance(spec, DType):
            return spec
        if isinstance(spec, str):
            text = spec.strip()
            nullable = text.endswith("?")
            base = text[:-1].strip() if nullable else text
            base = _ALIASES.get(base.lower(), base.lower())
            element = _element_name(base.replace(" ", ""))
            if element is not None:
                return cls(f"list[{element}]", nullable)
            if base not in _TYPES:
                raise SchemaError(f"unknown type {spec!r}; accepted: {_ACCEPTED}")
            return cls(base, nullable)
        if isinstance(spec, type) and spec in _PYTHON_TYPES:
            return cls(_PYTHON_TYPES[spec])
        if isinstance(spec, pl.DataType) or (
            isinstance(spec, type) and issubclass(spec, pl.DataType)
        ):
            return cls.from_polars(spec() if isinstance(spec, type) else spec)
        raise SchemaError(f"cannot read {spec!r} as a column type; accepted: {_ACCEPTED}")

    @classmethod
    def from_polars(cls, dtype: pl.DataType, nullable: bool = False) -> DType:
        """The ddflow type that is represented by a Polars dtype.

        >>> DType.from_polars(pl.Float32(), nullable=True), DType.from_polars(pl.List(pl.String))
        (DType('float32?'), DType('list[str]'))
        """
        if isinstance(dtype, pl.List):
            element = cls.from_polars(dtype.inner)  # type: ignore[arg-type]
            if element.kind == "list":
                raise SchemaError(f"Polars type {dtype}: ddflow lists do not nest")
            return cls(f"list[{element.name}]", nullable)
        for name, info in _TYPES.items():
            if dtype == info.polars:
                return cls(name, nullable)
        hint = ""
        if isinstance(dtype, pl.Datetime):
            hint = "; ddflow datetimes are microsecond precision with no time zone"
        raise SchemaError(
            f"Polars type {dtype} has no ddflow equivalent{hint}; accepted: {_ACCEPTED}"
        )

    @property
    def polars(self) -> pl.DataType:
        """The Polars dtype that stores this type.

        >>> DType("datetime").polars, DType("list[int64]").polars
        (Datetime(time_unit='us', time_zone=None), List(Int64))
        """
        element = self.element
        if element is not None:
            return pl.List(element.polars)
        return _TYPES[self.name].polars

    @property
    def spark_type_name(self) -> str:
        """The Spark SQL type name that stores this type (pyspark is not imported here).

        >>> DType("float32").spark_type_name, DType("list[str]").spark_type_name
        ('float', 'array<string>')
        """
        element = self.element
        if element is not None:
            return f"array<{element.spark_type_name}>"
        return _TYPES[self.name].spark

    @property
    def kind(self) -> str:
        """The family of the type: ``int``, ``float``, ``bool``, ``str``, ``date``, ``datetime``
        or ``list``.

        >>> DType("int32").kind, DType("float64").is_numeric, DType("list[str]").kind
        ('int', True, 'list')
        """
        if self.element is not None:
            return "list"
        return _TYPES[self.name].kind

    @property
    def element(self) -> DType | None:
        """The type of a list's elements (never null); None for a type that is not a list.

        >>> DType.parse("list[float64]?").element, DType("int64").element
        (DType('float64'), None)
        """
        name = _element_name(self.name)
        return None if name is None else DType(name)

    @property
    def is_numeric(self) -> bool:
        """Whether the type is an integer or a float (bool is not numeric in ddflow).

        >>> DType("bool").is_numeric
        False
        """
        return self.kind in ("int", "float")

    def with_nullable(self, nullable: bool = True) -> DType:
        """The same type with the given nullability.

        >>> DType("str").with_nullable()
        DType('str?')
        """
        return DType(self.name, nullable)

    def __str__(self) -> str:
        return self.name + ("?" if self.nullable else "")

    def __repr__(self) -> str:
        return f"DType({str(self)!r})"


def _fail(message: str) -> SchemaError:
    return SchemaError(message, site=call_site())


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _names(names: Iterable[str]) -> str:
    return ", ".join(names) or "(none)"


class Schema(Mapping[str, DType]):
    """An immutable ordered mapping from column name to :class:`DType`.

    Equality is ordered: two schemas are equal iff they have the same columns, in the same
    order, with the same types and nullability.

    >>> s = Schema({"src": "int64", "dst": "int64", "name": "str?"})
    >>> s.names, s["name"]
    (('src', 'dst', 'name'), DType('str?'))
    >>> s == Schema([("src", int), ("dst", pl.Int64), ("name", "string?")])
    True
    """

    __slots__ = ("_columns", "_index")
    _columns: tuple[tuple[str, DType], ...]
    _index: dict[str, DType]

    def __init__(self, columns: Mapping[str, TypeSpec] | Iterable[tuple[str, TypeSpec]]) -> None:
        pairs = list(columns.items()) if isinstance(columns, Mapping) else list(columns)
        if not pairs:
            raise _fail("a schema needs at least one column")
        parsed: list[tuple[str, DType]] = []
        seen: set[str] = set()
        for name, spec in pairs:
            if not isinstance(name, str) or not name:
                raise _fail(f"column names must be non-empty strings, got {name!r}")
            if name.startswith("__"):
                raise _fail(
                    f"column name {name!r} is reserved: names starting with '__' are used by "
                    "ddflow for times and diffs"
                )
            if name in seen:
                raise _fail(f"column {name!r} appears twice in the schema")
            seen.add(name)
            try:
                parsed.append((name, DType.parse(spec)))
            except SchemaError as e:
                raise _fail(f"column {name!r}: {e.message}") from None
        object.__setattr__(self, "_columns", tuple(parsed))
        object.__setattr__(self, "_index", dict(parsed))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Schema is immutable")

    @classmethod
    def from_polars(
        cls,
        schema: Mapping[str, pl.DataType | type[pl.DataType]],
        nullable: bool | Iterable[str] = False,
    ) -> Schema:
        """The schema of a Polars schema; ``nullable`` is True, False or the nullable names.

        Polars does not record nullability, so it is given here.

        >>> Schema.from_polars(pl.Schema({"a": pl.Int64, "b": pl.String}), nullable=["b"])
        Schema({'a': 'int64', 'b': 'str?'})
        """
        if isinstance(nullable, bool):
            flags = dict.fromkeys(schema, nullable)
        else:
            wanted = set(nullable)
            unknown = sorted(wanted - set(schema))
            if unknown:
                raise _fail(f"nullable names unknown columns: {_names(unknown)}")
            flags = {name: name in wanted for name in schema}
        pairs = []
        for name, dtype in schema.items():
            polars_dtype = dtype() if isinstance(dtype, type) else dtype
            try:
                pairs.append((name, DType.from_polars(polars_dtype, flags[name])))
            except SchemaError as e:
                raise _fail(f"column {name!r}: {e.message}") from None
        return cls(pairs)

    # Mapping protocol -----------------------------------------------------------------------

    def __getitem__(self, name: str) -> DType:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; the schema has {_names(self.names)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._columns)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return self._columns == other._columns

    def __hash__(self) -> int:
        return hash(self._columns)

    def __repr__(self) -> str:
        columns = {name: str(t) for name, t in self._columns}
        return f"Schema({columns!r})"

    # Derived schemas ------------------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in order.

        >>> Schema({"a": "int64", "b": "str"}).names
        ('a', 'b')
        """
        return tuple(name for name, _ in self._columns)

    @property
    def dtypes(self) -> tuple[DType, ...]:
        """The column types, in order.

        >>> Schema({"a": "int64", "b": "str?"}).dtypes
        (DType('int64'), DType('str?'))
        """
        return tuple(t for _, t in self._columns)

    def polars_schema(self) -> pl.Schema:
        """The Polars schema of the data columns of a batch.

        >>> Schema({"a": "int32", "b": "date"}).polars_schema()
        Schema([('a', Int32), ('b', Date)])
        """
        return pl.Schema([(name, t.polars) for name, t in self._columns])

    def _require(self, names: Iterable[str], what: str) -> list[str]:
        wanted = [names] if isinstance(names, str) else list(names)
        unknown = [n for n in wanted if n not in self._index]
        if unknown:
            raise _fail(
                f"{what}: unknown column{'s' if len(unknown) > 1 else ''} {_names(unknown)}; "
                f"the schema has {_names(self.names)}"
            )
        return wanted

    def select(self, names: str | Iterable[str]) -> Schema:
        """The schema of the given columns, in the given order.

        >>> Schema({"a": "int64", "b": "str", "c": "bool"}).select(["c", "a"])
        Schema({'c': 'bool', 'a': 'int64'})
        """
        return Schema([(n, self._index[n]) for n in self._require(names, "select")])

    def drop(self, names: str | Iterable[str]) -> Schema:
        """The schema without the given columns.

        >>> Schema({"a": "int64", "b": "str"}).drop("b")
        Schema({'a': 'int64'})
        """
        gone = set(self._require(names, "drop"))
        return Schema([(n, t) for n, t in self._columns if n not in gone])

    def with_columns(self, columns: Mapping[str, TypeSpec]) -> Schema:
        """Replace the types of existing columns in place and append new columns at the end.

        >>> Schema({"a": "int64", "b": "str"}).with_columns({"b": "int32", "c": "bool?"})
        Schema({'a': 'int64', 'b': 'int32', 'c': 'bool?'})
        """
        new = dict(Schema(columns)._columns)
        kept = [(n, new.pop(n, t)) for n, t in self._columns]
        return Schema(kept + list(new.items()))

    def merge(self, other: Mapping[str, TypeSpec]) -> Schema:
        """The columns of ``self`` followed by those of ``other``; shared names are an error.

        >>> Schema({"a": "int64"}).merge(Schema({"b": "str"}))
        Schema({'a': 'int64', 'b': 'str'})
        """
        other_schema = other if isinstance(other, Schema) else Schema(other)
        shared = [n for n in other_schema.names if n in self._index]
        if shared:
            raise _fail(
                f"cannot merge schemas: both have column{'s' if len(shared) > 1 else ''} "
                f"{_names(shared)}; rename or drop one side first"
            )
        return Schema(self._columns + other_schema._columns)

    def rename(self, mapping: Mapping[str, str]) -> Schema:
        """The schema with columns renamed by ``{old: new}``, keeping their positions.

        >>> Schema({"a": "int64", "b": "str"}).rename({"a": "id"})
        Schema({'id': 'int64', 'b': 'str'})
        """
        self._require(mapping, "rename")
        return Schema([(mapping.get(n, n), t) for n, t in self._columns])

    def with_nullable(self, names: str | Iterable[str] | None = None) -> Schema:
        """The schema with the given columns (all when None) made nullable.

        >>> Schema({"a": "int64", "b": "str"}).with_nullable("b")
        Schema({'a': 'int64', 'b': 'str?'})
        """
        chosen = set(self.names if names is None else self._require(names, "with_nullable"))
        return Schema([(n, t.with_nullable() if n in chosen else t) for n, t in self._columns])

    # Conversion of user data ----------------------------------------------------------------

    def rows_to_frame(self, rows: Iterable[Any]) -> pl.DataFrame:
        """Rows (tuples or lists in column order, or dicts) as a validated batch.

        A schema with a single column also accepts bare values as rows.

        >>> s = Schema({"a": "int64", "b": "str?"})
        >>> s.rows_to_frame([(1, "x"), {"b": None, "a": 2}]).rows()
        [(1, 'x'), (2, None)]
        >>> Schema({"n": "float64"}).rows_to_frame([1, 2.5]).rows()
        [(1.0,), (2.5,)]
        >>> s.rows_to_frame([(1, "x"), ("2", "y")])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ddflow.errors.SchemaError: column 'a' (int64) at row 1: expected int64, got str '2'...
        """
        return _rows_to_frame(self, rows)

    def frame_to_frame(self, data: Any) -> pl.DataFrame:
        """A pandas or Polars (lazy) frame, or a pyarrow table or batch, as a validated batch.

        Columns are matched by name and reordered; integers of other widths, floats with
        integral values and dates are cast when no value changes.

        >>> s = Schema({"a": "int64", "b": "str"})
        >>> s.frame_to_frame(pl.DataFrame({"b": ["x"], "a": pl.Series([7], dtype=pl.Int8)}))
        shape: (1, 2)
        ┌─────┬─────┐
        │ a   ┆ b   │
        │ --- ┆ --- │
        │ i64 ┆ str │
        ╞═════╪═════╡
        │ 7   ┆ x   │
        └─────┴─────┘
        """
        return _frame_to_frame(self, data)


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
        raise _fail(
            f"{where} at row {row}: expected {dtype.name}, got {type(value).__name__} "
            f"{_show(value)}"
        )
    # float32 is built as float64 first so that a value out of float32's range is noticed
    # instead of silently becoming infinity.
    build = pl.Float64() if dtype.name == "float32" else dtype.polars
    try:
        series = pl.Series(name, values, dtype=build, strict=True)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        row = _first_unbuildable(values, build)
        raise _fail(
            f"{where} at row {row}: {_show(values[row])} cannot be represented as {dtype.name}"
        ) from None
    if dtype.name == "float32":
        narrow = series.cast(pl.Float32)
        overflow = series.is_finite() & narrow.is_infinite()
        if overflow.any():
            row = int(overflow.arg_max() or 0)
            raise _fail(
                f"{where} at row {row}: {_show(values[row])} is out of the range of float32"
            )
        series = narrow
    if dtype.kind == "list":
        _check_elements(where, dtype, values, series)
    if dtype.kind == "datetime":
        # Polars converts time-zone-aware datetimes to UTC (or to a zoned column) instead of
        # refusing them; a naive column must not silently shift some of its values.
        aware = next((i for i, v in enumerate(values) if v is not None and v.tzinfo), None)
        if aware is not None:
            raise _fail(
                f"{where} at row {aware}: {_show(values[aware])} has a time zone; ddflow datetimes "
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
                raise _fail(
                    f"{where} at row {row}: element {_show(x)} of {_show(value)} is not a "
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
    raise _fail(
        f"column {name!r} ({dtype}, not nullable) at row {row}: got {null_word}; declare the "
        f"column as {dtype.name + '?'!r} to allow nulls"
    )


def _rows_to_frame(schema: Schema, rows: Iterable[Any]) -> pl.DataFrame:
    if isinstance(rows, (str, bytes, Mapping, pl.DataFrame, pl.LazyFrame)):
        raise _fail(
            f"rows must be an iterable of rows (tuples, lists or dicts), got "
            f"{type(rows).__name__}; use frame_to_frame for data frames"
        )
    rows = rows if isinstance(rows, list) else list(rows)
    names = schema.names
    row_types = set(map(type, rows))
    if len(names) == 1 and not any(issubclass(t, (tuple, list, Mapping)) for t in row_types):
        columns: list[Sequence[Any]] = [rows]
    elif row_types and all(issubclass(t, (tuple, list)) for t in row_types):
        if set(map(len, rows)) - {len(names)}:
            row = next(i for i, r in enumerate(rows) if len(r) != len(names))
            raise _fail(
                f"row {row} has {len(rows[row])} values but the schema has {len(names)} "
                f"columns ({_names(names)}): {_show(rows[row])}"
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
            raise _fail(
                f"row {row} has {len(value)} values but the schema has {len(names)} columns "
                f"({_names(names)}): {_show(value)}"
            )
        return tuple(value)
    if len(names) == 1:
        return (value,)
    raise _fail(
        f"row {row} is {type(value).__name__} {_show(value)}; rows must be tuples, lists "
        f"or dicts with the columns {_names(names)}"
    )


def _raise_key_error(names: Sequence[str], rows: Sequence[Any], first_row: int = 0) -> None:
    """Raise the error for the first dict row whose keys are not exactly ``names``."""
    wanted = set(names)
    for i, r in enumerate(rows, start=first_row):
        if not isinstance(r, Mapping):
            raise _fail(f"row {i} is {type(r).__name__} {_show(r)} but earlier rows are dicts")
        missing = [n for n in names if n not in r]
        if missing:
            raise _fail(f"row {i} is missing column {_names(map(repr, missing))}: {_show(r)}")
        extra = [k for k in r if k not in wanted]
        if extra:
            raise _fail(
                f"row {i} has unknown column {_names(map(repr, extra))}; the schema has "
                f"{_names(names)}"
            )


# Frames ----------------------------------------------------------------------------------------


def _frame_to_frame(schema: Schema, data: Any) -> pl.DataFrame:
    present, read, from_pandas = _source_columns(data)
    names = schema.names
    missing = [n for n in names if n not in present]
    if missing:
        raise _fail(
            f"the data is missing column{'s' if len(missing) > 1 else ''} {_names(missing)}; "
            f"it has {_names(map(str, present))}"
        )
    extra = [str(n) for n in present if n not in schema]
    if extra:
        raise _fail(
            f"the data has column{'s' if len(extra) > 1 else ''} {_names(extra)} that the "
            f"schema does not ({_names(names)}); select the schema's columns first"
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
    raise _fail(
        f"cannot read a {type(data).__name__} as a frame; expected a pandas DataFrame, a Polars "
        "DataFrame or LazyFrame, or a pyarrow Table or RecordBatch (use rows_to_frame for rows)"
    )


def _check_unique(names: list[str], source: str) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise _fail(f"the {source} data has duplicate column names: {_names(dupes)}")


def _arrow_series(name: str, array: Any) -> pl.Series:
    try:
        series = pl.from_arrow(array)
    except Exception as e:  # pyarrow and polars raise many types for unsupported arrays
        raise _fail(f"column {name!r}: cannot read arrow type {array.type}: {e}") from None
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
        raise _fail(
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
        raise _fail(
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
        raise _fail(
            f"column {name!r} ({dtype}) at row {row}: {_show(value)} cannot be represented "
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
        raise _fail(
            f"column {name!r} ({dtype}) at row {row}: {_show(series[row].to_list())} holds a "
            "null element"
        )
