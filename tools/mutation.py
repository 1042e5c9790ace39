"""Mutation testing of ddflow's core modules, run on request (see docs/testing.md).

    python tools/mutation.py [module ...] [--functions PATTERN ...] [--time-limit SECONDS]

For each module named (``lattice``, ``frontier``, ``progress``, ``trace``, ``expr_compile``,
``reduce``, ``local_reduce_times``, ``local_reduce_skips``, ``local_reduce_evaluation``,
``local_reduce_bounded_extremes``, ``local_reduce_groups``, ``reference``, or its path under
``src/``; by default every module but ``reference``, smallest first), mutmut mutates that one
file and runs, for each mutant, the tests of the module's own selection that reach the mutated
function (``TARGETS`` below, plus ``tests/unit/test_mutants_<module>.py``), with
``-k "not spark" -x -q -p no:cacheprovider``, one test process at a time under ``nice``, and
Hypothesis derandomized with at most 20 examples a test (``tools/mutation_hypothesis.py``), so
that two runs on the same code agree.

Each module runs in a fresh copy of ``src/`` and ``tests/`` under
``tools/mutation-report/work/<module>/`` (the checkout itself is never mutated, and edits made
to it during a run do not leak in). Per module it prints a JSON line (generated, killed,
survived, timeout, no_tests, not_checked, kill_rate, seconds), writes the surviving mutants with
their ``file:line`` and diff to ``tools/mutation-report/<module>.md``, every mutant's status to
``<module>.json``, and appends the JSON line to ``history.jsonl``; a table closes the run.

``kill_rate`` is (killed + timeout) / checked: a mutant that makes the tests hang is caught
(a timed-out mutant is run again in a fresh process, unforked, and judged there).
Mutants in functions that no selected test reaches count as checked and not killed
(``no_tests``). With ``--time-limit`` the run stops after that many seconds and reports the
mutants checked so far (``partial``); with ``--functions`` only the functions named are mutated
(``Class.method`` or ``function``, shell-style wildcards allowed); with ``--src-rev HEAD`` the
sources are taken as committed, the tests still from the work tree. ``--recheck`` re-judges
the last run's survivors with ``tests/unit/test_mutants_<module>.py`` as it is now (seconds,
where a full run takes many minutes): the rest of the selection let them through already.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REPORT_DIR = REPO / "tools" / "mutation-report"
PLUGIN = REPO / "tools" / "mutation_hypothesis.py"
PYTEST_ARGS = ["-k", "not spark", "-x", "-q", "-p", "no:cacheprovider", "-p", PLUGIN.stem]
#: What the fork server imports before forking a process per mutant: no module that starts
#: threads (Polars and pyarrow start thread pools on import, and a process forked from one that
#: has them waits forever for workers it does not have), so ddflow is imported per mutant.
PRELOAD = ["numpy", "pytest", "_pytest.python", "hypothesis", "hypothesis.strategies"]
#: mutmut separates a method's class from its name with this character in mutant names.
CLASS_SEP = "ǁ"


@dataclass(frozen=True)
class Target:
    """A module to mutate and the tests (globs, relative to the repository) that exercise it."""

    name: str
    path: str
    tests: tuple[str, ...]
    default: bool = True
    #: the tests compute with Polars: each mutant then runs in a process forked from one that
    #: has not imported it (mutmut's "forkserver"; about a second more per mutant), since a
    #: process forked after Polars started its thread pool waits forever for its workers
    polars: bool = True

    def test_paths(self) -> list[str]:
        """The selection as it is now: missing globs dropped, the module's mutant tests added."""
        found: list[str] = []
        for pattern in (*self.tests, f"tests/unit/test_mutants_{self.name}.py"):
            for match in sorted(REPO.glob(pattern)) or []:
                relative = match.relative_to(REPO).as_posix()
                if relative not in found:
                    found.append(relative)
        return found

    def module(self) -> str:
        """The dotted module name mutmut puts in front of its mutant names."""
        return self.path.removeprefix("src/").removesuffix(".py").replace("/", ".")


