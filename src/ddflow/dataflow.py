"""The dataflow: inputs, outputs, probes, and running.

A :class:`Dataflow` owns a plan (:mod:`ddflow.plan`) and, from its first ``run()``, the operators
built from it on its runtime. Inputs accept updates at their current epoch; ``advance_to(e)``
promises that no more updates for epochs before ``e`` will come; ``run()`` works until every
epoch that every input has moved past is complete at every output. Invariants:

* an input never loses an accepted update: a rejected batch (bad schema, closed input) leaves
  what was accepted before untouched;
* an input's multiplicities never go below zero (unless it was made ``signed=True``): a call
  that would take a record below zero is rejected whole, naming the record;
* epochs only move forward; ``advance_to`` an earlier epoch is an error;
* an output's ``snapshot(e)`` is the accumulation of its changes at epochs ``<= e``, and is only
  available for complete epochs;
* a failure inside ``run()`` (a user function that raised, an interrupt) never leaves silently
  wrong results: the dataflow stops, ``run()`` raises (a :class:`~ddflow.errors.UserFunctionError`
  naming the function, the line that gave it and the operator, for a user function), and every
  later call that would feed or run the dataflow raises
  :class:`~ddflow.errors.DataflowFailedError` naming that failure. Epochs complete before the
  failure stay readable at the outputs.
"""

from __future__ import annotations

import os
import sys
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from ddflow.build import build
from ddflow.collection import Collection
from ddflow.errors import (
    CallSite,
    ClosedInputError,
    DataflowFailedError,
    DDFlowError,
    GraphError,
    InputError,
    TimeError,
    UserFunctionError,
    call_site,
)
from ddflow.kernels.local import DIFF, LocalKernels
from ddflow.kernels.local_rows import SMALL_ROWS, Rows
from ddflow.multiplicities import Multiplicities
from ddflow.plan import Node, Plan, Scope
from ddflow.schema import Schema
from ddflow.timely import Vertex

if TYPE_CHECKING:  # pandas is imported when a frame is asked for as pandas (it takes ~70 MB)
    import pandas as pd


__all__ = ["Dataflow", "InputCollection", "LocalRuntime", "Output", "Probe", "RunProgress"]


class LocalRuntime:
    """The embedded runtime (the default): Polars batches in this process.

    ``small_batch_rows``: a batch of at most this many rows (a small step of an update) is
    held as Python tuples and processed without Polars, whose fixed cost per call dominates
    small steps; ``0`` keeps every batch in Polars. Results do not depend on it.
    """

    name = "local"

    def __init__(self, small_batch_rows: int = SMALL_ROWS) -> None:
        self.kernels = LocalKernels(small_rows=small_batch_rows)

    def to_polars(self, data: Any) -> Any:
        return data


