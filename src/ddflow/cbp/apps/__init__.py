"""The applications of cbp-socc2010, each a function from ddflow collections to ddflow
collections whose snapshot at each complete epoch is the application's result (after the lag
each one documents):

* :func:`url_count` (Figure 3): ``url``, ``count``, the totals so far;
* :func:`crawl_set_difference` (Figure 4): the URLs only one of two crawls saw, per hour;
* :func:`crawl_queue` (§1.1, Figures 1 and 10): the uncrawled URLs whose in-link score passes a
  threshold;
* :func:`clustering_coefficients` (Figure 7): ``node``, ``coefficient`` of the undirected graph;
* :func:`incremental_pagerank` (Figure 9): the approximate incremental PageRank over link
  insertions, with the affected subgraph's size.

The ``*_stage(s)`` functions give the stages themselves (their flows, state and metrics).
"""

from ddflow.cbp.apps.graphs import (
    clustering_coefficients,
    clustering_coefficients_stage,
    incremental_pagerank,
)
from ddflow.cbp.apps.web import (
    crawl_queue,
    crawl_queue_stages,
    crawl_set_difference,
    crawl_set_difference_stage,
    site_of,
    url_count,
    url_count_stage,
)

__all__ = [
    "clustering_coefficients",
    "clustering_coefficients_stage",
    "crawl_queue",
    "crawl_queue_stages",
    "crawl_set_difference",
    "crawl_set_difference_stage",
    "incremental_pagerank",
    "site_of",
    "url_count",
    "url_count_stage",
]