_REDUCE_TESTS = (
    "tests/unit/test_reduce_*.py",
    "tests/unit/test_interesting_times.py",
    "tests/unit/test_minmax_skip.py",
    "tests/semantics/test_reduce.py",
)

#: Smallest first: the order in which a run without arguments takes them.
TARGETS = [
    Target(
        "lattice",
        "src/ddflow/timely/lattice.py",
        ("tests/unit/test_lattice.py", "tests/property/test_time_properties.py"),
        polars=False,
    ),
    Target(
        "frontier", "src/ddflow/timely/frontier.py", ("tests/unit/test_frontier.py",), polars=False
    ),
    Target(
        "trace",
        "src/ddflow/runtime/local/trace.py",
        ("tests/unit/test_trace.py", "tests/semantics/test_compaction.py"),
    ),
    Target(
        "progress", "src/ddflow/timely/progress.py", ("tests/unit/test_progress.py",), polars=False
    ),
    Target("reduce", "src/ddflow/differential/operators/reduce.py", _REDUCE_TESTS),
    Target(
        "expr_compile",
        "src/ddflow/expr/compiler.py",
        (
            "tests/unit/test_expr.py",
            "tests/semantics/test_linear.py",
            "tests/testing/test_values.py",
        ),
    ),
    *(
        Target(f"local_reduce_{name}", f"src/ddflow/runtime/local/reduce/{name}.py", _REDUCE_TESTS)
        for name in ("bounded_extremes", "groups", "times", "evaluation", "skips")
    ),
    Target(
        "reference",
        "src/ddflow/testing/reference.py",
        ("tests/semantics", "tests/testing"),
        default=False,
    ),
]


def find_target(name: str) -> Target:
    for target in TARGETS:
        if name in (target.name, target.path, target.module()):
            return target
    known = ", ".join(t.name for t in TARGETS)
    raise SystemExit(f"unknown module {name!r}: expected one of {known} (or its path)")


def mutant_patterns(target: Target, functions: list[str]) -> list[str]:
    """mutmut's mutant-name globs for ``Class.method`` / ``function`` patterns."""
    patterns = []
    for function in functions:
        cls, _, name = function.rpartition(".")
        mangled = f"x{CLASS_SEP}{cls}{CLASS_SEP}{name}" if cls else f"x_{name}"
        patterns.append(f"{target.module()}.{mangled}__mutmut_*")
    return patterns


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def prepare_workdir(target: Target, workdir: Path, tests: list[str], src_rev: str | None) -> None:
    """A fresh copy of the sources (of the work tree, or of the commit ``src_rev``) and of the
    tests, with a pyproject.toml made for this module."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    if src_rev is None:
        shutil.copytree(REPO / "src", workdir / "src", ignore=ignore)
    else:
        archive = subprocess.run(
            ["git", "archive", src_rev, "src"], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(workdir)], input=archive, check=True)
    shutil.copytree(REPO / "tests", workdir / "tests", ignore=ignore)
    shutil.copy2(PLUGIN, workdir / PLUGIN.name)
    (workdir / "preload.txt").write_text("\n".join(PRELOAD) + "\n")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    markers = project["tool"]["pytest"]["ini_options"].get("markers", [])
    (workdir / "pyproject.toml").write_text(f"""\
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"
markers = {_toml_list(markers)}