class Dataflow:
    """A differential dataflow: build collections from inputs, then feed and run it.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> words = flow.input("words", schema={"word": "str"})
    >>> counts = words.group_by("word").agg(n=dd.count()).output()
    >>> words.insert(["a", "b", "a"]); flow.advance_to(1); flow.run()
    >>> counts.snapshot().sort_values("word").to_dict("list")
    {'word': ['a', 'b'], 'n': [2, 1], 'count': [1, 1]}
    """

    def __init__(self, runtime: Any = None) -> None:
        self.runtime = runtime if runtime is not None else LocalRuntime()
        self.kernels = self.runtime.kernels
        self.plan = Plan()
        self.inputs: dict[str, InputCollection] = {}
        self.outputs: list[Output] = []
        self.probes: list[Probe] = []
        self._entered: dict[tuple[int, int], Node] = {}
        self.worker: Any = None
        self._epoch = 0
        self._loop_counts: dict[str, dict[tuple[int, ...], int]] = {}
        #: the failure that stopped this dataflow (see :meth:`_check_usable`), if one did
        self.failure: DDFlowError | BaseException | None = None

    # ------------------------------------------------------------------ building

    def input(
        self, name: str, schema: Mapping[str, Any], *, signed: bool = False
    ) -> InputCollection:
        """A new input collection with the given schema (column name -> type name).

        An input checks its multiplicities: a call that would remove a record more times than
        it was inserted raises :class:`~ddflow.errors.InputError` and is not accepted (see
        :class:`InputCollection`). ``signed=True`` makes an input whose multiplicities may go
        below zero (a collection of signed changes): nothing is checked or kept.

        >>> import ddflow as dd
        >>> flow = dd.Dataflow()
        >>> deltas = flow.input("deltas", schema={"k": "str"}, signed=True)
        >>> out = deltas.output()
        >>> deltas.remove(["a"]); flow.advance_to(1); flow.run()
        >>> out.changes().to_dict("list")
        {'k': ['a'], 'time': [0], 'diff': [-1]}
        """
        site = call_site()
        if name in self.inputs:
            raise GraphError(f"an input named {name!r} already exists", site=site)
        sch = Schema(schema)
        node = self.plan.add("input", (), sch, self.plan.top, {"name": name}, site)
        handle = InputCollection(self, node, name, self._epoch, signed=bool(signed))
        self.inputs[name] = handle
        return handle

    def vertex(
        self,
        vertex: Vertex,
        inputs: Iterable[Collection],
        outputs: Iterable[Mapping[str, Any] | Schema],
    ) -> tuple[Collection, ...]:
        """Add a timely vertex (:class:`ddflow.Vertex`) reading ``inputs``; returns one
        collection per output schema."""
        from ddflow.collection import _align

        site = call_site()
        ins = list(inputs)
        if not ins:
            raise GraphError("a vertex needs at least one input", site=site)
        if not isinstance(vertex, Vertex):
            raise GraphError(f"{vertex!r} is not a ddflow.Vertex", site=site)
        nodes = _align(ins, site)
        schemas = [o if isinstance(o, Schema) else Schema(o) for o in outputs]
        v = self.plan.add(
            "vertex",
            tuple(nodes),
            schemas[0],
            nodes[0].scope,
            {"vertex": vertex, "outputs": tuple(schemas)},
            site,
        )
        return tuple(
            Collection(self, self.plan.add("port", (v,), s, v.scope, {"port": i}, site))
            for i, s in enumerate(schemas)
        )

    def _enter(self, node: Node, scope: Scope, site: CallSite | None) -> Node:
        key = (node.id, scope.id)
        entered = self._entered.get(key)
        if entered is None:
            entered = self.plan.add("enter", (node,), node.schema, scope, {}, site)
            self._entered[key] = entered
        return entered

    # ------------------------------------------------------------------ running

    @property
    def epoch(self) -> int:
        """The epoch the whole flow was last advanced to."""
        return self._epoch

    def advance_to(self, epoch: int) -> None:
        """Advance every open input to ``epoch``: epochs before it are closed."""
        site = call_site()
        self._check_usable(site)
        if epoch < self._epoch:
            raise TimeError(
                f"advance_to({epoch}) goes back: the flow is at epoch {self._epoch}", site=site
            )
        for h in self.inputs.values():
            if not h.closed and h.epoch < epoch:
                h._advance(epoch, site)
        self._epoch = epoch

    def close(self) -> None:
        """Close every input: no more updates will come."""
        self._check_usable(call_site())
        for h in self.inputs.values():
            h.close()

    def _ensure_built(self) -> None:
        if self.worker is None:
            self.plan.frozen = True
            self.worker = build(self)

    def run(
        self, progress: bool | Callable[[RunProgress], None] | None = None, every: float = 10.0
    ) -> None:
        """Run until every closed epoch is complete at every output.

        ``progress`` reports on a long run: ``True`` prints a line to stderr every ``every``
        seconds (operator steps run, seconds elapsed, the last operator), and one when the run
        ends if any was printed; a callable is called with a :class:`RunProgress` every
        ``every`` seconds and once at the end (``done=True``)."""
        if progress is not None and not isinstance(progress, bool) and not callable(progress):
            raise TypeError(
                f"run(progress=...) takes True, False, None or a callable, got {progress!r}"
            )
        if not every >= 0:
            raise ValueError(f"run(every=...) must be a number of seconds >= 0, got {every!r}")
        self._check_usable(call_site())
        self._ensure_built()
        for h in self.inputs.values():
            h._flush()
            h._activate()
        if not progress:
            with self._stop_on_failure():
                self.worker.run()
            return
        watch = _ProgressWatch(
            _print_progress if progress is True else progress, every, quiet_end=progress is True
        )
        previous = self.worker.on_step

        def on_step(op: Any) -> None:
            if previous is not None:
                previous(op)
            watch.step(op)

        self.worker.on_step = on_step
        try:
            with self._stop_on_failure():
                self.worker.run()
        finally:
            self.worker.on_step = previous
        watch.finish()

    def step(self) -> bool:
        """Run one operator activation; returns whether there was work (``while
        flow.step(): ...`` runs to the same point as ``run()``)."""
        self._check_usable(call_site())
        self._ensure_built()
        for h in self.inputs.values():
            h._flush()
            if h._pending_work():
                h._activate()
        with self._stop_on_failure():
            return bool(self.worker.step())

    def _check_usable(self, site: CallSite | None) -> None:
        """Refuse a call that would feed or run a dataflow stopped by a failure."""
        if self.failure is not None:
            raise DataflowFailedError(
                f"this dataflow stopped when {_describe_failure(self.failure)}; what it had "
                "accepted may be partly processed, so it cannot go on: build it again and feed "
                "its inputs again",
                site=site,
            )

    @contextmanager
    def _stop_on_failure(self) -> Iterator[None]:
        """Stop the dataflow on any exception escaping an operator step; a user function's
        exception is raised again as a :class:`UserFunctionError` naming it."""
        try:
            yield
        except BaseException as e:
            error = _user_function_error(self, e)
            self.failure = error if error is not None else e
            if error is not None:
                raise error from e
            raise

    def loop_stats(self) -> pd.DataFrame:
        """Differences processed by each loop, per time: columns ``loop``, ``epoch``,
        ``iteration`` (the loop's own counter), ``time`` (the full time inside the loop:
        epoch, outer loops' counters, and for a prioritized loop its priority), and
        ``differences`` (updates that reached the loop variable at that time)."""
        rows = [
            (name, t[0], t[-1], t, n)
            for name, counts in self._loop_counts.items()
            for t, n in sorted(counts.items())
        ]
        import pandas as pd

        return pd.DataFrame(rows, columns=["loop", "epoch", "iteration", "time", "differences"])

    def last_epoch(self) -> int:
        """The latest epoch any input reached (closed inputs included)."""
        return max([h.epoch for h in self.inputs.values()] or [0])


