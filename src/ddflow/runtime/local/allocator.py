"""Polars' memory allocator, configured before Polars loads.

Polars allocates with jemalloc, whose defaults keep the pages a program frees resident for a
while: pages freed for reuse ("dirty") for a fraction of a second, then pages handed back
lazily with ``MADV_FREE`` ("muzzy"), which the kernel reclaims only under memory pressure, so
until then they count in the process's resident memory. A first epoch frees large temporaries
at every step (sorts, merges, gathers) that the next step does not reuse at once, and the peak
of a load is the step that happens to come while most of them are still held.

So this module sets, for Polars:

* ``muzzy_decay_ms:0``: pages that decay are handed back with ``MADV_DONTNEED`` at once, not
  lazily;
* ``dirty_decay_ms:100``: pages freed for reuse decay sooner than by Polars' default;
* ``background_thread:true``: jemalloc's own thread hands them back, off the threads that
  allocate.

Together they lower the peak memory of a load, with the same first-result time and update
latencies. What it costs: a workload that frees and allocates again tens of MB per epoch, tens
of milliseconds apart (large epochs of a join and group-by), faults its pages in again and
absorbs somewhat fewer updates per second (``docs/performance.md``, "Memory", compares the
settings tried).

The settings are made here, through ``_RJEM_MALLOC_CONF``, the variable Polars reads its
allocator's options from when it is imported (it appends it to its own defaults, so the options
given win): only when the variable is not set already (set it to choose otherwise), and only
in effect when ddflow is imported before Polars.

>>> POLARS_MALLOC_CONF
'muzzy_decay_ms:0,dirty_decay_ms:100,background_thread:true'
>>> "_RJEM_MALLOC_CONF" in os.environ  # (set here, unless the environment set it)
True
"""

from __future__ import annotations

import os

#: jemalloc options ddflow sets for Polars when the environment sets none
POLARS_MALLOC_CONF = "muzzy_decay_ms:0,dirty_decay_ms:100,background_thread:true"

os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_MALLOC_CONF)
