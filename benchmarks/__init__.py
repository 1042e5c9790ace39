"""ddflow benchmarks: ``python -m benchmarks run NAME``; each prints one JSON document."""

import ddflow  # noqa: F401  (before any benchmark imports Polars: see ddflow.runtime.local.allocator)