@dataclass(frozen=True)
class RunProgress:
    """How far a :meth:`Dataflow.run` has got: operator ``steps`` run and ``seconds``
    elapsed since it began, the ``operator`` that ran last (its kind, e.g. ``"reduce"``), and
    whether the run has ended (``done``)."""

    steps: int
    seconds: float
    operator: str
    done: bool = False


def _print_progress(p: RunProgress) -> None:
    state = "done" if p.done else f"last: {p.operator}"
    print(
        f"ddflow: {p.steps:,} operator steps, {p.seconds:.0f} s ({state})",
        file=sys.stderr,
        flush=True,
    )


class _ProgressWatch:
    """Counts a run's operator steps and reports every ``every`` seconds."""

    def __init__(
        self, report: Callable[[RunProgress], None], every: float, quiet_end: bool
    ) -> None:
        self.report, self.every, self.quiet_end = report, every, quiet_end
        self.start = self.last = _time.perf_counter()
        self.steps = 0
        self.operator = ""
        self.reported = False

    def step(self, op: Any) -> None:
        self.steps += 1
        self.operator = op.kind or op.name
        now = _time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            self.reported = True
            self.report(RunProgress(self.steps, now - self.start, self.operator))

    def finish(self) -> None:
        if self.reported or not self.quiet_end:
            self.report(
                RunProgress(self.steps, _time.perf_counter() - self.start, self.operator, done=True)
            )


