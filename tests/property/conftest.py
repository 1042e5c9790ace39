"""Hypothesis profiles of the property tests, chosen by ``DDFLOW_HYPOTHESIS_PROFILE``.

* ``ci`` (the default): the example counts each test sets (sized to run in a few minutes);
* ``long``: ten times the examples and longer streams (``tests/property/test_random_plans.py``
  reads :data:`PROFILE` for its sizes), for a run of an hour or so before a release.

A profile given to pytest (``--hypothesis-profile``) is used instead. Both print a reproduction
blob with each failure (``@reproduce_failure``) and draw new examples
on every run (``derandomize=False``), so that each run explores further. For example::

    DDFLOW_HYPOTHESIS_PROFILE=long python -m pytest tests/property/test_random_plans.py
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

PROFILES = ("ci", "long")
PROFILE = os.environ.get("DDFLOW_HYPOTHESIS_PROFILE", "ci")
if PROFILE not in PROFILES:
    raise ValueError(f"DDFLOW_HYPOTHESIS_PROFILE={PROFILE!r}: the profiles are {PROFILES}")

_COMMON = dict(
    deadline=None,  # the first run of a flow compiles its expressions
    derandomize=False,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", **_COMMON)
# tests without an example count of their own get ten times Hypothesis' default
settings.register_profile("long", max_examples=1000, **_COMMON)


def pytest_configure(config: pytest.Config) -> None:
    # a profile named on the command line (--hypothesis-profile) wins over the variable
    if config.getoption("hypothesis_profile", None) is None:
        settings.load_profile(PROFILE)
