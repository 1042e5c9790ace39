"""Polars' memory allocator, configured before Polars loads.

Polars allocates with jemalloc, whose default keeps the pages a program frees "muzzy" (handed
back lazily with ``MADV_FREE``) for a second: the kernel reclaims them only under memory
pressure, so until then they count in the process's resident memory. A first epoch frees
hundreds of MB of temporaries (sorts, merges, gathers), and the peak resident memory of
connected components on a million edges measured 1,118-1,127 MB by default against 956-958 MB
with ``muzzy_decay_ms:0`` (pages returned with ``MADV_DONTNEED`` when they decay), with the
same first-result time and update latencies.

Dirty pages (freed, kept for reuse) are handed back sooner too: after 100 ms instead of Polars'
half a second (``dirty_decay_ms:100``), by jemalloc's background thread
(``background_thread:true``), off the threads that allocate. A first epoch's steps each free
large temporaries that the next step does not reuse at once, and the peak of a load is the
step that happens to come while most of them are still held. Five loads of connected
components on a million edges with each setting, alternating (each then timing updates of 1,
10, 100 and 1,000 changes; medians of the loads' medians):

* ``muzzy_decay_ms:0`` alone (Polars' half second for dirty pages): peak 866-945 MiB, first
  result 3.64 s, updates 2.74 / 24.1 / 73.3 / 235 ms;
* with ``dirty_decay_ms:100`` and the background thread (this module's setting): peak 824-846
  MiB, first result 3.33 s, updates 2.47 / 22.2 / 71.2 / 245 ms;
* with ``dirty_decay_ms:100`` without the thread: peak 822-831 MiB, first result 3.56 s,
  updates 2.71 / 23.2 / 79.0 / 254 ms (an earlier two pairs of runs of this one had found the
  first result and the 1,000-change updates a fifth slower);
* with ``dirty_decay_ms:200`` and the thread: peak 832-853 MiB, first result 3.50 s, updates
  2.59 / 23.8 / 75.2 / 254 ms.

What it costs: a workload that frees and allocates again tens of MB per epoch, tens of
milliseconds apart, faults its pages in again. The ``throughput`` benchmark (a join and a
group-by fed 1M updates) in batches of 100,000 absorbed a median of 2.52M updates/s over six
runs with this setting against 2.87M/s over five with ``muzzy_decay_ms:0`` alone (its Polars
baseline slowed as much: 0.35x of it either way), in batches of 10,000 642k/s against 695k/s,
in batches of 1,000 the same (108k/s against 104k/s); its peak fell from 280-296 MB to
267-286 MB.

These settings are made here, through ``_RJEM_MALLOC_CONF``, the variable Polars reads its
allocator's options from when it is imported (it appends it to its own defaults, so the options
given win): only when the variable is not set already (set it to choose otherwise), and only
in effect when ddflow is imported before Polars.
"""

from __future__ import annotations

import os

#: jemalloc options ddflow sets for Polars when the environment sets none
POLARS_MALLOC_CONF = "muzzy_decay_ms:0,dirty_decay_ms:100,background_thread:true"

os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_MALLOC_CONF)
