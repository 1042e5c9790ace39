"""Polars' memory allocator, configured before Polars loads.

Polars allocates with jemalloc. With Polars' defaults, jemalloc keeps the pages a program frees
"dirty" for half a second, then "muzzy" (handed back lazily with ``MADV_FREE``) for a second
more; the kernel reclaims muzzy pages only under memory pressure. Until they are handed back,
both kinds count in the process's resident memory. A first epoch frees hundreds of MB of
temporaries (sorts, merges, gathers), so this retention decides much of its peak.

Connected components on a million edges peaked as follows:

* by Polars' defaults: 1,035-1,075 MB over four runs;
* with ``muzzy_decay_ms:0`` (pages returned with ``MADV_DONTNEED`` when they decay):
  922-1,068 MB over fifteen runs, the spread being how much the half second caught;
* with ``dirty_decay_ms:100`` as well: 862-902 MB over thirteen runs.

The first-result time and update latencies stayed within run-to-run noise (medians of six
paired runs, 1,000-change updates: 288 against 272 ms). Dropping the dirty pages at once
(``dirty_decay_ms:0``) gives 805 MB, but re-faulting the pages makes the first result about
1.4 s slower.

The setting is made here, through ``_RJEM_MALLOC_CONF``, the variable Polars reads its
allocator's options from when it is imported (it appends it to its own defaults, so the options
given win). It applies only when the variable is not set already (set it to choose otherwise),
and takes effect only when ddflow is imported before Polars.
"""

from __future__ import annotations

import os

#: jemalloc options ddflow sets for Polars when the environment sets none
POLARS_MALLOC_CONF = "dirty_decay_ms:100,muzzy_decay_ms:0"

os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_MALLOC_CONF)
