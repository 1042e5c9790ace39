"""A worker process: ``python -m ddflow.runtime.workers.child FD``.

It reads a plan, the runtime's settings and its place (worker ``index`` of ``workers``) from
the socket ``FD`` (its end of a socket pair with the coordinator), builds its copy of the
operators (as :func:`~ddflow.plan.build.build_shard` does for every worker), reports the
capabilities its operators hold at start, then serves commands until the dataflow releases
it (it then waits for another plan: see :func:`ddflow.runtime.workers.reuse_processes`), until
told to stop, or until the coordinator goes away (end of file: it never outlives the
coordinator):

* ``run``: apply the other workers' pointstamp changes to its replica of the tracker, queue
  the messages it carries, run one operator, and reply with its own pointstamp changes, the
  messages it sent to other workers, the operators it activated and its loops' counts;
* ``checkpoint``: write its operators' states under a checkpoint's directory and reply with
  their manifest entries and files (:mod:`ddflow.plan.state`);
* ``restore``: load its operators' states from a checkpoint, and reply with the pointstamp
  changes and activations that made (a vertex's notifications);
* ``release``: forget this dataflow and wait for another plan;
* ``stop``: exit.

A user function that raises is reported (``error``: the message, naming the function and the
plan node) and the worker waits to be stopped; any other failure is reported with its traceback
(``crash``) before the process exits. Interrupts are the coordinator's to handle: the worker
ignores SIGINT (a Ctrl-C in a terminal reaches every process of the group).
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from ddflow.errors import CheckpointError
from ddflow.plan.build import build_shard
from ddflow.plan.failures import user_function_error
from ddflow.plan.state import load_operators, save_operators
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.workers.shipping import land
from ddflow.runtime.workers.wire import decode, encode
from ddflow.timely.cluster import ReplicaTracker, Shard, tracked_sets
from ddflow.timely.lattice import Time
from ddflow.timely.progress import ProgressGraph

__all__ = ["main", "serve_connection"]


class _Elsewhere:
    """Another worker, seen from this one: what is sent to it is counted here and carried
    to the coordinator in the reply."""

    local = False

    def __init__(self, worker: _Worker, index: int) -> None:
        self.worker, self.index = worker, index

    def deliver(self, target: int, port: int, time: Time, batch: Any) -> None:
        self.worker.tracker.update_target(target, port, time, 1)
        self.worker.outgoing.append((self.index, target, port, time, batch))


class _Worker:
    """The cluster as one worker process sees it (what its :class:`Shard` asks of it)."""

    def __init__(self, index: int, workers: int) -> None:
        self.index, self.workers = index, workers
        self.tracker: Any = None
        self.shard = Shard(self, index)
        self.shards: list[Any] = [
            self.shard if w == index else _Elsewhere(self, w) for w in range(workers)
        ]
        self.outgoing: list[tuple[int, int, int, Time, Any]] = []
        self.activated: set[int] = set()

    def activate(self, op: int, worker: int) -> None:
        self.activated.add(op)

    def activate_all(self, op: int, skip: int | None = None) -> None:
        """(Frontier changes: the coordinator sees them too, and activates everywhere.)"""

    def start(self) -> None:
        graph = ProgressGraph()
        ops = self.shard.operators
        for op in ops:
            graph.add_node(op.input_types, op.output_types, op.summaries)
        for (src, port), targets in self.shard.edges.items():
            for target, tport, _ in targets:
                graph.add_edge((src, port), (target, tport))
        self.tracker = ReplicaTracker(graph, *tracked_sets(ops))
        for op in ops:
            op.on_start()

    def run(self, index: int, sync: list[Any], messages: list[tuple[Any, ...]]) -> None:
        self.tracker.apply(sync)
        self.tracker.propagate()
        queues = self.shard.queues
        for target, port, time, batch in messages:
            queues[target][port].append((time, batch))
        self.shard.operators[index].schedule()
        self.shard.take_consumed()


def main(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(socket.socket(fileno=fd).detach())
    try:
        serve_connection(conn)
    except BaseException:
        os._exit(1)


def serve_connection(conn: Connection) -> None:
    """Serve the coordinator at the other end of ``conn``: dataflow after dataflow, until it
    says stop or goes away (end of file). Any other failure is reported to it with its
    traceback (``crash``) and raised again."""
    try:
        while True:  # (a dataflow after another, while the coordinator keeps this worker)
            kind, fields, _ = decode(conn.recv_bytes())
            if kind == "stop":
                return
            if not serve(conn, *fields):
                return
    except EOFError:  # (the coordinator has gone)
        return
    except BaseException:
        text = traceback.format_exc()
        try:
            conn.send_bytes(encode("crash", text))
        except OSError:
            print(text, file=sys.stderr)
        raise


def serve(
    conn: Connection, plan_bytes: bytes, settings_bytes: bytes, index: int, workers: int
) -> bool:
    """Be worker ``index`` of ``workers`` of one dataflow, until it is released (then
    return True: wait for another plan) or told to stop (False)."""
    plan = land(plan_bytes)
    kernels = LocalKernels(pickle.loads(settings_bytes))
    worker = _Worker(index, workers)
    loop_counts: dict[str, dict[tuple[int, ...], int]] = {}
    build_shard(plan, kernels, {}, worker.shard, last_epoch=lambda: 0, loop_counts=loop_counts)
    worker.start()
    conn.send_bytes(encode("ready", worker.tracker.take()))
    while True:
        kind, fields, messages = decode(conn.recv_bytes())
        if kind == "release":
            return True
        if kind == "stop":
            return False
        if kind in ("checkpoint", "restore"):
            _state(conn, worker, kind, fields)
            continue
        op, sync = fields
        try:
            worker.run(op, sync, messages)
        except Exception as e:
            failure = user_function_error(plan, e)
            if failure is None:
                raise
            text = traceback.format_exc()
            conn.send_bytes(encode("error", failure.message, failure.site, text))
            continue
        counts = {name: dict(c) for name, c in loop_counts.items() if c}
        for c in loop_counts.values():
            c.clear()
        out, worker.outgoing = worker.outgoing, []
        activated, worker.activated = sorted(worker.activated), set()
        conn.send_bytes(encode("done", worker.tracker.take(), activated, counts, batches=out))


def _state(conn: Connection, worker: _Worker, kind: str, fields: tuple[Any, ...]) -> None:
    """Write (``checkpoint``) or load (``restore``) this worker's part of a checkpoint."""
    ops = worker.shard.operators
    try:
        if kind == "checkpoint":
            (root,) = fields
            entries, files = save_operators(ops, root, worker.index)
            conn.send_bytes(encode("checkpointed", entries, files))
            return
        root, entries = fields
        load_operators(ops, root, entries)
    except CheckpointError as e:
        conn.send_bytes(encode("refused", e.message))
        return
    activated, worker.activated = sorted(worker.activated), set()
    conn.send_bytes(encode("restored", worker.tracker.take(), activated))


if __name__ == "__main__":
    main(int(sys.argv[1]))
