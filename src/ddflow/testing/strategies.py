"""Hypothesis strategies for testing dataflows: column values, records, update streams, and
random dataflows (plans) built with the public API.

A user tests a pipeline as ddflow tests itself: draw a stream of updates for its inputs, feed
it epoch by epoch (``run()`` only at some epochs, so that several epochs are in flight), and
compare every complete epoch of every output with the from-scratch reference interpreter::

    output.snapshot(epoch=e)  ==  reference(flow, inputs accumulated at epochs <= e)[output]

* :func:`values` draws values of one ddflow type, skewed: a few hot values most of the time
  (so that keys collide and joins match), the type's special values often (NaN, ``-0.0``,
  ``±inf``, the int64 and int32 extremes, the first and last dates, nulls in a nullable
  column), and any value of the type now and then;
* :func:`records` draws records (tuples in schema order) of a schema;
* :func:`streams` draws streams: a list of epochs, each a list of ``(input_name, record, diff)``
  updates with diffs ±1 (now and then ±2): insertions, retractions of inserted records,
  insertions again, an insertion cancelled by its retraction in the same epoch, and, for the
  inputs made with ``signed=True``, retractions of records never inserted (so multiplicities go
  negative); :func:`run_points` draws the epochs after which to ``run()``;
* :func:`plans` draws random dataflows (:class:`Plan`): a DAG of the public operators over a
  few inputs, with loops nested up to three deep and random column expressions.

Invariants:

* a drawn value is valid for its column and unchanged by the conversion into a batch (a
  ``float32`` value is exactly representable; a ``datetime`` has microsecond precision);
* a drawn record holds NaN only as the one object :data:`NAN`, so that records compare and hash
  as equal records do (``float("nan") != float("nan")``, and Python hashes NaN by identity);
* a drawn plan builds on every runtime; its loops terminate on every stream (a loop without
  ``max_iterations`` has a body that grows its variable within a finite set of records:
  ``x.concat(g(x)).distinct()``, or a ``min``/``max`` per key of ``x.concat(g(x))``, where ``g``
  uses only operations with a finite range, or a body that is idempotent, such as a filter);
  no multiplicity overflows an int64 for inputs whose multiplicities stay below ``2 ** 10``
  (collections that joins and concats could grow beyond ``2 ** 24`` are clamped by a
  ``threshold``); and its results do not depend on batch sizes or runtimes: floats are summed
  by no aggregate (``sum``/``mean`` only of ``int32`` or small ``int64`` columns), a float
  divisor is never zero (so the sign of a zero is never observed), and row functions are
  deterministic functions of the record (:class:`MapColumns` and friends);
* ``repr(plan)`` is the plan's Python code, which builds the same dataflow when run.

>>> from hypothesis import given, settings
>>> import ddflow as dd
>>> from ddflow.testing import accumulate, frame_to_counter, reference
>>> SCHEMA = {"edges": {"src": "int64", "dst": "int64"}}
>>> @settings(max_examples=5, database=None, deadline=None)
... @given(streams(SCHEMA, max_epochs=3, extremes=False))
... def test_out_degrees(stream):
...     flow = dd.Dataflow()
...     edges = flow.input("edges", schema=SCHEMA["edges"])
...     out = edges.group_by("src").agg(n=dd.count()).output()
...     fed = []
...     for epoch, updates in enumerate(stream):
...         edges.update([(*record, diff) for _, record, diff in updates])
...         fed += [(record, diff) for _, record, diff in updates]
...         flow.advance_to(epoch + 1)
...         flow.run()
...         want = reference(flow, {"edges": accumulate(fed)})[out]
...         assert frame_to_counter(out.snapshot(epoch=epoch)) == want
>>> test_out_degrees()

A random plan draws its streams itself (:meth:`Plan.streams`) and builds on any dataflow:

>>> @settings(max_examples=3, database=None, deadline=None)
... @given(plans(max_ops=3, loops=False).flatmap(lambda p: st.tuples(st.just(p), p.streams())))
... def test_plan_builds(case):
...     plan, stream = case
...     inputs, outputs = plan.build(dd.Dataflow())
...     assert set(inputs) == set(plan.schemas) and outputs
>>> test_plan_builds()
"""

from __future__ import annotations

import datetime
import inspect
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

import ddflow as dd
from ddflow.expr import Expr, output_dtype
from ddflow.schema import DType, Schema

__all__ = [
    "NAN",
    "TYPES",
    "Abs",
    "Clamp",
    "DistinctValues",
    "FlatMapColumns",
    "GroupSize",
    "Halve",
    "LeastValue",
    "MapColumns",
    "OddValues",
    "Plan",
    "Scale",
    "plans",
    "records",
    "run_points",
    "streams",
    "streams_and_run_points",
    "values",
]

#: The one NaN object that drawn records hold (see the module's invariants).
NAN = math.nan
#: The ddflow column types, without nullability.
TYPES = ("int64", "int32", "float64", "float32", "bool", "str", "date", "datetime")

Update = tuple[str, tuple[Any, ...], int]
Stream = list[list[Update]]

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


RecordsOrSchemas = Mapping[str, "st.SearchStrategy[tuple[Any, ...]] | Mapping[str, Any] | Schema"]


def _record_strategies(
    inputs: RecordsOrSchemas, extremes: bool
) -> dict[str, st.SearchStrategy[tuple[Any, ...]]]:
    return {
        name: s if isinstance(s, st.SearchStrategy) else records(s, extremes)
        for name, s in inputs.items()
    }


#: the diffs of new updates: mostly +1, sometimes -1 (a retraction of a record never inserted,
#: on a signed input) or ±2
_DIFFS = st.sampled_from([1, 1, 1, 1, -1, 2, -2])
_KINDS = st.sampled_from(["insert", "insert", "retract", "cancel", "again"])

#: whether ``Dataflow.input`` takes ``signed=`` (inputs then refuse to go below zero unless
#: signed); without it, every input is signed
SIGNED_INPUTS = "signed" in inspect.signature(dd.Dataflow.input).parameters


@st.composite
def _streams(
    draw: st.DrawFn,
    recs: dict[str, st.SearchStrategy[tuple[Any, ...]]],
    max_epochs: int,
    max_updates: int,
    signed: frozenset[str],
) -> Stream:
    names = sorted(recs)
    seen: list[tuple[str, tuple[Any, ...]]] = []
    # each record's multiplicity so far, the open epoch's changes included: an unsigned input's
    # never goes below zero, so neither does the sum of an epoch's changes (one ``update`` call)
    live: Counter[tuple[str, tuple[Any, ...]]] = Counter()
    stream: Stream = []
    for _ in range(draw(st.integers(1, max_epochs))):
        updates: list[Update] = []
        for _ in range(draw(st.integers(0, max_updates))):
            kind = draw(_KINDS)
            if kind == "retract":
                present = [u for u in seen if u[0] in signed or live[u] > 0]
                if present:
                    name, record = draw(st.sampled_from(present))
                    updates.append((name, record, -1))
                    live[name, record] -= 1
                    continue
            if kind == "again" and seen:
                name, record = draw(st.sampled_from(seen))
                updates.append((name, record, 1))
                live[name, record] += 1
                continue
            name = draw(st.sampled_from(names))
            record = draw(recs[name])
            seen.append((name, record))
            if kind == "cancel":
                updates += [(name, record, 1), (name, record, -1)]
                continue
            diff = draw(_DIFFS)
            if name not in signed and live[name, record] + diff < 0:
                diff = -diff
            updates.append((name, record, diff))
            live[name, record] += diff
        stream.append(updates)
    return stream


def _signed_names(inputs: Mapping[str, Any], signed: bool | Iterable[str]) -> frozenset[str]:
    if not SIGNED_INPUTS or signed is True:
        return frozenset(inputs)
    return frozenset() if signed is False else frozenset(signed)  # type: ignore[arg-type]


