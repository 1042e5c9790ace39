"""The crash harness: a pipeline killed with SIGKILL and restarted until it finishes ends as a
run never interrupted.

Each trial writes a folder of Parquet files (12 epochs of edge insertions and removals), runs
the pipeline of :mod:`benchmarks.crash_child` once whole (the reference), then runs it again,
killing it three times, each time once a few more epochs have completed and a random few
milliseconds later (while it runs an epoch, writes its sinks or writes a checkpoint), and
restarts it until it finishes. Its change logs and snapshot must equal the reference's:
nothing lost, nothing written twice. A ``subscribe`` callback, which is at-least-once across a
crash, must have been given every epoch, and after a restore only epochs after the checkpoint;
``redelivered_epochs`` counts those it was given twice. ``kills_while`` counts where the kills
landed, from what they left behind (a checkpoint's or a sink's temporary files). Trials
alternate between ``checkpoint_every`` 1 and 3 and between the configurations of
``CRASH_WORKERS`` (default ``1,2,2p,1n``: one worker, two in one process, two processes, one
worker with the reduces in the native core); ``CRASH_TRIALS`` (default 100) and
``CRASH_SPARK_TRIALS`` (default 3: two workers hosted by Spark, a session started at every
restart) set how many.
"""

from __future__ import annotations

import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import polars as pl

from benchmarks.common import machine

EPOCHS = 12
KILLS = 3


def write_epochs(folder: str, epochs: int, seed: int) -> None:
    """``epochs`` files of edges, each inserting a few and removing one of the live ones (a
    diff column ``d``)."""
    rng = random.Random(seed)
    os.makedirs(folder)
    live: list[tuple[int, int]] = []
    for e in range(epochs):
        rows = [(rng.randrange(30), rng.randrange(30), 1) for _ in range(12)]
        if live:
            rows.append((*live.pop(rng.randrange(len(live))), -1))
        live += [(s, d) for s, d, diff in rows if diff == 1]
        frame = pl.DataFrame(
            rows, schema={"src": pl.Int64, "dst": pl.Int64, "d": pl.Int64}, orient="row"
        )
        frame.write_parquet(os.path.join(folder, f"epoch-{e:03d}.parquet"))


