"""The tour of ``README.md`` runs: its ```` ```python ```` blocks, executed in order in one
namespace, as the README says they can be (later blocks use names defined by earlier ones).

The blocks fall into two tests, each block run by exactly one of them:

* the *Spark blocks*, those naming a Spark session (the name ``spark``, ``local_session`` or
  ``SparkRuntime``), run in a test marked ``spark`` on the suite's one Spark session (the
  README's ``local_session()`` is ``getOrCreate``, so it returns that session), after the
  earlier blocks they need: the blocks defining the names they use, found from the code;
* every other block runs, in order, in the other test, which needs no Spark.

Both run in a temporary working directory. A block that fails is named by its index among the
Python blocks and its first line.
"""

from __future__ import annotations

import ast
import builtins
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

import ddflow as dd

README = Path(__file__).resolve().parents[2] / "README.md"

#: the README's Spark blocks: the pipeline's sources and sinks, and the workers hosted by Spark
EXPECTED_SPARK_BLOCKS = 2
#: names that mark a block as needing Spark
SPARK_NAMES = frozenset({"spark", "local_session", "SparkRuntime", "SparkSession"})

_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_BUILTINS = frozenset(dir(builtins))


def readme_blocks() -> list[str]:
    """The README's ```` ```python ```` blocks, in order (no other fenced block)."""
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


def first_line(block: str) -> str:
    return next((line for line in block.splitlines() if line.strip()), "").strip()


def bound_and_used(block: str) -> tuple[set[str], set[str]]:
    """The names a block binds (anywhere in it) and the names it uses without binding them
    (builtins left out): what it needs from the blocks before it."""
    bound: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(ast.parse(block)):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, used - bound - _BUILTINS


def identifiers(block: str) -> set[str]:
    """Every name, attribute and imported name a block mentions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(block)):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name.split(".")[-1])
    return found


def provider(blocks: list[str], index: int, name: str) -> int | None:
    """The last block before ``index`` that binds ``name``."""
    for i in range(index - 1, -1, -1):
        if name in bound_and_used(blocks[i])[0]:
            return i
    return None


def plan(blocks: list[str]) -> tuple[list[int], list[int], list[int]]:
    """(the Spark blocks, the other blocks, the other blocks the Spark blocks need), checking
    that the README still splits as this module expects."""
    spark = [i for i, b in enumerate(blocks) if identifiers(b) & SPARK_NAMES]
    plain = [i for i in range(len(blocks)) if i not in spark]
    assert len(spark) == EXPECTED_SPARK_BLOCKS, (
        f"expected {EXPECTED_SPARK_BLOCKS} Spark blocks in README.md, found {len(spark)}: "
        + "; ".join(f"block {i}: {first_line(blocks[i])!r}" for i in spark)
    )
    # every block is run by exactly one of the two tests
    assert sorted(spark + plain) == list(range(len(blocks)))
    assert not set(spark) & set(plain)
    # the other blocks never need a name that only a Spark block (skipped there) defines
    for i in plain:
        for name in sorted(bound_and_used(blocks[i])[1]):
            j = provider(blocks, i, name)
            assert j not in spark, (
                f"README block {i} ({first_line(blocks[i])!r}) uses {name!r} from Spark "
                f"block {j}, which its test does not run"
            )
    # the earlier blocks the Spark blocks need, and what those need in turn
    needed: set[int] = set()
    todo = list(spark)
    while todo:
        i = todo.pop()
        for name in sorted(bound_and_used(blocks[i])[1]):
            j = provider(blocks, i, name)
            assert j is not None, (
                f"README block {i} ({first_line(blocks[i])!r}) uses {name!r}, which no "
                "earlier block defines"
            )
            if j not in spark and j not in needed:
                needed.add(j)
                todo.append(j)
    return spark, plain, sorted(needed)


def run_blocks(blocks: list[str], indices: list[int], namespace: dict[str, Any]) -> None:
    """Execute ``blocks[i]`` for each ``i`` in order in ``namespace``; a failure names the
    block."""
    for i in indices:
        code = compile(blocks[i], f"README block {i}", "exec")
        try:
            exec(code, namespace)
        except Exception as e:
            raise AssertionError(
                f"README block {i} ({first_line(blocks[i])!r}) failed: {type(e).__name__}: {e}"
            ) from e


def test_readme_blocks_without_spark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocks = readme_blocks()
    _, plain, _ = plan(blocks)
    monkeypatch.chdir(tmp_path)  # files a block writes land here,
    # and Hypothesis' (its example database), whose default folder is fixed when it is imported
    set_hypothesis_home_dir(tmp_path / ".hypothesis")
    try:
        run_blocks(blocks, plain, {"__name__": "__readme__"})
    finally:
        set_hypothesis_home_dir(None)  # back to its default


@pytest.mark.spark
def test_readme_spark_blocks(spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocks = readme_blocks()
    spark_blocks, _, needed = plan(blocks)
    monkeypatch.chdir(tmp_path)
    scratch = tmp_path / "tmp"  # the blocks' tempfile.mkdtemp() folders
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    conf_before = dict(spark.conf.getAll)
    queries_before = {q.id for q in spark.streams.active}
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    try:
        run_blocks(blocks, sorted(needed + spark_blocks), namespace)
        # the README's session is the suite's one session, not a second one
        assert namespace.get("spark") is spark
    finally:
        from ddflow.runtime.spark.runtime import SparkRuntime

        for value in namespace.values():
            if isinstance(value, dd.Dataflow) and isinstance(value.runtime, SparkRuntime):
                value.close()  # (its barrier stage holds a task slot)
        for query in spark.streams.active:
            if query.id not in queries_before:
                query.stop()
        # put back the session settings a block changed (local_session() applies its own)
        conf_after = dict(spark.conf.getAll)
        for key, value in conf_after.items():
            if key not in conf_before:
                spark.conf.unset(key)
            elif conf_before[key] != value:
                spark.conf.set(key, conf_before[key])
        shutil.rmtree(scratch, ignore_errors=True)
