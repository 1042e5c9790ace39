"""The coordinator's side of ``Dataflow(workers=W)``: W-1 worker processes and their proxies.

The process that owns the dataflow is the coordinator and worker 0: it keeps the scheduler
and the one progress tracker (:class:`~ddflow.timely.cluster.Cluster`) and runs worker 0's
operators itself. Each other worker is a process of its own (``python -m
ddflow.runtime.workers.child``, started with a socket pair, so nothing of the user's
``__main__`` is run again), driven through a :class:`RemoteShard`: a step of operator X sends
``run X`` to every worker with work for X, with the messages routed to it since its last
step and the pointstamp changes of the other workers it has not seen, runs X on worker 0
meanwhile, then applies each reply (the worker's own pointstamp changes, the messages it
sent to other workers, the operators it activated) before anything is propagated. A message
between two workers is counted from the step that sent it until the step that took it, so
no time completes while one is in flight. Messages between workers 1 and 2 pass through the
coordinator.

Every wait on a worker also watches for its death: a worker that dies makes the step raise
:class:`~ddflow.errors.WorkerError` naming it, its process id, its exit code or signal, and
the traceback it sent. The processes stop with :meth:`WorkerProcesses.stop` (the dataflow's
``close()``, the end of a ``with`` block), when the dataflow is collected, or at interpreter
exit; a worker also exits when the coordinator's end of its socket closes.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import pickle
import signal
import socket
import subprocess
import sys
import time as _time
import weakref
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection, wait
from typing import Any

from ddflow.errors import CheckpointError, UserFunctionError, WorkerError
from ddflow.plan.build import build_shard
from ddflow.plan.nodes import Plan
from ddflow.runtime.workers.shipping import check_shippable, ship
from ddflow.runtime.workers.wire import decode, encode
from ddflow.timely.cluster import Cluster
from ddflow.timely.lattice import Time

__all__ = ["RemoteShard", "WorkerProcesses", "reuse_processes", "start_workers"]

#: seconds a worker may take to start (import ddflow, build its operators) before it counts as
#: failed
START_TIMEOUT = 120.0
#: seconds between checks that a busy worker is still alive
POLL = 1.0
#: log entries kept before the log of pointstamp changes is trimmed
TRIM_AT = 4096


class WorkerProcesses:
    """The worker processes of one dataflow (workers 1 .. W-1) and their sockets."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.procs: list[subprocess.Popen[bytes]] = []
        self.conns: list[Connection] = []
        #: whether the processes may serve another dataflow when this one is done with them
        #: (not after a failure: a worker may be in the middle of a step)
        self.healthy = [True]
        self._finalizer = weakref.finalize(self, _release, self.procs, self.conns, self.healthy)

    def spawn(self) -> None:
        """Start the processes (or take idle ones, see :func:`reuse_processes`)."""
        for _ in range(1, self.workers):
            proc, conn = _idle() or _new_process()
            self.procs.append(proc)
            self.conns.append(conn)

    @property
    def alive(self) -> bool:
        return self._finalizer.alive

    def stop(self, failed: bool = False) -> None:
        """Stop every worker (and wait for it, at most a few seconds, then kill it); with
        :func:`reuse_processes` on and no failure, keep them for the next dataflow."""
        if failed:
            self.healthy[0] = False
        self._finalizer()


#: idle worker processes, kept for the next dataflow while :data:`_REUSE` is on
_POOL: list[tuple[subprocess.Popen[bytes], Connection]] = []
_REUSE = [False]


def reuse_processes(enabled: bool = True) -> None:
    """Keep the worker processes of a dataflow that is done with them for the next one
    (``True``), instead of stopping them; ``False`` stops the idle ones. Starting a worker
    process costs about a second (importing Polars and ddflow), which a program that builds
    many small dataflows, a test suite, saves this way. Idle processes stop at interpreter
    exit, and whenever the process that started them ends."""
    _REUSE[0] = bool(enabled)
    if not enabled:
        idle = list(_POOL)
        _POOL.clear()
        _stop([p for p, _ in idle], [c for _, c in idle])


def _idle() -> tuple[subprocess.Popen[bytes], Connection] | None:
    if _REUSE[0] and not _POOL:  # (dataflows no longer referenced give theirs back when
        # collected: collecting costs less than starting a process)
        gc.collect()
    while _REUSE[0] and _POOL:
        proc, conn = _POOL.pop()
        if proc.poll() is None:
            return proc, conn
        conn.close()
    return None


