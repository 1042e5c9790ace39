"""The local runtime's reduce kernels (see :mod:`ddflow.differential.operators.reduce` for the
algorithm), one concept a module:

* :mod:`~ddflow.runtime.local.reduce.times`: ``interesting_times``, the closure of the new
  update times of each key under least upper bounds with the key's other input times, grouped
  by time;
* :mod:`~ddflow.runtime.local.reduce.skips`: ``minmax_unchanged`` and ``distinct_unchanged``,
  the keys whose new updates cannot change a min/max aggregate's or a distinct's output;
* :mod:`~ddflow.runtime.local.reduce.evaluation`: ``reduce_evaluate``, for ready ``(key, time)``
  queries (``time_queries``), the desired output ``f(input accumulated at time)`` minus the
  output accumulated at that time, computed in rounds (a key's ready times ranked in a linear
  extension of the order) so that each round sees the corrections of the earlier ones; and
  ``reduce_prepare``, an input batch shaped for the input arrangement;
* :mod:`~ddflow.runtime.local.reduce.bounded_extremes`: a single min or max evaluated from each
  key's values only up to its current output;
* :mod:`~ddflow.runtime.local.reduce.groups`: the group functions, on accumulated rows
  ``keys, __q*, values, __diff, weights``;
* :mod:`~ddflow.runtime.local.reduce.small_steps`: the size below which the kernels work row
  by row.

Each kernel takes the runtime's :class:`~ddflow.runtime.local.settings.LocalSettings` (the
kernels pass theirs), whose ``reduce`` thresholds choose its path; the paths give the same
result.
"""

from __future__ import annotations

from ddflow.runtime.local.reduce.bounded_extremes import _single_rows as _single_rows
from ddflow.runtime.local.reduce.evaluation import _accumulate_by_key as _accumulate_by_key
from ddflow.runtime.local.reduce.evaluation import reduce_evaluate, reduce_prepare, time_queries
from ddflow.runtime.local.reduce.groups import GROUP_FUNCTIONS
from ddflow.runtime.local.reduce.skips import distinct_unchanged, minmax_unchanged
from ddflow.runtime.local.reduce.times import _distinct_keys as _distinct_keys
from ddflow.runtime.local.reduce.times import _interesting_times_arrays as _interesting_times_arrays
from ddflow.runtime.local.reduce.times import interesting_times

__all__ = [
    "GROUP_FUNCTIONS",
    "distinct_unchanged",
    "interesting_times",
    "minmax_unchanged",
    "reduce_evaluate",
    "reduce_prepare",
    "time_queries",
]