class Child:
    """One run of the pipeline (``python -m benchmarks.crash_child``), its stdout read line by
    line."""

    def __init__(self, *args: Any) -> None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *sys.path])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.crash_child", *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[list[str] | None] = queue.Queue()
        self.errors: list[str] = []
        # (each pipe has one reader, a thread of its own, to the end: the process is waited
        # for, never communicated with, which would read the same pipes)
        self.readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_errors, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.split())
        self.lines.put(None)

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self.errors.extend(self.proc.stderr)

    def _reap(self, timeout: float) -> None:
        """Wait for the process, then for its pipes' readers (which end at the pipes' end)."""
        self.proc.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout=60)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def until(self, epochs: int, timeout: float = 300.0) -> list[list[str] | None]:
        """Wait for ``epochs`` more complete epochs (or the end: a None line); the lines."""
        seen: list[list[str] | None] = []
        deadline = time.monotonic() + timeout
        while sum(1 for line in seen if line and line[0] == "epoch") < epochs:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            seen.append(line)
            if line is None:
                break
        return seen

    def rest(self) -> list[list[str]]:
        """The lines not read yet, once the process has ended (its reader puts None last)."""
        lines: list[list[str]] = []
        while (line := self.lines.get(timeout=60)) is not None:
            lines.append(line)
        return lines

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self._reap(60)

    def finish(self, timeout: float = 600.0) -> None:
        try:
            self._reap(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        if self.proc.returncode != 0:
            raise RuntimeError("the pipeline failed:\n" + "".join(self.errors))


def outcome(out: str) -> tuple[dict[str, list[Any]], list[Any]]:
    """The pipeline's change logs and snapshot, sorted."""
    from ddflow.io import spark as io

    logs = {
        name: sorted(io.read_change_log(os.path.join(out, name), polars=True).rows())
        for name in ("log", "degree-log")
    }
    snapshot = sorted(pl.read_parquet(os.path.join(out, "snapshot", "*.parquet")).rows())
    return logs, snapshot


def _temporary(out: str, checkpoints: str) -> dict[str, set[str]]:
    """The temporary files of checkpoints and sinks now present (what a run that was killed
    while writing leaves behind)."""
    found: dict[str, set[str]] = {"checkpoint": set(), "sink": set()}
    for kind, d in [("checkpoint", checkpoints)] + [
        ("sink", os.path.join(out, n)) for n in ("log", "degree-log")
    ]:
        if os.path.isdir(d):
            found[kind] |= {os.path.join(d, n) for n in os.listdir(d) if n.startswith("_tmp-")}
    return found


def _landed(before: dict[str, set[str]], after: dict[str, set[str]]) -> str:
    """Where a kill landed: writing a checkpoint or a sink (it left new temporary files), or
    elsewhere in an epoch's run."""
    for kind in ("checkpoint", "sink"):
        if after[kind] - before[kind]:
            return kind
    return "epoch"


def _subscribed_at_least_once(whole: list[list[str]], runs: list[list[list[str]]]) -> int:
    """The ``subscribe`` contract across crashes: every epoch the uninterrupted run's
    callback got, the restarted runs' got at least once, and a run restored from a
    checkpoint of epoch ``r`` is called with epochs after ``r`` only (what was delivered
    after the checkpoint and before the crash is delivered again). The epochs delivered
    twice."""

    def said(lines: list[list[str]], what: str) -> list[str]:
        # (a run killed while printing may leave half a line)
        return [line[1] for line in lines if len(line) == 2 and line[0] == what]

    want = {int(e) for e in said(whole, "epoch")}
    got: list[int] = []
    for lines in runs:
        starts = said(lines, "restored")
        epochs = [int(e) for e in said(lines, "epoch") if e.isdigit()]
        if starts and starts[0] != "None":
            assert all(e > int(starts[0]) for e in epochs), (starts, epochs)
        got += epochs
    assert set(got) == want, f"subscribe delivered {sorted(set(got))}, not {sorted(want)}"
    return len(got) - len(set(got))


def trial(root: str, every: int, workers: str, seed: int) -> dict[str, Any]:
    """One trial in ``root`` (see the module): where its kills landed and what it restored;
    raises AssertionError if it ends otherwise than the reference."""
    folder = os.path.join(root, "in")
    write_epochs(folder, EPOCHS, seed)
    reference = os.path.join(root, "reference")
    whole = Child(folder, reference, os.path.join(root, "ref-ckpt"), every, workers)
    whole.finish()
    out, checkpoints = os.path.join(root, "out"), os.path.join(root, "ckpt")
    rng = random.Random(seed)
    restored: list[str] = []
    landed: list[str] = []
    runs: list[list[list[str]]] = []  # (each run's lines)
    for _ in range(KILLS):
        child = Child(folder, out, checkpoints, every, workers)
        lines = child.until(every + 1 + rng.randrange(0, 3))
        restored += [line[1] for line in lines if line and line[0] == "restored"]
        before = _temporary(out, checkpoints)
        time.sleep(rng.uniform(0, 0.03))
        child.kill()
        landed.append(_landed(before, _temporary(out, checkpoints)))
        runs.append([line for line in lines if line] + child.rest())
    child = Child(folder, out, checkpoints, every, workers)
    child.finish()
    runs.append(child.rest())
    assert any(epoch != "None" for epoch in restored), f"never restored: {restored}"
    assert outcome(out) == outcome(reference), f"differs after restores from {restored}"
    redelivered = _subscribed_at_least_once(whole.rest(), runs)
    return {"restored": restored, "landed": landed, "redelivered": redelivered}


def run(quick: bool = False) -> dict[str, Any]:
    trials = 2 if quick else int(os.environ.get("CRASH_TRIALS", "100"))
    spark_trials = 0 if quick else int(os.environ.get("CRASH_SPARK_TRIALS", "3"))
    configs = os.environ.get("CRASH_WORKERS", "1,2,2p,1n").split(",")
    plan = [(("1", "3")[i % 2], configs[i % len(configs)]) for i in range(trials)]
    plan += [(("1", "3")[i % 2], "spark") for i in range(spark_trials)]
    results: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    started = time.perf_counter()
    for i, (every, workers) in enumerate(plan):
        root = tempfile.mkdtemp(prefix="ddflow-crash-")
        key = f"workers={workers}"
        r = results.setdefault(key, {"trials": 0, "passed": 0, "kills_while": {}})
        r["trials"] += 1
        try:
            got = trial(root, int(every), workers, seed=i)
            r["passed"] += 1
            for where in got["landed"]:
                r["kills_while"][where] = r["kills_while"].get(where, 0) + 1
            r["redelivered_epochs"] = r.get("redelivered_epochs", 0) + got["redelivered"]
        except AssertionError as e:
            failures.append(f"trial {i} ({key}, every {every}): {e}")
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"crash: trial {i + 1}/{len(plan)} done", file=sys.stderr, flush=True)
    if failures:  # (a run whose results disagree fails)
        raise AssertionError("\n".join(failures))
    return {
        "benchmark": "crash",
        "machine": machine(),
        "epochs_per_trial": EPOCHS,
        "kills_per_trial": KILLS,
        "configurations": results,
        "trials": len(plan),
        "passed": sum(r["passed"] for r in results.values()),
        "seconds": round(time.perf_counter() - started, 1),
    }
