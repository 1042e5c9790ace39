"""ddflow sets Polars' allocator to hand freed pages back soon, by a background thread
(``ddflow.runtime.local.allocator``), before Polars loads, unless the environment says
otherwise: checked in fresh interpreters."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import ddflow.runtime.local.allocator as allocator


def run(script: str, env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if env_value is not None:
        env["_RJEM_MALLOC_CONF"] = env_value
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout + done.stderr


def polars_options_after_importing_ddflow(env_value: str | None) -> str:
    return run("import os, ddflow; print(os.environ['_RJEM_MALLOC_CONF'])", env_value).strip()


def test_the_option_is_set_before_polars_reads_it():
    """Polars puts its own defaults before the variable's value when it is imported: with
    them in front, ddflow's value was there first."""
    options = polars_options_after_importing_ddflow(None)
    assert options.endswith("," + allocator.POLARS_MALLOC_CONF)
    assert "dirty_decay_ms" in options.split(",")[0]


def test_an_option_the_environment_sets_is_kept():
    options = polars_options_after_importing_ddflow("muzzy_decay_ms:250")
    assert options.endswith(",muzzy_decay_ms:250")
    assert allocator.POLARS_MALLOC_CONF not in options


def test_jemalloc_runs_with_the_option():
    """The allocator's own report of its options (printed at exit), with the variable as the
    module leaves it."""
    script = f"""
import os, runpy
runpy.run_path({allocator.__file__!r})
os.environ["_RJEM_MALLOC_CONF"] += ",stats_print:true"
import polars as pl
pl.DataFrame({{"a": [1, 2]}}).sum()
"""
    report = run(script, None)
    found = re.search(r"opt\.muzzy_decay_ms: (-?\d+)", report)
    assert found, "jemalloc printed no options"
    assert int(found.group(1)) == 0
    assert re.search(r"opt\.dirty_decay_ms: 100\b", report)
    assert re.search(r"opt\.background_thread: true\b", report)
