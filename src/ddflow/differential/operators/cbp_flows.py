"""The flows of a CBP stage (see :mod:`ddflow.differential.operators.cbp`): the stage's
description (:class:`StageSpec`, :class:`FlowSpec`), the routes that give each record its group
keys or cast before the exchange (:func:`route_frame`, :func:`delay_route`), and the framer of a
flow with a FrameBy function (:class:`FrameOp`).

Routed rows have the columns of :func:`routed_schema`: the group key ``__g0..``, ``__cast``
(:data:`KEYED` rows go to the worker owning their key; the others, broadcasts, multicasts and
markers, to every worker), ``__mc`` (a multicast address), ``__frame`` and ``__fkey`` (a framed
increment's number and framing key), the record, ``__t0`` and the multiplicity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ddflow.differential.batch import DIFF
from ddflow.errors import CallSite, CBPError
from ddflow.schema import Schema
from ddflow.timely.lattice import EPOCHS, Time
from ddflow.timely.operator import Operator, OperatorState

__all__ = [
    "ALL",
    "ALL_STATE",
    "FlowSpec",
    "FrameByPrior",
    "FrameOp",
    "Multicast",
    "OrderByAny",
    "Route",
    "RouteByRcd",
    "StageSpec",
    "delay_route",
    "route_frame",
    "routed_schema",
]

T0 = "__t0"
CAST = "__cast"
MC = "__mc"
FRAME = "__frame"
FKEY = "__fkey"
#: kinds of routed rows
KEYED, TO_ALL, TO_STATE, TO_MULTICAST, PRESENT, COMPLETE = range(6)


class _Cast:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"cbp.{self.name}"

    def __reduce__(self) -> str:
        return self.name


#: RouteBy's broadcast key: the record reaches every group called in the epoch
ALL = _Cast("ALL")
#: RouteBy's broadcast to the groups with state only (they are called for it)
ALL_STATE = _Cast("ALL_STATE")
#: RouteBy: the record is its own group key (record-wise processing)
RouteByRcd = _Cast("RouteByRcd")
#: OrderBy: any order within a group (the default)
OrderByAny = _Cast("OrderByAny")
#: FrameBy: an increment per epoch in which the flow received records (the default)
FrameByPrior = _Cast("FrameByPrior")


@dataclass(frozen=True)
class Multicast:
    """RouteBy to a multicast address, the record's ``column``: the record reaches the groups
    that translate associated with the address (``out.associate(key, address)``) in the
    epoch that wrote the record."""

    column: str


@dataclass(frozen=True)
class Route:
    """A flow's RouteBy, resolved: ``columns`` (one key from columns), ``record`` (the record
    is its key: RouteByRcd), ``fn`` (a function giving a key, a list of keys or a cast),
    ``all``, ``all_state`` or ``multicast`` (of ``columns[0]``)."""

    kind: str
    columns: tuple[str, ...] = ()
    fn: Callable[[tuple[Any, ...]], Any] | None = None


@dataclass(frozen=True)
class FlowSpec:
    """One flow of a stage: its name, records' schema, RouteBy, OrderBy and FrameBy."""

    name: str
    schema: Schema
    route: Route
    order_by: Any = None  # None (OrderByAny), column names, or a function of a record
    frame_by: Callable[[tuple[Any, ...], Any], tuple[int, Any]] | None = None
    frame_state: Any = None


