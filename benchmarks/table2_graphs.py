"""Seeded graph generators and single-edge update streams for the Table 2 benchmark.

Every generator returns a Polars frame of distinct directed edges ``src, dst`` (int64, no
self-loops), plus ``weight`` (int64) when asked for, so that ddflow and NetworkX see exactly
the same graph. Kept apart from :mod:`benchmarks.graphs` so the two can evolve independently.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

#: SNAP's amazon0601 (the Amazon co-purchasing graph of June 1 2003, the paper's [19])
AMAZON_NODES = 403_394
AMAZON_EDGES = 3_387_388


def _distinct_edges(src: np.ndarray, dst: np.ndarray) -> pl.DataFrame:
    """The pairs ``(src[i], dst[i])`` without self-loops and without repeats (first kept)."""
    frame = pl.DataFrame({"src": src.astype(np.int64), "dst": dst.astype(np.int64)})
    return frame.filter(pl.col("src") != pl.col("dst")).unique(maintain_order=True)


def _with_weights(
    edges: pl.DataFrame, weights: tuple[int, int] | None, rng: np.random.Generator
) -> pl.DataFrame:
    """``edges`` with a ``weight`` column uniform in ``weights = (lo, hi)`` (inclusive), or
    unchanged when ``weights`` is None."""
    if weights is None:
        return edges
    lo, hi = weights
    return edges.with_columns(
        weight=pl.Series(rng.integers(lo, hi + 1, edges.height, dtype=np.int64))
    )


def random_digraph(
    nodes: int, edges: int, seed: int, weights: tuple[int, int] | None = None
) -> pl.DataFrame:
    """``edges`` distinct directed edges drawn uniformly among the ``nodes * (nodes - 1)``
    ordered pairs of distinct nodes ``0 .. nodes - 1`` (the G(n, m) model, directed).

    Nodes that no edge touches are not in the frame (the node set of a ddflow graph is the set
    of edge endpoints)."""
    if edges > nodes * (nodes - 1):
        raise ValueError(f"{edges} distinct edges do not fit on {nodes} nodes")
    rng = np.random.default_rng(seed)
    frame = pl.DataFrame(schema={"src": pl.Int64, "dst": pl.Int64})
    while frame.height < edges:
        want = int((edges - frame.height) * 1.05) + 16
        more = _distinct_edges(rng.integers(0, nodes, want), rng.integers(0, nodes, want))
        frame = pl.concat([frame, more]).unique(maintain_order=True)
    return _with_weights(frame.head(edges), weights, rng)


def _capped_pareto(
    rng: np.random.Generator, nodes: int, exponent: float, draws: int, max_expected: float
) -> np.ndarray:
    """Probabilities proportional to Pareto weights of tail ``exponent`` (a power-law degree
    distribution ``P(d) ~ d**-exponent``), clipped so that no node expects more than
    ``max_expected`` of ``draws`` draws (without the cap, a tail this heavy gives one hub that
    most nodes point to)."""
    weight = (1.0 - rng.random(nodes)) ** (-1.0 / (exponent - 1.0))
    for _ in range(50):
        clipped = np.minimum(weight, max_expected / draws * weight.sum())
        if np.array_equal(clipped, weight):
            break
        weight = clipped
    probabilities: np.ndarray = weight / weight.sum()
    return probabilities


def amazon_like(
    nodes: int = AMAZON_NODES,
    edges: int = AMAZON_EDGES,
    seed: int = 3,
    exponent: float = 2.3,
    max_in_degree: int = 2_500,
) -> pl.DataFrame:
    """A connected, heavy-tailed directed graph of the size of amazon0601.

    * a random recursive tree (node ``v`` points to a uniformly chosen earlier node) makes the
      graph one (weakly) connected component, with depth about ``ln(nodes)``;
    * the other ``edges - nodes + 1`` edges start at a uniform node and end at a node chosen
      with probability proportional to a Pareto weight of tail ``exponent``, capped so that no
      node expects more than ``max_in_degree`` in-edges (the Chung-Lu model): in-degrees are
      heavy-tailed as in a co-purchasing graph (a few products are "also bought" with very
      many others) while out-degrees are Poisson around the mean, 8.4;
    * node ids are then permuted at random, so that neither the tree's root nor the hubs get
      the smallest ids (which min-label propagation would favour).
    """
    rng = np.random.default_rng(seed)
    child = np.arange(1, nodes, dtype=np.int64)
    parent = np.floor(rng.random(nodes - 1) * child).astype(np.int64)
    tree = _distinct_edges(child, parent)
    extra = max(edges - tree.height, 1)
    cumulative = np.cumsum(_capped_pareto(rng, nodes, exponent, extra, max_in_degree))
    frame = tree
    while frame.height < edges:
        want = int((edges - frame.height) * 1.05) + 16
        src = rng.integers(0, nodes, want)
        dst = np.minimum(np.searchsorted(cumulative, rng.random(want)), nodes - 1)
        frame = pl.concat([frame, _distinct_edges(src, dst)]).unique(maintain_order=True)
    perm = rng.permutation(nodes).astype(np.int64)
    frame = frame.head(edges)
    return pl.DataFrame(
        {"src": perm[frame["src"].to_numpy()], "dst": perm[frame["dst"].to_numpy()]}
    )


@dataclass(frozen=True)
class EdgeChange:
    """One single-record update: ``edge`` (a one-row frame) removed or inserted."""

    kind: str  # "removal" or "insertion"
    edge: pl.DataFrame


def _has_edge(live: pl.DataFrame, src: int, dst: int) -> bool:
    return live.filter((pl.col("src") == src) & (pl.col("dst") == dst)).height > 0


def _new_edge(
    live: pl.DataFrame, nodes: int, rng: np.random.Generator, weights: tuple[int, int] | None
) -> pl.DataFrame:
    """A one-row frame holding an edge between distinct nodes of ``0 .. nodes - 1`` that is not
    in ``live`` (with a weight drawn from ``weights`` if given)."""
    while True:
        src, dst = (int(x) for x in rng.integers(0, nodes, 2))
        if src != dst and not _has_edge(live, src, dst):
            break
    row = pl.DataFrame({"src": [src], "dst": [dst]}, schema={"src": pl.Int64, "dst": pl.Int64})
    return _with_weights(row, weights, rng)


def single_edge_changes(
    live: pl.DataFrame, nodes: int, count: int, seed: int, weights: tuple[int, int] | None = None
) -> Iterator[tuple[EdgeChange, pl.DataFrame]]:
    """``count`` single-edge changes, alternating removal of a uniformly chosen live edge and
    insertion of a new uniformly chosen edge (so the size stays put), each yielded with the
    live edge set after it. Each change is drawn against the graph as the previous ones left
    it, so a removed edge is always present and an inserted one always new."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        if k % 2 == 0:
            i = int(rng.integers(0, live.height))
            change = EdgeChange("removal", live[i])
            live = pl.concat([live[:i], live[i + 1 :]])
        else:
            change = EdgeChange("insertion", _new_edge(live, nodes, rng, weights))
            live = pl.concat([live, change.edge])
        yield change, live


def most_out_edges(edges: pl.DataFrame) -> int:
    """The node with the most out-edges (the least such id on a tie): an SSSP source that
    reaches a large part of a sparse random graph."""
    counts = edges.group_by("src").len().sort(["len", "src"], descending=[True, False])
    return int(counts["src"][0])