def streams(
    inputs: RecordsOrSchemas,
    max_epochs: int = 5,
    max_updates: int = 6,
    extremes: bool = True,
    signed: bool | Iterable[str] = False,
) -> st.SearchStrategy[Stream]:
    """Streams of updates to the named inputs: a list of at least one epoch, each a list of at
    most ``max_updates`` updates ``(input_name, record, diff)``.

    ``inputs`` maps each input's name to its schema (records drawn with :func:`records`) or to
    a strategy of its records. Diffs are ±1, sometimes ±2; updates insert new records, retract
    earlier ones, insert earlier ones again, and cancel an insertion with a retraction in the
    same epoch. An input named in ``signed`` (True: every input), made with
    ``flow.input(name, schema, signed=True)``, also sees retractions of records never inserted,
    so that multiplicities go negative; another input's multiplicities never do, after any
    epoch's updates (fed as one ``update`` call) or within one.

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=10, database=None)
    ... @given(streams({"xs": {"x": "int64"}}, max_epochs=3, signed=True))
    ... def test(stream):
    ...     assert 1 <= len(stream) <= 3
    ...     assert all(n == "xs" and d in (-2, -1, 1, 2) for e in stream for n, _, d in e)
    >>> test()
    """
    return _streams(
        _record_strategies(inputs, extremes), max_epochs, max_updates, _signed_names(inputs, signed)
    )


def run_points(epochs: int) -> st.SearchStrategy[set[int]]:
    """The epochs (of ``range(epochs)``) after which to ``run()``; often none, so that all
    epochs are in flight until the final ``run()``.

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=5, database=None)
    ... @given(run_points(3))
    ... def test(points):
    ...     assert points <= {0, 1, 2}
    >>> test()
    """
    return st.sets(st.integers(0, max(epochs - 1, 0)), max_size=epochs)


@st.composite
def streams_and_run_points(
    draw: st.DrawFn,
    inputs: RecordsOrSchemas,
    max_epochs: int = 5,
    max_updates: int = 6,
    extremes: bool = True,
    signed: bool | Iterable[str] = False,
) -> tuple[Stream, set[int]]:
    """A stream (:func:`streams`) and the epochs after which to ``run()`` (:func:`run_points`).

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=5, database=None)
    ... @given(streams_and_run_points({"xs": {"x": "str"}}))
    ... def test(case):
    ...     stream, points = case
    ...     assert points <= set(range(len(stream)))
    >>> test()
    """
    stream = draw(streams(inputs, max_epochs, max_updates, extremes, signed))
    return stream, draw(run_points(len(stream)))


# ---------------------------------------------------------------------- row functions
#
# Plans use these instead of lambdas so that their code can be printed and run again, and
# pickled for Spark's Python workers. Each is a deterministic function of its arguments, and
# a function of records as equal records compare (the same for 0.0 and -0.0, and for NaNs).


def _wrap(v: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return (v + half) % (1 << bits) - half


#: value operations of :class:`MapColumns`: name -> (function of a non-null value, finite)
#: where finite means that applying the operations again and again to a value reaches finitely
#: many values
_VALUE_OPS: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "id": (lambda v: v, True),
    "null": (lambda v: None, True),
    "neg64": (lambda v: _wrap(-v, 64), True),
    "neg32": (lambda v: _wrap(-v, 32), True),
    "abs64": (lambda v: _wrap(abs(v), 64), True),
    "mod3": (lambda v: v % 3, True),
    "clamp": (lambda v: max(-2, min(2, v)), True),
    "inc64": (lambda v: _wrap(v + 1, 64), False),
    "negf": (lambda v: -v, True),
    "absf": (lambda v: abs(v), True),
    "halff": (lambda v: v / 2, False),
    "not": (lambda v: not v, True),
    "upper": (lambda v: v.upper(), True),
    "rev": (lambda v: v[::-1], True),
    "head": (lambda v: v[:1], True),
    "twice": (lambda v: v + v, False),
    "jan1": (lambda v: v.replace(month=1, day=1), True),
    "midnight": (lambda v: v.replace(hour=0, minute=0, second=0, microsecond=0), True),
}
_OPS_BY_TYPE: dict[str, list[str]] = {
    "int64": ["id", "neg64", "abs64", "mod3", "clamp", "inc64"],
    "int32": ["id", "neg32", "mod3", "clamp"],
    "float64": ["id", "negf", "absf", "halff"],
    "float32": ["id", "negf", "absf"],
    "bool": ["id", "not"],
    "str": ["id", "upper", "rev", "head", "twice"],
    "date": ["id", "jan1"],
    "datetime": ["id", "midnight"],
}


class MapColumns:
    """A record function for ``map``: output column ``j`` is ``op_j(record[i_j])`` for
    ``ops = ((i_0, op_0), (i_1, op_1), ...)``; a null stays null.

    >>> MapColumns(((1, "upper"), (0, "mod3")))((7, "ab"))
    ('AB', 1)
    """

    def __init__(self, ops: tuple[tuple[int, str], ...]) -> None:
        self.ops = tuple(ops)
        self._fns = [(i, _VALUE_OPS[op][0]) for i, op in self.ops]

    def __call__(self, record: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(None if record[i] is None else fn(record[i]) for i, fn in self._fns)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.ops!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.ops,))


class FlatMapColumns(MapColumns):
    """A record function for ``flat_map``: :class:`MapColumns`' record, yielded as ``mode``
    says: ``"one"`` once, ``"dup"`` twice, ``"some"`` once if the record's first value is
    truthy (a null, zero, false or empty value is not), ``"both"`` once and, with every
    operation replaced by ``"id"``, once more.

    >>> FlatMapColumns(((0, "neg64"),), "both")((5,))
    [(-5,), (5,)]
    >>> FlatMapColumns(((0, "neg64"),), "some")((0,))
    []
    """

    def __init__(self, ops: tuple[tuple[int, str], ...], mode: str) -> None:
        super().__init__(ops)
        self.mode = mode

    def __call__(self, record: tuple[Any, ...]) -> list[tuple[Any, ...]]:  # type: ignore[override]
        out = super().__call__(record)
        if self.mode == "dup":
            return [out, out]
        if self.mode == "some":
            return [out] if record[0] else []
        if self.mode == "both":
            return [out, tuple(record[i] for i, _ in self.ops)]
        return [out]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.ops!r}, {self.mode!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.ops, self.mode))


def _order(v: Any) -> tuple[int, Any]:
    """A total order on a column's values: NaN above numbers, null last."""
    if v is None:
        return (2, 0)
    if isinstance(v, float) and math.isnan(v):
        return (1, 0)
    return (0, v)


class GroupSize:
    """A group function for ``reduce``: one row, the group's count (sum of multiplicities).

    >>> GroupSize()(1, [(("a",), 2), (("b",), 1)])
    [(3,)]
    """

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[int]]:
        return [(sum(m for _, m in group),)]

    def __repr__(self) -> str:
        return "GroupSize()"


class DistinctValues:
    """A group function for ``reduce``: one row, the number of distinct records in the group.

    >>> DistinctValues()(1, [(("a",), 2), (("b",), 1)])
    [(2,)]
    """

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[int]]:
        return [(len(group),)]

    def __repr__(self) -> str:
        return "DistinctValues()"


class LeastValue:
    """A group function for ``reduce``: one row, the least value of value column ``i`` (NaN
    above every number, null only if every value is null).

    >>> LeastValue(0)(1, [((2.0,), 1), ((float("nan"),), 1), ((None,), 3)])
    [(2.0,)]
    """

    def __init__(self, i: int) -> None:
        self.i = i

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[Any]]:
        return [(min((vals[self.i] for vals, _ in group), key=_order),)]

    def __repr__(self) -> str:
        return f"LeastValue({self.i})"


