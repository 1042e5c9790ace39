"""Column types (:class:`DType`) and schemas (:class:`Schema`): the type table of
:mod:`ddflow.schema`, the parsing of the ways users write a type, and the schema's operations.
The conversion of user data into batches of a schema is :mod:`ddflow.schema.convert`."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import polars as pl

from ddflow.errors import SchemaError, call_site

__all__ = ["DType", "Schema", "TypeSpec", "fail", "names_text", "show"]

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


def fail(message: str) -> SchemaError:
    return SchemaError(message, site=call_site())


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def names_text(names: Iterable[str]) -> str:
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
            raise fail("a schema needs at least one column")
        parsed: list[tuple[str, DType]] = []
        seen: set[str] = set()
        for name, spec in pairs:
            if not isinstance(name, str) or not name:
                raise fail(f"column names must be non-empty strings, got {name!r}")
            if name.startswith("__"):
                raise fail(
                    f"column name {name!r} is reserved: names starting with '__' are used by "
                    "ddflow for times and diffs"
                )
            if name in seen:
                raise fail(f"column {name!r} appears twice in the schema")
            seen.add(name)
            try:
                parsed.append((name, DType.parse(spec)))
            except SchemaError as e:
                raise fail(f"column {name!r}: {e.message}") from None
        object.__setattr__(self, "_columns", tuple(parsed))
        object.__setattr__(self, "_index", dict(parsed))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Schema is immutable")

    def __reduce__(self) -> tuple[Any, ...]:  # (sent to worker processes)
        return (Schema, (self._columns,))

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
                raise fail(f"nullable names unknown columns: {names_text(unknown)}")
            flags = {name: name in wanted for name in schema}
        pairs = []
        for name, dtype in schema.items():
            polars_dtype = dtype() if isinstance(dtype, type) else dtype
            try:
                pairs.append((name, DType.from_polars(polars_dtype, flags[name])))
            except SchemaError as e:
                raise fail(f"column {name!r}: {e.message}") from None
        return cls(pairs)

    # Mapping protocol -----------------------------------------------------------------------

    def __getitem__(self, name: str) -> DType:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; the schema has {names_text(self.names)}") from None

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
            raise fail(
                f"{what}: unknown column{'s' if len(unknown) > 1 else ''} {names_text(unknown)}; "
                f"the schema has {names_text(self.names)}"
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
            raise fail(
                f"cannot merge schemas: both have column{'s' if len(shared) > 1 else ''} "
                f"{names_text(shared)}; rename or drop one side first"
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
        from ddflow.schema.convert import rows_to_frame

        return rows_to_frame(self, rows)

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
        from ddflow.schema.convert import frame_to_frame

        return frame_to_frame(self, data)
