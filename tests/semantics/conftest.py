"""Fixtures of the semantics suite: every test runs once per runtime in ``harness.RUNTIMES``."""

from __future__ import annotations

import pytest
from harness import RUNTIMES


@pytest.fixture(params=RUNTIMES, scope="session")
def runtime(request: pytest.FixtureRequest) -> str:
    """The name of the runtime under test; build flows with ``harness.make_flow(runtime)``."""
    return str(request.param)