def _new_process() -> tuple[subprocess.Popen[bytes], Connection]:
    env = dict(os.environ)
    env["POLARS_MAX_THREADS"] = "1"  # (one core per worker: the workers are the parallelism)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ddflow.runtime.workers.child", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=env,
            stdin=subprocess.DEVNULL,
        )
    finally:
        theirs.close()
    return proc, Connection(ours.detach())


def _release(
    procs: list[subprocess.Popen[bytes]], conns: list[Connection], healthy: list[bool]
) -> None:
    if healthy[0] and _REUSE[0]:
        for proc, conn in zip(procs, conns, strict=True):
            try:
                conn.send_bytes(encode("release"))
            except OSError:
                continue
            if proc.poll() is None:
                _POOL.append((proc, conn))
        return
    _stop(procs, conns)


def _stop(procs: list[subprocess.Popen[bytes]], conns: list[Connection]) -> None:
    for conn in conns:
        with contextlib.suppress(OSError):
            conn.send_bytes(encode("stop"))
    deadline = _time.monotonic() + 5.0
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - _time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)
    for conn in conns:
        conn.close()


atexit.register(reuse_processes, False)


class RemoteShard:
    """Worker ``index`` (in another process), as the coordinator's :class:`Cluster` drives
    it: the messages routed to it wait here until its next step."""

    local = False

    def __init__(
        self,
        cluster: Cluster,
        index: int,
        proc: subprocess.Popen[bytes],
        conn: Connection,
        loop_counts: dict[str, dict[tuple[int, ...], int]],
    ) -> None:
        self.cluster, self.index, self.proc, self.conn = cluster, index, proc, conn
        self.loop_counts = loop_counts
        self.inbox: list[tuple[int, int, Time, Any]] = []
        #: how far it has read the coordinator's log of pointstamp changes
        self.cursor = 0
        #: bytes sent to it and received from it (commands, replies and their batches)
        self.bytes_out = self.bytes_in = 0

    def deliver(self, target: int, port: int, time: Time, batch: Any) -> None:
        self.cluster.tracker.update_target(target, port, time, 1)
        self.inbox.append((target, port, time, batch))
        self.cluster.activate(target, self.index)

    def accept(self, target: int, port: int, time: Time, batch: Any) -> None:
        self.inbox.append((target, port, time, batch))
        self.cluster.activate(target, self.index)

    def start(self) -> None:
        kind, fields, _ = self._receive(START_TIMEOUT, "starting")
        if kind != "ready":
            raise WorkerError(f"worker {self.index} answered {kind!r} when starting")
        tracker: Any = self.cluster.tracker
        tracker.apply(fields[0], self.index)
        self.cluster.count_holds(self.index, fields[0])

    def begin(self, op: int) -> None:
        tracker: Any = self.cluster.tracker
        sync, self.cursor = tracker.since(self.cursor, self.index)
        messages, self.inbox = self.inbox, []
        self._send(encode("run", op, sync, batches=messages))
        if len(tracker.log) > TRIM_AT:
            tracker.trim(min(s.cursor for s in self.cluster.shards if not s.local))

    def finish(self) -> None:
        kind, fields, messages = self._receive(None, "running")
        if kind == "error":
            message, site, text = fields
            raise UserFunctionError(f"{message} (in worker {self.index})", site=site) from (
                _RemoteTraceback(text)
            )
        if kind != "done":
            raise WorkerError(f"worker {self.index} answered {kind!r} to a step")
        changes, activated, counts = fields
        cluster = self.cluster
        tracker: Any = cluster.tracker
        tracker.apply(changes, self.index)
        cluster.count_holds(self.index, changes)
        shards = cluster.shards
        for w, target, port, time, batch in messages:
            shards[w].accept(target, port, time, batch)
        for op in activated:
            cluster.activate(op, self.index)
        for name, c in counts.items():
            mine = self.loop_counts.setdefault(name, {})
            for t, n in c.items():
                mine[t] = mine.get(t, 0) + n

    def save_state(self, root: str) -> tuple[list[Any], dict[str, Any]]:
        """Have the worker write its operators' states under a checkpoint's directory
        (:mod:`ddflow.plan.state`): their manifest entries and the files written."""
        entries, files = self._state("checkpoint", "checkpointed", root)
        return entries, files

    def load_state(self, root: str, entries: list[Any]) -> None:
        """Have the worker load its operators' states from a checkpoint, and count what that
        held (a vertex's notifications)."""
        changes, activated = self._state("restore", "restored", root, entries)
        tracker: Any = self.cluster.tracker
        tracker.apply(changes, self.index)
        self.cluster.count_holds(self.index, changes)
        for op in activated:
            self.cluster.activate(op, self.index)

    def _state(self, command: str, answer: str, *fields: Any) -> tuple[Any, ...]:
        """Send a checkpoint's command (``checkpoint``, ``restore``) and wait for its answer:
        its fields."""
        self._send(encode(command, *fields))
        kind, got, _ = self._receive(None, f"answering {command}")
        if kind == "refused":
            raise CheckpointError(f"{got[0]} (in worker {self.index})")
        if kind != answer:
            raise WorkerError(f"worker {self.index} answered {kind!r} to {command}")
        return got

    def _send(self, data: bytes) -> None:
        self.bytes_out += len(data)
        try:
            self.conn.send_bytes(data)
        except OSError:
            raise self._died() from None

    def _receive(self, timeout: float | None, doing: str) -> tuple[str, tuple[Any, ...], list[Any]]:
        deadline = None if timeout is None else _time.monotonic() + timeout
        while True:
            if self.conn.poll() or wait([self.conn], POLL):
                try:
                    data = self.conn.recv_bytes()
                except (EOFError, OSError):
                    raise self._died() from None
                self.bytes_in += len(data)
                kind, fields, messages = decode(data)
                if kind == "crash":
                    raise self._died(fields[0])
                return kind, fields, messages
            if self.proc.poll() is not None:
                raise self._died()
            if deadline is not None and _time.monotonic() > deadline:
                raise WorkerError(
                    f"worker {self.index} ({self.where}) did not answer within "
                    f"{timeout:.0f} s while {doing}"
                )

    @property
    def where(self) -> str:
        """Where it runs, for messages: its process (or what hosts it, see
        :mod:`ddflow.runtime.spark.hosted`)."""
        return getattr(self.proc, "where", None) or f"process {self.proc.pid}"

    def _died(self, text: str | None = None) -> WorkerError:
        try:
            code = self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            code = None
        ended = getattr(self.proc, "ended", None)  # (a host that says how it ended)
        how: str | None = ended() if ended is not None else None
        if how is None:
            if code is None:
                how = "stopped answering"
            elif code < 0:
                how = f"was killed by signal {signal.Signals(-code).name}"
            else:
                how = f"exited with code {code}"
        where = f"worker {self.index} ({self.where})"
        if text:
            return WorkerError(f"{where} failed and {how}; its traceback:\n{text}")
        return WorkerError(f"{where} {how}")


