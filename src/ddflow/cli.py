"""The ``ddflow`` command line.

``python -m ddflow demo`` slides a time window over a stream of mentions (edges src → dst with
an optional hashtag), keeps the strongly connected components of the window's graph up to date
with ddflow, and shows them on a page served at ``http://HOST:PORT``: each step of the window
beside the time NetworkX takes to recompute the same window from scratch. The stream is
generated (``--seed``, ``--hours``) or read from a Parquet or CSV file (``--data``, with Spark
when ``--spark`` is given); the page stays up until Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from ddflow.errors import InputError

__all__ = ["main"]


def _positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def _port(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65_535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535)")
    return value


def parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command line's parser, and its ``demo`` subcommand's.

    >>> top, _ = parsers()
    >>> args = top.parse_args(["demo", "--no-browser", "--window", "3600"])
    >>> (args.host, args.port, args.window, args.step, args.browser, args.data)
    ('127.0.0.1', 8050, 3600, 60, False, None)
    """
    top = argparse.ArgumentParser(prog="ddflow", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    d = sub.add_parser(
        "demo",
        help="serve the sliding-window demo: incremental SCCs beside NetworkX",
        description=__doc__.split("\n\n")[1].replace("``", ""),
    )
    d.add_argument("--host", default="127.0.0.1", help="the address to serve on (%(default)s)")
    d.add_argument(
        "--port", type=_port, default=8050, help="the port (%(default)s; 0: any free one)"
    )
    d.add_argument(
        "--no-browser",
        dest="browser",
        action="store_false",
        help="do not open the page in a browser (none opens without a display anyway)",
    )
    d.add_argument(
        "--window",
        type=_positive,
        default=86_400,
        metavar="SECONDS",
        help="the window, in seconds (%(default)s)",
    )
    d.add_argument(
        "--step",
        type=_positive,
        default=60,
        metavar="SECONDS",
        help="a step of the window, in seconds (%(default)s)",
    )
    d.add_argument(
        "--data",
        metavar="FILE",
        help="a Parquet or CSV file of mentions (columns time, src, dst, tag) to use instead "
        "of a generated stream",
    )
    d.add_argument("--spark", action="store_true", help="read --data FILE with Spark")
    d.add_argument("--seed", type=int, metavar="N", help="the generated stream's seed (7)")
    d.add_argument(
        "--hours", type=_positive, metavar="H", help="the generated stream's length in hours (48)"
    )
    return top, d


def can_open_browser() -> bool:
    """Whether a browser window can open here: not on a Linux (or BSD) machine without a
    display (neither ``DISPLAY`` nor ``WAYLAND_DISPLAY`` set), such as a server over SSH.

    >>> import sys
    >>> can_open_browser() or sys.platform.startswith("linux")
    True
    """
    if sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def demo(args: argparse.Namespace) -> int:
    """Run ``python -m ddflow demo`` with parsed ``args``: build the mentions and the window's
    dataflow, then serve the page until Ctrl-C; the model, and the Spark session of
    ``--spark``, are closed on the way out. Data that cannot be used, Spark that cannot start,
    or an address that cannot be served is one line on stderr and exit status 2."""
    from ddflow.demo.app import serve
    from ddflow.demo.data import mention_stream, read_mentions
    from ddflow.demo.model import WindowModel

    spark = None
    model = None
    try:
        if args.data is None:
            seed = 7 if args.seed is None else args.seed
            hours = 48 if args.hours is None else args.hours
            print(f"generating {hours} hours of mentions (seed {seed}) …", flush=True)
            mentions = mention_stream(seed=seed, hours=hours)
        else:
            if args.spark:
                from ddflow.runtime.spark.session import SparkUnavailableError, local_session

                print("starting Spark (local[2]) …", flush=True)
                try:
                    spark = local_session(app="ddflow demo")
                except SparkUnavailableError as e:
                    print(f"ddflow demo: error: {e.message}", file=sys.stderr)
                    return 2
            print(f"reading {args.data} …", flush=True)
            mentions = read_mentions(args.data, spark=spark)
        print(
            f"building the first window: {mentions.height} mentions in all, a window of "
            f"{args.window} s moving by {args.step} s …",
            flush=True,
        )
        started = time.perf_counter()
        model = WindowModel(mentions, window=args.window, step=args.step, progress=True)
        print(f"built in {time.perf_counter() - started:.1f} s", flush=True)
        browser = args.browser and can_open_browser()
        if args.browser and not browser:
            print("no display here: open the address below in a browser", flush=True)
        try:
            serve(model, args.host, args.port, open_browser=browser)
        except OSError as e:  # the address is taken, or not this machine's
            print(
                f"ddflow demo: error: cannot serve at {args.host}:{args.port}: {e}", file=sys.stderr
            )
            return 2
        print("stopped", flush=True)
    except InputError as e:
        print(f"ddflow demo: error: {e.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # (before serving: while the data or the model is built)
        print("stopped", flush=True)
    finally:
        if model is not None:
            model.close()
        if spark is not None:
            spark.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The ``ddflow`` command: parse ``argv`` (the process's arguments by default), run the
    subcommand, and return its exit status. Arguments that do not fit are argparse's errors
    (usage on stderr, exit status 2).

    >>> main(["demo", "--spark"])
    Traceback (most recent call last):
    ...
    SystemExit: 2
    """
    top, d = parsers()
    args = top.parse_args(argv)
    if args.spark and args.data is None:
        d.error("--spark reads --data FILE with Spark: give --data FILE too")
    if args.data is not None and (args.seed is not None or args.hours is not None):
        d.error("--seed and --hours shape a generated stream; with --data the file is the stream")
    return demo(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