[tool.mutmut]
source_paths = ["src"]
only_mutate = {_toml_list([target.path])}
also_copy = {_toml_list([PLUGIN.name])}
process_isolation = "{"forkserver" if target.polars else "fork"}"
forkserver_warmup = "import"
preload_modules_file = "preload.txt"
pytest_add_cli_args = {_toml_list(PYTEST_ARGS)}
pytest_add_cli_args_test_selection = {_toml_list(tests)}
use_git_change_detection = false
""")


def test_env() -> dict[str, str]:
    env = dict(os.environ)
    # One core: the machine is shared, and the mutants run one at a time anyway.
    for var in (
        "POLARS_MAX_THREADS",
        "RAYON_NUM_THREADS",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
    ):
        env[var] = "1"
    env["PYTHONHASHSEED"] = "0"
    return env


def run_mutmut(workdir: Path, patterns: list[str], time_limit: float | None) -> bool:
    """Run mutmut in ``workdir``; True when it was stopped by the time limit."""
    mutmut = shutil.which("mutmut") or str(Path(sys.executable).with_name("mutmut"))
    command = ["nice", "-n", "10", mutmut, "run", "--max-children", "1", *patterns]
    with open(workdir / "mutmut.log", "w") as log:
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=test_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            process.wait(timeout=time_limit)
        except subprocess.TimeoutExpired:
            # SIGINT lets mutmut stop its worker and keep the verdicts it has.
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            return True
    if process.returncode != 0:
        tail = (workdir / "mutmut.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"mutmut failed (exit {process.returncode}) in {workdir}:\n{tail}")
    return False


def run_mutant(workdir: Path, key: str, tests: list[str], timeout: float) -> str:
    """The verdict of ``tests`` on one mutant, in a fresh process (no fork)."""
    env = test_env() | {"PYTHONPATH": "src:.", "MUTANT_UNDER_TEST": key}
    command = [
        "nice",
        "-n",
        "10",
        sys.executable,
        "-m",
        "pytest",
        "--rootdir=.",
        *PYTEST_ARGS,
        *tests,
    ]
    try:
        code = subprocess.run(
            command, cwd=workdir / "mutants", env=env, timeout=timeout, capture_output=True
        ).returncode
    except subprocess.TimeoutExpired:
        return "timeout"
    return {0: "survived", 1: "killed", 5: "no tests"}.get(code, "suspicious")


def recheck_timeouts(
    workdir: Path, tests: list[str], meta: dict[str, Any], statuses: dict[str, str]
) -> list[str]:
    """Run each timed-out mutant's tests again in a fresh process, and keep ``timeout`` only
    for the mutants that time out there too: a hang of a forked process (a thread pool it
    lost) is no verdict on the tests. Returns the mutants re-judged."""
    changed = []
    for key in sorted(k for k, s in statuses.items() if s == "timeout"):
        estimate = meta["estimated_durations_by_key"].get(key) or 0.0
        verdict = run_mutant(workdir, key, tests, 60 + 4 * estimate)
        if verdict != "timeout":
            statuses[key] = verdict
            changed.append(key)
    return changed


def recheck_survivors(target: Target, workdir: Path) -> tuple[dict[str, str], list[str]]:
    """The last run's statuses, with its surviving mutants judged again by the module's
    mutant tests as they are now (``tests/unit/test_mutants_<module>.py``): the rest of the
    selection, derandomized, let them through already. Returns the statuses and the tests."""
    last = json.loads((REPORT_DIR / f"{target.name}.json").read_text())
    statuses: dict[str, str] = last["statuses"]
    mutant_tests = f"tests/unit/test_mutants_{target.name}.py"
    if not (REPO / mutant_tests).exists():
        raise SystemExit(f"--recheck: {mutant_tests} does not exist")
    shutil.copy2(REPO / mutant_tests, workdir / "mutants" / mutant_tests)
    for key in sorted(k for k, s in statuses.items() if s in ("survived", "no tests")):
        verdict = run_mutant(workdir, key, [mutant_tests], 300)
        if verdict in ("killed", "timeout"):
            statuses[key] = verdict
    tests = [t for t in last["summary"]["tests"] if t != mutant_tests]
    return statuses, [*tests, mutant_tests]


def function_spans(source: str) -> dict[str, tuple[int, int]]:
    """First and last line of each top-level function and method, keyed as mutmut keys them."""
    spans: dict[str, tuple[int, int]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            spans[f"x_{node.name}"] = (node.lineno, node.end_lineno or node.lineno)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    key = f"x{CLASS_SEP}{node.name}{CLASS_SEP}{item.name}"
                    spans[key] = (item.lineno, item.end_lineno or item.lineno)
    return spans


def mutated_line(diff: str, lines: list[str], span: tuple[int, int]) -> int:
    """The source line the diff changes: its first removed line, found in the function."""
    offset = 0
    for line in diff.splitlines()[2:]:
        if line.startswith("@@"):
            offset = int(line.split()[1].split(",")[0].lstrip("-")) - 1
            continue
        if line.startswith("-"):
            text = line[1:].strip()
            guess = span[0] + offset
            candidates = [n for n in range(span[0], span[1] + 1) if lines[n - 1].strip() == text]
            return min(candidates, key=lambda n: abs(n - guess)) if candidates else guess
        if line.startswith("+"):
            return span[0] + max(offset - 1, 0)
        offset += 1
    return span[0]


def function_name(key: str) -> str:
    mangled = key.rpartition(".")[2].partition("__mutmut_")[0]
    if mangled.startswith("x_"):
        return mangled[2:]
    _, cls, name = mangled.split(CLASS_SEP)
    return f"{cls}.{name}"


def collect(
    target: Target,
    workdir: Path,
    patterns: list[str],
    tests: list[str],
    statuses: dict[str, str] | None = None,
) -> dict[str, object]:
    """Statuses of the selected mutants (timeouts checked again; or ``statuses`` as given),
    and the survivors' diffs."""
    from mutmut.configuration import reset_config
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    rechecked: list[str] = []
    if statuses is None:
        meta = json.loads((workdir / "mutants" / f"{target.path}.meta").read_text())
        statuses = {
            key: status_by_exit_code[code]
            for key, code in meta["exit_code_by_key"].items()
            if not patterns or any(fnmatch.fnmatch(key, p) for p in patterns)
        }
        rechecked = recheck_timeouts(workdir, tests, meta, statuses)
    source = (workdir / target.path).read_text()
    lines, spans = source.splitlines(), function_spans(source)
    survivors = []
    here = Path.cwd()
    os.chdir(workdir)
    try:
        reset_config()
        for key in sorted(k for k, s in statuses.items() if s in ("survived", "no tests")):
            diff = get_diff_for_mutant(key, path=Path(target.path))
            mangled = key.rpartition(".")[2].partition("__mutmut_")[0]
            span = spans.get(mangled, (1, len(lines)))
            survivors.append(
                {
                    "mutant": key,
                    "function": function_name(key),
                    "status": statuses[key],
                    "line": mutated_line(diff, lines, span),
                    "diff": diff,
                }
            )
    finally:
        os.chdir(here)
        reset_config()
    return {"statuses": statuses, "survivors": survivors, "timeouts_rechecked": rechecked}