@dataclass(frozen=True)
class StageSpec:
    """A stage: its flows by role and its functions (see :mod:`ddflow.cbp`)."""

    name: str
    key: Schema
    translate: Callable[..., Any]
    inputs: tuple[FlowSpec, ...]
    loopbacks: tuple[FlowSpec, ...]
    outputs: tuple[FlowSpec, ...]
    state: FlowSpec | None
    grouping: str
    runnable: Callable[..., Any]
    runnable_state: Any = None
    site: CallSite | None = None
    #: the hidden loopback of multicast associations (key, address), if a flow multicasts
    assoc: FlowSpec | None = field(default=None)

    @property
    def readable(self) -> tuple[FlowSpec, ...]:
        """The flows Runnable chooses among: the inputs, then the loopbacks."""
        return self.inputs + self.loopbacks

    def functions(self) -> list[Any]:
        """The user's functions: translate, Runnable, the flows' RouteBy, OrderBy, FrameBy."""
        fns: list[Any] = [self.translate, self.runnable]
        for f in [*self.readable, *self.outputs, *(x for x in (self.state,) if x is not None)]:
            fns += [f.route.fn, f.order_by if callable(f.order_by) else None, f.frame_by]
        return [fn for fn in fns if fn is not None]

    def in_ports(self) -> list[FlowSpec]:
        extra = [f for f in (self.state, self.assoc) if f is not None]
        return [*self.inputs, *self.loopbacks, *extra]

    def out_ports(self) -> list[FlowSpec]:
        extra = [f for f in (self.state, self.assoc) if f is not None]
        return [*self.outputs, *self.loopbacks, *extra]


# ---------------------------------------------------------------------------------- routes


def routed_schema(key: Schema, flow: FlowSpec) -> dict[str, pl.DataType]:
    """The columns of a flow's routed rows: group keys, cast, multicast address, increment and
    framing key, the record, its epoch and its multiplicity."""
    out: dict[str, pl.DataType] = {f"__g{i}": t.polars for i, t in enumerate(key.dtypes)}
    out.update({CAST: pl.Int8(), MC: pl.Utf8(), FRAME: pl.Int64(), FKEY: pl.Int64()})
    out.update(dict(zip(flow.schema.names, (t.polars for t in flow.schema.dtypes), strict=True)))
    out[T0] = pl.Int64()
    out[DIFF] = pl.Int64()
    return out


def _blank(layout: dict[str, pl.DataType], n: int, **columns: Any) -> pl.DataFrame:
    """``n`` routed rows with nulls but for ``columns`` (values or lists)."""
    data = {}
    for c, t in layout.items():
        v = columns.get(c)
        if isinstance(v, pl.Series):
            data[c] = v.cast(t)
        elif isinstance(v, list):
            data[c] = pl.Series(c, v, dtype=t)
        else:
            data[c] = pl.Series(c, [v] * n, dtype=t)
    return pl.DataFrame(data)


def route_frame(
    stage: StageSpec, flow: FlowSpec, frame: pl.DataFrame, markers: bool = True
) -> pl.DataFrame:
    """A flow's records (columns, ``__t0``, diff) as routed rows, with a *present* marker per
    epoch among them (see the module)."""
    key, layout = stage.key, routed_schema(stage.key, flow)
    gcols = [f"__g{i}" for i in range(len(key))]
    names = list(flow.schema.names)
    r = flow.route
    parts = []
    if frame.height:
        if r.kind in ("columns", "record"):
            cols = r.columns if r.kind == "columns" else tuple(names)
            part = frame.with_columns(
                *[pl.col(c).alias(g) for c, g in zip(cols, gcols, strict=True)],
                pl.lit(KEYED, dtype=pl.Int8).alias(CAST),
            )
            parts.append(_fit(part, layout, stage, flow))
        elif r.kind in ("all", "all_state"):
            cast = TO_ALL if r.kind == "all" else TO_STATE
            parts.append(_fit(frame.with_columns(pl.lit(cast, pl.Int8).alias(CAST)), layout))
        elif r.kind == "multicast":
            part = frame.with_columns(
                pl.lit(TO_MULTICAST, pl.Int8).alias(CAST),
                pl.col(r.columns[0]).cast(pl.Utf8).alias(MC),
            )
            parts.append(_fit(part, layout))
        else:
            parts.append(_route_by_function(stage, flow, frame, layout, gcols))
    if markers:
        times = frame.get_column(T0).unique().sort().to_list() if frame.height else []
        if times:
            parts.append(_blank(layout, len(times), **{CAST: PRESENT, T0: times, DIFF: 1}))
    if not parts:
        return _blank(layout, 0)
    return pl.concat(parts, how="vertical") if len(parts) > 1 else parts[0]


