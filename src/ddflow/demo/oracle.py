"""The demo's judge: a window's strongly connected components and top tags, from scratch.

This module recomputes, with NetworkX and Polars alone, what the demo's incremental model
maintains, so that the two can be compared and timed against each other. It shares no code
with the engine.

For a window ``[start, end)`` of a mention stream (columns ``time``, ``src``, ``dst``, ``tag``),
the *graph* has an edge ``src -> dst`` for every mention of the window (a pair mentioned many
times is one edge). Its *components* are its strongly connected components of at least two
nodes. The *top tags* of a component C are defined by counting, over the window's mentions
(every occurrence, duplicates included), the non-null tags of those with ``src`` and ``dst``
both in C: the most frequent first, ties by tag in ascending string order, at most three.
Mentions that enter or leave C, and untagged ones, do not count.

The result is a list of ``{"size": int, "nodes": [int, ...], "top_tags": [str, ...]}``, one per
component, its nodes in ascending order; the largest component first, ties by smallest node.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import networkx as nx
import numpy as np
import polars as pl

__all__ = ["TOP_TAGS", "recompute", "window_edges"]

#: the number of tags reported per component
TOP_TAGS = 3


def window_edges(mentions: pl.DataFrame, start: int, end: int) -> pl.DataFrame:
    """The mentions with ``start <= time < end``, in their order.

    >>> m = pl.DataFrame({"time": [0, 5, 10], "src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> window_edges(m, 5, 10)["src"].to_list()
    [2]
    """
    return mentions.filter((pl.col("time") >= start) & (pl.col("time") < end))


def recompute(edges: pl.DataFrame) -> list[dict[str, Any]]:
    """The strongly connected components of at least two nodes of the graph of ``edges``
    (columns ``src``, ``dst`` and ``tag``; others are ignored), each with its size, sorted
    nodes and top tags, largest first (the module's docstring defines them).

    >>> edges = pl.DataFrame(
    ...     {"src": [1, 2, 2, 3, 4], "dst": [2, 1, 3, 4, 3], "tag": ["a", "b", "x", None, "c"]}
    ... )
    >>> for component in recompute(edges):
    ...     print(component)
    {'size': 2, 'nodes': [1, 2], 'top_tags': ['a', 'b']}
    {'size': 2, 'nodes': [3, 4], 'top_tags': ['c']}
    """
    with _collector_paused():
        return _recompute(edges)


def _recompute(edges: pl.DataFrame) -> list[dict[str, Any]]:
    pairs = edges.select(pl.col("src").cast(pl.Int64), pl.col("dst").cast(pl.Int64)).unique()
    graph = nx.DiGraph()
    graph.add_edges_from(zip(pairs["src"].to_list(), pairs["dst"].to_list(), strict=True))
    components = sorted(
        (sorted(c) for c in nx.strongly_connected_components(graph) if len(c) >= 2),
        key=lambda nodes: (-len(nodes), nodes[0]),
    )
    if not components:
        return []
    sizes = [len(nodes) for nodes in components]
    member = pl.DataFrame(
        {
            "node": np.fromiter((n for nodes in components for n in nodes), np.int64),
            "component": np.repeat(np.arange(len(components), dtype=np.int64), sizes),
        }
    )
    tags = (
        edges.lazy()
        .select(
            pl.col("src").cast(pl.Int64),
            pl.col("dst").cast(pl.Int64),
            pl.col("tag").cast(pl.String),
        )
        .drop_nulls("tag")
        .join(member.lazy().rename({"node": "src"}), on="src")
        .join(member.lazy().rename({"node": "dst", "component": "dst_component"}), on="dst")
        .filter(pl.col("component") == pl.col("dst_component"))
        .group_by("component", "tag")
        .agg(pl.len().alias("uses"))
        .sort(["component", "uses", "tag"], descending=[False, True, False])
        .group_by("component", maintain_order=True)
        .agg(pl.col("tag").head(TOP_TAGS))
        .collect()
    )
    top = dict(zip(tags["component"].to_list(), tags["tag"].to_list(), strict=True))
    return [
        {"size": size, "nodes": nodes, "top_tags": top.get(i, [])}
        for i, (size, nodes) in enumerate(zip(sizes, components, strict=True))
    ]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (and back on after, if it was on).

    A graph of a few hundred thousand edges is a few hundred thousand new dicts, and its
    components as many list items: every few hundred allocations the collector would scan the
    young objects, all of them alive, which costs a third of the time and frees nothing.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
