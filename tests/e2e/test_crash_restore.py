"""The crash harness: a pipeline (``crash_child.py``) killed with SIGKILL at a random moment and
restarted until it finishes ends with the change logs and the snapshot of a run that was never
interrupted: nothing lost, nothing written twice."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time

import polars as pl
import pytest

from ddflow.io import spark as io

CHILD = os.path.join(os.path.dirname(__file__), "crash_child.py")
EPOCHS = 12


def write_epochs(folder, epochs, seed):
    """``epochs`` files of edges, each inserting a few and removing one of the live ones (a
    diff column)."""
    rng = random.Random(seed)
    os.makedirs(folder)
    live = []
    for e in range(epochs):
        rows = [(rng.randrange(30), rng.randrange(30), 1) for _ in range(12)]
        if live:
            gone = live.pop(rng.randrange(len(live)))
            rows.append((*gone, -1))
        live += [(s, d) for s, d, diff in rows if diff == 1]
        frame = pl.DataFrame(
            rows, schema={"src": pl.Int64, "dst": pl.Int64, "d": pl.Int64}, orient="row"
        )
        frame.write_parquet(os.path.join(folder, f"epoch-{e:03d}.parquet"))


class Child:
    """One run of the pipeline, its stdout read line by line."""

    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [sys.executable, CHILD, *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.split())
        self.lines.put(None)

    def until(self, epochs, timeout=120):
        """Wait for ``epochs`` more complete epochs; the lines seen (None: it ended)."""
        seen = []
        deadline = time.monotonic() + timeout
        while sum(1 for line in seen if line and line[0] == "epoch") < epochs:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            seen.append(line)
            if line is None:
                break
        return seen

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)

    def finish(self):
        _, err = self.proc.communicate(timeout=300)
        assert self.proc.returncode == 0, err
        return self.proc.returncode


def outcome(out):
    logs = {
        name: sorted(io.read_change_log(os.path.join(out, name)).rows())
        for name in ("log", "degree-log")
    }
    snapshot = sorted(pl.read_parquet(os.path.join(out, "snapshot", "*.parquet")).rows())
    return logs, snapshot


@pytest.mark.parametrize(
    ("every", "workers", "seed"), [(1, "1", 1), (3, "1", 2), (1, "2", 3), (3, "2", 4), (1, "2p", 5)]
)
def test_killed_and_restarted_it_ends_as_a_run_never_interrupted(tmp_path, every, workers, seed):
    folder = str(tmp_path / "in")
    write_epochs(folder, EPOCHS, seed)
    reference = str(tmp_path / "reference")
    Child(folder, reference, tmp_path / "ref-ckpt", every, workers).finish()
    out, checkpoints = str(tmp_path / "out"), str(tmp_path / "ckpt")
    rng = random.Random(seed)
    restored = []
    for _ in range(3):  # (three kills, each after a few epochs and a few milliseconds more:
        # while an epoch runs, its sinks or a checkpoint are written)
        child = Child(folder, out, checkpoints, every, workers)
        lines = child.until(every + 1 + rng.randrange(0, 3))
        restored += [line[1] for line in lines if line and line[0] == "restored"]
        time.sleep(rng.uniform(0, 0.03))
        child.kill()
    child = Child(folder, out, checkpoints, every, workers)
    child.finish()
    assert any(epoch != "None" for epoch in restored), restored
    assert outcome(out) == outcome(reference), f"restored from {restored}"