def _fit(
    part: pl.DataFrame,
    layout: dict[str, pl.DataType],
    stage: StageSpec | None = None,
    flow: FlowSpec | None = None,
) -> pl.DataFrame:
    """``part`` in the routed layout: missing columns null, keys cast to the stage's types."""
    out = []
    for c, t in layout.items():
        if c in part.columns:
            col = pl.col(c)
            out.append(col if part.schema[c] == t else col.cast(t, strict=True))
        else:
            out.append(pl.lit(None, dtype=t).alias(c))
    try:
        return part.select(out)
    except pl.exceptions.PolarsError as e:
        assert stage is not None and flow is not None
        raise CBPError(
            f"stage {stage.name!r}: flow {flow.name!r} routes by {list(flow.route.columns)}, "
            f"whose values do not fit the stage's key {dict(stage.key.items())} ({e})",
            site=stage.site,
        ) from None


def _route_by_function(
    stage: StageSpec,
    flow: FlowSpec,
    frame: pl.DataFrame,
    layout: dict[str, pl.DataType],
    gcols: list[str],
) -> pl.DataFrame:
    fn = flow.route.fn
    assert fn is not None
    width = len(stage.key)
    names = list(flow.schema.names)
    rows = frame.select(names).rows()
    keyed_at: list[int] = []
    keys: list[tuple[Any, ...]] = []
    cast_at: list[int] = []
    casts: list[int] = []
    mcs: list[str | None] = []
    for i, rec in enumerate(rows):
        got = fn(rec)
        for k in got if isinstance(got, list) else (got,):
            if k is ALL or k is ALL_STATE:
                cast_at.append(i)
                casts.append(TO_ALL if k is ALL else TO_STATE)
                mcs.append(None)
            elif isinstance(k, Multicast):
                cast_at.append(i)
                casts.append(TO_MULTICAST)
                mcs.append(str(k.column))
            else:
                t = k if isinstance(k, tuple) else (k,)
                if len(t) != width:
                    raise CBPError(
                        f"stage {stage.name!r}: the RouteBy of flow {flow.name!r} gave the key "
                        f"{k!r} for the record {rec!r}; the stage's key has {width} "
                        f"column(s) {list(stage.key.names)}",
                        site=stage.site,
                    )
                keyed_at.append(i)
                keys.append(t)
    parts = []
    if keyed_at:
        idx = pl.Series(keyed_at, dtype=pl.UInt32)
        part = frame[idx]
        try:
            cols = [
                pl.Series(g, [k[j] for k in keys], dtype=layout[g]) for j, g in enumerate(gcols)
            ]
        except (TypeError, OverflowError, pl.exceptions.PolarsError) as e:
            raise CBPError(
                f"stage {stage.name!r}: the RouteBy of flow {flow.name!r} gave keys that do not "
                f"fit the stage's key {dict(stage.key.items())} ({e})",
                site=stage.site,
            ) from None
        part = part.with_columns(cols).with_columns(pl.lit(KEYED, pl.Int8).alias(CAST))
        parts.append(_fit(part, layout))
    if cast_at:
        part = frame[pl.Series(cast_at, dtype=pl.UInt32)].with_columns(
            pl.Series(CAST, casts, dtype=pl.Int8), pl.Series(MC, mcs, dtype=pl.Utf8)
        )
        parts.append(_fit(part, layout))
    if not parts:
        return _blank(layout, 0)
    return pl.concat(parts, how="vertical") if len(parts) > 1 else parts[0]


def delay_route(stage: StageSpec, flow: FlowSpec, frame: pl.DataFrame) -> pl.DataFrame:
    """A loopback flow's records written in epoch ``e``, routed, at ``e + 1`` (with *present*
    markers for a flow Runnable sees, not for state and associations)."""
    frame = frame.with_columns(pl.col(T0) + 1)
    markers = flow is not stage.state and flow is not stage.assoc
    return route_frame(stage, flow, frame, markers)


# ---------------------------------------------------------------------------------- framing


