"""Graph algorithms over an ``edges`` collection, kept exact as the edges change
(see :mod:`ddflow.graph.algorithms`)."""

from ddflow.graph.algorithms import (
    bfs,
    connected_components,
    pagerank,
    reachability_labels,
    shortest_paths,
    strongly_connected_components,
)

__all__ = [
    "bfs",
    "connected_components",
    "pagerank",
    "reachability_labels",
    "shortest_paths",
    "strongly_connected_components",
]
