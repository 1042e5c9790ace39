"""Workers hosted by Spark: ``dd.SparkRuntime(spark, workers=N)``.

The workers of :mod:`ddflow.runtime.workers` run as the tasks of one Spark *barrier stage*
that lives as long as the dataflow (the pattern of TorchDistributor and XGBoost's Spark
estimators): Spark places the tasks and starts them all at once; each task connects back to
the driver, which is the coordinator and worker 0, and then serves it exactly as a worker
process does (:func:`~ddflow.runtime.workers.child.serve_connection`), keeping its
arrangements in memory with the embedded kernels. No Spark job runs per operator step.

**Task slots.** The stage takes ``N - 1`` task slots for the dataflow's whole life (worker 0
is the driver). The Spark jobs the dataflow needs meanwhile (reading a source's DataFrame,
writing a sink) need a free slot, so :meth:`HostedWorkers.spawn` refuses a stage that would
leave none (``N`` at most the session's slots) and says how many there are. Barrier stages
refuse dynamic allocation: that is refused too, before anything starts.

**The executors' ddflow.** Before the stage, a small job runs on the executors that imports
ddflow there and reads its version and native build (:func:`_probe_executors`): an executor
whose Python lacks ddflow, or has another version or another build of its native core, is
refused with a :class:`~ddflow.errors.WorkerError` that says what is missing, which Python
the executors run (``spark.pyspark.python``) and how to ship ddflow (a wheel installed on the
cluster, or a packed virtual environment through ``spark.archives``), instead of a barrier
stage failing with the cause only in the executors' log.

**Failures.** A task that dies fails the stage (Spark kills its other tasks): ``run()``
raises :class:`~ddflow.errors.WorkerError` naming the worker, its task and the stage's
failure. Stopping the dataflow tells every task to stop and waits for the stage to end; a
stage that does not is cancelled (its job group).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import pickle
import re
import secrets
import socket
import subprocess
import sys
import threading
import time as _time
import weakref
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from ddflow.errors import CallSite, ConfigurationError, WorkerError
from ddflow.runtime.workers.processes import START_TIMEOUT

__all__ = ["HostedWorkers", "check_session", "task_slots"]

#: seconds between checks of the stage while the tasks connect
POLL = 0.5
#: seconds the stage has to end after its tasks were told to stop, before it is cancelled
STOP_TIMEOUT = 15.0


def task_slots(sc: Any) -> int:
    """How many tasks the session runs at once: ``local[N]``'s N (``*``: the cores), else
    the default parallelism (the executors' cores)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", sc.master)
    if m is not None:
        n = m.group(1)
        return (os.cpu_count() or 1) if n == "*" else int(n or 1)
    return int(sc.defaultParallelism)


class _Stage:
    """The barrier stage's state, shared with the thread that waits for its job."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.group = f"ddflow-workers-{secrets.token_hex(6)}"
        self.listener: socket.socket | None = None
        self.sc: Any = None


class _Task:
    """A worker's task, as :class:`~ddflow.runtime.workers.processes.RemoteShard` watches a
    process: ``poll()`` is None while the stage runs."""

    def __init__(self, stage: _Stage, index: int, pid: int, host: str) -> None:
        self.stage, self.pid = stage, pid
        self.where = f"Spark barrier task {index - 1} on {host}, process {pid}"

    def poll(self) -> int | None:
        thread = self.stage.thread
        if thread is not None and thread.is_alive():
            return None
        return 1 if self.stage.error is not None else 0

    def wait(self, timeout: float | None = None) -> int:
        thread = self.stage.thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise subprocess.TimeoutExpired("spark barrier stage", timeout or 0.0)
        return 1 if self.stage.error is not None else 0

    def ended(self) -> str | None:
        """How the stage ended, if it failed."""
        if self.stage.error is None:
            return None
        return f"was lost: its Spark stage failed ({_cause(self.stage.error)})"


#: what Spark says of a task that failed, in the text of the job's error
_TASK_FAILURE = re.compile(
    r"(Python worker exited unexpectedly \(crashed\)|Job aborted due to stage failure: [^\n]*)"
)


def _cause(error: BaseException) -> str:
    """Why the stage failed, in one line: what Spark says of the task, else the first line
    of the error."""
    text = str(error)
    found: list[str] = _TASK_FAILURE.findall(text)
    if found:
        crashed = [f for f in found if f.startswith("Python worker")]
        return (crashed or found)[0][:300]
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:300] or type(error).__name__


def _serve_task(
    host: str, port: int, token: str, paths: list[str], _partition: Iterator[Any]
) -> Iterator[int]:
    """A barrier task: connect to the coordinator, then serve it as a worker process does.
    ``paths``: the driver's module search path, whose folders that exist here are searched
    too (the modules of the user's functions, where the executor shares the driver's
    files; elsewhere they come with Spark's ``--py-files``, as for any Spark job)."""
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    # (Polars sizes its thread pool when first imported: to the task's cores, not the
    # executor's, unless the session says otherwise or this Python worker imported it before)
    os.environ.setdefault("POLARS_MAX_THREADS", str(max(1, context.cpus())))

    from ddflow.runtime.workers.child import serve_connection

    sys.path.extend(p for p in paths if p not in sys.path and os.path.isdir(p))

    index = context.partitionId() + 1
    try:
        sock = socket.create_connection((host, port), timeout=START_TIMEOUT)
    except OSError:  # (the dataflow is gone: a retry of its stage has nothing to serve)
        return iter(())
    sock.settimeout(None)
    conn = Connection(sock.detach())
    conn.send_bytes(pickle.dumps((token, index, os.getpid(), socket.gethostname())))
    try:
        serve_connection(conn)
    finally:
        conn.close()
    return iter([index])


def _executor_build(_partition: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
    """On an executor: ``(its Python, ddflow's version, the native core's version and
    source fingerprint, None)``, or the error importing them in place of the versions.
    (Sent by value, not by reference to this module: it runs where ddflow may be missing.)"""
    import sys as _sys
    from importlib.metadata import version as _version

    try:
        from ddflow.runtime.native import build_info  # (ddflow itself, imported first)

        info = build_info()
        yield (_sys.executable, _version("ddflow"), info.version, info.fingerprint, None)
    except Exception as e:  # (any failure to import is what the driver reports)
        yield (_sys.executable, None, None, None, f"{type(e).__name__}: {e}")


# (cloudpickle sends a function of a module it cannot import by value)
_executor_build.__module__ = "__ddflow_executor_probe__"
_executor_build.__qualname__ = "_executor_build"

#: how to give the executors ddflow, in every error about it
SHIPPING = (
    "install the same ddflow on every executor's Python: a wheel (python3 -m pip install "
    "ddflow-*.whl, built with maturin build --release), or a packed virtual environment "
    "passed with spark.archives (e.g. venv-pack -o env.tar.gz; --conf "
    "spark.archives=env.tar.gz#env --conf spark.pyspark.python=./env/bin/python)"
)


def _probe_executors(sc: Any, tasks: int) -> None:
    """Refuse executors whose Python cannot import ddflow or runs another build of it
    (see the module)."""
    from importlib.metadata import version

    from ddflow.runtime.native import build_info

    mine, release = build_info(), version("ddflow")
    python = (
        sc.getConf().get("spark.pyspark.python", None)
        or getattr(sc, "pythonExec", None)
        or "python3 (the default)"
    )
    try:
        seen = set(sc.parallelize(range(tasks), tasks).mapPartitions(_executor_build).collect())
    except Exception as e:
        raise WorkerError(
            f"the Spark executors could not run ddflow's check before its workers' stage "
            f"({_cause(e)}); the executors run {python} (spark.pyspark.python): {SHIPPING}"
        ) from e
    for executable, found, core, fingerprint, error in sorted(seen, key=str):
        if error is not None:
            raise WorkerError(
                f"the Spark executors' Python ({executable}; spark.pyspark.python: {python}) "
                f"cannot import ddflow ({error}): {SHIPPING}"
            )
        if (found, core, fingerprint) != (release, mine.version, mine.fingerprint):
            raise WorkerError(
                f"the Spark executors' Python ({executable}) has ddflow {found} with native "
                f"core {core} (build {fingerprint}), the driver ddflow {release} with "
                f"{mine.version} (build {mine.fingerprint}): {SHIPPING}"
            )


def _run_stage(sc: Any, stage: _Stage, tasks: int, host: str, port: int, token: str) -> None:
    try:
        sc.setJobGroup(stage.group, "ddflow: the workers of a dataflow", interruptOnCancel=True)
        rdd = sc.parallelize(range(tasks), tasks).barrier()
        paths = [p for p in sys.path if p]
        rdd.mapPartitions(functools.partial(_serve_task, host, port, token, paths)).collect()
    except BaseException as e:
        stage.error = e


def check_session(spark: Any, workers: int, site: CallSite | None) -> None:
    """Refuse a session where a barrier stage cannot host ``workers`` - 1 workers (see the
    module), naming ``site``, the user's ``SparkRuntime(...)``."""
    sc = spark.sparkContext
    if sc.getConf().get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        raise ConfigurationError(
            "SparkRuntime(spark, workers=...) runs its workers in a barrier stage, which "
            "Spark refuses under dynamic allocation: set spark.dynamicAllocation.enabled="
            "false for this session",
            site=site,
        )
    slots, tasks = task_slots(sc), workers - 1
    if tasks > slots - 1:
        raise ConfigurationError(
            f"SparkRuntime(spark, workers={workers}) needs {tasks} task slot"
            f"{'s' if tasks != 1 else ''} for its workers (worker 0 is the driver) and one "
            f"more left free for the Spark jobs the dataflow runs meanwhile (reading a "
            f"source, writing a sink); this session ({sc.master}) has {slots}: use "
            f"workers={max(slots, 1)} at most, or a session with more cores",
            site=site,
        )


class HostedWorkers:
    """Workers 1 .. W-1 of one dataflow as the tasks of a Spark barrier stage (the
    interface of :class:`~ddflow.runtime.workers.processes.WorkerProcesses`)."""

    def __init__(self, spark: Any, workers: int, site: CallSite | None = None) -> None:
        self.spark, self.workers = spark, workers
        #: the line of the user's ``SparkRuntime(...)`` (named by a setting refused)
        self.site = site
        self.procs: list[_Task] = []
        self.conns: list[Connection] = []
        self._stage = _Stage()
        self._finalizer = weakref.finalize(self, _stop, self.conns, self._stage)

    @property
    def alive(self) -> bool:
        return self._finalizer.alive

    def check(self) -> None:
        """Refuse what a barrier stage cannot do here (see the module)."""
        check_session(self.spark, self.workers, self.site)

    def spawn(self) -> None:
        """Start the stage and wait until every task has connected."""
        self.check()
        gc.collect()  # (dataflows no longer referenced stop their stages: their slots free)
        sc = self.spark.sparkContext
        stage, tasks = self._stage, self.workers - 1
        _probe_executors(sc, tasks)
        stage.sc = sc
        local = sc.master.startswith("local")
        host = "127.0.0.1" if local else sc.getConf().get("spark.driver.host")
        listener = socket.create_server(("127.0.0.1" if local else "", 0))
        stage.listener = listener
        listener.settimeout(POLL)
        token = secrets.token_hex(16)
        port = listener.getsockname()[1]
        stage.thread = threading.Thread(
            target=_run_stage,
            args=(sc, stage, tasks, host, port, token),
            name="ddflow-barrier-stage",
            daemon=True,
        )
        stage.thread.start()
        found: dict[int, tuple[_Task, Connection]] = {}
        deadline = _time.monotonic() + START_TIMEOUT
        while len(found) < tasks:
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                if stage.error is not None:
                    raise WorkerError(
                        f"the Spark stage of the workers failed before they started: "
                        f"{_cause(stage.error)}"
                    ) from stage.error
                if _time.monotonic() > deadline:
                    raise WorkerError(
                        f"the {tasks} task(s) of the workers' Spark stage did not all start "
                        f"within {START_TIMEOUT:.0f} s ({len(found)} did): other jobs hold the "
                        "session's task slots (another dataflow's workers? close() a dataflow "
                        "when done with it, or use a with block)"
                    ) from None
                continue
            sock.setblocking(True)
            conn = Connection(sock.detach())
            try:
                if not conn.poll(START_TIMEOUT):
                    raise EOFError
                hello = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError, pickle.UnpicklingError):
                conn.close()
                continue
            if not (isinstance(hello, tuple) and len(hello) == 4 and hello[0] == token):
                conn.close()  # (not one of ours)
                continue
            _, index, pid, where = hello
            found[index] = (_Task(stage, index, pid, where), conn)
        for index in sorted(found):
            task, conn = found[index]
            self.procs.append(task)
            self.conns.append(conn)

    def stop(self, failed: bool = False) -> None:
        """Tell every task to stop and wait for the stage to end (cancel it if it does not;
        after a failure, at once: a task may be in the middle of a step)."""
        if failed and self._finalizer.alive and self._stage.sc is not None:
            with contextlib.suppress(Exception):
                self._stage.sc.cancelJobGroup(self._stage.group)
        self._finalizer()


def _stop(conns: list[Connection], stage: _Stage) -> None:
    from ddflow.runtime.workers.wire import encode

    if stage.listener is not None:  # (first: a retry of the stage finds nobody to serve)
        stage.listener.close()
    for conn in conns:
        with contextlib.suppress(OSError):
            conn.send_bytes(encode("stop"))
    thread = stage.thread
    if thread is not None:
        thread.join(STOP_TIMEOUT)
        if thread.is_alive() and stage.sc is not None:
            with contextlib.suppress(Exception):
                stage.sc.cancelJobGroup(stage.group)
            thread.join(STOP_TIMEOUT)
    for conn in conns:
        conn.close()