class InputCollection(Collection):
    """An input: a collection you change with ``insert``/``remove`` and move with
    ``advance_to``.

    An input is a table: no record's multiplicity goes below zero. It keeps the accumulated
    multiplicity of every record it has accepted (all epochs, the open one included; a columnar
    copy of its live records, see :mod:`ddflow.multiplicities`), and a ``remove``,
    ``remove_frame``, ``update`` or ``insert_frame(..., diff=...)`` that would take a record
    below zero raises :class:`~ddflow.errors.InputError` naming the first such record, its
    multiplicity and the caller's line. The call is then not accepted at all, and what was
    accepted before stays. A call's changes to one record are summed first, so a call that
    inserts a record and removes it is fine. An input made with ``signed=True``
    (``flow.input(name, schema, signed=True)``) holds signed changes: it checks nothing and
    keeps nothing. (On the Spark runtime, a Spark DataFrame given to a checked input is
    collected once to be checked; a signed input leaves it on the cluster.)

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    >>> edges.insert([(1, 2), (2, 3)]); edges.remove([(1, 2)])
    >>> edges.advance_to(1); edges.epoch
    1
    >>> edges.remove([(1, 2)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ddflow.errors.InputError: remove on input 'edges' would take record (1, 2) below zero: ...
    """

    def __init__(
        self, flow: Dataflow, node: Node, name: str, epoch: int, *, signed: bool = False
    ) -> None:
        super().__init__(flow, node)
        self.name = name
        self._epoch = epoch
        self.closed = False
        #: whether the input's multiplicities may go below zero (then nothing is checked)
        self.signed = signed
        #: the accumulated multiplicity of every record accepted, for the check
        self._multiplicities: Multiplicities | None = (
            None if signed else Multiplicities(self.schema.polars_schema())
        )
        #: updates not sent yet: data frames, each with its diff (one for every row, or one
        #: per row); the columns of a diff are added when the epoch's batch is made
        self._buffer: list[tuple[pl.DataFrame, int | pl.Series]] = []
        # batches already in the runtime's own format (Spark DataFrames on Spark)
        self._native: list[Any] = []
        self._messages: list[tuple[int, pl.DataFrame]] = []
        self._op: Any = None
        self._batch_columns: dict[str, Any] | None = None

    @property
    def epoch(self) -> int:
        """The epoch at which inserted updates take effect."""
        return self._epoch

    def _check_open(self, site: CallSite | None, what: str) -> None:
        self._flow._check_usable(site)
        if self.closed:
            raise ClosedInputError(f"{what} on input {self.name!r}, which is closed", site=site)

    def insert(self, rows: Iterable[Any]) -> None:
        """Insert records (tuples in column order, dicts, or scalars for one column)."""
        site = call_site()
        self._check_open(site, "insert")
        self._accept(self._rows(rows, site), 1, site, "insert")

    def remove(self, rows: Iterable[Any]) -> None:
        """Remove records (one copy of each). On a checked input (the default), removing a
        record more times than it is present raises :class:`~ddflow.errors.InputError` and
        removes nothing."""
        site = call_site()
        self._check_open(site, "remove")
        self._accept(self._rows(rows, site), -1, site, "remove")

    def update(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Apply ``(record..., diff)`` tuples: each record's multiplicity changes by ``diff``."""
        site = call_site()
        self._check_open(site, "update")
        rows = list(rows)
        n = len(self.schema.names)
        for i, r in enumerate(rows):
            if not isinstance(r, (tuple, list)) or len(r) != n + 1:
                raise InputError(
                    f"update row {i} is {r!r}: expected {n} values and a diff", site=site
                )
        diffs = [r[-1] for r in rows]
        if not all(isinstance(d, int) and not isinstance(d, bool) for d in diffs):
            raise InputError("update diffs must be integers", site=site)
        data = self._rows([r[:-1] for r in rows], site)
        self._accept(data, pl.Series(DIFF, diffs, dtype=pl.Int64), site, "update")

    def insert_frame(self, frame: Any, diff: str | None = None) -> None:
        """Insert the rows of a pandas, Polars or Arrow DataFrame (or a Spark DataFrame, which is
        collected). With ``diff=name``, that column holds each row's change of multiplicity."""
        site = call_site()
        self._check_open(site, "insert_frame")
        frame = _to_local_frame(frame)
        diffs = None
        if diff is not None:
            frame = _as_polars(frame)
            if diff not in frame.columns:
                raise InputError(f"insert_frame: no diff column {diff!r}", site=site)
            diffs = frame.get_column(diff)
            if not diffs.dtype.is_integer() or diffs.null_count():
                raise InputError(
                    f"insert_frame: diff column {diff!r} must be non-null integers", site=site
                )
            frame = frame.drop(diff)
        try:
            data = self.schema.frame_to_frame(frame)
        except Exception as e:  # re-raise pointing at the user's line
            raise type(e)(getattr(e, "message", str(e)), site=site) from None
        if diffs is None:
            self._accept(data, 1, site, "insert_frame")
        else:
            self._accept(data, diffs.cast(pl.Int64).alias(DIFF), site, "insert_frame")

    def remove_frame(self, frame: Any) -> None:
        """Remove the rows of a DataFrame (one copy each)."""
        site = call_site()
        self._check_open(site, "remove_frame")
        try:
            data = self.schema.frame_to_frame(_to_local_frame(frame))
        except Exception as e:
            raise type(e)(getattr(e, "message", str(e)), site=site) from None
        self._accept(data, -1, site, "remove_frame")

    def _insert_native(self, df: Any, diff: str | None) -> None:
        """Queue a batch already in the runtime's format (a Spark DataFrame on Spark). A
        checked input collects it (one job) to check and keep its multiplicities; a signed
        one leaves it where it is."""
        site = call_site()
        self._check_open(site, "insert")
        if self._multiplicities is not None:
            k: Any = self._flow.kernels  # (the Spark kernels: native batches are theirs)
            changes = k.to_polars(k.native_updates(df, self.schema, diff, self._epoch))
            self._check(
                changes.select(self.schema.names),
                changes.get_column(DIFF),
                site,
                "insert_dataframe",
            )
        self._native.append((df, diff))

    def _rows(self, rows: Iterable[Any], site: CallSite | None) -> pl.DataFrame:
        try:
            return self.schema.rows_to_frame(rows)
        except Exception as e:
            raise type(e)(getattr(e, "message", str(e)), site=site) from None

    def _accept(
        self, data: pl.DataFrame, diff: int | pl.Series, site: CallSite | None, what: str
    ) -> None:
        """Buffer a call's updates, once checked."""
        if data.height:
            self._check(data, diff, site, what)
            self._buffer.append((data, diff))

    def _check(
        self, data: pl.DataFrame, diff: int | pl.Series, site: CallSite | None, what: str
    ) -> None:
        """Add a call's updates to the input's multiplicities, or raise (adding none of them)
        if they would take a record below zero."""
        if self._multiplicities is None:
            return
        short = self._multiplicities.apply(data, diff)
        if short is not None:
            raise InputError(
                f"{what} on input {self.name!r} would take record {short.record!r} below "
                f"zero: its multiplicity is {short.multiplicity} and this call changes it by "
                f"{short.change}; nothing of this call was accepted (an input whose "
                "multiplicities may go below zero is made with "
                "flow.input(name, schema, signed=True))",
                site=site,
            )

    def _flush(self) -> None:
        if not self._buffer and not self._native:
            return
        buffer, self._buffer = self._buffer, []
        names = list(self.schema.names)
        k = self._flow.kernels
        batch = None
        if (
            buffer
            and not self._native
            and hasattr(k, "from_rows")
            and sum(f.height for f, _ in buffer) <= k.small_rows
        ):
            # a few updates (a small epoch's) become the runtime's rows directly: building
            # the frame first costs a few Polars calls of about a hundred microseconds each
            batch = k.from_rows(self._batch_schema(), lambda: _update_rows(buffer, self._epoch))
        if batch is None:
            frames = [
                f.with_columns(
                    pl.lit(d, dtype=pl.Int64).alias(DIFF) if isinstance(d, int) else d.alias(DIFF)
                )
                for f, d in buffer
            ]
            if not frames:
                frames.append(pl.DataFrame(schema=self._batch_schema()).drop("__t0"))
            data = pl.concat(frames) if len(frames) > 1 else frames[0]
            batch = k.from_polars(
                data.with_columns(pl.lit(self._epoch, dtype=pl.Int64).alias("__t0")).select(
                    [*names, "__t0", DIFF]
                )
            )
        if self._native:
            natives = [
                k.native_updates(df, self.schema, diff, self._epoch) for df, diff in self._native
            ]
            batch = k.concat([batch, *natives])
            self._native = []
        self._messages.append((self._epoch, batch))

    def _batch_schema(self) -> dict[str, Any]:
        """The columns of an input batch: the data's, its epoch and its diff (made once: a
        Polars schema costs several microseconds to build, at every epoch)."""
        if self._batch_columns is None:
            self._batch_columns = {
                **dict(self.schema.polars_schema()),
                "__t0": pl.Int64,
                DIFF: pl.Int64,
            }
        return dict(self._batch_columns)

    def _advance(self, epoch: int, site: CallSite | None) -> None:
        self._flush()
        self._epoch = epoch
        self._activate()

    def advance_to(self, epoch: int) -> None:
        """Close the epochs before ``epoch`` on this input; later inserts belong to ``epoch``."""
        site = call_site()
        self._check_open(site, "advance_to")
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            raise TimeError(f"advance_to({epoch!r}): epochs are integers", site=site)
        if epoch < self._epoch:
            raise TimeError(
                f"advance_to({epoch}) on input {self.name!r} goes back: it is at epoch "
                f"{self._epoch}",
                site=site,
            )
        if epoch > self._epoch:
            self._advance(epoch, site)

    def close(self) -> None:
        """No more updates: every epoch of this input is closed."""
        if self.closed:
            return
        self._flush()
        self.closed = True
        self._multiplicities = None  # no more changes to check
        self._activate()

    def _activate(self) -> None:
        if (
            self._op is not None
            and self._op.worker is not None
            and self._op.worker.tracker is not None
        ):
            self._op.activate()

    def _pending_work(self) -> bool:
        """Messages to send, or a capability to downgrade or drop."""
        if self._messages:
            return True
        if self._op is None:
            return False
        held = self._op.held()
        return held != ([] if self.closed else [(self._epoch,)])

    # the InputSource protocol of ddflow.operators.io.InputOp
    def take_messages(self) -> list[tuple[int, pl.DataFrame]]:
        out, self._messages = self._messages, []
        return out

    def current_epoch(self) -> int | None:
        return None if self.closed else self._epoch

    def earliest_epoch(self) -> int | None:
        epochs = [e for e, _ in self._messages]
        if not self.closed:
            epochs.append(self._epoch)
        return min(epochs) if epochs else None


def _describe_failure(failure: BaseException) -> str:
    if isinstance(failure, UserFunctionError):
        return str(failure)
    return f"run() was interrupted by {type(failure).__name__}: {failure}"


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_function_error(flow: Dataflow, error: BaseException) -> UserFunctionError | None:
    """A :class:`UserFunctionError` for an exception that a user function raised inside an
    operator step, or None if the exception did not come from user code (an interrupt, a
    failure of ddflow itself).

    The function is the first frame of the traceback outside the ddflow package (the
    function ddflow called); the plan node whose function it is names the operator and the
    line that gave it."""
    if not isinstance(error, Exception) or isinstance(error, DDFlowError):
        return None
    tb = error.__traceback__
    frame = None
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_DIR + os.sep):
            frame = tb.tb_frame
            break
        tb = tb.tb_next
    if frame is None:
        return None
    code = frame.f_code
    node = next((n for n in flow.plan.nodes if _runs_in(n, frame)), None)
    what = f"the function {code.co_name}"
    if node is not None:
        what = (
            f"the vertex {type(node.params['vertex']).__name__}.{code.co_name}"
            if node.op == "vertex"
            else f"the {_kind(node)} function {code.co_name}"
        )
    where = f"{code.co_filename}:{code.co_firstlineno}"
    return UserFunctionError(
        f"{what} (defined at {where}) raised {type(error).__name__}: {error}",
        site=node.site if node is not None else None,
    )


