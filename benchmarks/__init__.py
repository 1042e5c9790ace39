"""ddflow benchmarks: ``python -m benchmarks run NAME``; each prints one JSON document."""
