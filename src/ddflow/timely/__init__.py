"""Timely dataflow: the layer every other one is built on (naiad-timely-dataflow §2).

* :mod:`~ddflow.timely.lattice`: times (tuples of integers under the product order, or with a
  lexicographic ``(priority, iteration)`` pair), their ``join``/``meet`` and ``advance_by``;
* :mod:`~ddflow.timely.frontier`: antichains of times and when a time is complete at one;
* :mod:`~ddflow.timely.progress`: pointstamps, path summaries and the frontier at every location;
* :mod:`~ddflow.timely.operator`: the operator base and the user-facing :class:`Vertex`;
* :mod:`~ddflow.timely.scheduler`: the worker that runs operators and tracks their progress.

This layer knows nothing of collections, batches or runtimes.
"""
