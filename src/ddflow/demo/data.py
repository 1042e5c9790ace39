"""The demo's data: a seeded stream of Twitter-like mentions, and a reader for a user's own.

A *mention* is an edge ``src -> dst`` at a ``time`` (integer seconds from the stream's start)
with an optional hashtag ``tag``: user ``src`` wrote a message that names user ``dst``. Every
frame this module returns has exactly the columns ``time`` (Int64), ``src`` (Int64), ``dst``
(Int64) and ``tag`` (String, null for an untagged mention), sorted by ``time``.

The generator, :func:`mention_stream`, draws everything from one seed (the same seed gives the
same frame, row for row) and follows a small model of a social network:

* **Users and communities.** ``users`` accounts are split into communities whose sizes follow a
  power law (Pareto, from 3 to 400 members: many small circles of friends, a few large
  crowds). The communities stand in a random order of *prominence*, unrelated to their size.
* **Activity.** Each user writes at a rate proportional to a Pareto-distributed weight (most
  write rarely, a few write all the time), and each user is mentioned in proportion to a second,
  independent Pareto weight (their *popularity*). The whole stream has a daily rhythm (busier
  in the evening than at dawn); ``rate`` is the mean number of mentions per hour over it,
  replies and bursts included.
* **Whom a mention names.** A share ``inside`` of the first mentions names a member of the author's
  own community; a share ``broadcast`` names one of ``broadcasters`` popular accounts (news
  outlets, celebrities: Zipf-distributed popularity) that never mention anyone; the rest name a
  user of one of the ``reach`` communities just above the author's in prominence (attention
  flows up, to neighbouring circles; the authors of the most prominent community name
  broadcasters instead). Within the chosen range, users are named in proportion to their
  popularity. Nobody mentions themselves.
* **Replies.** A mention inside a community is answered with probability ``reply`` (one
  outside it with probability ``reply_outside``; broadcasters never answer): the named user
  mentions the author back after a delay of minutes (log-normal, median eight minutes, at most
  an hour), with the same tag. Replies close the cycles that make strongly connected components:
  inside a community they knit its active members together. Across communities they are rare,
  and since first mentions only flow up, to nearby communities, an answer can join only a
  community with a few of its neighbours: components stay community-sized rather than merging
  into one giant component (raise ``reply_outside`` or ``reach`` to watch one form).
* **Tags.** Every community has two to five tags of its own, used with Zipf frequencies (its
  first tag is the most used); a few global tags (``news``, ``music``, ...) are shared by
  everyone. A share ``untagged`` of the first mentions carries no tag (null); of the tagged
  ones, a share ``global_tags`` carries a global tag and the others one of the author's
  community's tags.
* **Bursts.** About ``bursts`` times a day, one community (chosen in proportion to its size)
  becomes several times (4 to 12) more active for a while (about an hour, 20 minutes to 3
  hours): a match, a release, a quarrel.

The defaults are sized so that any 24-hour window holds over 200,000 mentions, whose graph has
thousands of strongly connected components of two users or more, none of them giant (the
largest hold a few hundred users). The generator guarantees: ``src != dst`` on every row, a
broadcaster never appears as ``src``, ``0 <= time < hours * 3600``, rows sorted by time.

:func:`read_mentions` reads the same columns from a user's Parquet or CSV file (or through
Spark), checks them, and returns a frame of the same shape.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import polars as pl

from ddflow.errors import InputError

__all__ = ["SCHEMA", "mention_stream", "read_mentions"]

#: the columns of a mention frame, in order, with their types
SCHEMA: dict[str, pl.DataType] = {
    "time": pl.Int64(),
    "src": pl.Int64(),
    "dst": pl.Int64(),
    "tag": pl.String(),
}

#: community sizes: MIN * (1 + Lomax(ALPHA)), at most MAX
MIN_COMMUNITY, MAX_COMMUNITY, COMMUNITY_ALPHA = 3, 400, 1.2
#: a user's activity and popularity weights: 1 + Lomax(alpha), at most the cap
ACTIVITY_ALPHA, ACTIVITY_CAP = 1.5, 2_000.0
POPULARITY_ALPHA, POPULARITY_CAP = 1.3, 2_000.0
#: the daily rhythm: rate * (1 + DIURNAL * cos(2 pi (t - PEAK) / day))
DIURNAL, PEAK_HOUR = 0.5, 20.0
#: reply delay: log-normal, median and sigma of its log, clipped to [min, max] seconds
REPLY_MEDIAN_S, REPLY_SIGMA, REPLY_MIN_S, REPLY_MAX_S = 480.0, 1.0, 20.0, 3600.0
#: tags: how many each community has, and the Zipf exponent of their use (and of global tags')
COMMUNITY_TAGS_MIN, COMMUNITY_TAGS_MAX, TAG_ZIPF = 2, 5, 1.2
GLOBAL_TAGS = ("news", "music", "football", "tech", "movies", "weather", "food", "travel")
#: bursts: rate multiplier range and duration (median and clip, seconds)
BURST_MULTIPLIER = (4.0, 12.0)
BURST_MEDIAN_S, BURST_MIN_S, BURST_MAX_S = 3600.0, 1200.0, 10800.0

_CONSONANTS = [*"bdfgklmnprstvz", "ch", "sh", "th"]
_VOWELS = list("aeiou")


def mention_stream(
    seed: int = 7,
    hours: float = 48,
    *,
    rate: float = 9_200.0,
    users: int = 60_000,
    broadcasters: int = 200,
    inside: float = 0.78,
    broadcast: float = 0.15,
    reply: float = 0.35,
    reply_outside: float = 0.03,
    reach: int = 8,
    untagged: float = 0.4,
    global_tags: float = 0.2,
    bursts: float = 6.0,
) -> pl.DataFrame:
    """A seeded stream of ``hours`` hours of mentions (the model is the module's docstring).

    ``rate`` is mentions per hour (replies and bursts included, on average), ``users`` the
    accounts that write, ``broadcasters`` the accounts that are only mentioned; ``inside`` and
    ``broadcast`` the shares of first mentions that name a user of the author's community and
    a broadcaster (the rest name a user of one of the ``reach`` communities just above the
    author's in prominence); ``reply`` and ``reply_outside`` the probabilities that a mention
    inside and outside a community is answered; ``untagged`` the share of first mentions
    without a tag, ``global_tags`` the share of tagged ones with a global tag; ``bursts`` the
    mean number of bursts a day. A ``ValueError`` names a knob out of its range.

    >>> m = mention_stream(seed=1, hours=1, rate=500, users=2_000)
    >>> m.columns, m.schema["time"], m.schema["tag"]
    (['time', 'src', 'dst', 'tag'], Int64, String)
    >>> m["time"].is_sorted() and m["time"].max() < 3600 and (m["src"] != m["dst"]).all()
    True
    >>> m.equals(mention_stream(seed=1, hours=1, rate=500, users=2_000))
    True
    """
    _check_sizes(hours=hours, rate=rate, users=users, broadcasters=broadcasters, reach=reach)
    _check_shares(inside=inside, broadcast=broadcast, reply=reply, reply_outside=reply_outside)
    _check_shares(untagged=untagged, global_tags=global_tags)
    if inside + broadcast > 1.0:
        raise ValueError(f"inside + broadcast must be at most 1, got {inside} + {broadcast}")
    if bursts < 0:
        raise ValueError(f"bursts is a mean number a day, at least 0, got {bursts}")
    rng = np.random.default_rng(seed)
    horizon = max(round(hours * 3600), 1)
    outside = 1.0 - inside - broadcast

    # communities, most prominent first; users numbered community by community
    sizes = _community_sizes(rng, users)
    first = np.concatenate([[0], np.cumsum(sizes)])  # community c is users first[c]:first[c+1]
    community = np.repeat(np.arange(sizes.size), sizes)
    activity = np.minimum(1.0 + rng.pareto(ACTIVITY_ALPHA, users), ACTIVITY_CAP)
    popularity = np.minimum(1.0 + rng.pareto(POPULARITY_ALPHA, users), POPULARITY_CAP)
    cum_activity = _cumulative(activity)
    cum_popularity = _cumulative(popularity)
    cum_broadcasters = _cumulative(1.0 / np.arange(1, broadcasters + 1))
    community_share = np.diff(cum_activity[first]) / cum_activity[-1]

    # bursts: (community, start, duration, multiplier); the base rate is set so that the
    # expected total, replies and bursts included, is rate * hours
    n_bursts = rng.poisson(bursts * horizon / 86_400)
    burst_community = rng.choice(sizes.size, size=n_bursts, p=sizes / sizes.sum())
    burst_start = rng.integers(0, horizon, n_bursts)
    burst_length = np.clip(
        BURST_MEDIAN_S * rng.lognormal(0.0, 0.6, n_bursts), BURST_MIN_S, BURST_MAX_S
    ).astype(np.int64)
    burst_length = np.maximum(np.minimum(burst_length, horizon - burst_start), 1)
    low, high = BURST_MULTIPLIER
    burst_factor = np.exp(rng.uniform(np.log(low), np.log(high), n_bursts))
    burst_extra = community_share[burst_community] * (burst_factor - 1.0) * burst_length
    answered = inside * reply + outside * reply_outside
    base = rate * hours / ((horizon + burst_extra.sum()) * (1.0 + answered))  # per second

    # first mentions: background (daily rhythm, authors by activity), then the bursts'
    n_background = rng.poisson(base * horizon)
    time = _rhythmic_times(rng, n_background, horizon)
    src = _pick(rng, cum_activity, np.zeros(n_background, np.int64), users)
    burst_counts = rng.poisson(base * burst_extra)
    in_burst = np.repeat(np.arange(n_bursts), burst_counts)
    time = np.concatenate([time, burst_start[in_burst] + rng.integers(0, burst_length[in_burst])])
    c = burst_community[in_burst]
    src = np.concatenate([src, _pick(rng, cum_activity, first[c], first[c + 1])])

    # whom they name
    n = src.size
    c = community[src]
    kind = rng.random(n)
    to_broadcaster = (kind < broadcast) | ((kind < broadcast + outside) & (c == 0))
    to_outside = ~to_broadcaster & (kind < broadcast + outside)
    to_inside = ~to_broadcaster & ~to_outside
    dst = np.empty(n, np.int64)
    dst[to_broadcaster] = users + _pick(
        rng, cum_broadcasters, np.zeros(int(to_broadcaster.sum()), np.int64), broadcasters
    )
    co = c[to_outside]
    dst[to_outside] = _pick(rng, cum_popularity, first[np.maximum(co - reach, 0)], first[co])
    dst[to_inside] = _pick_other(
        rng, cum_popularity, first[c[to_inside]], first[c[to_inside] + 1], src[to_inside]
    )

    # tags of the first mentions: null, global, or one of the author's community's
    tag_count = rng.integers(COMMUNITY_TAGS_MIN, COMMUNITY_TAGS_MAX + 1, sizes.size)
    tag_first = len(GLOBAL_TAGS) + np.concatenate([[0], np.cumsum(tag_count)])
    vocabulary = list(GLOBAL_TAGS) + _words(rng, int(tag_count.sum()), set(GLOBAL_TAGS))
    zipf = _cumulative(
        1.0 / np.arange(1, max(COMMUNITY_TAGS_MAX, len(GLOBAL_TAGS)) + 1) ** TAG_ZIPF
    )
    is_global = rng.random(n) < global_tags
    tag = np.where(
        is_global,
        _pick(rng, zipf, np.zeros(n, np.int64), len(GLOBAL_TAGS)),
        tag_first[c] + _pick(rng, zipf, np.zeros(n, np.int64), tag_count[c]),
    )
    tag[rng.random(n) < untagged] = -1

    # replies: the named user answers, minutes later, with the same tag
    p_answer = np.where(to_inside, reply, np.where(to_outside, reply_outside, 0.0))
    answer = np.flatnonzero(rng.random(n) < p_answer)
    delay = np.clip(
        REPLY_MEDIAN_S * rng.lognormal(0.0, REPLY_SIGMA, answer.size), REPLY_MIN_S, REPLY_MAX_S
    ).astype(np.int64)
    time = np.concatenate([time, time[answer] + delay])
    src, dst = np.concatenate([src, dst[answer]]), np.concatenate([dst, src[answer]])
    tag = np.concatenate([tag, tag[answer]])

    # public ids: a random numbering of all accounts; rows in time order
    ids = rng.permutation(users + broadcasters).astype(np.int64)
    keep = np.flatnonzero(time < horizon)
    order = keep[np.argsort(time[keep], kind="stable")]
    index = pl.Series(tag[order], dtype=pl.Int64)
    index = pl.select(pl.when(index >= 0).then(index)).to_series().cast(pl.UInt32)
    tags = pl.Series("tag", vocabulary, dtype=pl.String).gather(index)
    return pl.DataFrame(
        {
            "time": time[order].astype(np.int64),
            "src": ids[src[order]],
            "dst": ids[dst[order]],
            "tag": tags,
        },
        schema=SCHEMA,
    )


def _check_sizes(**sizes: float) -> None:
    """Raise ValueError unless every size is positive (and ``users`` makes two communities)."""
    for name, value in sizes.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if sizes["users"] < 2 * MIN_COMMUNITY:
        raise ValueError(f"users must be at least {2 * MIN_COMMUNITY}, got {sizes['users']}")


def _check_shares(**shares: float) -> None:
    """Raise ValueError unless every share is a probability."""
    for name, value in shares.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} is a probability, between 0 and 1, got {value}")


def _community_sizes(rng: np.random.Generator, users: int) -> np.ndarray:
    """Power-law community sizes adding up to ``users``, in a random order (of prominence)."""
    raw = np.floor(MIN_COMMUNITY * (1.0 + rng.pareto(COMMUNITY_ALPHA, users)))
    raw = np.minimum(raw, MAX_COMMUNITY).astype(np.int64)
    total = np.cumsum(raw)
    k = int(np.searchsorted(total, users)) + 1  # the first k sizes reach ``users``
    sizes = raw[:k].copy()
    sizes[-1] -= total[k - 1] - users
    if k > 1 and sizes[-1] < MIN_COMMUNITY:  # (a remainder too small joins the one before)
        sizes[-2] += sizes[-1]
        sizes = sizes[:-1]
    return rng.permutation(sizes)


def _cumulative(weights: np.ndarray) -> np.ndarray:
    """``[0, w0, w0 + w1, ...]``: item i owns the interval ``[cum[i], cum[i + 1])``."""
    return np.concatenate([[0.0], np.cumsum(weights, dtype=np.float64)])


def _pick(
    rng: np.random.Generator, cum: np.ndarray, lo: np.ndarray, hi: np.ndarray | int
) -> np.ndarray:
    """For each i, an item of ``lo[i]:hi[i]`` drawn in proportion to its weight (``cum`` is
    :func:`_cumulative` of the weights; every range is non-empty)."""
    hi = np.broadcast_to(np.asarray(hi, np.int64), lo.shape)
    u = cum[lo] + rng.random(lo.size) * (cum[hi] - cum[lo])
    picked: np.ndarray = np.clip(np.searchsorted(cum, u, side="right") - 1, lo, hi - 1)
    return picked


def _pick_other(
    rng: np.random.Generator, cum: np.ndarray, lo: np.ndarray, hi: np.ndarray, not_: np.ndarray
) -> np.ndarray:
    """As :func:`_pick`, but never ``not_[i]`` (each range holds at least two items)."""
    out = _pick(rng, cum, lo, hi)
    for _ in range(20):  # (redraw the few that hit ``not_``: a very popular author's own)
        again = np.flatnonzero(out == not_)
        if again.size == 0:
            return out
        out[again] = _pick(rng, cum, lo[again], hi[again])
    again = out == not_  # (still the same: take the next member, in turn)
    out[again] = lo[again] + (out[again] - lo[again] + 1) % (hi[again] - lo[again])
    return out


def _rhythmic_times(rng: np.random.Generator, n: int, horizon: int) -> np.ndarray:
    """``n`` times in ``[0, horizon)`` from the daily rhythm, by the minute's inverse CDF."""
    minutes = -(-horizon // 60)
    hour = (np.arange(minutes) + 0.5) / 60.0
    cum = _cumulative(1.0 + DIURNAL * np.cos(2 * np.pi * (hour - PEAK_HOUR) / 24.0))
    minute = np.searchsorted(cum, rng.random(n) * cum[-1], side="right") - 1
    seconds = np.minimum(minute, minutes - 1) * 60 + rng.integers(0, 60, n)
    times: np.ndarray = np.minimum(seconds, horizon - 1).astype(np.int64)
    return times


def _words(rng: np.random.Generator, n: int, taken: set[str]) -> list[str]:
    """``n`` distinct pronounceable tags of two or three syllables, none in ``taken``."""
    consonant = rng.integers(0, len(_CONSONANTS), (n, 3))
    vowel = rng.integers(0, len(_VOWELS), (n, 3))
    length = rng.integers(2, 4, n)
    seen = set(taken)
    words = []
    for i in range(n):
        word = "".join(
            _CONSONANTS[consonant[i, j]] + _VOWELS[vowel[i, j]] for j in range(length[i])
        )
        unique, k = word, 2
        while unique in seen:
            unique, k = f"{word}{k}", k + 1
        seen.add(unique)
        words.append(unique)
    return words


# ---------------------------------------------------------------------- reading a user's file


def read_mentions(path: str | os.PathLike[str], *, spark: Any = None) -> pl.DataFrame:
    """The mentions of a Parquet file (``.parquet``), a CSV file with a header (``.csv``) or a
    directory of either (as Spark writes them), as a frame of the columns ``time``, ``src``,
    ``dst`` (Int64) and ``tag`` (String; all null where there is no ``tag`` column), sorted by
    ``time``. Other columns are ignored. With ``spark`` (a SparkSession), Spark reads the data
    (``spark.read.parquet``, or ``spark.read.csv`` with a header and inferred types).

    Raises :class:`~ddflow.errors.InputError`, naming the file and the problem, if it is
    missing, has another extension, cannot be read, lacks a column, or has a ``time``, ``src``
    or ``dst`` column that does not hold integers or holds nulls.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "m.csv")
    >>> _ = open(path, "w").write("time,src,dst,lang\\n30,1,2,en\\n10,2,1,fr\\n")
    >>> read_mentions(path).rows()
    [(10, 2, 1, None), (30, 1, 2, None)]
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"mentions file {path!r} does not exist")
    kind, files = _files(path)
    if spark is not None:
        frames = [_checked(_read_spark(spark, path, kind), path)]
    else:
        frames = [_checked(_read_polars(f, kind), f, csv=kind == "csv") for f in files]
    return pl.concat(frames).sort("time", maintain_order=True)


def _files(path: str) -> tuple[str, list[str]]:
    """The format (``"parquet"`` or ``"csv"``) and the files of ``path``: itself, or the
    ``.parquet`` files of a directory (else its ``.csv`` files) in name order, leaving out
    hidden and bookkeeping files (``.x``, ``_SUCCESS``)."""
    if os.path.isdir(path):
        names = sorted(f for f in os.listdir(path) if not f.startswith((".", "_")))
        for kind in ("parquet", "csv"):
            files = [os.path.join(path, f) for f in names if f.lower().endswith(f".{kind}")]
            if files:
                return kind, files
        raise InputError(f"mentions directory {path!r} holds no .parquet or .csv files")
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".parquet", ".csv"):
        found = repr(ext) if ext else "no extension"
        raise InputError(
            f"mentions file {path!r} has {found}: expected a .parquet or .csv file, or a "
            "directory of them"
        )
    return ext[1:], [path]


def _read_polars(path: str, kind: str) -> pl.DataFrame:
    try:
        if kind == "csv":
            # (the whole file decides the types: a float on the last line makes a float column)
            return pl.read_csv(path, infer_schema_length=None, schema_overrides={"tag": pl.String})
        return pl.read_parquet(path)
    except Exception as e:  # (Polars, Arrow and the OS each raise their own errors)
        raise InputError(f"cannot read mentions file {path!r}: {_root_cause(e)}") from e


def _read_spark(spark: Any, path: str, kind: str) -> pl.DataFrame:
    try:
        if kind == "csv":
            df = spark.read.csv(path, header=True, inferSchema=True)
        else:
            df = spark.read.parquet(path)
        frame = pl.from_arrow(df.toArrow())
    except Exception as e:  # (Spark's errors come from the JVM, as many classes)
        raise InputError(f"cannot read mentions file {path!r}: {_root_cause(e)}") from e
    assert isinstance(frame, pl.DataFrame)  # (a table gives a frame)
    return frame


def _root_cause(e: BaseException) -> str:
    """The first line of the message of the innermost exception ``e`` was raised from (for an
    error of Spark's JVM, of the innermost Java exception: the outer ones only say which call
    failed)."""
    while e.__cause__ is not None:
        e = e.__cause__
    message = str(e)
    java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
    if java is not None:
        try:
            while java.getCause() is not None:
                java = java.getCause()
            message = str(java.getMessage())
        except Exception:  # (a JVM gone: keep the Python message)
            pass
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


def _checked(frame: pl.DataFrame, path: str, *, csv: bool = False) -> pl.DataFrame:
    """``frame``, read from ``path``, checked and cast to :data:`SCHEMA`."""
    for name in ("time", "src", "dst"):
        if name not in frame.columns:
            found = ", ".join(frame.columns) or "none"
            raise InputError(
                f"mentions file {path!r} has no column {name!r} (columns found: {found})"
            )
    for name in ("time", "src", "dst"):
        dtype = frame.schema[name]
        if not dtype.is_integer():
            raise InputError(
                f"mentions file {path!r}: column {name!r} must hold integers, it holds {dtype}"
            )
        nulls = frame[name].is_null()
        if nulls.any():
            row = int(nulls.arg_max() or 0)
            line = f", line {row + 2} of the file" if csv else ""
            more = f" and in {nulls.sum() - 1} more rows" if nulls.sum() > 1 else ""
            raise InputError(
                f"mentions file {path!r}: column {name!r} is null at row {row} (counting from "
                f"0{line}){more}"
            )
    if "tag" not in frame.columns:
        frame = frame.with_columns(tag=pl.lit(None, pl.String))
    try:
        return frame.select(pl.col(name).cast(dtype) for name, dtype in SCHEMA.items())
    except pl.exceptions.PolarsError as e:  # (UInt64 values beyond Int64)
        raise InputError(f"mentions file {path!r}: {_root_cause(e)}") from e
