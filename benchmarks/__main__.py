"""Entry point: ``python -m benchmarks list`` / ``python -m benchmarks run NAME [options]``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys

BENCHMARKS = {
    "updates": "benchmarks.updates",
    "cc": "benchmarks.cc",
    "figure1": "benchmarks.figure1",
    "spark_cc": "benchmarks.spark_cc",
    "pathway_cc": "benchmarks.pathway_cc",
    "small_batches": "benchmarks.small_batches",
    "input_check": "benchmarks.input_check",
    "spark_reach": "benchmarks.spark_reach",
    "table2": "benchmarks.table2",
    "throughput": "benchmarks.throughput",
    "realdata": "benchmarks.realdata",
    "demo": "benchmarks.demo",
    "workers": "benchmarks.workers",
    "checkpoint": "benchmarks.checkpoint",
    "crash": "benchmarks.crash",
    "cbp": "benchmarks.cbp",
    "steps": "benchmarks.steps",
    "priorities": "benchmarks.priorities",
    "small_scc": "benchmarks.small_scc",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the benchmarks")
    run = sub.add_parser("run", help="run one benchmark and print its JSON")
    run.add_argument("name", choices=sorted(BENCHMARKS))
    run.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name, mod in sorted(BENCHMARKS.items()):
            doc = (importlib.import_module(mod).__doc__ or "").strip().splitlines()[0]
            print(f"{name:12s} {doc}")
        return 0
    module = importlib.import_module(BENCHMARKS[args.name])
    result = module.run(quick=args.quick)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
