"""CBP stages (cbp-socc2010) as operators of the dataflow.

A stage is one :class:`StageOp` on every worker, owning the groups whose key hashes to it. Its
flows are edges:

* an input flow reaches it through a *route* (:func:`route_frame`, applied on every worker
  before the exchange): each record gets its group keys (RouteBy) as the columns ``__g0..``, or
  a cast (``ALL``, ``ALL`` to groups with state, a multicast address); keyed rows go to the
  worker owning the key, cast rows to every worker. Each route also sends every worker a
  *present* marker for each epoch it saw records at, so that every copy of the stage knows the
  same increments exist, whatever share of them it holds;
* a flow with a FrameBy function is framed by one :class:`FrameOp` on worker 0 (framing is a
  sequence: an increment ends where a record with another framing key follows), which sends
  the records tagged with their increment and a *complete* marker to every worker;
* a loopback flow (state, messages, the hidden multicast associations) leaves the stage on an
  output port, passes a route that also moves it one epoch on (:func:`delay_route`, the
  cycle's increment for progress tracking) and comes back on an input port.

Every copy of the stage sees the same increments at the same epochs and calls the same
Runnable on them, so they run in the same epochs; each calls translate for its own groups.
State lives in the copy as a dict from group key to its records: an inner grouping reads the
keys in its inputs by index, never the rest.
"""

from __future__ import annotations

import datetime
import operator
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from ddflow.differential.batch import DIFF
from ddflow.differential.operators.cbp_flows import (
    CAST,
    COMPLETE,
    FKEY,
    FRAME,
    KEYED,
    MC,
    PRESENT,
    T0,
    TO_ALL,
    TO_STATE,
    FlowSpec,
    StageSpec,
    routed_schema,
)
from ddflow.errors import CallSite, CBPError
from ddflow.schema import Schema
from ddflow.timely.lattice import EPOCHS
from ddflow.timely.operator import Operator, OperatorState

__all__ = ["StageOp", "Writer"]

# ---------------------------------------------------------------------------------- stages


@dataclass
class _Increment:
    seq: int
    fkey: int
    frame: pl.DataFrame | None  # this worker's routed rows of it


_KINDS: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "date": lambda v: isinstance(v, datetime.date) and not isinstance(v, datetime.datetime),
    "datetime": lambda v: isinstance(v, datetime.datetime),
    "list": lambda v: isinstance(v, (list, tuple)),
}


def _checker(stage: StageSpec, flow: FlowSpec, what: str) -> Callable[[Any], tuple[Any, ...]]:
    """A function normalizing a record written to ``flow`` (a tuple, list or dict) to a tuple,
    raising :class:`CBPError` at the writer's line for one that does not fit the schema."""
    names = flow.schema.names
    checks = [(n, t, _KINDS[t.kind], t.nullable) for n, t in flow.schema.items()]
    width = len(names)

    def check(record: Any) -> tuple[Any, ...]:
        if isinstance(record, dict):
            if set(record) != set(names):
                _bad(stage, flow, what, record, f"its fields are not the columns {list(names)}")
            record = tuple(record[n] for n in names)
        elif not isinstance(record, tuple):
            if isinstance(record, list):
                record = tuple(record)
            elif width == 1:
                record = (record,)
            else:
                _bad(stage, flow, what, record, f"give a tuple of {width} values")
        if len(record) != width:
            _bad(stage, flow, what, record, f"it has {len(record)} values, the flow {width}")
        for (n, t, ok, nullable), v in zip(checks, record, strict=True):
            if v is None:
                if not nullable:
                    _bad(stage, flow, what, record, f"column {n!r} ({t}) is null")
            elif not ok(v):
                _bad(stage, flow, what, record, f"column {n!r} is {t}, got {type(v).__name__}")
        return record  # type: ignore[no-any-return]

    return check


