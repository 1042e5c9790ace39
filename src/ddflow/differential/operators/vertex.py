"""Runs a user's :class:`~ddflow.timely.operator.Vertex` on the timely core.

Each queued message is split by update time and handed to ``on_recv`` as a Polars DataFrame of
the input's columns plus ``diff``. While a callback for time ``t`` runs, the vertex may send or
request notifications only at times ``>= t`` (otherwise :class:`TimelyError`). A notification
request holds a capability; ``on_notify(t)`` runs once ``t`` is complete at every input, and the
capability is dropped when it returns.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import polars as pl

from ddflow.differential.batch import DIFF
from ddflow.errors import CheckpointError, TimelyError
from ddflow.schema import Schema
from ddflow.timely.lattice import Time, TimeType
from ddflow.timely.operator import Operator, OperatorState, Vertex

__all__ = ["VertexOp"]


class VertexOp(Operator):
    name = "vertex"

    def __init__(
        self, vertex: Vertex, tt: TimeType, n_inputs: int, outputs: Sequence[Schema], kernels: Any
    ) -> None:
        super().__init__([tt] * n_inputs, [tt] * len(outputs))
        self.vertex = vertex
        self.tt = tt
        self.out_schemas = list(outputs)
        self.kernels = kernels
        self.current: Time | None = None
        self.notifications: dict[Time, int] = {}
        vertex._runner = self

    def schedule(self) -> None:
        tt = self.tt
        tcols = tt.columns()
        for port in range(len(self.input_types)):
            for _, batch in self.pull(port):
                for t, part in self.kernels.split_by_time(batch, tt):
                    frame = self.kernels.to_polars(part).drop(tcols).rename({DIFF: "diff"})
                    self._call(t, lambda f=frame, p=port, tm=t: self.vertex.on_recv(p, f, tm))
        while True:
            ready = sorted(t for t in self.notifications if self.complete(t))
            if not ready:
                break
            for t in ready:
                count = self.notifications.pop(t)
                self._call(t, lambda tm=t: self.vertex.on_notify(tm))
                self.release(t, count)

    def save_state(self) -> OperatorState:
        """The user's vertex's state (:meth:`~ddflow.timely.operator.Vertex.checkpoint`) and
        the notifications it asked for."""
        try:
            user = self.vertex.checkpoint()
        except NotImplementedError as e:
            raise CheckpointError(str(e)) from None
        if not isinstance(user, dict):
            raise CheckpointError(
                f"{type(self.vertex).__name__}.checkpoint() returned {type(user).__name__}, "
                "not a dict"
            )
        frames: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for name, v in user.items():
            if isinstance(v, pl.DataFrame):
                frames[name] = v
            elif _is_pandas(v):
                frames[name] = pl.from_pandas(v)
            else:
                try:
                    json.dumps(v)
                except (TypeError, ValueError):
                    raise CheckpointError(
                        f"{type(self.vertex).__name__}.checkpoint() gave {name!r} = "
                        f"{type(v).__name__}: give DataFrames or values JSON can hold"
                    ) from None
                values[name] = v
        notes = [[list(t), n] for t, n in sorted(self.notifications.items())]
        return OperatorState(frames, {"user": values, "notifications": notes})

    def load_state(self, state: OperatorState) -> None:
        self.vertex.restore({**state.values["user"], **state.frames})
        for t, n in state.values["notifications"]:
            time = tuple(t)
            self.notifications[time] = n
            self.hold(time, n)
        if self.notifications:
            self.activate()

    def _call(self, t: Time, fn: Any) -> None:
        self.current = t
        try:
            fn()
        finally:
            self.current = None

    def _check(self, what: str, time: Time) -> None:
        if self.current is None:
            raise TimelyError(f"{what} called outside on_recv/on_notify")
        if len(time) != self.tt.width:
            raise TimelyError(
                f"{what} at {time}: times in this scope have {self.tt.width} coordinates"
            )
        if not self.tt.less_equal(self.current, time):
            raise TimelyError(
                f"{what} at time {time}, earlier than the event being handled at {self.current}"
            )

    def vertex_send(self, edge: int, batch: Any, time: Time) -> None:
        self._check("send_by", time)
        if not 0 <= edge < len(self.out_schemas):
            raise TimelyError(
                f"send_by on output {edge}: the vertex has {len(self.out_schemas)} outputs"
            )
        schema = self.out_schemas[edge]
        frame = _to_frame(batch, schema)
        if frame.height == 0:
            return
        out = frame.with_columns(
            [
                pl.lit(v, dtype=pl.Int64).alias(c)
                for c, v in zip(self.tt.columns(), time, strict=True)
            ]
        )
        out = out.select([*schema.names, *self.tt.columns(), DIFF])
        self.send(edge, time, self.kernels.from_polars(out))

    def vertex_notify(self, time: Time) -> None:
        self._check("notify_at", time)
        if time not in self.notifications:
            self.hold(time)
            self.notifications[time] = 1
        # a repeated request for the same time is one notification


def _to_frame(batch: Any, schema: Schema) -> pl.DataFrame:
    """Rows for a vertex output: the schema's columns and an optional trailing ``diff``."""
    names = list(schema.names)
    if isinstance(batch, pl.DataFrame):
        frame = batch
    elif _is_pandas(batch):
        frame = pl.from_pandas(batch)
    else:
        rows = [tuple(r) if isinstance(r, (tuple, list)) else (r,) for r in batch]
        with_diff = bool(rows) and len(rows[0]) == len(names) + 1
        if with_diff:
            data = schema.rows_to_frame([r[:-1] for r in rows])
            return data.with_columns(pl.Series(DIFF, [int(r[-1]) for r in rows], dtype=pl.Int64))
        return schema.rows_to_frame(rows).with_columns(pl.lit(1, dtype=pl.Int64).alias(DIFF))
    diff = None
    if "diff" in frame.columns:
        diff = frame.get_column("diff").cast(pl.Int64)
        frame = frame.drop("diff")
    data = schema.frame_to_frame(frame)
    if diff is None:
        return data.with_columns(pl.lit(1, dtype=pl.Int64).alias(DIFF))
    return data.with_columns(diff.alias(DIFF))


def _is_pandas(batch: Any) -> bool:
    """Whether a vertex handler gave a pandas DataFrame (pandas is not imported to find out:
    a program that never imported it cannot have made one)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(batch, pd.DataFrame)