class _RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process."""

    def __str__(self) -> str:
        return f"\n{self.args[0]}"


def start_workers(
    plan: Plan,
    settings: Any,
    kernels: Any,
    inputs: Mapping[str, Any],
    *,
    last_epoch: Callable[[], int],
    loop_counts: dict[str, dict[tuple[int, ...], int]],
    workers: int,
    procs: Any = None,
) -> tuple[Cluster, Any]:
    """Start the worker processes of ``plan`` and the cluster that drives them (worker 0
    built here while the others start). ``procs``: what starts and stops workers 1.. (default:
    :class:`WorkerProcesses`; another host gives the same interface, see
    :mod:`ddflow.runtime.spark.hosted`)."""
    check_shippable(plan)
    plan_bytes, settings_bytes = ship(plan), pickle.dumps(settings)
    if procs is None:
        procs = WorkerProcesses(workers)
    try:
        procs.spawn()
        for w, conn in enumerate(procs.conns, start=1):
            conn.send_bytes(encode("plan", plan_bytes, settings_bytes, w, workers))
        cluster = Cluster(workers)
        build_shard(
            plan, kernels, inputs, cluster.shards[0], last_epoch=last_epoch, loop_counts=loop_counts
        )
        for w, (proc, conn) in enumerate(zip(procs.procs, procs.conns, strict=True), start=1):
            cluster.shards[w] = RemoteShard(cluster, w, proc, conn, loop_counts)
        cluster.start()
    except BaseException:
        procs.stop(failed=True)
        raise
    return cluster, procs
