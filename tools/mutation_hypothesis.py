"""A pytest plugin that ``tools/mutation.py`` loads into every test run of a mutation run.

It makes each Hypothesis test reproducible and short: derandomized (examples drawn from a seed
derived from the test itself), without the example database, deadlines, health checks or
shrinking (a mutant needs a failure, not a minimal one, and shrinking against a mutated module
can outlast the timeout), and with at most ``DDFLOW_MUTATION_MAX_EXAMPLES`` examples (default
20), also for tests whose own ``@settings`` ask for more. A mutant that survives here may still
be killed by the full example counts of the normal suite.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

MAX_EXAMPLES = int(os.environ.get("DDFLOW_MUTATION_MAX_EXAMPLES", "20"))

_OVERRIDES = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": list(HealthCheck),
    "print_blob": False,
    "phases": (Phase.explicit, Phase.generate),
    "report_multiple_bugs": False,
}

settings.register_profile("ddflow-mutation", max_examples=MAX_EXAMPLES, **_OVERRIDES)
settings.load_profile("ddflow-mutation")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Cap the examples of tests that carry their own ``@settings`` (which the profile cannot)."""
    for item in items:
        function = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        own = getattr(function, "_hypothesis_internal_use_settings", None)
        if own is None or not getattr(function, "is_hypothesis_test", False):
            continue
        function._hypothesis_internal_use_settings = settings(  # type: ignore[union-attr]
            own, max_examples=min(own.max_examples, MAX_EXAMPLES), **_OVERRIDES
        )