def summarize(
    target: Target, statuses: dict[str, str], seconds: float, partial: bool, tests: list[str]
) -> dict[str, object]:
    counts = Counter(statuses.values())
    checked = len(statuses) - counts["not checked"]
    caught = counts["killed"] + counts["timeout"] + counts["caught by type check"]
    return {
        "module": target.name,
        "path": target.path,
        "generated": len(statuses),
        "killed": counts["killed"],
        "survived": counts["survived"],
        "timeout": counts["timeout"],
        "no_tests": counts["no tests"],
        "other": checked - caught - counts["survived"] - counts["no tests"],
        "not_checked": counts["not checked"],
        "kill_rate": round(caught / checked, 4) if checked else None,
        "seconds": round(seconds),
        "partial": partial,
        "tests": tests,
    }


def write_report(
    summary: dict[str, object], result: dict[str, object], patterns: list[str]
) -> Path:
    name = str(summary["module"])
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / f"{name}.json").write_text(
        json.dumps(
            {"summary": summary, "patterns": patterns, **result}, indent=1, ensure_ascii=False
        )
    )
    survivors = result["survivors"]
    assert isinstance(survivors, list)
    out = [
        f"# Mutation testing of {summary['path']}",
        "",
        "```json",
        json.dumps({k: v for k, v in summary.items() if k != "tests"}),
        "```",
        "",
        "Tests: " + " ".join(f"`{t}`" for t in summary["tests"]),  # type: ignore[attr-defined]
        "",
        f"## Surviving mutants ({len(survivors)})",
        "",
    ]
    for s in sorted(survivors, key=lambda s: (s["line"], s["mutant"])):
        out += [
            f"### {summary['path']}:{s['line']} `{s['function']}` ({s['status']})",
            "",
            f"`{s['mutant']}`",
            "",
            "```diff",
            s["diff"],
            "```",
            "",
        ]
    path = REPORT_DIR / f"{name}.md"
    path.write_text("\n".join(out))
    return path


