"""Per-step cost of a single change: operator steps, time per step, and where a step's time
goes: the reduces' ``schedule``, the other operators', and the scheduler around them.

The change is `realdata`'s: one road of the shortest-path tree of France's highways (around
Paris with ``--quick``) removed, then put back, one epoch each, against NetworkX's Dijkstra
recomputing. Every operator step is timed (the worker's ``profile``); a change's time splits
into

* ``reduce``: the reduces' steps (their reads of the arrangements, the interesting times, the
  skips, the evaluation, the output's insertion), also given per reduce step
  (``us_per_reduce_step``, over ``reduce_steps``);
* ``other_operators``: the other operators' steps (the join, the arrangements, the loop's
  variable and feedback, the input and output);
* ``scheduler``: the rest (progress tracking, activations, the epoch's advance).

With ``STEPS_AGAINST=<git revision>`` the same changes also run, in a process of their own, on
that revision's ``src`` (taken with ``git archive`` from this repository), side by side in the
same JSON: the code before a change, say. ``native_reducer`` is the same changes on this
``src`` with the reduces in the native core (``ReduceSettings(native=True)``), in a process of
its own too (``STEPS_NATIVE_REDUCER=0`` leaves it out).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

import ddflow as dd
from benchmarks import realdata
from benchmarks.common import machine, peak_rss_mb

ROOT = Path(__file__).resolve().parent.parent


def measure(quick: bool, changes: int, native_reducer: bool = False) -> dict[str, Any]:
    """ddflow's shortest paths, then ``changes`` roads removed and put back, each timed
    (``native_reducer``: the reduces in the native core)."""
    world = realdata.load_world_highways()
    net = world.within(realdata.QUICK_BOX if quick else realdata.FULL_BOX)
    source = net.nearest(*realdata.PARIS)
    if native_reducer:
        from ddflow.runtime.local.settings import LocalSettings, ReduceSettings

        settings = LocalSettings(reduce=ReduceSettings(native=True))
        flow = dd.Dataflow(runtime=dd.LocalRuntime(settings))
    else:
        flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "weight": "int64"})
    sources = flow.input("sources", schema={"node": "int64"})
    out = dd.graph.shortest_paths(edges, sources).output()
    t0 = time.perf_counter()
    edges.insert_frame(realdata.both_directions(net.roads))
    sources.insert([source])
    realdata.advance(flow)
    first_s = time.perf_counter() - t0
    graph = nx.Graph()
    graph.add_weighted_edges_from(net.roads.iter_rows())
    dist = realdata.dijkstra(graph, source)
    tree = realdata.tree_roads(net.roads, dist)
    picks = np.random.default_rng(1).choice(
        tree.height, size=min(changes, tree.height), replace=False
    )
    roads = list(tree[np.sort(picks)].iter_rows())
    worker = flow.worker
    worker.profile = True
    rows = []
    for remove in (True, False):
        for a, b, w in roads:
            worker.step_seconds.clear()
            # (a revision before the per-operator step counts has none)
            counts: dict[int, int] | None = getattr(worker, "step_counts", None)
            if counts is not None:
                counts.clear()
            steps = worker.steps
            t0 = time.perf_counter()
            (edges.remove if remove else edges.insert)([(a, b, w), (b, a, w)])
            realdata.advance(flow)
            total = time.perf_counter() - t0
            if remove:
                graph.remove_edge(a, b)
            else:
                graph.add_edge(a, b, weight=w)
            t1 = time.perf_counter()
            dist = realdata.dijkstra(graph, source)
            nx_s = time.perf_counter() - t1
            assert realdata.as_dict(out, "node", "distance") == dist, "ddflow and Dijkstra disagree"
            n = worker.steps - steps
            operators = sum(worker.step_seconds.values())
            reduces = [
                i for i in worker.step_seconds if type(worker.operators[i]).__name__ == "ReduceOp"
            ]
            reduce = sum(worker.step_seconds[i] for i in reduces)
            reduce_steps = None if counts is None else sum(counts[i] for i in reduces)
            rows.append(
                {
                    "removed": remove,
                    "steps": n,
                    "ms": total * 1e3,
                    "dijkstra_ms": nx_s * 1e3,
                    "us_per_step": total / n * 1e6,
                    "reduce_us_per_step": reduce / n * 1e6,
                    "reduce_steps": reduce_steps,
                    "us_per_reduce_step": (reduce / reduce_steps * 1e6 if reduce_steps else None),
                    "other_operators_us_per_step": (operators - reduce) / n * 1e6,
                    "scheduler_us_per_step": (total - operators) / n * 1e6,
                }
            )

    def med(k: str) -> float | None:
        values = [r[k] for r in rows]
        if any(v is None for v in values):
            return None
        return round(statistics.median(values), 2)

    return {
        "roads": net.roads.height,
        "first_result_s": round(first_s, 3),
        "changes": len(rows),
        "median": {
            k: med(k)
            for k in (
                "steps",
                "ms",
                "dijkstra_ms",
                "us_per_step",
                "reduce_us_per_step",
                "reduce_steps",
                "us_per_reduce_step",
                "other_operators_us_per_step",
                "scheduler_us_per_step",
            )
        },
        "speedup_vs_dijkstra_median": round(
            statistics.median(r["dijkstra_ms"] / r["ms"] for r in rows), 3
        ),
        "reduce_share": round(
            sum(r["reduce_us_per_step"] * r["steps"] for r in rows)
            / sum(r["us_per_step"] * r["steps"] for r in rows),
            3,
        ),
        "per_change": [
            {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()} for r in rows
        ],
        "peak_rss_mb": peak_rss_mb(),
    }


def _apart(src: str, call: str, what: str) -> dict[str, Any]:
    """``steps.<call>`` run in a process of its own on the ``src`` folder ``src``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(ROOT)])}
    code = f"import json, sys; from benchmarks import steps; print(json.dumps(steps.{call}))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=3600
    )
    if done.returncode:
        raise RuntimeError(f"the run {what} failed:\n{done.stderr[-2000:]}")
    import json

    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _against(revision: str, quick: bool, changes: int) -> dict[str, Any]:
    """The same measurement on ``revision``'s ``src``, in a process of its own."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src"],
        check=True,
        capture_output=True,
        timeout=120,
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        return _apart(f"{tmp}/src", f"measure({quick!r}, {changes})", f"on {revision}")


def run(quick: bool = False) -> dict[str, Any]:
    changes = int(os.environ.get("STEPS_CHANGES", "3" if quick else "12"))
    result: dict[str, Any] = {
        "benchmark": "steps",
        "machine": machine(),
        "region": "around Paris" if quick else "northern France",
        "this": measure(quick, changes),
    }
    if os.environ.get("STEPS_NATIVE_REDUCER", "1") != "0":
        result["native_reducer"] = _apart(
            str(ROOT / "src"), f"measure({quick!r}, {changes}, native_reducer=True)", "native"
        )
        result["speedup_per_change_of_native_reducer"] = round(
            result["this"]["median"]["ms"] / result["native_reducer"]["median"]["ms"], 2
        )
    revision = os.environ.get("STEPS_AGAINST")
    if revision:
        result["against"] = {"revision": revision, **_against(revision, quick, changes)}
        result["speedup_per_change_vs_against"] = round(
            result["against"]["median"]["ms"] / result["this"]["median"]["ms"], 2
        )
    return result
