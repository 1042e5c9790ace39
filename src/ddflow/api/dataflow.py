"""The dataflow: inputs, outputs, probes, and running.

A :class:`Dataflow` owns a plan (:mod:`ddflow.plan.nodes`) and, from its first ``run()``, the
operators built from it on its runtime. Inputs accept updates at their current epoch;
``advance_to(e)`` promises that no more updates for epochs before ``e`` will come; ``run()``
works until every epoch that every input has moved past is complete at every output.
Invariants:

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
import tempfile
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ddflow.api.collection import Collection
from ddflow.api.inputs import InputCollection
from ddflow.api.outputs import Output, Probe
from ddflow.errors import (
    CallSite,
    CheckpointError,
    ConfigurationError,
    DataflowFailedError,
    DDFlowError,
    GraphError,
    TimeError,
    UserFunctionError,
    call_site,
)
from ddflow.plan.build import build
from ddflow.plan.failures import user_function_error
from ddflow.plan.nodes import Node, Plan, Scope
from ddflow.runtime.local.runtime import LocalRuntime
from ddflow.schema import Schema
from ddflow.timely.operator import Vertex

if TYPE_CHECKING:  # pandas is imported only when a frame is asked for as pandas (it is large)
    import pandas as pd


__all__ = ["Dataflow", "RunProgress"]


class Dataflow:
    """A differential dataflow: build collections from inputs, then feed and run it.

    * ``runtime``: where it runs: :class:`~ddflow.LocalRuntime` (the default, embedded in this
      process) or :class:`~ddflow.SparkRuntime` (workers hosted by a Spark barrier stage);
    * ``workers``: how many workers split every keyed operator (default 1; each owns the
      keys that hash to it, and the results are the same for every number);
    * ``processes``: whether workers other than 0 run in processes of their own (the
      default) or one after another in this process (``False``, for debugging);
    * ``checkpoint``: a directory for checkpoints (made if missing; refused at once if it
      cannot be written), for :meth:`checkpoint` and :meth:`restore`;
    * ``checkpoint_every``: write a checkpoint by itself after every this many complete
      epochs (needs ``checkpoint``);
    * ``keep``: how many of the newest checkpoints are kept (default 2).

    A setting it cannot take raises :class:`~ddflow.errors.ConfigurationError` (or
    :class:`~ddflow.errors.CheckpointError` for the directory) at the user's line. Used in a
    ``with`` block, its worker processes are stopped at the end.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> words = flow.input("words", schema={"word": "str"})
    >>> counts = words.group_by("word").agg(n=dd.count()).output()
    >>> words.insert(["a", "b", "a"]); flow.advance_to(1); flow.run()
    >>> counts.snapshot().sort_values("word").to_dict("list")
    {'word': ['a', 'b'], 'n': [2, 1], 'count': [1, 1]}
    """

    def __init__(
        self,
        runtime: Any = None,
        *,
        workers: int | None = None,
        processes: bool = True,
        checkpoint: str | os.PathLike[str] | None = None,
        checkpoint_every: int | None = None,
        keep: int = 2,
    ) -> None:
        site = call_site()
        self.runtime = runtime if runtime is not None else LocalRuntime()
        self.kernels = self.runtime.kernels
        hosted = getattr(self.runtime, "workers", None)
        if hosted is not None and workers is not None and workers != hosted:
            raise ConfigurationError(
                f"Dataflow(workers={workers}) and its runtime's workers={hosted} differ: give "
                "the number once",
                site=site,
            )
        #: how many workers split every keyed operator (see :mod:`ddflow.runtime.workers`;
        #: a runtime that hosts workers, ``SparkRuntime(spark, workers=N)``, says how many)
        self.workers = _check_workers(
            hosted or (1 if workers is None else workers), self.kernels, site
        )
        #: whether workers other than 0 are processes of their own (``False``: they all run
        #: in this process, one after another, for debugging; the results are the same)
        self.processes = bool(processes)
        self._processes: Any = None
        #: why the worker processes were stopped (``close``, ``with``), if they were
        self._stopped: str | None = None
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
        #: what to do once the next :meth:`run` has run everything accepted (remove the files
        #: a source staged for the workers to read, see :mod:`ddflow.io.spark`)
        self._after_run: list[Callable[[], None]] = []
        if checkpoint_every is not None and (
            checkpoint is None
            or isinstance(checkpoint_every, bool)
            or not isinstance(checkpoint_every, int)
            or checkpoint_every < 1
        ):
            raise ConfigurationError(
                "Dataflow(checkpoint_every=N) takes a number of epochs >= 1, with "
                "checkpoint=DIR naming where checkpoints go",
                site=site,
            )
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigurationError(
                f"Dataflow(keep=...) takes a number of checkpoints >= 1, got {keep!r}", site=site
            )
        #: where checkpoints are written and restored from (see :meth:`checkpoint`)
        self.checkpoint_dir = None if checkpoint is None else _checkpoint_dir(checkpoint, site)
        self.checkpoint_every = checkpoint_every
        self.keep = keep
        #: the epoch of the last checkpoint written or restored
        self.checkpointed: int | None = None
        #: sources that keep a position for checkpoints (``checkpoint_values`` and
        #: ``restore_values``), by a name of their own
        self._sources: dict[str, Any] = {}
        #: the positions of the sources in the checkpoint restored, for sources made after
        self._positions: dict[str, Any] = {}

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
        key: str | Sequence[str] | None = None,
    ) -> tuple[Collection, ...]:
        """Add a timely vertex (:class:`ddflow.Vertex`) reading ``inputs``; returns one
        collection per output schema.

        ``key``: columns every input has. With several workers, a vertex with a key runs on
        every worker, each with its own copy of ``vertex`` that receives only the updates
        whose key that worker owns (the object given is worker 0's copy); a vertex without
        one runs on worker 0 alone and receives everything."""
        from ddflow.api.collection import _align

        site = call_site()
        ins = list(inputs)
        if not ins:
            raise GraphError("a vertex needs at least one input", site=site)
        if not isinstance(vertex, Vertex):
            raise GraphError(f"{vertex!r} is not a ddflow.Vertex", site=site)
        nodes = _align(ins, site)
        keys = (key,) if isinstance(key, str) else None if key is None else tuple(key)
        if keys is not None:
            if not keys or not all(isinstance(c, str) for c in keys):
                raise GraphError(
                    f"a vertex's key is a column name or a list of them, got {key!r}", site=site
                )
            for i, n in enumerate(nodes):
                missing = [c for c in keys if c not in n.schema.names]
                if missing:
                    raise GraphError(
                        f"the vertex's key {list(keys)} is not in input {i}: it has no column "
                        f"{missing[0]!r} (its columns: {list(n.schema.names)})",
                        site=site,
                    )
        schemas = [o if isinstance(o, Schema) else Schema(o) for o in outputs]
        v = self.plan.add(
            "vertex",
            tuple(nodes),
            schemas[0],
            nodes[0].scope,
            {"vertex": vertex, "outputs": tuple(schemas), "key": keys},
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
        """Close every input: no more updates will come. With worker processes, also run
        what is left to do and stop them (the outputs stay readable)."""
        self._check_usable(call_site())
        for h in self.inputs.values():
            h.close()
        if self._processes is not None and self._stopped is None:
            self.run()
            self._stop_workers("close")

    def __enter__(self) -> Dataflow:
        return self

    def __exit__(self, *exc: object) -> None:
        """The end of a ``with`` block stops the worker processes (the outputs stay
        readable)."""
        self._stop_workers("with")

    def _stop_workers(self, why: str) -> None:
        if self._processes is not None and self._stopped is None:
            self._stopped = why
            self._processes.stop(failed=why == "failure")

    def _ensure_built(self) -> None:
        if self._stopped == "with":
            raise DataflowFailedError(
                "this dataflow's worker processes were stopped at the end of its with block: "
                "it cannot run again"
            )
        host = getattr(self.runtime, "host_workers", None)  # (Spark hosts its workers)
        if self.worker is None and self.workers > 1 and (self.processes or host is not None):
            from ddflow.runtime.workers import start_workers

            self.plan.frozen = True
            self.worker, self._processes = start_workers(
                self.plan,
                getattr(self.runtime, "worker_settings", self.runtime.settings),
                self.kernels,
                self.inputs,
                last_epoch=self.last_epoch,
                loop_counts=self._loop_counts,
                workers=self.workers,
                procs=None if host is None else host(self.workers),
            )
        if self.worker is None:
            self.plan.frozen = True
            self.worker = build(
                self.plan,
                self.kernels,
                self.inputs,
                last_epoch=self.last_epoch,
                loop_counts=self._loop_counts,
                workers=self.workers,
                regions=self.checkpoint_dir is None,
            )

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
        if self._stopped == "close":  # (everything was closed and run)
            return
        self._ensure_built()
        for h in self.inputs.values():
            h._flush()
            h._activate()
        if not progress:
            with self._stop_on_failure():
                self.worker.run()
            self._ran()
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
        self._ran()
        watch.finish()

    def _ran(self) -> None:
        done, self._after_run = self._after_run, []
        for fn in done:
            fn()
        every = self.checkpoint_every
        if every is None or self.worker is None or not self.worker.idle():
            return
        from ddflow.api import checkpoints

        try:
            epoch = checkpoints.complete_epoch(self)
        except CheckpointError:  # (not at a complete epoch now: at a later run)
            return
        last = -1 if self.checkpointed is None else self.checkpointed
        if epoch - last >= every:
            self._write_checkpoint()

    def checkpoint(self) -> int:
        """Write a checkpoint of the last complete epoch in ``Dataflow(checkpoint=DIR)``;
        returns its epoch. Taken after ``run()``, with every open input at one epoch whose
        updates have not run yet (:class:`~ddflow.errors.CheckpointError` says otherwise).
        ``Dataflow(checkpoint_every=N)`` takes one after every N complete epochs by itself.
        See :mod:`ddflow.api.checkpoints`."""
        site = call_site()
        self._check_usable(site)
        if self.checkpoint_dir is None:
            raise CheckpointError(
                "this dataflow has nowhere to write checkpoints: Dataflow(checkpoint=DIR)",
                site=site,
            )
        try:
            return self._write_checkpoint()
        except CheckpointError as e:
            raise CheckpointError(e.message, site=site) from None

    def _write_checkpoint(self) -> int:
        from ddflow.api import checkpoints

        assert self.checkpoint_dir is not None
        self.checkpointed = checkpoints.write(self, self.checkpoint_dir, self.keep)
        return self.checkpointed

    def restore(self) -> int | None:
        """Restore the latest whole checkpoint in ``Dataflow(checkpoint=DIR)``, into this
        dataflow built as the one that wrote it; returns its epoch (None: there is none, and
        nothing changed). The inputs are then at the epoch after it (``flow.epoch``): feed
        them from there; sources that registered resume by themselves. The outputs hold the
        checkpoint's epoch and go on from it; earlier epochs are not kept. Also the way back
        after a failure inside ``run()``, in the same process: restore() rebuilds the
        operators. A checkpoint that does not read whole is skipped, with a warning, for the
        one before."""
        site = call_site()
        if self.checkpoint_dir is None:
            raise CheckpointError(
                "this dataflow has nowhere to restore from: Dataflow(checkpoint=DIR)", site=site
            )
        from ddflow.api import checkpoints

        try:
            epoch = checkpoints.restore(self, self.checkpoint_dir)
        except CheckpointError as e:
            raise CheckpointError(e.message, site=site) from None
        if epoch is not None:
            self.checkpointed = epoch
        return epoch

    def _register_source(self, key: str, source: Any) -> None:
        """A source whose position goes into checkpoints (``checkpoint_values``, and
        ``restore_values`` when restored, also after the restore if made after it)."""
        self._sources[key] = source
        if key in self._positions:
            source.restore_values(self._positions[key])

    def _reset(self) -> None:
        """Let go of the operators (and worker processes), and of a failure, before a
        restore builds them again."""
        if self._processes is not None and self._stopped is None:
            self._processes.stop(failed=self.failure is not None)
        self._processes, self._stopped = None, None
        self.worker = None
        self.failure = None
        self._after_run = []

    def step(self) -> bool:
        """Run one operator activation; returns whether there was work (``while
        flow.step(): ...`` runs to the same point as ``run()``)."""
        self._check_usable(call_site())
        if self._stopped == "close":
            return False
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
            error = user_function_error(self.plan, e)
            self.failure = error if error is not None else e
            self._stop_workers("failure")
            if error is not None:
                raise error from e
            raise

    def explain(self) -> str:
        """The dataflow as it runs: one line per operator (of worker 0, where there are
        several), in the order they were built, and for each reduce whether it runs in the
        native core or in Python (the choice is made when the dataflow is built). Where the
        runtime runs loops whole in the core (``LocalSettings(regions=True)``), each such loop
        is one line, ``loop region (name): native``, and a last line for each other loop says
        why it runs as Python operators. Building the dataflow fixes it: no collection can be
        added after.

        >>> import ddflow as dd
        >>> from ddflow.runtime.local.settings import LocalSettings, ReduceSettings
        >>> native = LocalSettings(reduce=ReduceSettings(native=True))
        >>> flow = dd.Dataflow(runtime=dd.LocalRuntime(native))
        >>> xs = flow.input("xs", schema={"k": "int64", "v": "int64"})
        >>> _ = xs.group_by("k").agg(n=dd.count()).output()
        >>> print(flow.explain())
        0 input
        1 reduce: native
        2 output
        """
        self._ensure_built()
        lines = []
        for op in self.worker.operators:
            reducer = getattr(op, "reducer", None)
            how = ""
            if reducer is not None:
                how = ": native" if reducer.native else ": python"
            lines.append(f"{op.index} {op.name}{how}")
        lines.extend(self.worker.notes)
        return "\n".join(lines)

    def loop_stats(self, epoch: int | None = None) -> pd.DataFrame:
        """Differences processed by each loop, per time: columns ``loop``, ``epoch``,
        ``iteration`` (the loop's own counter), ``time`` (the full time inside the loop:
        epoch, outer loops' counters, and for a prioritized loop its priority), and
        ``differences`` (updates that reached the loop variable at that time). With
        ``epoch``, only that epoch's times."""
        rows = [
            (name, t[0], t[-1], t, n)
            for name, counts in self._loop_counts.items()
            for t, n in sorted(c for c in counts.items() if epoch is None or c[0][0] == epoch)
        ]
        import pandas as pd

        return pd.DataFrame(rows, columns=["loop", "epoch", "iteration", "time", "differences"])

    def last_epoch(self) -> int:
        """The latest epoch any input reached (closed inputs included)."""
        return max([h.epoch for h in self.inputs.values()] or [0])


def _checkpoint_dir(checkpoint: Any, site: CallSite | None) -> str:
    """``Dataflow(checkpoint=...)``'s directory, made if missing and tried with a file of its
    own: a path that cannot hold checkpoints is refused where it is given, not at every
    ``run()``."""
    try:
        path = os.fspath(checkpoint)
    except TypeError:
        raise CheckpointError(
            f"Dataflow(checkpoint=...) takes a directory's path, got {checkpoint!r}", site=site
        ) from None
    if os.path.exists(path) and not os.path.isdir(path):
        raise CheckpointError(
            f"Dataflow(checkpoint={path!r}): the checkpoint path is a file, not a directory",
            site=site,
        )
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".ddflow-probe-", dir=path)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise CheckpointError(
            f"Dataflow(checkpoint={path!r}): the checkpoint directory cannot be written "
            f"({e.strerror or e})",
            site=site,
        ) from None
    return path


def _check_workers(workers: Any, kernels: Any, site: CallSite | None) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigurationError(
            f"Dataflow(workers=...) takes a number of workers >= 1, got {workers!r}", site=site
        )
    if workers > 1 and not kernels.capabilities.partitions:
        raise ConfigurationError(
            f"Dataflow(workers={workers}): the {kernels.name} runtime runs one worker; "
            "use the embedded runtime (the default) for several",
            site=site,
        )
    return workers


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


def _describe_failure(failure: BaseException) -> str:
    if isinstance(failure, UserFunctionError):
        return str(failure)
    return f"run() was interrupted by {type(failure).__name__}: {failure}"
