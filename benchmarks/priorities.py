"""Prioritized against plain label propagation: which loop the graph algorithms should run.

``connected_components`` and ``reachability_labels`` run min-label propagation, either as a
plain ``iterate`` or as a ``prioritized_iterate`` that introduces the labels in order of
``floor(log2(label + 1))`` (naiad-tech-report Figure 10). Both give the same labels (checked,
at the end of every run, against each other and against NetworkX); they differ in the work a
change does. Each is measured on two graphs of the same number of edges: an R-MAT graph
(power-law, about 16 edges per node: short paths) and a sparse uniform one (as many nodes as
edges, average degree 2: long chains, many rounds). Per algorithm, graph and loop: the first
result, then single-edge updates (a random edge removed, then a random one inserted,
alternately) and batches of 100 changes, each one epoch; medians, and the ratio of the plain
loop's to the prioritized loop's (above 1: prioritized is faster).
"""

from __future__ import annotations

import time
from typing import Any

import networkx as nx
import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.cc import _remove_once, apply_changes, load_edges
from benchmarks.common import dataflow, machine, native_reducer, summary
from benchmarks.graphs import random_changes, rmat

ALGORITHMS = ("connected_components", "reachability_labels")


def sparse(edges: int, seed: int) -> pl.DataFrame:
    """A uniform random graph of ``edges`` edges on as many nodes (average degree 2)."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "src": rng.integers(0, edges, edges, dtype=np.int64),
            "dst": rng.integers(0, edges, edges, dtype=np.int64),
        }
    )


def expected(algorithm: str, edges: pl.DataFrame) -> dict[int, int]:
    """NetworkX's labels: the least node of each component, or the least node reaching each
    node (itself included)."""
    if algorithm == "connected_components":
        g = nx.Graph()
        g.add_edges_from(edges.iter_rows())
        return {v: min(c) for c in nx.connected_components(g) for v in c}
    d = nx.DiGraph()
    d.add_edges_from(edges.iter_rows())
    labels: dict[int, int] = {}
    # (from each node in increasing order, a search through the nodes not labelled yet: the
    # first to reach a node is its least ancestor, and a labelled node's descendants are all
    # labelled already, by a smaller node)
    for u in sorted(d.nodes):
        if u in labels:
            continue
        labels[u] = u
        frontier = [u]
        while frontier:
            v = frontier.pop()
            for w in d.successors(v):
                if w not in labels:
                    labels[w] = u
                    frontier.append(w)
    return labels


def _labels(out: dd.Output) -> dict[int, int]:
    snap = out.snapshot_polars()
    return dict(zip(snap["node"].to_list(), snap["label"].to_list(), strict=True))


def measure(
    algorithm: str, graph: pl.DataFrame, prioritized: bool, singles: int, batches: int, seed: int
) -> tuple[dict[str, Any], dict[int, int], pl.DataFrame]:
    """One algorithm, graph and loop: its timings, final labels and final edges."""
    flow = dataflow()
    inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = getattr(dd.graph, algorithm)(inp, prioritized=prioritized).output()
    first = load_edges(flow, inp, graph)
    n_nodes = int(max(graph["src"].max(), graph["dst"].max())) + 1  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    live = graph
    single: list[float] = []
    for i in range(singles):
        if i % 2 == 0:  # (a random live edge removed)
            gone = live[int(rng.integers(0, live.height))]
            new = live.clear()
        else:
            gone, new = live.clear(), random_changes(live, n_nodes, 1, rng)[1]
        single.append(apply_changes(flow, inp, gone, new))
        live = _apply(live, gone, new)
    hundred: list[float] = []
    for _ in range(batches):
        gone, new = random_changes(live, n_nodes, 100, rng)
        hundred.append(apply_changes(flow, inp, gone, new))
        live = _apply(live, gone, new)
    timings = {
        "first_result_s": round(first, 3),
        "single_edge": summary(single),
        "batch_of_100": summary(hundred),
    }
    flow.close()
    return timings, _labels(out), live


def _apply(live: pl.DataFrame, gone: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    return pl.concat([_remove_once(live, gone), new])


def run(quick: bool = False) -> dict[str, Any]:
    edges = 20_000 if quick else 200_000
    singles, batches = (6, 2) if quick else (30, 7)
    graphs = {"rmat": rmat(edges, seed=3), "sparse": sparse(edges, seed=4)}
    results: dict[str, Any] = {}
    started = time.perf_counter()
    for algorithm in ALGORITHMS:
        for name, graph in graphs.items():
            row: dict[str, Any] = {}
            finals = []
            for prioritized in (False, True):
                timings, labels, live = measure(algorithm, graph, prioritized, singles, batches, 7)
                row["prioritized" if prioritized else "plain"] = timings
                finals.append((labels, live))
            (plain, live), (prior, live2) = finals
            assert live.sort(["src", "dst"]).equals(live2.sort(["src", "dst"]))
            assert plain == prior == expected(algorithm, live), f"{algorithm} on {name} differs"
            p, q = row["plain"], row["prioritized"]
            row["plain_over_prioritized"] = {
                "first_result": round(p["first_result_s"] / q["first_result_s"], 2),
                "single_edge": round(
                    p["single_edge"]["median_ms"] / q["single_edge"]["median_ms"], 2
                ),
                "batch_of_100": round(
                    p["batch_of_100"]["median_ms"] / q["batch_of_100"]["median_ms"], 2
                ),
            }
            results.setdefault(algorithm, {})[name] = row
    return {
        "benchmark": "priorities",
        "machine": machine(),
        "reducer": "native" if native_reducer() else "python",
        "edges": edges,
        "single_edge_updates": singles,
        "batches_of_100": batches,
        "results": results,
        "seconds": round(time.perf_counter() - started, 1),
    }