def _runs_in(node: Node, frame: Any) -> bool:
    """Whether ``frame`` runs the user code of ``node``: its function, or a method of its
    vertex."""
    if node.op == "vertex":
        return frame.f_locals.get("self") is node.params["vertex"]
    fn = node.params.get("fn")
    return fn is not None and getattr(fn, "__code__", None) is frame.f_code


def _kind(node: Node) -> str:
    kind = node.params.get("kind") if node.op == "reduce" else None
    return {"reduce": "group_by().reduce", None: node.op}.get(kind, str(kind))


def _update_rows(
    buffer: list[tuple[pl.DataFrame, int | pl.Series]], epoch: int
) -> list[tuple[Any, ...]]:
    """The rows of an input's buffered updates (the schema's columns, then epoch and diff).
    (The schema's conversions give every buffered frame its columns in that order.)"""
    rows: list[tuple[Any, ...]] = []
    for f, d in buffer:
        data = f.rows()
        if isinstance(d, int):
            rows += [(*r, epoch, d) for r in data]
        else:
            rows += [(*r, epoch, x) for r, x in zip(data, d.to_list(), strict=True)]
    return rows


def _as_polars(frame: Any) -> pl.DataFrame:
    if isinstance(frame, pl.LazyFrame):
        return frame.collect()
    if isinstance(frame, pl.DataFrame):
        return frame
    pd = sys.modules.get("pandas")  # if pandas was never imported, frame cannot be pandas
    if pd is not None and isinstance(frame, pd.DataFrame):
        return pl.from_pandas(frame)
    return pl.DataFrame(pl.from_arrow(frame))


