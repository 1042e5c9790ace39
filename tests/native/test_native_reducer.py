"""The native reducer against the Python one, step by step.

Both :class:`~ddflow.differential.kernel.Reducer` s are given the same calls: batches of new
updates at times in advance of the frontier, then ``evaluate`` at a frontier that advances
(never back), and ``set_since`` it (compaction between steps); at every step their output
corrections must be the same updates, and, for the aggregates neither reducer skips keys of
(``count``/``sum``), their pending times too. Histories are drawn over times of widths 1 to
4, with product and lexicographic coordinates, null keys and values, ``int64`` extremes (sums
that wrap), retractions and several rounds within an epoch (a loop's iterations). The native
core keeps whole keys, not key codes, so key-code collisions have no native counterpart;
they are the Python reducer's to handle (tests/unit). A checkpoint written by either reducer
is restored by the other and goes on the same.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow import _native
from ddflow.differential.batch import DIFF
from ddflow.differential.kernel import ReduceSpec
from ddflow.differential.operators.join import Arranger
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.local.native_reducer import NativeReducer
from ddflow.runtime.local.reducer import KernelReducer
from ddflow.runtime.local.settings import LocalSettings
from ddflow.timely.lattice import TimeType

I64 = 2**63
#: values drawn: small ones (collisions of times and groups), nulls, the int64 extremes
VALUES = st.one_of(st.integers(-3, 3), st.none(), st.sampled_from([I64 - 1, -I64, I64 // 2]))
#: ... of an int32 column
VALUES32 = st.one_of(st.integers(-3, 3), st.none(), st.sampled_from([2**31 - 1, -(2**31)]))

#: the reduces drawn: (kind, aggregates over value columns "a", "b"), the output types
SPECS: list[tuple[str, list[tuple[Any, ...]]]] = [
    ("agg", [("n", "count", None), ("s", "sum", "a")]),
    ("agg", [("lo", "min", "a"), ("hi", "max", "b")]),
    ("agg", [("n", "count", None), ("lo", "min", "b"), ("s", "sum", "b")]),
    # (an arg_max by the other column, and one by its own)
    ("agg", [("am", "arg_max", "a", "b"), ("bm", "arg_max", "b", "b"), ("n", "count", None)]),
    ("distinct", []),
    ("threshold", []),
]


def _thresholded(m: int) -> int:
    """A threshold's function: not monotone, zero at 1, negative below zero."""
    return -1 if m < 0 else min(m - 1, 2)


def _spec(kind: str, aggs: list[Any], key_type: Any) -> tuple[ReduceSpec, dict[str, Any]]:
    source = {"k": key_type, "a": pl.Int64, "b": pl.Int32}
    if kind in ("distinct", "threshold"):
        fn = _thresholded if kind == "threshold" else None
        return ReduceSpec.of(kind, ["k", "a"], fn=fn, out_types=source), source
    out = {"k": key_type}
    for name, agg, column, *_ in aggs:
        out[name] = pl.Int64 if agg in ("count", "sum") else source[column]
    ranked = [(name, 1, by[0]) for name, agg, _, *by in aggs if agg == "arg_max"]
    plain = [(name, agg, column) for name, agg, column, *_ in aggs]
    spec = ReduceSpec.of("agg", ["k"], aggs=plain, out_types=out, ranked=ranked)
    return spec, source


def _reducer(kind: type, spec: ReduceSpec, source: dict[str, Any], tt: TimeType) -> Any:
    k = LocalKernels(LocalSettings())
    tcols = {c: pl.Int64 for c in tt.columns()}
    empty = k.empty(source, tt)
    out_empty = k.empty({c: spec.out_types[c] for c in [*spec.keys, *spec.outputs]}, tt)
    arranger = Arranger(
        tt,
        k,
        spec.keys,
        empty,
        prepare=lambda b: k.reduce_prepare(spec, b, tt),
        sums=(DIFF, *spec.weights),
    )
    del tcols
    return kind(k, spec, tt, arranger, out_empty)


@st.composite
def histories(draw: st.DrawFn) -> dict[str, Any]:
    coords = draw(st.lists(st.sampled_from(["product", "lexicographic"]), min_size=0, max_size=2))
    tt = TimeType(("product", *coords))
    kind, aggs = draw(st.sampled_from(SPECS))
    key_type = draw(st.sampled_from([pl.Int64, pl.Int32, pl.Boolean]))
    keys = (
        st.one_of(st.none(), st.booleans())
        if key_type == pl.Boolean
        else (st.one_of(st.none(), st.integers(-2, 2)))
    )
    steps = []
    frontier = [tt.minimum()]
    for _ in range(draw(st.integers(1, 5))):
        updates = []
        for _ in range(draw(st.integers(0, 6))):
            base = draw(st.sampled_from(frontier))
            lift = tuple(draw(st.integers(0, 2)) for _ in range(tt.width))
            t = tt.join(base, tuple(b + d for b, d in zip(base, lift, strict=True)))
            row = (draw(keys), draw(VALUES), draw(VALUES32))
            updates.append((row, t, draw(st.sampled_from([1, -1, 2]))))
        # the frontier advances: each new element at or after an old one
        advanced = []
        for f in frontier:
            lift = tuple(draw(st.integers(0, 1)) for _ in range(tt.width))
            advanced.append(tuple(a + b for a, b in zip(f, lift, strict=True)))
        frontier = sorted({t for t in advanced if not any(tt.less_than(s, t) for s in advanced)})
        steps.append((updates, list(frontier)))
    steps.append(([], []))  # (the end: every pending time is complete)
    # (batches as Polars frames, their columns crossing as Arrow arrays, or as rows)
    frames = draw(st.booleans())
    return {
        "tt": tt,
        "kind": kind,
        "aggs": aggs,
        "key_type": key_type,
        "steps": steps,
        "frames": frames,
    }


