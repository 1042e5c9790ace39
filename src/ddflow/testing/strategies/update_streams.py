"""Hypothesis strategies of update streams: :func:`streams`, lists of epochs of
``(input_name, record, diff)`` updates, and :func:`run_points`, the epochs after which to
``run()`` (often none, so that all epochs are in flight until the final ``run()``).

Diffs are ±1, now and then ±2: updates insert new records, retract earlier ones, insert earlier
ones again, cancel an insertion with its retraction in the same epoch and, on the inputs made
with ``signed=True``, retract records never inserted (so multiplicities go negative).

Invariant: on an input not named signed, no record's multiplicity goes below zero, after any
epoch's updates (fed as one ``update`` call) or within one.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import strategies as st

import ddflow as dd
from ddflow.schema import Schema
from ddflow.testing.strategies.column_values import records

__all__ = ["run_points", "streams", "streams_and_run_points"]


Update = tuple[str, tuple[Any, ...], int]
Stream = list[list[Update]]


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