def _bad(stage: StageSpec, flow: FlowSpec, what: str, record: Any, why: str) -> None:
    raise CBPError(
        f"stage {stage.name!r}: translate wrote {record!r} to {what} {flow.name!r}, which does "
        f"not fit its schema {dict(flow.schema.items())}: {why}",
        site=_writer_site(),
    )


def _writer_site() -> CallSite | None:
    """The user's line that called a writer method (the first frame outside this module)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return None
    return CallSite(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


class Writer:
    """What translate writes through (``out``): ``out.write(flow, record)`` to an output or
    loopback flow, ``out.state(record)`` to the stage's state (its group's state in the next
    epoch), ``out.associate(key, address)`` for a multicast in the next epoch; ``out.epoch``
    and ``out.key`` say where it runs."""

    def __init__(self, op: StageOp) -> None:
        s = op.spec
        self._op = op
        self._ports = {f.name: i for i, f in enumerate([*s.outputs, *s.loopbacks])}
        kinds = ["output"] * len(s.outputs) + ["loopback flow"] * len(s.loopbacks)
        self._checks = [
            _checker(s, f, w) for f, w in zip([*s.outputs, *s.loopbacks], kinds, strict=True)
        ]
        self._state_check = _checker(s, s.state, "the state") if s.state is not None else None
        self.rows: list[list[tuple[Any, ...]]] = [[] for _ in self._ports]
        self.state_rows: list[tuple[Any, ...]] = []
        self.assoc_rows: list[tuple[Any, ...]] = []
        self.epoch = -1
        self.key: Any = None

    def write(self, flow: str, record: Any) -> None:
        """Write ``record`` to the output or loopback flow named ``flow``."""
        port = self._ports.get(flow)
        if port is None:
            s = self._op.spec
            raise CBPError(
                f"stage {s.name!r}: translate wrote {record!r} to flow {flow!r}, which the "
                f"stage does not have (its outputs and loopbacks: {sorted(self._ports)})",
                site=_writer_site(),
            )
        self.rows[port].append(self._checks[port](record))

    def state(self, record: Any) -> None:
        """Write ``record`` to the stage's state: it is state in the next epoch."""
        if self._state_check is None:
            raise CBPError(
                f"stage {self._op.spec.name!r}: translate wrote state {record!r}, but the "
                "stage has no state (give state=... to the stage)",
                site=_writer_site(),
            )
        self.state_rows.append(self._state_check(record))

    def associate(self, key: Any, address: Any) -> None:
        """Make the group ``key`` a destination of the records written in this epoch to
        ``address`` (a flow routed by :class:`Multicast`); valid for this epoch's writes."""
        s = self._op.spec
        if s.assoc is None:
            raise CBPError(
                f"stage {s.name!r}: translate called associate() but no loopback flow of the "
                "stage is routed by cbp.Multicast",
                site=_writer_site(),
            )
        t = key if isinstance(key, tuple) else (key,)
        if len(t) != len(s.key):
            raise CBPError(
                f"stage {s.name!r}: associate({key!r}, ...): the stage's key has "
                f"{len(s.key)} column(s) {list(s.key.names)}",
                site=_writer_site(),
            )
        self.assoc_rows.append((*t, str(address)))