def _batch(
    k: LocalKernels, source: dict[str, Any], tt: TimeType, updates: list[Any], frames: bool
) -> Any:
    rows = [(*row, *t, d) for row, t, d in updates]
    schema = {**source, **{c: pl.Int64 for c in tt.columns()}, DIFF: pl.Int64}
    if source["k"] == pl.Boolean:
        rows = [(None if r[0] is None else bool(r[0]), *r[1:]) for r in rows]
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame if frames else k.from_polars(frame)


def _updates(k: LocalKernels, out: list[tuple[Any, Any]] | None) -> Counter:
    found: Counter = Counter()
    for _, batch in out or []:
        frame = k.to_polars(batch)
        for row in frame.iter_rows():
            *data, d = row
            found[tuple(data)] += d
    return +found - (-found)


def _run(reducers: list[Any], source: dict[str, Any], h: dict[str, Any], compare: bool) -> None:
    tt = h["tt"]
    for updates, frontier in h["steps"]:
        for r in reducers:
            r.take(
                [
                    [
                        (
                            frontier[0] if frontier else tt.minimum(),
                            _batch(r.kernels, source, tt, updates, h["frames"]),
                        )
                    ]
                ]
            )
        rounds = 0
        while True:
            outs = [r.evaluate(frontier) for r in reducers]
            got = [_updates(r.kernels, o) for r, o in zip(reducers, outs, strict=True)]
            assert got[0] == got[1], (updates, frontier)
            if compare:
                assert reducers[0].pending() == reducers[1].pending()
            if all(o is None for o in outs) or rounds > 8:
                break
            rounds += 1
        for r in reducers:
            r.set_since(frontier)


@settings(max_examples=150, deadline=None)
@given(histories())
def test_the_native_reducer_matches_the_python_reducer_at_every_step(h: dict[str, Any]) -> None:
    spec, source = _spec(h["kind"], h["aggs"], h["key_type"])
    reducers = [_reducer(cls, spec, source, h["tt"]) for cls in (NativeReducer, KernelReducer)]
    skips = spec.minmax_only or spec.kind == "distinct"
    _run(reducers, source, h, compare=not skips)


@settings(max_examples=60, deadline=None)
@given(histories(), st.booleans())
def test_a_checkpoint_of_either_reducer_restores_in_the_other(
    h: dict[str, Any], native_first: bool
) -> None:
    """The same history in a reducer of each kind; at the first step after which nothing is
    pending (a checkpoint is taken then), the first is saved and loaded into a new reducer of
    the other kind, which goes on in its place: its corrections stay the second's."""
    spec, source = _spec(h["kind"], h["aggs"], h["key_type"])
    tt = h["tt"]
    kinds = (NativeReducer, KernelReducer) if native_first else (KernelReducer, NativeReducer)
    pair = [_reducer(kinds[0], spec, source, tt), _reducer(kinds[1], spec, source, tt)]
    restored = False
    for i, step in enumerate(h["steps"]):
        _run(pair, source, {**h, "steps": [step]}, compare=False)
        if not restored and i < len(h["steps"]) - 1 and not any(r.pending() for r in pair):
            fresh = _reducer(kinds[1], spec, source, tt)
            fresh.load(pair[0].save())
            pair[0] = fresh
            restored = True


def test_an_arrow_column_is_read_with_its_nulls_and_offset() -> None:
    """Columns cross through the Arrow C data interface: values, nulls (the validity bitmap)
    and the offset of a sliced array; another type is refused, naming it."""
    values = [5, None, -(2**63), 2**63 - 1, None, 0, 7, 8, 9, None]
    array = pa.array(values, type=pa.int64())
    assert _native.int64_column(array) == values
    assert _native.int64_column(array.slice(3, 5)) == values[3:8]
    assert _native.int64_column(pa.array([1, 2], type=pa.int64())) == [1, 2]
    assert _native.int64_column(pl.Series([3, None], dtype=pl.Int64).to_arrow()) == [3, None]
    with pytest.raises(ValueError, match="int64"):
        _native.int64_column(pa.array([1.5]))