class OddValues:
    """A group function for ``reduce``: the group's records of odd multiplicity, one row each.

    >>> OddValues()(1, [(("a",), 2), (("b",), 3)])
    [('b',)]
    """

    def __call__(self, key: Any, group: list[tuple[tuple[Any, ...], int]]) -> list[tuple[Any, ...]]:
        return [vals for vals, m in group if m % 2 == 1]

    def __repr__(self) -> str:
        return "OddValues()"


class Clamp:
    """A multiplicity function for ``threshold``: ``m`` limited to ``[lo, hi]`` (``lo <= 0 <=
    hi``, so that an absent record stays absent).

    >>> Clamp(0, 1)(5), Clamp(0, 1)(-2)
    (1, 0)
    """

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def __call__(self, m: int) -> int:
        return max(self.lo, min(self.hi, m))

    def __repr__(self) -> str:
        return f"Clamp({self.lo}, {self.hi})"


class Scale:
    """A multiplicity function for ``threshold``: ``k * m``.

    >>> Scale(2)(-3)
    -6
    """

    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, m: int) -> int:
        return self.k * m

    def __repr__(self) -> str:
        return f"Scale({self.k})"


class Halve:
    """A multiplicity function for ``threshold``: ``m // 2`` (rounded towards -inf).

    >>> Halve()(3), Halve()(-1)
    (1, -1)
    """

    def __call__(self, m: int) -> int:
        return m // 2

    def __repr__(self) -> str:
        return "Halve()"


class Abs:
    """A multiplicity function for ``threshold``: ``|m|``.

    >>> Abs()(-2)
    2
    """

    def __call__(self, m: int) -> int:
        return abs(m)

    def __repr__(self) -> str:
        return "Abs()"


_HELPERS: dict[str, Any] = {
    c.__name__: c
    for c in (
        MapColumns,
        FlatMapColumns,
        GroupSize,
        DistinctValues,
        LeastValue,
        OddValues,
        Clamp,
        Scale,
        Halve,
        Abs,
    )
}