def _to_local_frame(frame: Any) -> Any:
    """A Spark DataFrame is collected through Arrow; other frames pass through."""
    mod = type(frame).__module__
    if mod.startswith("pyspark"):
        return pl.from_arrow(frame.toArrow())
    return frame


class Output:
    """The changes of a collection, kept for reading: ``snapshot``, ``changes``, ``subscribe``.

    Epoch ``e``'s changes become visible once ``e`` is complete here (after ``run()``)."""

    def __init__(self, collection: Collection, site: CallSite | None) -> None:
        self.collection = collection
        self.schema = collection.schema
        flow = collection.flow
        self.node = flow.plan.add(
            "output", (collection._node,), collection.schema, flow.plan.top, {"sink": self}, site
        )
        flow.outputs.append(self)
        #: the changes of the completed epochs: (first epoch, last epoch, their changes), a
        #: Polars frame, or a small batch as the local runtime holds it (rows), made a frame
        #: when read (:meth:`_frames`): a frame made for each epoch of small updates costs
        #: more than the steps that computed its changes
        self._log: list[tuple[int, int, Any]] = []
        #: entries of the log still held as rows
        self._held = 0
        self._subscribers: list[Callable[[pd.DataFrame], None]] = []
        self.complete_through = -1
        #: wall-clock time at which each epoch completed (for latency measurements)
        self.completed_at: dict[int, float] = {}
        #: called with every completed epoch, changed or not (sinks that keep state current)
        self._epoch_listeners: list[Callable[[int], None]] = []

    def _on_epoch(self, epoch: int, changes: Any) -> None:
        """Epoch ``epoch`` is complete, with ``changes`` (None, a Polars frame, or rows)."""
        self.complete_through = epoch
        self.completed_at[epoch] = _time.perf_counter()
        if changes is not None and changes.height:
            if type(changes) is Rows and self._subscribers:
                changes = changes.to_frame()
            self._log.append((epoch, epoch, changes))
            if type(changes) is Rows:
                self._held += 1
                if self._held >= HELD_EPOCHS:
                    self._frames()
            if self._subscribers:
                df = _changes_frame(changes, self.schema)
                for cb in self._subscribers:
                    cb(df)
        for listener in self._epoch_listeners:
            listener(epoch)

    def _frames(self) -> list[tuple[int, int, pl.DataFrame]]:
        """The log, each run of entries held as rows (in one column order) made one frame."""
        if self._held:
            log: list[tuple[int, int, Any]] = []
            run: list[Any] = []  # (first epoch, last epoch, the run's first batch, its rows)

            def close() -> None:
                if run:
                    log.append((run[0], run[1], run[2].like(run[3]).to_frame()))
                    run.clear()

            for first, last, c in self._log:
                if type(c) is not Rows:
                    close()
                    log.append((first, last, c))
                elif run and c.names == run[2].names and c.schema == run[2].schema:
                    run[1] = last
                    run[3].extend(c.rows)
                else:
                    close()
                    run.extend((first, last, c, list(c.rows)))
            close()
            self._log = log
            self._held = 0
        return self._log

    def subscribe(self, callback: Callable[[pd.DataFrame], None]) -> None:
        """Call ``callback`` with each completed epoch's non-empty changes (a pandas DataFrame of
        the columns plus ``time`` and ``diff``)."""
        self._subscribers.append(callback)

    def changes(self) -> pd.DataFrame:
        """Every change so far: the columns plus ``time`` (epoch) and ``diff``, consolidated per
        epoch, in epoch order."""
        if not self._log:
            return _changes_frame(self._empty(), self.schema)
        return _changes_frame(pl.concat([c for _, _, c in self._frames()]), self.schema)

    def snapshot(self, epoch: int | None = None) -> pd.DataFrame:
        """The collection at a complete epoch (default: the last complete one): the columns plus
        ``count``, one row per record with non-zero multiplicity."""
        site = call_site()
        if epoch is None:
            epoch = self.complete_through
        elif epoch > self.complete_through:
            raise TimeError(
                f"snapshot(epoch={epoch}): that epoch is not complete yet "
                f"(complete through {self.complete_through}); call run() after advance_to",
                site=site,
            )
        return to_pandas(self.snapshot_polars(epoch), self.schema)

    def snapshot_polars(self, epoch: int | None = None) -> pl.DataFrame:
        if epoch is None:
            epoch = self.complete_through
        names = list(self.schema.names)
        parts = [
            c if last <= epoch else c.filter(pl.col("__t0") <= epoch)
            for first, last, c in self._frames()
            if first <= epoch
        ]
        if not parts:
            return (
                self._empty()
                .select(names)
                .with_columns(pl.lit(0, dtype=pl.Int64).alias("count"))
                .clear()
            )
        acc = (
            pl.concat(parts)
            .group_by(names)
            .agg(pl.col(DIFF).sum().alias("count"))
            .filter(pl.col("count") != 0)
            .sort(names)
        )
        return acc

    def _empty(self) -> pl.DataFrame:
        return pl.DataFrame(
            schema={**dict(self.schema.polars_schema()), "__t0": pl.Int64, DIFF: pl.Int64}
        )