class StageOp(Operator):
    """One worker's copy of a CBP stage (see the module). Ports: in, the input flows, the
    loopbacks, then state and associations; out, the output flows, the loopbacks, state and
    associations (to their delay routes), then the state as a collection and the metrics."""

    name = "cbp-stage"

    def __init__(self, spec: StageSpec, kernels: Any, worker: int) -> None:
        n_in = len(spec.in_ports())
        n_out = len(spec.out_ports()) + 2
        super().__init__([EPOCHS] * n_in, [EPOCHS] * n_out)
        self.name = f"cbp-stage({spec.name})"
        self.spec, self.k, self.worker_no = spec, kernels, worker
        self.layouts = [routed_schema(spec.key, f) for f in spec.in_ports()]
        readable = spec.readable
        self.n_read = len(readable)
        self.names = [f.name for f in readable]
        self.state_port = self.n_read if spec.state is not None else None
        self.assoc_port = len(spec.in_ports()) - 1 if spec.assoc is not None else None
        self.out_state_port = len(spec.outputs) + len(spec.loopbacks)
        self.collection_port = n_out - 2
        self.metrics_port = n_out - 1
        self.buffer: dict[int, list[tuple[int, pl.DataFrame]]] = {}
        self.queues: list[deque[_Increment]] = [deque() for _ in readable]
        self.framed: list[dict[int, list[pl.DataFrame]]] = [{} for _ in readable]
        self.state: dict[Any, list[tuple[Any, ...]]] = {}
        self.state_size = 0
        self.rstate = spec.runnable_state
        self.again: int | None = None  # the epoch held to call Runnable again
        self.writer = Writer(self)
        self.single = len(spec.key) == 1
        self.gcols = [f"__g{i}" for i in range(len(spec.key))]
        self.orders = [_order_key(f) for f in readable]

    # ------------------------------------------------------------------ scheduling

    def schedule(self) -> None:
        for port in range(len(self.input_types)):
            for _, batch in self.pull(port):
                f = self.k.to_polars(batch)
                for (t,), part in f.partition_by(T0, as_dict=True).items():
                    self._buffered(t).append((port, part))
        self.settle()
        while self.buffer:
            t = min(self.buffer)
            if not self.complete((t,)):
                break
            self._epoch(t, self.buffer.pop(t))
            self.release((t,))
            self.settle(propagate=True)

    def _buffered(self, t: int) -> list[tuple[int, pl.DataFrame]]:
        parts = self.buffer.get(t)
        if parts is None:
            parts = self.buffer[t] = []
            self.hold((t,))
        return parts

    def _epoch(self, t: int, parts: list[tuple[int, pl.DataFrame]]) -> None:
        by_port: dict[int, list[pl.DataFrame]] = {}
        for port, frame in parts:
            by_port.setdefault(port, []).append(frame)
        frames = {p: pl.concat(fs, how="vertical") for p, fs in by_port.items()}
        if self.state_port is not None and self.state_port in frames:
            self._add_state(frames.pop(self.state_port))
        assoc: dict[str, list[Any]] = {}
        if self.assoc_port is not None and self.assoc_port in frames:
            a = frames.pop(self.assoc_port)
            addr = a.get_column("address").to_list()
            for k, ad in zip(self._keys(a), addr, strict=True):
                assoc.setdefault(ad, []).append(k)
        fresh = False
        for port in range(self.n_read):
            f = frames.get(port)
            if f is None:
                continue
            flow = self.spec.readable[port]
            if flow.frame_by is None:
                if f.filter(pl.col(CAST) == PRESENT).height:
                    data = f.filter(pl.col(CAST) < PRESENT)
                    self.queues[port].append(_Increment(t, t, data if data.height else None))
                    fresh = True
                continue
            data = f.filter(pl.col(CAST) < PRESENT)
            if data.height:
                for (seq,), part in data.partition_by(FRAME, as_dict=True).items():
                    self.framed[port].setdefault(seq, []).append(part)
            done = f.filter(pl.col(CAST) == COMPLETE).sort(FRAME)
            for seq, fkey in done.select(FRAME, FKEY).rows():
                got = self.framed[port].pop(seq, [])
                inc = pl.concat(got, how="vertical") if got else None
                self.queues[port].append(_Increment(seq, fkey, inc))
                fresh = True
        if fresh or self.again == t:
            self.again = None
            self._run(t, assoc)

    # ------------------------------------------------------------------ a stage's epoch

    def _run(self, t: int, assoc: dict[str, list[Any]]) -> None:
        heads = {
            name: [inc.fkey for inc in q] for name, q in zip(self.names, self.queues, strict=True)
        }
        if not any(heads.values()):
            return
        reads, removes = self._runnable(heads)
        if not reads and not removes:
            return
        read_incs: dict[int, _Increment] = {}
        for name in reads:
            port = self.names.index(name)
            read_incs[port] = self.queues[port][0]
        removed = False
        for name in removes:
            self.queues[self.names.index(name)].popleft()
            removed = True
        if reads:
            self._translate(t, read_incs, assoc)
        if removed and any(self.queues):
            self.again = t + 1
            self._buffered(t + 1)

    def _runnable(self, heads: dict[str, list[int]]) -> tuple[list[str], list[str]]:
        spec = self.spec
        got = spec.runnable({k: list(v) for k, v in heads.items()}, self.rstate)
        if not (isinstance(got, tuple) and len(got) in (2, 3)):
            raise CBPError(
                f"stage {spec.name!r}: Runnable {_fn_name(spec.runnable)} returned {got!r}, not "
                "(reads, removes, state)",
                site=_fn_site(spec.runnable) or spec.site,
            )
        reads, removes = list(got[0] or ()), list(got[1] or ())
        if len(got) == 3:
            self.rstate = got[2]
        for what, names in (("read", reads), ("remove", removes)):
            for name in names:
                if not heads.get(name):
                    why = (
                        "it has no increment now"
                        if name in self.names
                        else f"the stage has no such flow (its flows: {self.names})"
                    )
                    raise CBPError(
                        f"stage {spec.name!r}: Runnable {_fn_name(spec.runnable)} asked to "
                        f"{what} an increment of flow {name!r}, but {why}; increments "
                        f"available: {heads}",
                        site=_fn_site(spec.runnable) or spec.site,
                    )
        return list(dict.fromkeys(reads)), list(dict.fromkeys(removes))

    def _translate(self, t: int, incs: dict[int, _Increment], assoc: dict[str, list[Any]]) -> None:
        spec = self.spec
        groups: dict[Any, dict[str, list[tuple[Any, ...]]]] = {}
        to_all: dict[str, list[tuple[Any, ...]]] = {}
        to_state: dict[str, list[tuple[Any, ...]]] = {}
        multicast: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
        for port, inc in incs.items():
            f = inc.frame
            if f is None or f.height == 0:
                continue
            flow = spec.readable[port]
            f = self._insertions(f, flow, t)
            names = list(flow.schema.names)
            keyed = f.filter(pl.col(CAST) == KEYED)
            if keyed.height:
                recs = keyed.select(names).rows()
                diffs = keyed.get_column(DIFF).to_list()
                for k, r, d in zip(self._keys(keyed), recs, diffs, strict=True):
                    g = groups.get(k)
                    if g is None:
                        g = groups[k] = {}
                    lst = g.get(flow.name)
                    if lst is None:
                        lst = g[flow.name] = []
                    lst.append(r) if d == 1 else lst.extend([r] * d)
            rest = f.filter(pl.col(CAST) != KEYED)
            if rest.height:
                for cast, mc, d, r in zip(
                    rest.get_column(CAST).to_list(),
                    rest.get_column(MC).to_list(),
                    rest.get_column(DIFF).to_list(),
                    rest.select(names).rows(),
                    strict=True,
                ):
                    if cast == TO_ALL:
                        to_all.setdefault(flow.name, []).extend([r] * d)
                    elif cast == TO_STATE:
                        to_state.setdefault(flow.name, []).extend([r] * d)
                    else:
                        multicast.setdefault(mc, {}).setdefault(flow.name, []).extend([r] * d)
        # the groups called: keys in the inputs, and those reached by casts; all with state in
        # an outer grouping
        for addr, flows in multicast.items():
            for k in assoc.get(addr, ()):
                g = groups.setdefault(k, {})
                for name, recs in flows.items():
                    g.setdefault(name, []).extend(recs)
        if to_state or spec.grouping == "outer":
            for k in self.state:
                g = groups.setdefault(k, {})
                for name, recs in to_state.items():
                    g.setdefault(name, []).extend(recs)
        out = self.writer
        out.epoch = t
        read, size = 0, self.state_size
        old: list[tuple[Any, list[tuple[Any, ...]]]] = []
        empty: dict[str, Sequence[tuple[Any, ...]]] = dict.fromkeys(self.names, ())
        orders = self.orders
        for k, g in groups.items():
            for name, recs in to_all.items():
                g[name] = [*g.get(name, ()), *recs]
            for i, name in enumerate(self.names):
                if orders[i] is not None and name in g:
                    g[name].sort(key=orders[i])
            st = self.state.get(k)
            if st is not None:
                read += len(st)
                old.append((k, st))
            view = dict(empty)
            view.update(g)
            out.key = k
            spec.translate(k, st if st is not None else [], view, out)
        for k, _ in old:
            del self.state[k]
        self._emit(t, old, len(groups), read, size)

    def _insertions(self, f: pl.DataFrame, flow: FlowSpec, t: int) -> pl.DataFrame:
        """An increment's rows with positive multiplicities (a record and its retraction in
        one epoch cancel); a retraction left raises."""
        if f.get_column(DIFF).min() > 0:  # type: ignore[operator]
            return f
        cols = [c for c in f.columns if c != DIFF]
        f = f.group_by(cols, maintain_order=True).agg(pl.col(DIFF).sum()).filter(pl.col(DIFF) != 0)
        neg = f.filter(pl.col(DIFF) < 0)
        if neg.height:
            rec = neg.select(flow.schema.names).row(0)
            raise CBPError(
                f"stage {self.spec.name!r}: flow {flow.name!r} retracted {rec!r} in epoch {t}; "
                "a CBP flow carries records added, not retractions (feed it a collection's "
                "insertions, or keep the change in state)",
                site=self.spec.site,
            )
        return f

    def _keys(self, f: pl.DataFrame) -> list[Any]:
        if self.single:
            return f.get_column("__g0").to_list()
        return list(zip(*(f.get_column(g).to_list() for g in self.gcols), strict=True))

    def _add_state(self, f: pl.DataFrame) -> None:
        flow = self.spec.state
        assert flow is not None
        if CAST in f.columns and f.filter(pl.col(CAST) != KEYED).height:
            rec = f.filter(pl.col(CAST) != KEYED).select(flow.schema.names).row(0)
            raise CBPError(
                f"stage {self.spec.name!r}: the state's RouteBy sent {rec!r} to no one group; "
                "a state record belongs to one group",
                site=self.spec.site,
            )
        recs = f.select(flow.schema.names).rows()
        for k, r, d in zip(self._keys(f), recs, f.get_column(DIFF).to_list(), strict=True):
            lst = self.state.get(k)
            if lst is None:
                lst = self.state[k] = []
            lst.extend([r] * d)
            self.state_size += d

    def _emit(
        self,
        t: int,
        old: list[tuple[Any, list[tuple[Any, ...]]]],
        calls: int,
        read: int,
        size: int,
    ) -> None:
        spec, out = self.spec, self.writer
        flows = [*spec.outputs, *spec.loopbacks]
        for port, (flow, rows) in enumerate(zip(flows, out.rows, strict=True)):
            if rows:
                self.send(port, (t,), self._frame(flow.schema, rows, t))
                out.rows[port] = []
        if spec.state is not None:
            removed = [r for _, st in old for r in st]
            self.state_size -= len(removed)
            if out.state_rows:
                self.send(
                    self.out_state_port, (t,), self._frame(spec.state.schema, out.state_rows, t)
                )
            changes = []
            if removed:
                changes.append(self._frame(spec.state.schema, removed, t, -1, polars=True))
            if out.state_rows:
                changes.append(self._frame(spec.state.schema, out.state_rows, t, polars=True))
            if changes:
                merged = pl.concat(changes, how="vertical")
                self.send(self.collection_port, (t,), self.k.from_polars(merged))
            out.state_rows = []
        if spec.assoc is not None and out.assoc_rows:
            self.send(
                self.out_state_port + (spec.state is not None),
                (t,),
                self._frame(spec.assoc.schema, out.assoc_rows, t),
            )
            out.assoc_rows = []
        metrics = pl.DataFrame(
            {
                "worker": [self.worker_no],
                "calls": [calls],
                "state_read": [read],
                "state_size": [size],
                T0: [t],
                DIFF: [1],
            },
            schema={c: pl.Int64 for c in ("worker", "calls", "state_read", "state_size", T0, DIFF)},
        )
        self.send(self.metrics_port, (t,), self.k.from_polars(metrics))

    def _frame(
        self,
        schema: Schema,
        rows: list[tuple[Any, ...]],
        t: int,
        diff: int = 1,
        polars: bool = False,
    ) -> Any:
        f = schema.rows_to_frame(rows).with_columns(
            pl.lit(t, pl.Int64).alias(T0), pl.lit(diff, pl.Int64).alias(DIFF)
        )
        return f if polars else self.k.from_polars(f)

    # ------------------------------------------------------------------ checkpoints

    def save_state(self) -> OperatorState:
        frames: dict[str, pl.DataFrame] = {}
        spec = self.spec
        if spec.state is not None and self.state:
            keys = list(self.state)
            rows = [r for k in keys for r in self.state[k]]
            counts = [len(self.state[k]) for k in keys]
            f = spec.state.schema.rows_to_frame(rows)
            kcols = {}
            for j, g in enumerate(self.gcols):
                vals = [
                    (k if self.single else k[j])
                    for k, n in zip(keys, counts, strict=True)
                    for _ in range(n)
                ]
                kcols[g] = pl.Series(g, vals, dtype=spec.key.dtypes[j].polars)
            frames["state"] = f.with_columns(**kcols)
        queues = []
        for port, q in enumerate(self.queues):
            meta = []
            for inc in q:
                meta.append([inc.seq, inc.fkey, inc.frame is not None])
                if inc.frame is not None:
                    frames[f"q{port}-{inc.seq}"] = inc.frame
            queues.append(meta)
        framed = []
        for port, pending in enumerate(self.framed):
            framed.append(sorted(pending))
            for seq, fs in pending.items():
                frames[f"f{port}-{seq}"] = pl.concat(fs, how="vertical")
        buffered = []
        for t, parts in self.buffer.items():
            for i, (port, f) in enumerate(parts):
                frames[f"b{t}-{i}"] = f
                buffered.append([t, i, port])
        values = {
            "queues": queues,
            "framed": framed,
            "buffer": buffered,
            "buffer_times": sorted(self.buffer),
            "rstate": self.rstate,
            "again": self.again,
        }
        return OperatorState(frames, values)

    def load_state(self, state: OperatorState) -> None:
        spec, v, fr = self.spec, state.values, state.frames
        st = fr.get("state")
        if st is not None and spec.state is not None:
            self._add_state(st.with_columns(pl.lit(1, pl.Int64).alias(DIFF)))
        for port, meta in enumerate(v["queues"]):
            for seq, fkey, has in meta:
                self.queues[port].append(
                    _Increment(seq, fkey, fr[f"q{port}-{seq}"] if has else None)
                )
        for port, seqs in enumerate(v["framed"]):
            for seq in seqs:
                self.framed[port][seq] = [fr[f"f{port}-{seq}"]]
        for t in v["buffer_times"]:
            self._buffered(t)
        for t, i, port in v["buffer"]:
            self.buffer[t].append((port, fr[f"b{t}-{i}"]))
        self.rstate, self.again = v["rstate"], v["again"]
        self.activate()


def _order_key(flow: FlowSpec) -> Callable[[tuple[Any, ...]], Any] | None:
    o = flow.order_by
    if o is None:
        return None
    if callable(o):
        return o  # type: ignore[no-any-return]
    idx = [flow.schema.names.index(c) for c in o]
    return operator.itemgetter(*idx)


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def _fn_site(fn: Any) -> CallSite | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return CallSite(code.co_filename, code.co_firstlineno, code.co_name)