# ---------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Plan:
    """A random dataflow: input schemas and the Python code of a function ``build(flow)`` that
    creates the inputs on ``flow`` and returns the collections to output.

    ``repr(plan)`` is a runnable script (imports and ``build``), so that a failing example is
    reproduced by copy and paste. ``extremes`` says whether :meth:`streams` draws integer
    extremes and far dates (plans meant for Spark do not: integer overflow raises there);
    ``signed`` names the inputs made with ``signed=True``, whose streams may take records below
    zero.

    >>> plan = Plan({"xs": {"x": "int64"}},
    ...             'def build(flow):\\n    xs = flow.input("xs", schema={"x": "int64"})\\n'
    ...             '    return [xs.distinct()]\\n')
    >>> inputs, outputs = plan.build(dd.Dataflow())
    >>> list(inputs), [o.columns for o in outputs]
    (['xs'], [['x']])
    """

    schemas: dict[str, dict[str, str]]
    source: str
    extremes: bool = True
    signed: frozenset[str] = frozenset()

    def build(self, flow: dd.Dataflow) -> tuple[dict[str, dd.InputCollection], list[dd.Collection]]:
        """Create the plan's inputs and collections on ``flow``; returns the inputs by name
        and the collections to output (call ``.output()`` on them)."""
        namespace: dict[str, Any] = {"dd": dd, "datetime": datetime, **_HELPERS}
        exec(compile(self.source, "<ddflow plan>", "exec"), namespace)
        outputs = list(namespace["build"](flow))
        return {name: flow.inputs[name] for name in self.schemas}, outputs

    def streams(self, max_epochs: int = 4, max_updates: int = 6) -> st.SearchStrategy[Stream]:
        """Streams of updates to the plan's inputs (:func:`streams`)."""
        return streams(self.schemas, max_epochs, max_updates, self.extremes, self.signed)

    def streams_and_run_points(
        self, max_epochs: int = 4, max_updates: int = 6
    ) -> st.SearchStrategy[tuple[Stream, set[int]]]:
        """Streams of updates to the plan's inputs and run points
        (:func:`streams_and_run_points`)."""
        return streams_and_run_points(
            self.schemas, max_epochs, max_updates, self.extremes, self.signed
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis (and IPython) print dataclasses field by field; a plan prints as its code
        printer.text(repr(self))

    def __repr__(self) -> str:
        used = sorted(n for n in _HELPERS if n + "(" in self.source)
        imports = ["import datetime", "", "import ddflow as dd"]
        if used:
            imports.append(f"from ddflow.testing.strategies import {', '.join(used)}")
        return "\n".join(imports) + "\n\n\n" + self.source


_NAMES = ["k", "v", "w", "u", "z"]
#: Multiplicities, in bits (``|m| < 2 ** bits``): plans assume input multiplicities below
#: ``2 ** _INPUT_BITS``; a collection that could go beyond ``_MAX_BITS`` (joins multiply, concats
#: add) is clamped to ``_CLAMP_BITS`` with a ``threshold``, and so are the variables of loops
#: whose bodies may grow them (to ``_LOOP_BITS``), so that neither a multiplicity nor a
#: ``sum`` of ``int32`` values weighted by one overflows an int64.
_INPUT_BITS, _MAX_BITS, _CLAMP_BITS, _LOOP_BITS = 10, 24, 12, 12
_TYPE_WEIGHTS = ["int64"] * 4 + [
    "int32",
    "float64",
    "float64",
    "float32",
    "bool",
    "str",
    "str",
    "date",
    "datetime",
]


@st.composite
def _schema(draw: st.DrawFn) -> dict[str, str]:
    n = draw(st.integers(1, 4))
    first = draw(st.sampled_from(["int64", "int64", "int32", "str", "float64"]))
    types = [first] + [draw(st.sampled_from(_TYPE_WEIGHTS)) for _ in range(n - 1)]
    return {
        name: t + ("?" if draw(st.integers(0, 2)) == 0 else "")
        for name, t in zip(_NAMES, types, strict=False)
    }


def plans(
    max_inputs: int = 3,
    max_ops: int = 6,
    max_depth: int = 3,
    loops: bool = True,
    extremes: bool = True,
    spark: bool = False,
    max_outputs: int = 3,
    min_loops: int = 0,
    gaps: bool = False,
) -> st.SearchStrategy[Plan]:
    """Random dataflows (:class:`Plan`) built with the public API.

    A plan has up to ``max_inputs`` inputs of random schemas (every ddflow type, nullable or
    not), up to ``max_ops`` operations at the top level (``select``, ``with_columns``,
    ``filter``, ``map``, ``flat_map``, ``concat``, ``negate``, ``consolidate``, ``join``,
    ``semijoin``, ``antijoin``, an ``arrange`` shared by two joins, ``group_by().agg`` with
    ``count``/``sum``/``min``/``max``/``mean``, ``group_by().reduce``, ``distinct``,
    ``threshold``, ``iterate`` and ``prioritized_iterate`` nested up to ``max_depth`` deep, with
    or without ``max_iterations``), each applied to any earlier collection (so that collections
    are used twice), and up to ``max_outputs`` outputs.

    A loop's body either converges by construction (it grows the variable within a finite set
    of records, ``x.concat(g(x)).distinct()`` or a ``min``/``max`` per key of ``x.concat(g(x))``
    where ``g`` has a finite range, or it is idempotent, such as a filter), with or without
    ``max_iterations``, or it is any body, with ``max_iterations`` (1 to 4) and multiplicities
    clamped. A ``prioritized_iterate``'s priority is a non-negative integer expression.

    ``loops=False`` draws no loop;
    ``min_loops`` makes the last operations at the top level loops if fewer were drawn;
    ``gaps=False`` leaves out the expressions on which the local runtime is known to depart from
    the documented semantics (the strict xfails of ``tests/testing/test_values.py``: a float
    ``//`` or ``%`` by a constant, computed with a reciprocal in many-row batches; a division of
    a constant, typed ``float64`` but computed in ``float32`` by a ``float32``; arithmetic of
    literals alone, folded in another type);
    ``extremes=False`` draws streams without integer extremes; ``spark=True`` leaves out what
    the Spark runtime computes differently by design (``**``, by ``StrictMath``).

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=5, database=None, deadline=None)
    ... @given(plans(max_ops=4))
    ... def test(plan):
    ...     assert "def build(flow):" in repr(plan)
    >>> test()
    """
    options = _Options(
        max_ops, max_depth if loops else 0, extremes, spark, min_loops if loops else 0, gaps
    )
    return _plans(max_inputs, max_outputs, options)


#: a non-null value of each kind, to fill the nulls a loop body may make (see ``_op_iterate``)
_FILLERS = {
    "int": "0",
    "float": "0.0",
    "bool": "False",
    "str": "''",
    "date": "datetime.date(2000, 1, 1)",
    "datetime": "datetime.datetime(2000, 1, 1)",
}


@dataclass(frozen=True)
class _Options:
    max_ops: int
    max_depth: int
    extremes: bool
    spark: bool
    min_loops: int
    gaps: bool


@st.composite
def _plans(draw: st.DrawFn, max_inputs: int, max_outputs: int, options: _Options) -> Plan:
    n = draw(st.integers(1, max_inputs))
    schemas = {name: draw(_schema()) for name in ["a", "b", "c"][:n]}
    signed = frozenset(name for name in schemas if not SIGNED_INPUTS or draw(st.booleans()))
    gen = _Generator(draw, options)
    return gen.plan(schemas, signed, max_outputs)


@dataclass
class _Item:
    """A collection made while drawing a plan, with what the generator knows of it.

    ``neg``: None if its multiplicities may be negative, else the loops at whose iteration 0
    only they may be; ``conv``: the loops with converging bodies (see :func:`plans`) whose
    variables it depends on (it may then go through operations of finite range only);
    ``bounded``: int columns whose values are small enough to be summed without overflow;
    ``bits``: its multiplicities are below ``2 ** bits`` in absolute value."""

    name: str
    coll: dd.Collection
    neg: frozenset[int] | None
    conv: frozenset[int]
    bounded: frozenset[str]
    bits: int

    @property
    def schema(self) -> Schema:
        return self.coll.schema


def _union_neg(*items: _Item) -> frozenset[int] | None:
    if any(i.neg is None for i in items):
        return None
    return frozenset().union(*(i.neg for i in items))  # type: ignore[misc]


def _union_conv(*items: _Item) -> frozenset[int]:
    return frozenset().union(*(i.conv for i in items))


def _unused(name: str, taken: Iterable[str]) -> str:
    """``name``, with underscores appended until it is not one of ``taken``."""
    taken = set(taken)
    while name in taken:
        name += "_"
    return name


def _base(schema: Schema) -> list[tuple[str, Any]]:
    return [(n, t.polars) for n, t in schema.items()]


_LITERALS: dict[str, list[str]] = {
    "int": ["0", "1", "2", "3", "-1", "7"],
    "float": ["0.5", "-1.5", "2.0", "0.1", "0.0"],
    "bool": ["True", "False"],
    "str": ['"a"', '""', '"ab"', '"1"'],
    "date": ["datetime.date(2000, 1, 1)", "datetime.date(1999, 12, 31)"],
    "datetime": ["datetime.datetime(2000, 1, 1, 12, 30)", "datetime.datetime(2000, 1, 1)"],
}
_KIND_OF = {
    "int64": "int",
    "int32": "int",
    "float64": "float",
    "float32": "float",
    "bool": "bool",
    "str": "str",
    "date": "date",
    "datetime": "datetime",
}


class _Generator:
    """Draws a plan operation by operation, applying each one to a scratch dataflow as it is
    drawn (so that schemas are exact and a mistake surfaces here) and recording its code."""

    def __init__(self, draw: st.DrawFn, options: _Options) -> None:
        self.draw = draw
        self.opt = options
        self.flow = dd.Dataflow()
        self.env: dict[str, Any] = {"dd": dd, "datetime": datetime, **_HELPERS}
        self.lines: list[str] = []
        self.indent = 1
        self.frames: list[list[_Item]] = [[]]
        self.counter = itertools.count()
        self.loop_ids = itertools.count(1)
        self.depth = 0
        self.loops = 0
        self._defined: dict[str, int] = {}

    # ------------------------------------------------------------------ bookkeeping

    def _emit(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def _run(self, target: str, code: str) -> Any:
        exec(f"{target} = {code}", self.env)
        self._defined[target] = len(self.lines)
        self._emit(f"{target} = {code}")
        return self.env[target]

    def _new(
        self,
        code: str,
        neg: frozenset[int] | None,
        conv: frozenset[int],
        bounded: Iterable[str] = (),
        prefix: str = "c",
        *,
        bits: int,
    ) -> _Item:
        """A new collection made by ``code``; one whose multiplicities could outgrow
        :data:`_MAX_BITS` is clamped (a ``threshold``) so that none overflows an int64."""
        name = f"{prefix}{next(self.counter)}"
        coll = self._run(name, code)
        kept = frozenset(b for b in bounded if b in coll.schema)
        item = _Item(name, coll, neg, conv, kept, bits)
        self.frames[-1].append(item)
        if bits > _MAX_BITS:
            return self._clamp(item, _CLAMP_BITS)
        return item

    def _clamp(self, item: _Item, bits: int) -> _Item:
        """``item`` with multiplicities limited to ``bits`` bits."""
        if item.bits <= bits:
            return item
        m = 2 ** (bits - 1)
        return self._new(
            f"{item.name}.threshold(Clamp({-m}, {m}))", item.neg, item.conv, item.bounded, bits=bits
        )

    def _visible(self) -> list[_Item]:
        return [i for frame in self.frames for i in frame]

    def _pick(self, items: Sequence[_Item] | None = None) -> _Item:
        items = list(items if items is not None else self._visible())
        # later collections more often, so that chains grow
        return self.draw(st.sampled_from(items[::-1][:3] * 2 + items[::-1]))

    def _pick_columns(self, schema: Schema, lo: int, hi: int) -> list[str]:
        names = list(schema.names)
        k = self.draw(st.integers(min(lo, len(names)), min(hi, len(names))))
        return self.draw(st.permutations(names))[:k]

    # ------------------------------------------------------------------ the plan

    def plan(
        self, schemas: dict[str, dict[str, str]], signed: frozenset[str], max_outputs: int
    ) -> Plan:
        self.env["flow"] = self.flow
        for name, schema in schemas.items():
            signs = ", signed=True" if name in signed and SIGNED_INPUTS else ""
            coll = self._run(name, f"flow.input({name!r}, schema={schema!r}{signs})")
            tame = not self.opt.extremes
            bounded = [c for c, t in coll.schema.items() if t.kind == "int" and tame]
            neg = None if name in signed else frozenset()
            self.frames[0].append(
                _Item(name, coll, neg, frozenset(), frozenset(bounded), _INPUT_BITS)
            )
        n = self.draw(st.integers(1, self.opt.max_ops))
        for i in range(max(n, self.opt.min_loops)):
            self._operation(loop=i >= n - self.opt.min_loops and self.loops < self.opt.min_loops)
        top = self.frames[0]
        # the collections nothing else reads first, so that every operation reaches an output
        sinks = [
            i
            for i in top
            if not any(
                re.search(rf"\b{i.name}\b", line)
                for line in self.lines[self._defined[i.name] + 1 :]
            )
        ]
        others = [i for i in top[::-1] if i not in sinks]
        outs = (sinks[::-1] + others)[: self.draw(st.integers(1, max_outputs))]
        names = [i.name for i in outs]
        self._emit(f"return [{', '.join(names)}]")
        source = "def build(flow):\n" + "\n".join(self.lines) + "\n"
        return Plan(schemas, source, self.opt.extremes, signed)

    _OPERATIONS = (
        "filter",
        "select",
        "with_columns",
        "distinct",
        "join",
        "agg",
        "concat",
        "map",
        "flat_map",
        "negate",
        "consolidate",
        "semijoin",
        "antijoin",
        "reduce",
        "threshold",
        "arrange",
        "iterate",
        "prioritized_iterate",
    )

    def _operation(self, chain: _Item | None = None, loop: bool = False) -> _Item:
        """One operation on ``chain`` (or on a collection picked among the visible ones); a loop
        if ``loop``."""
        src = chain if chain is not None else self._pick()
        finite = bool(src.conv)
        ops = list(self._OPERATIONS) if not loop else ["iterate", "prioritized_iterate"]
        if self.depth > 0:  # inside a loop body: nested loops more often
            ops += ["iterate", "iterate", "prioritized_iterate"]
        if self.depth >= self.opt.max_depth:
            ops = [o for o in ops if not o.endswith("iterate")]
        op = self.draw(st.sampled_from(ops))
        made = getattr(self, "_op_" + op)(src, finite)
        return made if made is not None else src

    # ------------------------------------------------------------------ linear operators

    def _op_filter(self, src: _Item, finite: bool) -> _Item:
        pred = _Exprs(self, src.schema, finite).of_kind("bool", 2)
        return self._new(
            f"{src.name}.filter({pred})", src.neg, src.conv, src.bounded, bits=src.bits
        )

    def _op_select(self, src: _Item, finite: bool) -> _Item:
        kept = self._pick_columns(src.schema, 0, 3)
        exprs = _Exprs(self, src.schema, finite)
        computed = []
        used = set(kept)
        for _ in range(self.draw(st.integers(0 if kept else 1, 2))):
            name = self._fresh_column(used)
            used.add(name)
            computed.append(f"{name}={exprs.any_kind(2)}")
        args = ", ".join([repr(k) for k in kept] + computed)
        return self._new(
            f"{src.name}.select({args})", src.neg, src.conv, src.bounded, bits=src.bits
        )

    def _op_with_columns(self, src: _Item, finite: bool) -> _Item:
        exprs = _Exprs(self, src.schema, finite)
        parts = []
        used: set[str] = set()
        for _ in range(self.draw(st.integers(1, 2))):
            replace = [n for n in src.schema.names if n not in used]
            if replace and self.draw(st.booleans()):
                name = self.draw(st.sampled_from(replace))
            else:
                name = self._fresh_column(set(src.schema.names) | used)
            used.add(name)
            parts.append(f"{name}={exprs.any_kind(2)}")
        bounded = src.bounded - used
        return self._new(
            f"{src.name}.with_columns({', '.join(parts)})",
            src.neg,
            src.conv,
            bounded,
            bits=src.bits,
        )

    def _fresh_column(self, used: set[str]) -> str:
        pool = [n for n in ["y", "q", "r", "p", "m2", "y2", "q2"] if n not in used]
        return self.draw(st.sampled_from(pool)) if pool else f"col{next(self.counter)}"

    def _map_ops(self, schema: Schema, finite: bool, lo: int = 1) -> tuple[tuple[int, str], ...]:
        names = list(schema.names)
        ops = []
        for _ in range(self.draw(st.integers(lo, min(3, len(names) + 1)))):
            i = self.draw(st.integers(0, len(names) - 1))
            t = schema.dtypes[i]
            choices = [o for o in _OPS_BY_TYPE[t.name] if _VALUE_OPS[o][1] or not finite]
            if t.nullable:
                choices.append("null")
            ops.append((i, self.draw(st.sampled_from(choices))))
        return tuple(ops)

    def _map_schema(self, schema: Schema, ops: tuple[tuple[int, str], ...]) -> dict[str, str]:
        # nullable: a collection may hold nulls where its schema says it does not (a concat with
        # a nullable input, a loop whose body makes nulls, a min of nulls)
        out: dict[str, str] = {}
        for j, (i, _) in enumerate(ops):
            name = schema.names[i]
            out[name if name not in out else f"{name}{j}"] = schema.dtypes[i].name + "?"
        return out

    def _op_map(self, src: _Item, finite: bool) -> _Item:
        ops = self._map_ops(src.schema, finite)
        schema = self._map_schema(src.schema, ops)
        return self._new(
            f"{src.name}.map(MapColumns({ops!r}), schema={schema!r})",
            src.neg,
            src.conv,
            bits=src.bits,
        )

    def _op_flat_map(self, src: _Item, finite: bool) -> _Item:
        ops = self._map_ops(src.schema, finite)
        schema = self._map_schema(src.schema, ops)
        mode = self.draw(st.sampled_from(["one", "dup", "some", "both"]))
        return self._new(
            f"{src.name}.flat_map(FlatMapColumns({ops!r}, {mode!r}), schema={schema!r})",
            src.neg,
            src.conv,
            bits=src.bits + (mode in ("dup", "both")),
        )

    def _op_concat(self, src: _Item, finite: bool) -> _Item:
        other = self._conform(self._pick(), src.schema)
        return self._new(
            f"{src.name}.concat({other.name})",
            _union_neg(src, other),
            _union_conv(src, other),
            src.bounded & other.bounded,
            bits=max(src.bits, other.bits) + 1,
        )

    def _op_negate(self, src: _Item, finite: bool) -> _Item:
        return self._new(f"{src.name}.negate()", None, src.conv, src.bounded, bits=src.bits)

    def _op_consolidate(self, src: _Item, finite: bool) -> _Item:
        return self._new(f"{src.name}.consolidate()", src.neg, src.conv, src.bounded, bits=src.bits)

    def _conform(self, item: _Item, target: Schema) -> _Item:
        """``item`` made to have ``target``'s columns and types (nullability aside): a select of
        its columns of the same types, expressions of finite range or literals."""
        if _base(item.schema) == _base(target):
            return item
        finite = bool(item.conv)
        exprs = _Exprs(self, item.schema, finite)
        parts = [f"{name}={exprs.of_type(t)}" for name, t in target.items()]
        return self._new(
            f"{item.name}.select({', '.join(parts)})", item.neg, item.conv, bits=item.bits
        )

    # ------------------------------------------------------------------ joins

    def _key_pairs(self, left: Schema, right: Schema) -> list[tuple[str, str]]:
        pairs = [
            (a, b)
            for a, ta in left.items()
            for b, tb in right.items()
            if ta.kind == tb.kind and (ta.kind == "int" or ta.polars == tb.polars)
        ]
        if not pairs:
            return []
        # equal names first: joins on "k" are the common case
        pairs.sort(key=lambda p: p[0] != p[1])
        first = self.draw(st.sampled_from(pairs[:2] + pairs))
        more = [p for p in pairs if p[0] != first[0] and p[1] != first[1]]
        if more and self.draw(st.integers(0, 3)) == 0:
            return [first, self.draw(st.sampled_from(more))]
        return [first]

    def _keys_code(self, pairs: list[tuple[str, str]]) -> str:
        left, right = [a for a, _ in pairs], [b for _, b in pairs]
        if left == right:
            return f"on={left[0]!r}" if len(left) == 1 else f"on={left!r}"
        return f"left_on={left!r}, right_on={right!r}"

    def _suffix(self, left: Schema, right: Schema, right_keys: list[str]) -> str:
        names = set(left.names)
        for suffix in ["_right", "_r2", "_r3", "_r4", "_r5"]:
            out = [c if c not in names else c + suffix for c in right.names if c not in right_keys]
            if len(set(out)) == len(out) and not names & {
                c + suffix for c in right.names if c in names
            }:
                return suffix
        return f"_r{next(self.counter)}"

    def _join(self, left: _Item, right: _Item, pairs: list[tuple[str, str]]) -> _Item:
        suffix = self._suffix(left.schema, right.schema, [b for _, b in pairs])
        tail = "" if suffix == "_right" else f", suffix={suffix!r}"
        neg = _union_neg(left, right) if None not in (left.neg, right.neg) else None
        made = self._new(
            f"{left.name}.join({right.name}, {self._keys_code(pairs)}{tail})",
            neg,
            _union_conv(left, right),
            left.bounded,
            bits=left.bits + right.bits,
        )
        if len(made.schema) > 5:  # keep records narrow: joins of joins grow wide
            keep = self._pick_columns(made.schema, 1, 4)
            made = self._new(
                f"{made.name}.select({', '.join(map(repr, keep))})",
                made.neg,
                made.conv,
                made.bounded,
                bits=made.bits,
            )
        return made

    def _op_join(self, src: _Item, finite: bool) -> _Item | None:
        other = self._pick()
        if self.draw(st.booleans()):
            src, other = other, src
        pairs = self._key_pairs(src.schema, other.schema)
        return self._join(src, other, pairs) if pairs else None

    def _op_semijoin(self, src: _Item, finite: bool, anti: bool = False) -> _Item | None:
        other = self._pick()
        pairs = self._key_pairs(src.schema, other.schema)
        if not pairs:
            return None
        op = "antijoin" if anti else "semijoin"
        return self._new(
            f"{src.name}.{op}({other.name}, {self._keys_code(pairs)})",
            src.neg,
            _union_conv(src, other),
            src.bounded,
            bits=src.bits,
        )

    def _op_antijoin(self, src: _Item, finite: bool) -> _Item | None:
        return self._op_semijoin(src, finite, anti=True)

    def _op_arrange(self, src: _Item, finite: bool) -> _Item | None:
        """An arrangement shared by two joins (as the left input of one, the right of the
        other), then the concat of the two joins' results, made alike."""
        first, second = self._pick(), self._pick()
        pairs1 = self._key_pairs(src.schema, first.schema)
        if not pairs1:
            return None
        keys = [a for a, _ in pairs1]
        pairs2 = [(b, a) for a, b in self._key_pairs(src.schema.select(keys), second.schema)]
        if [b for _, b in pairs2] != keys:
            pairs2 = [(a, a) for a in keys]
            second = src
        arranged = self._new(
            f"{src.name}.arrange({keys!r})",
            src.neg,
            src.conv,
            src.bounded,
            prefix="arr",
            bits=src.bits,
        )
        # only the two joins read the arrangement: an arrangement read by other operators is
        # a known engine defect (tests/api/test_arrange_reuse.py, strict xfails)
        self.frames[-1].remove(arranged)
        j1 = self._join(arranged, first, pairs1)
        j2 = self._join(second, arranged, pairs2)
        return j1 if self.draw(st.booleans()) else self._concat_two(j1, j2)

    def _concat_two(self, a: _Item, b: _Item) -> _Item:
        b2 = self._conform(b, a.schema)
        return self._new(
            f"{a.name}.concat({b2.name})",
            _union_neg(a, b2),
            _union_conv(a, b2),
            bits=max(a.bits, b2.bits) + 1,
        )

    # ------------------------------------------------------------------ reductions

    def _op_distinct(self, src: _Item, finite: bool) -> _Item:
        return self._new(f"{src.name}.distinct()", frozenset(), src.conv, src.bounded, bits=1)

    def _op_threshold(self, src: _Item, finite: bool) -> _Item:
        fn = self.draw(
            st.sampled_from(
                ["Clamp(0, 1)", "Clamp(-1, 1)", "Clamp(0, 2)", "Scale(2)", "Halve()", "Abs()"]
            )
        )
        positive = fn.startswith(("Clamp(0", "Abs"))
        neg = frozenset() if positive else (src.neg if fn in ("Scale(2)", "Halve()") else None)
        bits = {"Scale(2)": src.bits + 1, "Halve()": src.bits, "Abs()": src.bits}.get(fn, 2)
        return self._new(f"{src.name}.threshold({fn})", neg, src.conv, src.bounded, bits=bits)

    def _op_agg(self, src: _Item, finite: bool) -> _Item:
        schema = src.schema
        keys = self._pick_columns(schema, 0 if len(schema) > 1 else 1, 2)
        if not keys:
            keys = [schema.names[0]]
        rest = [c for c in schema.names if c not in keys]
        aggs: list[str] = []
        bounded = []
        kinds = ["min", "max"] if finite else ["count", "min", "max", "sum", "mean"]
        for _ in range(self.draw(st.integers(1, 3))):
            kind = self.draw(st.sampled_from(kinds))
            if kind == "count":
                name = _unused(f"n{len(aggs)}", keys)
                aggs.append(f"{name}=dd.count()")
                bounded.append(name)
                continue
            cols = rest
            if kind in ("sum", "mean"):
                cols = [c for c in rest if schema[c].name == "int32" or c in src.bounded]
            if not cols:
                continue
            c = self.draw(st.sampled_from(cols))
            name = _unused(f"{kind}_{c}{len(aggs)}", keys)
            aggs.append(f"{name}=dd.{kind}({c!r})")
            if kind in ("min", "max") and c in src.bounded:
                bounded.append(name)
        if not aggs and not finite:
            aggs = [f"{_unused('n', keys)}=dd.count()"]
            bounded.append(_unused("n", keys))
        if not aggs:  # a finite context with nothing to take the min of: distinct keys
            return self._new(
                f"{src.name}.select({', '.join(map(repr, keys))}).distinct()",
                frozenset(),
                src.conv,
                src.bounded,
                bits=1,
            )
        group = ", ".join(map(repr, keys))
        return self._new(
            f"{src.name}.group_by({group}).agg({', '.join(aggs)})",
            frozenset(),
            src.conv,
            [*bounded, *(k for k in keys if k in src.bounded)],
            bits=1,
        )

    def _op_reduce(self, src: _Item, finite: bool) -> _Item:
        schema = src.schema
        keys = self._pick_columns(schema, 1, 2)
        if not keys:
            keys = [schema.names[0]]
        rest = [c for c in schema.names if c not in keys]
        fns = ["LeastValue", "OddValues"] if rest else []
        if not finite:
            fns += ["GroupSize", "DistinctValues"]
        if not fns:
            return self._op_distinct(src, finite)
        fn = self.draw(st.sampled_from(fns))
        if fn == "LeastValue":
            i = self.draw(st.integers(0, len(rest) - 1))
            code, out = f"LeastValue({i})", {f"least_{rest[i]}": schema[rest[i]].name + "?"}
        elif fn == "OddValues":
            code, out = "OddValues()", {f"odd_{c}": schema[c].name + "?" for c in rest}
        else:
            code, out = f"{fn}()", {"size" if fn == "GroupSize" else "values": "int64"}
        out = {_unused(n, keys): t for n, t in out.items()}
        group = ", ".join(map(repr, keys))
        return self._new(
            f"{src.name}.group_by({group}).reduce({code}, schema={out!r})",
            frozenset(),
            src.conv,
            [k for k in keys if k in src.bounded],
            bits=1,
        )

    # ------------------------------------------------------------------ loops

    def _op_iterate(self, src: _Item, finite: bool, prioritized: bool = False) -> _Item:
        lid = next(self.loop_ids)
        self.loops += 1
        converging = finite or self.draw(st.integers(0, 2)) > 0
        limit = (
            self.draw(st.sampled_from([None, None, 1, 2, 3, 4]))
            if converging
            else self.draw(st.integers(1, 4))
        )
        if not converging:  # its body may grow multiplicities: it starts and ends clamped
            src = self._clamp(src, _LOOP_BITS)
        body, var = f"body{lid}", f"x{lid}"
        conv = src.conv | ({lid} if converging else _union_conv(*self._visible()))
        var_neg = (frozenset({lid}) if src.neg is None else src.neg | {lid}) if converging else None
        result: list[_Item] = []

        def make_body(x: dd.Collection) -> dd.Collection:
            self.env[var] = x
            # (a prioritized loop's variable adds the records of a priority to the result)
            bits = src.bits if converging else _LOOP_BITS + 2
            item = _Item(var, x, var_neg, conv, src.bounded, bits)
            self.frames.append([item])
            self.indent += 1
            self.depth += 1
            made = self._body(item, lid, converging)
            # a body may not return nulls where the loop's input never holds them
            widened = [
                n
                for n, t in made.coll.schema.items()
                if t.nullable and not src.coll.schema[n].nullable
            ]
            if widened:
                kinds = {n: src.coll.schema[n].kind for n in widened}
                fills = ", ".join(
                    f"{n}=dd.col({n!r}).fill_null({_FILLERS[k]})" for n, k in kinds.items()
                )
                made = self._new(
                    f"{made.name}.with_columns({fills})",
                    made.neg,
                    made.conv,
                    made.bounded,
                    bits=made.bits,
                )
            self._emit(f"return {made.name}")
            self.depth -= 1
            self.indent -= 1
            self.frames.pop()
            result.append(made)
            return made.coll

        self.env[body] = make_body
        self._emit(f"def {body}({var}):")
        args = [body]
        if prioritized:
            args.append(f"priority={self._priority(src.schema)}")
        if limit is not None:
            args.append(f"max_iterations={limit}")
        method = "prioritized_iterate" if prioritized else "iterate"
        name = f"c{next(self.counter)}"
        coll = self._run(name, f"{src.name}.{method}({', '.join(args)})")
        made = result[0]
        neg = made.neg
        if neg is not None and lid in neg:
            neg = None if src.neg is None else (neg - {lid}) | src.neg
        item = _Item(
            name, coll, neg, (made.conv | src.conv) - {lid}, src.bounded, max(made.bits, src.bits)
        )
        self.frames[-1].append(item)
        return item

    def _op_prioritized_iterate(self, src: _Item, finite: bool) -> _Item:
        return self._op_iterate(src, finite, prioritized=True)

    def _priority(self, schema: Schema) -> str:
        """A non-negative, non-null integer expression of a record."""
        options = ["dd.lit(0)"]
        for name, t in schema.items():
            c = f"dd.col({name!r})"
            if t.kind == "int":
                options += [f"({c} % 4).fill_null(0)", f"({c}.abs() % 3).fill_null(1)"]
            elif t.kind == "bool":
                options.append(f"dd.when({c}).then(1).otherwise(0)")
            elif t.kind == "float":
                options.append(f"dd.when({c} > 0).then(2).otherwise(0)")
            elif t.kind == "str":
                options.append(f"({c}.str.len() % 3).fill_null(0)")
            elif t.kind in ("date", "datetime"):
                options.append(f"({c}.dt.year() % 2).fill_null(0)")
        return self.draw(st.sampled_from(options[1:] + options))

    def _body(self, x: _Item, lid: int, converging: bool) -> _Item:
        """A loop body: a collection of ``x``'s schema. Converging: one that grows ``x`` within a
        finite set (or an idempotent function of ``x``); else: any."""
        forms = ["grow", "grow", "least", "idempotent"] if converging else ["any"]
        form = self.draw(st.sampled_from(forms))
        if form == "idempotent":
            op = self.draw(
                st.sampled_from(["filter", "distinct", "semijoin", "antijoin", "identity"])
            )
            if op == "identity":
                return x
            made = getattr(self, "_op_" + op)(x, True)
            return made if made is not None else x
        g = x
        for _ in range(self.draw(st.integers(1, 3))):
            g = self._operation(g)
        g = self._conform(g, x.schema)
        if form == "any":
            if self.draw(st.booleans()):
                other = self._conform(self._pick(), x.schema)
                g = self._new(
                    f"{g.name}.concat({other.name})",
                    _union_neg(g, other),
                    _union_conv(g, other),
                    bits=max(g.bits, other.bits) + 1,
                )
            return self._clamp(g, _LOOP_BITS)
        if g.neg is None or not g.neg <= {lid}:  # may be negative: only its records count
            g = self._new(f"{g.name}.distinct()", frozenset(), g.conv, bits=1)
        grown = f"{x.name}.concat({g.name})"
        if form == "least" and len(x.schema) > 1:
            v = self.draw(st.sampled_from(list(x.schema.names)))
            keys = [c for c in x.schema.names if c != v]
            agg = self.draw(st.sampled_from(["min", "max"]))
            code = f"{grown}.group_by({', '.join(map(repr, keys))}).agg({v}=dd.{agg}({v!r}))"
            if [*keys, v] != list(x.schema.names):
                code += f".select({', '.join(map(repr, x.schema.names))})"
            return self._new(code, frozenset(), _union_conv(x, g), bits=1)
        return self._new(f"{grown}.distinct()", frozenset(), _union_conv(x, g), bits=1)


# ---------------------------------------------------------------------- expressions


#: how much more often than others some operations are drawn (arithmetic, comparisons)
_WEIGHTS = {"arith": 3, "div": 2, "floordiv": 2, "mod": 2, "compare": 2, "compare2": 2, "and": 2}


class _Exprs:
    """Random column expressions over a schema, as code, typed with ``output_dtype``.

    ``finite``: only operations of finite range (applied again and again to a value, they reach
    finitely many values: column copies, comparisons, ``abs``, negation, ``% k``, ``clip``,
    ``least``/``greatest``/``coalesce``/``when`` of such, casts, string length, ...), for
    collections that feed a loop without ``max_iterations``."""

    def __init__(self, gen: _Generator, schema: Schema, finite: bool) -> None:
        self.gen = gen
        self.draw = gen.draw
        self.schema = schema
        self.finite = finite
        self.cols: dict[str, list[str]] = {}
        for name, t in schema.items():
            self.cols.setdefault(t.kind, []).append(name)

    def dtype(self, code: str) -> DType:
        expr = eval(code, self.gen.env)
        assert isinstance(expr, Expr), code
        return output_dtype(expr, self.schema)

    def any_kind(self, depth: int) -> str:
        kinds = list(self.cols) * 3 + ["int", "float", "bool", "str"]
        return self.of_kind(self.draw(st.sampled_from(kinds)), depth)

    def of_type(self, t: DType) -> str:
        """An expression whose values have the Polars type of ``t``."""
        same = [n for n, u in self.schema.items() if u.polars == t.polars]
        kind = t.kind
        options = [f"dd.col({n!r})" for n in same]
        options.append(f"{self.of_kind(kind, 1)}")
        code = self.draw(st.sampled_from(options))
        if self.dtype(code).polars != t.polars:
            code = f"{code}.cast({t.name!r})"
            if self.dtype(code).polars != t.polars:  # pragma: no cover (a generator mistake)
                raise AssertionError(f"cannot make {t} from {code}")
        return code

    def _col(self, kind: str) -> str | None:
        names = self.cols.get(kind)
        return f"dd.col({self.draw(st.sampled_from(names))!r})" if names else None

    def _leaf(self, kind: str) -> str:
        col = self._col(kind)
        lit = f"dd.lit({self.draw(st.sampled_from(_LITERALS[kind]))})"
        if col is None:
            return lit
        return self.draw(st.sampled_from([col, col, col, col, lit]))

    def of_kind(self, kind: str, depth: int) -> str:
        """An expression of the kind ``kind`` (``int``, ``float``, ``bool``, ``str``, ``date``,
        ``datetime``), at most ``depth`` operations deep."""
        if depth <= 0:
            return self._leaf(kind)
        makers = getattr(self, "_" + kind)()
        weighted = [m for m in makers for _ in range(_WEIGHTS.get(m, 1))]
        name = self.draw(st.sampled_from(["leaf", *weighted]))
        if name == "leaf":
            return self._leaf(kind)
        code = makers[name](depth - 1)
        if code is None or (not self.gen.opt.gaps and self._known_gap(code)):
            return self._leaf(kind)
        got = self.dtype(code)
        if _KIND_OF[got.name] != kind:  # pragma: no cover (a generator mistake)
            raise AssertionError(f"{code} is {got}, wanted {kind}")
        return code

    def _known_gap(self, code: str) -> bool:
        """Whether the expression meets a known gap of the local runtime (see
        :func:`plans`): arithmetic of literals alone, a float ``//`` or ``%`` by a divisor that
        reads no column, a division of something that reads no column."""
        for node in eval(code, self.gen.env).walk():
            if node.kind != "binary" or node.params[0] not in ("+", "-", "*", "/", "//", "%"):
                continue
            reads = [any(n.kind == "col" for n in a.walk()) for a in node.args]
            if not any(reads) or (node.params[0] == "/" and not reads[0]):
                return True
            if (
                node.params[0] in ("//", "%")
                and not reads[1]
                and output_dtype(node, self.schema).kind == "float"
            ):
                return True
        return False

    def _sub(self, kind: str, depth: int) -> str:
        return self.of_kind(kind, depth)

    def _pick_kind(self, kinds: list[str]) -> str:
        return str(self.draw(st.sampled_from(kinds)))

    def _num(self, depth: int) -> str:
        return self.of_kind(self.draw(st.sampled_from(["int", "int", "float"])), depth)

    def _common(self, kind: str) -> dict[str, Callable[[int], str | None]]:
        """Operations of finite range that make a value of ``kind`` from values of ``kind``."""
        k = kind
        lit = lambda: self.draw(st.sampled_from(_LITERALS[k]))  # noqa: E731
        ops: dict[str, Callable[[int], str | None]] = {
            "fill_null": lambda d: f"{self._sub(k, d)}.fill_null({lit()})",
            "coalesce": lambda d: f"dd.coalesce({self._sub(k, d)}, {self._sub(k, d)})",
            "when": lambda d: (
                f"dd.when({self._sub('bool', d)}).then({self._sub(k, d)})"
                f".otherwise({self._sub(k, d)})"
            ),
        }
        if k in ("int", "float", "str", "date"):
            ops["least"] = lambda d: f"dd.least({self._sub(k, d)}, {self._sub(k, d)})"
            ops["greatest"] = lambda d: f"dd.greatest({self._sub(k, d)}, {self._sub(k, d)})"
        return ops

    def _int(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("int")
        ops.update(
            {
                "neg": lambda d: f"(-{self._sub('int', d)})",
                "abs": lambda d: f"{self._sub('int', d)}.abs()",
                "mod_k": lambda d: (
                    f"({self._sub('int', d)} % {self.draw(st.sampled_from([2, 3, 5]))})"
                ),
                "clip": lambda d: f"{self._sub('int', d)}.clip(-2, 3)",
                "str_len": lambda d: (
                    f"{self._sub('str', d)}.str.len()" if "str" in self.cols else None
                ),
                "year": lambda d: (
                    f"{self._sub(self.draw(st.sampled_from(t)), d)}.dt.year()"
                    if (t := [k for k in ("date", "datetime") if k in self.cols])
                    else None
                ),
                "cast": lambda d: (
                    f"{self._sub(self._pick_kind(['float', 'bool', 'int']), d)}"
                    f".cast({self.draw(st.sampled_from(['int64', 'int32']))!r})"
                ),
                "parse": lambda d: (
                    f"{self._sub('str', d)}.cast('int64')" if "str" in self.cols else None
                ),
            }
        )
        if not self.finite:
            ops.update(
                {
                    "arith": lambda d: (
                        f"({self._sub('int', d)} "
                        f"{self.draw(st.sampled_from(['+', '-', '*']))} "
                        f"{self._sub('int', d)})"
                    ),
                    "floordiv": lambda d: f"({self._sub('int', d)} // {self._sub('int', d)})",
                    "mod": lambda d: f"({self._sub('int', d)} % {self._sub('int', d)})",
                }
            )
        return ops

    def _divisor(self, depth: int) -> str:
        """A divisor that is never a float zero, whose sign the quotient would show."""
        if self.draw(st.booleans()):
            return self._sub("int", depth)
        return f"({self._sub('float', depth)}.abs() + 1)"

    def _float(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("float")
        ops.update(
            {
                "neg": lambda d: f"(-{self._sub('float', d)})",
                "abs": lambda d: f"{self._sub('float', d)}.abs()",
                "round": lambda d: (
                    f"{self._sub('float', d)}.round({self.draw(st.sampled_from([0, 1, 2]))})"
                ),
                "clip": lambda d: f"{self._sub('float', d)}.clip(-1.5, 2.0)",
                "mod_k": lambda d: (
                    f"({self._sub('float', d)} % 2.5)" if self.gen.opt.gaps else None
                ),
                "cast": lambda d: (
                    f"{self._sub(self.draw(st.sampled_from(['int', 'float'])), d)}"
                    f".cast({self.draw(st.sampled_from(['float64', 'float32']))!r})"
                ),
            }
        )
        if not self.finite:
            ops.update(
                {
                    "arith": lambda d: (
                        f"({self._sub('float', d)} "
                        f"{self.draw(st.sampled_from(['+', '-', '*']))} "
                        f"{self._num(d)})"
                    ),
                    "div": lambda d: f"({self._num(d)} / {self._divisor(d)})",
                    "floordiv": lambda d: f"({self._sub('float', d)} // {self._divisor(d)})",
                }
            )
            if not self.gen.opt.spark:
                ops["pow"] = lambda d: (
                    f"({self._num(d)} ** {self.draw(st.sampled_from(['2', '3', '0.5']))})"
                )
        return ops

    def _comparable(self, depth: int) -> tuple[str, str]:
        kind = self.draw(st.sampled_from([*self.cols, "int", "float"]))
        left = self.of_kind(kind, depth)
        if kind in ("int", "float"):
            return left, self._num(depth)
        return left, self.of_kind(kind, depth)

    def _bool(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("bool")

        def compare(d: int) -> str:
            a, b = self._comparable(d)
            return f"({a} {self.draw(st.sampled_from(['==', '!=', '<', '<=', '>', '>=']))} {b})"

        ops.update(
            {
                "compare": compare,
                "compare2": compare,
                "is_null": lambda d: (
                    f"{self.of_kind(self.draw(st.sampled_from(list(self.cols))), d)}.is_null()"
                ),
                "not": lambda d: f"(~{self._sub('bool', d)})",
                "and": lambda d: f"({self._sub('bool', d)} & {self._sub('bool', d)})",
                "or": lambda d: f"({self._sub('bool', d)} | {self._sub('bool', d)})",
                "contains": lambda d: (
                    f"{self._sub('str', d)}.str.contains("
                    f"{self.draw(st.sampled_from(['a', 'b', '', 'Σ']))!r})"
                ),
            }
        )
        return ops

    def _str(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("str")
        ops.update(
            {
                "upper": lambda d: f"{self._sub('str', d)}.str.upper()",
                "cast": lambda d: (
                    f"{self._sub(self._pick_kind(['int', 'bool', 'date']), d)}.cast('str')"
                ),
            }
        )
        return ops

    def _date(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("date")
        if "datetime" in self.cols:
            ops["cast"] = lambda d: f"{self._sub('datetime', d)}.cast('date')"
        return ops

    def _datetime(self) -> dict[str, Callable[[int], str | None]]:
        ops = self._common("datetime")
        if "date" in self.cols:
            ops["cast"] = lambda d: f"{self._sub('date', d)}.cast('datetime')"
        return ops
