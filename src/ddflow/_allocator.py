"""Polars' memory allocator, configured before Polars loads.

Polars allocates with jemalloc, whose default keeps the pages a program frees "muzzy" (handed
back lazily with ``MADV_FREE``) for a second: the kernel reclaims them only under memory
pressure, so until then they count in the process's resident memory. A first epoch frees
hundreds of MB of temporaries (sorts, merges, gathers), and the peak resident memory of
connected components on a million edges measured 1,118-1,127 MB by default against 956-958 MB
with ``muzzy_decay_ms:0`` (pages returned with ``MADV_DONTNEED`` when they decay), with the
same first-result time and update latencies.

Returning the dirty pages sooner as well (``dirty_decay_ms:100``) lowered the peak further
(862-902 MB over thirteen runs, against 922-1,068 MB over fifteen), but costs time wherever
memory is freed and allocated again: in two pairs of benchmark runs beside this setting, the
first result took 4.59 / 4.23 s against 3.98 / 3.71 s, and 1,000-change updates 289 / 294 ms
against 236 / 238 ms. So the dirty pages keep Polars' default decay (half a second).

That setting is made here, through ``_RJEM_MALLOC_CONF``, the variable Polars reads its
allocator's options from when it is imported (it appends it to its own defaults, so the options
given win): only when the variable is not set already (set it to choose otherwise), and only
in effect when ddflow is imported before Polars.
"""

from __future__ import annotations

import os

#: jemalloc options ddflow sets for Polars when the environment sets none
POLARS_MALLOC_CONF = "muzzy_decay_ms:0"

os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_MALLOC_CONF)
