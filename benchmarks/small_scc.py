"""One edge of a 100-edge graph changed: strongly connected components kept, against NetworkX.

What a user meets first on a small graph: the fixed cost of a change, not its size. A random
directed graph of 40 nodes and 100 edges (seeded); each change removes one edge or puts it
back, and each flow absorbs it (``advance_to``, ``run``) while NetworkX recomputes the
components of the whole graph (``strongly_connected_components``).

Five configurations run side by side, each with a flow of its own, the changes interleaved
so that all see the same machine load:

* ``python``: the Python progress tracker and the Python reducer;
* ``native_progress``: the core's tracker (the default) and the Python reducer (the default);
* ``native_reduce``: the Python tracker and the reduces in the core
  (``ReduceSettings(native=True)``);
* ``native``: the core's tracker and the reduces in the core;
* ``regions``: the loops run whole in the core (``LocalSettings(regions=True)``), the rest
  as ``native``.

After every change each flow's components must equal NetworkX's (every endpoint of an edge
labelled with the least node of its component), or the run fails (:class:`ResultMismatch`).
"""

from __future__ import annotations

import random
import time
from typing import Any

import networkx as nx
import polars as pl

import ddflow as dd
from benchmarks.common import machine, summary
from ddflow.runtime.local.settings import LocalSettings, ReduceSettings

NODES, EDGES = 40, 100

CONFIGURATIONS = {
    "python": LocalSettings(progress="python"),
    "native_progress": LocalSettings(),
    "native_reduce": LocalSettings(reduce=ReduceSettings(native=True), progress="python"),
    "native": LocalSettings(reduce=ReduceSettings(native=True)),
    "regions": LocalSettings(reduce=ReduceSettings(native=True), regions=True),
}


class ResultMismatch(AssertionError):
    """A flow's components differ from NetworkX's."""


def graph(seed: int = 3) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    edges: set[tuple[int, int]] = set()
    while len(edges) < EDGES:
        a, b = rng.randrange(NODES), rng.randrange(NODES)
        if a != b:
            edges.add((a, b))
    return sorted(edges)


def networkx_components(live: set[tuple[int, int]]) -> dict[int, int]:
    g = nx.DiGraph(list(live))
    return {n: min(c) for c in nx.strongly_connected_components(g) for n in c}


def run(quick: bool = False) -> dict[str, Any]:
    changes = 8 if quick else 60
    edges = graph()
    flows = {}
    for name, settings in CONFIGURATIONS.items():
        flow = dd.Dataflow(runtime=dd.LocalRuntime(settings))
        inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
        out = dd.graph.strongly_connected_components(inp).output()
        inp.insert_frame(pl.DataFrame(edges, schema=["src", "dst"], orient="row"))
        flow.advance_to(1)
        flow.run()
        flows[name] = (flow, inp, out)
    live = set(edges)
    rng = random.Random(11)
    seconds: dict[str, list[float]] = {name: [] for name in [*flows, "networkx"]}
    steps: dict[str, list[int]] = {name: [] for name in flows}
    epoch = 1
    for i in range(changes):
        # remove an edge, or put the last removed one back
        if i % 2 == 0:
            edge = rng.choice(sorted(live))
            live.discard(edge)
            diff = -1
        else:
            live.add(edge)
            diff = 1
        epoch += 1
        order = list(flows)
        order = order[i % len(order) :] + order[: i % len(order)]
        for name in order:
            flow, inp, _ = flows[name]
            before = flow.worker.steps
            t0 = time.perf_counter()
            (inp.insert if diff > 0 else inp.remove)([edge])
            flow.advance_to(epoch)
            flow.run()
            seconds[name].append(time.perf_counter() - t0)
            steps[name].append(flow.worker.steps - before)
        t0 = time.perf_counter()
        want = networkx_components(live)
        seconds["networkx"].append(time.perf_counter() - t0)
        for name, (_, _, out) in flows.items():
            snap = out.snapshot(polars=True)
            got = dict(zip(snap["node"].to_list(), snap["component"].to_list(), strict=True))
            if got != want:
                raise ResultMismatch(f"after change {i}, {name} differs from NetworkX")
    result: dict[str, Any] = {
        "benchmark": "small_scc",
        "machine": machine(),
        "graph": {"nodes": NODES, "edges": EDGES},
        "changes": changes,
        "result_checked": True,
    }
    for name, s in seconds.items():
        result[name] = summary(s)
        if name in steps:
            result[name]["median_steps"] = sorted(steps[name])[len(steps[name]) // 2]
    nx_ms = result["networkx"]["median_ms"]
    base = result["python"]["median_ms"]
    result["ratios"] = {
        f"{name}_vs_python": round(base / result[name]["median_ms"], 2) for name in flows
    } | {f"{name}_vs_networkx": round(nx_ms / result[name]["median_ms"], 3) for name in flows}
    return result