#: an output makes the epochs' changes it holds as rows one frame once it holds this many
HELD_EPOCHS = 256


def _changes_frame(batch: pl.DataFrame, schema: Schema) -> pd.DataFrame:
    names = list(schema.names)
    frame = batch.select([*names, pl.col("__t0").alias("time"), pl.col(DIFF).alias("diff")])
    return to_pandas(frame.sort(["time", *names]), schema)


#: pandas' nullable dtypes for ddflow's nullable integer and boolean columns
_PANDAS_NULLABLE = {
    "int8": "Int8",
    "int16": "Int16",
    "int32": "Int32",
    "int64": "Int64",
    "uint8": "UInt8",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
    "bool": "boolean",
}


def to_pandas(frame: pl.DataFrame, schema: Schema) -> pd.DataFrame:
    """``frame`` as pandas, with a nullable integer or boolean column (``"int64?"``) in
    pandas' nullable dtype (``Int64``, ``boolean``), so that a null stays a null (``pd.NA``)
    instead of turning the column into floats."""
    import pandas as pd

    out = frame.to_pandas()
    for name, dtype in schema.items():
        target = _PANDAS_NULLABLE.get(dtype.name)
        if dtype.nullable and target is not None and name in out.columns:
            out[name] = pd.array(frame.get_column(name).to_list(), dtype=target)
    return out


class Probe:
    """Watches the progress of a collection: which epochs are complete there."""

    def __init__(self, collection: Collection, site: CallSite | None) -> None:
        flow = collection.flow
        self.flow = flow
        self.node = flow.plan.add(
            "probe", (collection._node,), collection.schema, flow.plan.top, {"probe": self}, site
        )
        flow.probes.append(self)
        self.op: Any = None

    @property
    def frontier(self) -> list[int]:
        """The epochs that may still change here (empty once everything is complete)."""
        if self.op is None:
            return [0]
        return [t[0] for t in self.op.frontier_now()]

    def done(self, epoch: int) -> bool:
        """Is ``epoch`` complete here?"""
        return all(f > epoch for f in self.frontier)
