"""The papers' Figure 1: records in difference per iteration of connected components.

Four series on one graph (an R-MAT graph by default), as in differential-dataflow-cidr2013
Figure 1:

* stateless: every iteration recomputes every label (the number of labels, each iteration);
* incremental: the differences between successive iterations of a fresh computation (ddflow's
  loop differences in the first epoch);
* prioritized: the same with labels introduced in order of ``floor(log2(label + 1))``, per round
  (a round is a pair priority, iteration);
* differential: the differences needed to update the result after one more change to the
  input (one edge removed and one added), per iteration.

Counts come from ``Dataflow.loop_stats()``. With ``--plot`` (and matplotlib installed) the
series are also drawn, log scale, to ``benchmarks/results/figure1.png``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import ddflow as dd
from benchmarks.common import machine
from benchmarks.graphs import random_changes, rmat


def _run(edges: Any, prioritized: bool, change: bool, seed: int) -> tuple[dd.Dataflow, Any]:
    flow = dd.Dataflow()
    inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(inp, prioritized=prioritized).output()
    inp.insert_frame(edges)
    flow.advance_to(1)
    flow.run()
    if change:
        n_nodes = int(max(edges["src"].max(), edges["dst"].max())) + 1
        gone, new = random_changes(edges, n_nodes, 2, np.random.default_rng(seed))
        inp.remove_frame(gone)
        inp.insert_frame(new)
        flow.advance_to(2)
        flow.run()
    return flow, out


def series(n_edges: int, seed: int = 1) -> dict[str, Any]:
    edges = rmat(n_edges, seed)
    flow, out = _run(edges, prioritized=False, change=True, seed=seed)
    stats = flow.loop_stats()
    labels = len(out.snapshot(epoch=0))
    first = stats[stats["epoch"] == 0].sort_values("iteration")
    second = stats[stats["epoch"] == 1]
    second = second.groupby("iteration")["differences"].sum()
    iterations = int(first["iteration"].max()) + 1
    pflow, _ = _run(edges, prioritized=True, change=False, seed=seed)
    pstats = pflow.loop_stats()
    pstats = pstats[pstats["epoch"] == 0].copy()
    pstats["round"] = pstats["time"].map(lambda t: (t[1], t[2]))
    rounds = pstats.sort_values("round")["differences"].tolist()
    return {
        "edges": n_edges,
        "labels": labels,
        "stateless": [labels] * iterations,
        "incremental": first["differences"].tolist(),
        "prioritized": rounds,
        "differential_one_change": [int(second.get(i, 0)) for i in range(iterations)],
        "totals": {
            "stateless": labels * iterations,
            "incremental": int(first["differences"].sum()),
            "prioritized": int(sum(rounds)),
            "differential_one_change": int(second.sum()),
        },
    }


def plot(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name in ("stateless", "incremental", "prioritized", "differential_one_change"):
        ys = [max(y, 0.8) for y in result[name]]
        ax.plot(range(len(ys)), ys, marker="o", markersize=3, label=name.replace("_", " "))
    ax.set_yscale("log")
    ax.set_xlabel("iteration (rounds for prioritized)")
    ax.set_ylabel("records in difference")
    ax.set_title(f"Connected components, R-MAT {result['edges']:,} edges")
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=120)


def run(quick: bool = False, make_plot: bool = True) -> dict[str, Any]:
    result = series(20_000 if quick else 200_000)
    out = {"benchmark": "figure1", "machine": machine(), **result}
    if make_plot:
        try:
            path = os.path.join(os.path.dirname(__file__), "results", "figure1.png")
            plot(result, path)
            out["plot"] = path
        except ImportError:
            out["plot"] = "matplotlib not installed: pip install 'ddflow[bench]'"
    return out
