"""The ``ddflow`` command line: the demo, and the benchmark entry point.

``python -m ddflow demo`` builds a small incremental job on the embedded runtime, feeds it epoch
by epoch, and prints each epoch's output changes and its latency.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence

__all__ = ["main"]


def demo(
    epochs: int = 8,
    nodes: int = 2_000,
    edges: int = 6_000,
    batch: int = 5,
    seed: int = 7,
    out: object = sys.stdout,
) -> None:
    """A social graph changing over time: follower counts per user and the users who follow
    someone back, maintained incrementally; then connected components when available."""
    import ddflow as dd

    def say(*args: object) -> None:
        print(*args, file=out)  # type: ignore[call-overload]

    rng = random.Random(seed)
    flow = dd.Dataflow()
    follows = flow.input("follows", schema={"src": "int64", "dst": "int64"})
    followers = follows.group_by("dst").agg(followers=dd.count())
    top = followers.filter(dd.col("followers") >= 8).output()
    mutual = (
        follows.join(follows.select(src=dd.col("dst"), dst=dd.col("src")), on=["src", "dst"])
        .select("src")
        .distinct()
    )
    mutual_count = mutual.with_columns(one=dd.lit(0)).group_by("one").agg(users=dd.count()).output()
    components = None
    if hasattr(dd.graph, "connected_components"):
        components = (
            dd.graph.connected_components(follows)
            .group_by("label")
            .agg(size=dd.count())
            .group_by("size")
            .agg(components=dd.count())
            .output()
        )

    live: list[tuple[int, int]] = []
    say(
        f"ddflow demo: {nodes} users, {edges} follow edges, then {epochs - 1} epochs of "
        f"{batch} insertions and {batch} deletions (embedded runtime)"
    )
    for epoch in range(epochs):
        if epoch == 0:
            new = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)]
            follows.insert(new)
            live.extend(new)
        else:
            gone = [live.pop(rng.randrange(len(live))) for _ in range(batch)]
            new = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(batch)]
            follows.remove(gone)
            follows.insert(new)
            live.extend(new)
        t0 = time.perf_counter()
        flow.advance_to(epoch + 1)
        flow.run()
        ms = (time.perf_counter() - t0) * 1e3
        changes = top.changes()
        changes = changes[changes["time"] == epoch]
        mutual_now = mutual_count.snapshot()
        users = int(mutual_now["users"].iloc[0]) if len(mutual_now) else 0
        line = (
            f"epoch {epoch}: {ms:8.1f} ms   users with >= 8 followers changed by "
            f"{len(changes):3d} rows   users following someone back: {users}"
        )
        if components is not None:
            snap = components.snapshot()
            line += f"   components: {int((snap['components'] * 1).sum())}"
        say(line)
    snap = top.snapshot().sort_values("followers", ascending=False).head(5)
    say("most followed users now:")
    say(snap.to_string(index=False))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddflow", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the incremental demo on the embedded runtime")
    d.add_argument("--epochs", type=int, default=8)
    d.add_argument("--nodes", type=int, default=2_000)
    d.add_argument("--edges", type=int, default=6_000)
    d.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo(epochs=args.epochs, nodes=args.nodes, edges=args.edges, seed=args.seed)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