def git_head() -> str | None:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    return None


def table(rows: list[dict[str, object]]) -> str:
    columns = [
        "module",
        "generated",
        "killed",
        "survived",
        "timeout",
        "no_tests",
        "not_checked",
        "kill_rate",
        "seconds",
    ]
    cells = [
        [str(r[c]) if c != "kill_rate" or r[c] is None else f"{r[c]:.1%}" for c in columns]
        for r in rows
    ]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "modules", nargs="*", help="module names or paths (default: all but reference)"
    )
    parser.add_argument(
        "--functions",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="mutate only these functions: 'Class.method' or 'function' (globs)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="stop each module after this long and report what was checked",
    )
    parser.add_argument(
        "--src-rev",
        metavar="REV",
        help="mutate src/ as committed in REV (e.g. HEAD), not the work tree",
    )
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="judge the last run's survivors again with the module's "
        "tests/unit/test_mutants_<module>.py as it is now",
    )
    parser.add_argument(
        "--max-examples",
        type=int,
        default=20,
        help="cap on the examples of each Hypothesis test (default 20)",
    )
    args = parser.parse_args(argv)

    targets = [find_target(m) for m in args.modules] or [t for t in TARGETS if t.default]
    os.environ["DDFLOW_MUTATION_MAX_EXAMPLES"] = str(args.max_examples)
    rows = []
    for target in targets:
        tests = target.test_paths()
        patterns = mutant_patterns(target, args.functions)
        workdir = REPORT_DIR / "work" / target.name
        start = time.monotonic()
        if args.recheck:
            given, tests = recheck_survivors(target, workdir)
            partial = False
        else:
            prepare_workdir(target, workdir, tests, args.src_rev)
            partial = run_mutmut(workdir, patterns, args.time_limit)
            given = None
        seconds = time.monotonic() - start
        result = collect(target, workdir, patterns, tests, given)
        statuses = result["statuses"]
        assert isinstance(statuses, dict)
        partial = partial or "not checked" in statuses.values()
        summary = summarize(target, statuses, seconds, partial, tests)
        rechecked = result["timeouts_rechecked"]
        assert isinstance(rechecked, list)
        summary |= {
            "recheck": args.recheck,
            "timeouts_rechecked": len(rechecked),
            "functions": args.functions,
            "max_examples": args.max_examples,
            "src": args.src_rev or "work tree",
            "commit": git_head(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        report = write_report(summary, result, patterns)
        line = json.dumps(summary, ensure_ascii=False)
        print(line, flush=True)
        print(f"# survivors: {report.relative_to(REPO)}", file=sys.stderr, flush=True)
        with open(REPORT_DIR / "history.jsonl", "a") as history:
            history.write(line + "\n")
        rows.append(summary)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