class FrameOp(Operator):
    """Frames one flow (FrameBy): on worker 0, in epoch order and, within an epoch, in the order
    of the records. An increment ends where a record with another framing key follows, or when
    the flow ends; its records are tagged with its number, and a *complete* marker with its
    framing key goes to every worker. While an increment is open the operator holds a
    capability at its input's frontier, to send that marker."""

    name = "cbp-frame"

    def __init__(self, stage: StageSpec, flow: FlowSpec, kernels: Any) -> None:
        super().__init__([EPOCHS], [EPOCHS])
        self.name = f"cbp-frame({flow.name})"
        self.stage, self.flow, self.k = stage, flow, kernels
        self.layout = routed_schema(stage.key, flow)
        self.buffer: dict[int, list[pl.DataFrame]] = {}
        self.fstate = flow.frame_state
        self.seq = -1  # the open increment's number
        self.fkey: int | None = None
        self.open_at: Time | None = None  # the capability held for the open increment

    def schedule(self) -> None:
        for _, batch in self.pull(0):
            f = self.k.to_polars(batch)
            for (t,), part in f.partition_by(T0, as_dict=True).items():
                if t not in self.buffer:
                    self.buffer[t] = []
                    self.hold((t,))
                self.buffer[t].append(part)
        self.settle()
        frontier = self.frontier(0)
        for t in sorted(self.buffer):
            if any(f[0] <= t for f in frontier):
                break
            self._frame(t, pl.concat(self.buffer.pop(t), how="vertical"))
            if self.fkey is not None and not frontier and not self.buffer:
                self._complete(t)  # the flow ended with this epoch: its last increment too
                self.fkey = None
            self.release((t,))
        if self.fkey is not None and not frontier and not self.buffer:
            # the flow ended later: its last increment is complete
            assert self.open_at is not None
            self._complete(self.open_at[0])
            self.fkey = None
        want = []
        if self.fkey is not None:
            want = [frontier[0]] if frontier else []
        if want != ([self.open_at] if self.open_at else []):
            if want:
                self.hold(want[0])
            if self.open_at is not None:
                self.release(self.open_at)
            self.open_at = want[0] if want else None

    def _frame(self, t: int, frame: pl.DataFrame) -> None:
        names = list(self.flow.schema.names)
        frame = frame.filter(pl.col(DIFF) != 0)
        if frame.height == 0:
            return
        frame = frame.sort(names, maintain_order=True)
        seqs = []
        fn = self.flow.frame_by
        assert fn is not None
        for rec in frame.select(names).rows():
            key, self.fstate = fn(rec, self.fstate)
            if not isinstance(key, int) or isinstance(key, bool):
                raise CBPError(
                    f"stage {self.stage.name!r}: the FrameBy of flow {self.flow.name!r} gave "
                    f"{key!r} for the record {rec!r}; a framing key is an int",
                    site=self.stage.site,
                )
            if key != self.fkey:
                if self.fkey is not None:
                    self._complete(t)
                self.seq += 1
                self.fkey = key
            seqs.append(self.seq)
        tagged = frame.with_columns(pl.Series(FRAME, seqs, dtype=pl.Int64))
        routed = route_frame(self.stage, self.flow, tagged, markers=False)
        self.send(0, (t,), self.k.from_polars(routed))

    def _complete(self, t: int) -> None:
        marker = _blank(self.layout, 1, **{CAST: COMPLETE, FRAME: self.seq, FKEY: self.fkey})
        marker = marker.with_columns(pl.lit(t, pl.Int64).alias(T0), pl.lit(1, pl.Int64).alias(DIFF))
        self.send(0, (t,), self.k.from_polars(marker))

    def save_state(self) -> OperatorState:
        frames = {}
        if self.buffer:
            frames["buffer"] = pl.concat([f for fs in self.buffer.values() for f in fs])
        return OperatorState(
            frames,
            {
                "fstate": self.fstate,
                "seq": self.seq,
                "fkey": self.fkey,
                "open_at": None if self.open_at is None else list(self.open_at),
            },
        )

    def load_state(self, state: OperatorState) -> None:
        v = state.values
        self.fstate, self.seq, self.fkey = v["fstate"], v["seq"], v["fkey"]
        if v["open_at"] is not None:
            self.open_at = tuple(v["open_at"])
            self.hold(self.open_at)
        buf = state.frames.get("buffer")
        if buf is not None:
            for (t,), part in buf.partition_by(T0, as_dict=True).items():
                self.buffer[t] = [part]
                self.hold((t,))
        self.activate()
