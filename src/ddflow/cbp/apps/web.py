"""Three web applications of stateful bulk processing (cbp-socc2010), built from CBP stages.

Each is a function from ddflow collections to a ddflow collection whose snapshot at a complete
epoch is the application's result at that epoch; the ``*_stage(s)`` variants also give the
stages themselves (their flows, state and ``metrics``).

* :func:`url_count` (the paper's Figure 3): the number of times each URL was seen so far.
* :func:`crawl_set_difference` (Figure 4): the URLs found by one of two crawlers and not by the
  other, hour by hour, the two crawls kept aligned by FrameBy and Runnable.
* :func:`crawl_queue` (§1.1, Figures 1 and 10): the crawl queue, the uncrawled URLs whose score
  (from the in-links of the URL and of its site) passes a threshold.

Every flow of a CBP stage carries insertions: the input collections here only grow (a record
removed from one raises :class:`ddflow.CBPError` when the stage reads it).

A short session (the URL count):

>>> import ddflow as dd
>>> from ddflow.cbp.apps.web import url_count
>>> flow = dd.Dataflow()
>>> urls = flow.input("urls", schema={"url": "str"})
>>> counts = url_count(urls).output(count="multiplicity")  # (its records hold a count)
>>> urls.insert([("a.com/x",), ("b.org/",), ("a.com/x",)]); urls.advance_to(1)
>>> urls.insert([("a.com/x",)]); urls.advance_to(2); flow.run()
>>> counts.snapshot(0).sort_values("url").to_dict("list")
{'url': ['a.com/x', 'b.org/'], 'count': [2, 1], 'multiplicity': [1, 1]}
>>> counts.snapshot(1).sort_values("url").to_dict("list")
{'url': ['a.com/x', 'b.org/'], 'count': [3, 1], 'multiplicity': [1, 1]}
>>> flow.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ddflow import cbp
from ddflow.api.collection import Collection
from ddflow.errors import SchemaError, call_site
from ddflow.expr.nodes import col, lit

__all__ = [
    "CrawlQueue",
    "crawl_queue",
    "crawl_queue_stages",
    "crawl_set_difference",
    "crawl_set_difference_stage",
    "site_of",
    "url_count",
    "url_count_stage",
]

Record = tuple[Any, ...]
Flows = Mapping[str, list[Record]]


# ---------------------------------------------------------------------- URL count (Figure 3)


def _count_urls(url: str, state: list[Record], flows: Flows, out: Any) -> None:
    """URLCount's translate (Figure 3): the URL's records in this increment plus its total so
    far (its state record, if any); the new total is its state and is written to ``updates``."""
    count = len(flows["urls"]) + (state[0][1] if state else 0)
    out.state((url, count))
    out.write("updates", (url, count))


def url_count_stage(urls: Collection, *, name: str = "url_count") -> cbp.Stage:
    """The URL count stage of the paper's Figure 3 over the column ``url`` (str) of ``urls``.

    Its key is the URL and its grouping is *inner*: in an epoch, translate is called for the
    URLs of that epoch's records alone, and reads only their state records (one ``(url,
    count)`` each), whatever the number of URLs known (the stage's ``metrics`` count the state
    records read: ``state_read``). Every record counts, with its multiplicity; other columns of
    ``urls`` are ignored.

    * ``stage.state``: columns ``url``, ``count``, the total per URL after each epoch's run
      (what :func:`url_count` returns);
    * ``stage["updates"]``: columns ``url``, ``count``, the new totals of the URLs seen in an
      epoch, inserted at that epoch (the paper's output flow: what changed, not the totals).
    """
    return cbp.stage(
        name,
        _count_urls,
        key={"url": "str"},
        inputs={"urls": urls.select("url")},
        outputs={"updates": {"url": "str", "count": "int64"}},
        state={"url": "str", "count": "int64"},
        grouping="inner",
    )


def url_count(urls: Collection, *, name: str = "url_count") -> Collection:
    """The number of records of each URL in ``urls`` (column ``url``, str) so far.

    Columns ``url`` (str) and ``count`` (int64), one row per URL seen. No lag: the snapshot at a
    complete epoch ``e`` counts the records of epochs ``0..e`` (the stage runs in the epoch its
    input arrives). As ``count`` is a column, ``snapshot`` gives each row's multiplicity (1) in
    a column ``multiplicity``. Built by :func:`url_count_stage` (inner grouping: an epoch reads
    the state of its own URLs only); this is the stage's state collection.

    ``urls`` must only grow: a record removed raises :class:`ddflow.CBPError`.
    """
    return url_count_stage(urls, name=name).state


# ---------------------------------------------------------------------- crawl set difference


def _hour(record: Record, state: Any) -> tuple[int, Any]:
    """FrameBy of a crawl flow (records ``(hour, url)``): the framing key is the hour."""
    return int(record[0]), state


def _aligned(
    keys: Mapping[str, list[int]], done: tuple[bool, bool]
) -> tuple[list[str], list[str], tuple[bool, bool]]:
    """Runnable of the set difference: the hours of both crawls' first complete increments;
    both are read when equal, the smaller alone otherwise (a crawl that skips an hour does not
    shift the other); nothing until both crawls have one, except that a crawl marked finished
    with nothing left lets the other's increments be read alone. ``done`` (the Runnable's
    state) remembers the crawls marked finished; their marks are removed, never read."""
    a_done = bool(done[0]) or bool(keys.get("a_done"))
    b_done = bool(done[1]) or bool(keys.get("b_done"))
    marks = [f for f in ("a_done", "b_done") if keys.get(f)]
    a, b = keys["a"], keys["b"]
    reads: list[str]
    if a and b:
        reads = ["a", "b"] if a[0] == b[0] else (["a"] if a[0] < b[0] else ["b"])
    elif a and b_done:
        reads = ["a"]
    elif b and a_done:
        reads = ["b"]
    else:
        reads = []
    return reads, reads + marks, (a_done, b_done)


def _set_difference(url: str, state: list[Record], flows: Flows, out: Any) -> None:
    """SetDiff's translate (Figure 4), for a URL in the hour's increments: a URL with state was
    reported before or found by both crawls, and stays known; a new one becomes known and is
    reported if one crawl alone found it (records ``(hour, url)``)."""
    out.state((url,))
    if state:
        return
    a, b = flows["a"], flows["b"]
    if a and not b:
        out.write("only_a", (url, a[0][0]))
    elif b and not a:
        out.write("only_b", (url, b[0][0]))


def crawl_set_difference_stage(
    a: Collection,
    b: Collection,
    finished: Collection | None = None,
    *,
    name: str = "crawl_set_difference",
) -> cbp.Stage:
    """The symmetric set difference stage of the paper's Figure 4 (see
    :func:`crawl_set_difference` for the inputs and when an hour is read).

    Flows ``a`` and ``b`` (records ``(hour, url)``, each crawl's columns ``hour``, ``url``)
    FrameBy the hour and route by the URL (inner grouping: the URLs of the hour's increments
    are called, reading only their state, one ``(url,)`` record per URL known); ``a_done`` and
    ``b_done`` (when ``finished`` is given) carry the finished marks, removed by Runnable and
    never read. Outputs ``only_a`` and ``only_b``, columns ``url``, ``hour``: the URLs reported,
    inserted at the epoch of the run that read their hour. ``stage.state``: the URLs known.
    """
    inputs: dict[str, Collection | cbp.Flow] = {
        # (hour first: within an epoch a flow is framed in the order of its columns)
        "a": cbp.Flow(a.select("hour", "url"), route_by="url", frame_by=_hour),
        "b": cbp.Flow(b.select("hour", "url"), route_by="url", frame_by=_hour),
    }
    if finished is not None:
        crawl = finished.select("crawl")
        for c in ("a", "b"):
            inputs[f"{c}_done"] = cbp.Flow(crawl.filter(col("crawl") == c), route_by=cbp.ALL)
    return cbp.stage(
        name,
        _set_difference,
        key={"url": "str"},
        inputs=inputs,
        outputs={
            "only_a": {"url": "str", "hour": "int64"},
            "only_b": {"url": "str", "hour": "int64"},
        },
        state={"url": "str"},
        grouping="inner",
        runnable=_aligned,
        runnable_state=(False, False),
    )


def crawl_set_difference(
    a: Collection,
    b: Collection,
    finished: Collection | None = None,
    *,
    name: str = "crawl_set_difference",
) -> Collection:
    """The URLs found by one crawl only, hour by hour (the paper's Figure 4).

    ``a`` and ``b`` are two crawls, columns ``url`` (str) and ``hour`` (an integer type); each
    crawl's hours must not decrease from one epoch to the next (an hour may span epochs). The
    result has columns ``url`` (str), ``crawl`` (``"a"`` or ``"b"``) and ``hour`` (int64): the
    row ``(u, "a", h)`` says that ``u`` was first seen in hour ``h``, by crawl ``a`` and not by
    ``b`` in that hour. A URL seen earlier, by either crawl, is not reported again (the paper's
    footnote 2: the result is the change in unique URLs observed), so each URL is reported at
    most once, and a URL both crawls found in the hour it was first seen is never reported.

    When an hour is reported:

    * an hour of a crawl is *complete* at the epoch in which a record of a later hour arrives
      on that crawl, or, when the crawl's input closes, at the epoch that input had reached
      (its last ``advance_to``; run the flow after it, before closing);
    * the stage runs at most once per epoch, and reads one *step*: of the first complete hours
      of ``a`` and ``b``, both if equal, else the smaller alone. It needs a complete hour on
      both crawls, so an hour waits for the other crawl to complete an hour of its own; a
      crawl that skips an hour (no records) does not shift the other;
    * it runs at an epoch at which a crawl's hour completes (or a finished mark arrives), and,
      while complete hours are left after a step, at the next epoch: a backlog of ``k`` steps
      is read on ``k`` consecutive epochs, which run as the dataflow reaches them (advance the
      inputs or close them);
    * a step's URLs are in the snapshot at the epoch of the run that read it and later.

    The end of the streams: the stage cannot tell that a crawl ended, so without ``finished``
    the hours of one crawl after the other crawl's last hour stay unread (like the paper's
    Runnable, it waits for the other crawl). ``finished``, a collection with a column
    ``crawl`` (str), marks the crawls that ended: insert ``("a",)`` in the epoch crawl ``a``'s
    input closes (or later); once ``a``'s complete hours are all read, ``b``'s are read alone,
    one per epoch, and reported as found by ``b`` only (and symmetrically). Mark a crawl no
    earlier than that: its hour still open would be read out of order later.

    For example, crawl ``a`` finds ``x``, ``y`` in hour 1 and ``z`` in hour 2, crawl ``b``
    finds ``x`` in hour 1 and ``z``, ``w`` in hour 3, all in epoch 0, and both inputs close at
    epoch 1, ``a`` marked finished then: hours 1 of both are complete at epoch 0, hour 2 of
    ``a`` and hour 3 of ``b`` at epoch 1. Epoch 0 reads hour 1 of both: ``(y, a, 1)``; epoch 1
    reads hour 2 of ``a`` alone (``b`` skipped it): ``(z, a, 2)``; epoch 2 reads hour 3 of
    ``b`` alone, ``a`` being finished: ``(w, b, 3)`` (``z`` is known). Without the mark,
    ``(w, b, 3)`` is never reported.
    """
    stage = crawl_set_difference_stage(a, b, finished, name=name)
    only_a = stage["only_a"].select("url", crawl=lit("a"), hour=col("hour"))
    only_b = stage["only_b"].select("url", crawl=lit("b"), hour=col("hour"))
    return only_a.concat(only_b)


# ---------------------------------------------------------------------- crawl queue


def site_of(url: str) -> str:
    """The site of a URL: its host, lower case; for a URL without a scheme, what precedes the
    first ``/``.

    >>> site_of("http://A.com:80/x"), site_of("a.com/x")
    ('a.com', 'a.com')
    """
    host = urlsplit(url).hostname
    if host:
        return host
    return url.split("/", 1)[0].lower()


def _extract_links(url: str, state: list[Record], flows: Flows, out: Any) -> None:
    """*extract links* (record-wise, per crawled page ``(url, links)``): the page, with its
    site, to ``crawled``; each of its links ``(src, dst, dst's site)`` to ``links``. (``links``
    is a list of URLs, or a string of them separated by white space.)"""
    for page, links in flows["pages"]:
        out.write("crawled", (page, site_of(page)))
        for link in links.split() if isinstance(links, str) else links or ():
            out.write("links", (page, link, site_of(link)))


def _link_keys(record: Record) -> list[tuple[str, str]]:
    """RouteBy of *count in-links*: a link ``(src, dst, site)`` counts for two groups, its
    destination URL and its destination's site."""
    return [("url", record[1]), ("site", record[2])]


def _count_in_links(key: tuple[str, str], state: list[Record], flows: Flows, out: Any) -> None:
    """*count in-links*: a group per URL (``("url", u)``) and per site (``("site", s)``); its
    in-links so far are its state, and its new total is written to ``url_counts`` (with the
    URL's site) or to ``site_counts``."""
    kind, name = key
    links = flows["links"]
    count = len(links) + (state[0][2] if state else 0)
    out.state((kind, name, count))
    if kind == "url":
        out.write("url_counts", (name, links[0][2], count))
    else:
        out.write("site_counts", (name, count))


@dataclass(frozen=True)
class CrawlQueue:
    """The crawl queue's stages (see :func:`crawl_queue_stages`) and the queue itself."""

    extract: cbp.Stage
    count: cbp.Stage
    merge: cbp.Stage
    queue: Collection


def crawl_queue_stages(
    pages: Collection,
    *,
    threshold: float = 2.0,
    site_weight: float = 0.5,
    name: str = "crawl",
) -> CrawlQueue:
    """The incremental crawl queue of the paper's Figure 1, as three stages (Figure 10's
    grouping of them):

    * ``extract`` (*extract links*, record-wise, no state), key the page's URL: reads the pages
      (``url``, ``links``); writes ``crawled`` (``url``, ``site``) for each page and ``links``
      (``src``, ``dst``, ``site``: the link's site) for each of its links;
    * ``count`` (*count in-links*, stateful, inner grouping), key ``(kind, name)``: each link
      is routed to two groups, ``("url", dst)`` and ``("site", site)`` (a RouteBy giving two
      keys), which keep their in-link counts as state (columns ``kind``, ``name``, ``count``)
      and write their new totals to ``url_counts`` (``url``, ``site``, ``count``) and
      ``site_counts`` (``site``, ``count``);
    * ``merge`` (*merge*, with *score* and *threshold* as its postprocessing, as in Figure 10;
      stateful, inner grouping), key the site: every flow (``url_counts``, ``site_counts``,
      ``crawled``) routes by the site, ordered by the URL; its state is the site's known URLs,
      columns ``site``, ``url``, ``url_inlinks``, ``site_inlinks``, ``crawled`` (bool): the
      counts merged with the set of crawled pages. A URL's score is ``url_inlinks + site_weight
      * site_inlinks``; it is in the queue when not crawled and its score is at least
      ``threshold``. For each URL whose queue entry changes (it is crawled, or rescored by its
      own or its site's new in-links) the stage writes ``leave`` (``url``, ``score``, the old
      entry) and ``enter`` (the new one). Its Runnable is :data:`cbp.RunnableANY`: it runs in
      every epoch any of its flows has records.

    ``queue`` is ``enter`` minus ``leave``: the queue as a collection (see
    :func:`crawl_queue`).
    """

    def merge_score_threshold(site: str, state: list[Record], flows: Flows, out: Any) -> None:
        """*merge* the site's new counts and crawled pages into its state, then *score* and
        *threshold* the URLs: a URL whose queue entry changed leaves and (re)enters."""
        site_in = state[0][3] if state else 0
        known = {url: (n, crawled) for _, url, n, _, crawled in state}
        before = {url: entry(url, n, site_in, c) for url, (n, c) in known.items()}
        for _, n in flows["site_counts"]:
            site_in = max(site_in, n)
        for url, _, n in flows["url_counts"]:
            known[url] = (n, known.get(url, (0, False))[1])
        for url, _ in flows["crawled"]:
            known[url] = (known.get(url, (0, False))[0], True)
        for url in sorted(known):
            n, crawled = known[url]
            out.state((site, url, n, site_in, crawled))
            old, new = before.get(url), entry(url, n, site_in, crawled)
            if old != new:
                if old is not None:
                    out.write("leave", old)
                if new is not None:
                    out.write("enter", new)

    def entry(url: str, url_in: int, site_in: int, crawled: bool) -> tuple[str, float] | None:
        """The URL's queue entry ``(url, score)``, or None when it is not in the queue."""
        score = url_in + site_weight * site_in
        return None if crawled or score < threshold else (url, score)

    kind = pages.schema["links"].kind if "links" in pages.schema.names else None
    if kind not in ("list", "str"):
        raise SchemaError(
            "crawl_queue: pages need a column 'links' of type list[str] (or str, URLs separated "
            f"by white space); their columns: {dict(pages.schema.items())}",
            site=call_site(),
        )
    extract = cbp.stage(
        f"{name}.extract_links",
        _extract_links,
        key={"url": "str"},
        inputs={"pages": pages.select("url", "links")},
        outputs={
            "crawled": {"url": "str", "site": "str"},
            "links": {"src": "str", "dst": "str", "site": "str"},
        },
    )
    count = cbp.stage(
        f"{name}.count_in_links",
        _count_in_links,
        key={"kind": "str", "name": "str"},
        inputs={"links": cbp.Flow(extract["links"], route_by=_link_keys)},
        outputs={
            "url_counts": {"url": "str", "site": "str", "count": "int64"},
            "site_counts": {"site": "str", "count": "int64"},
        },
        state={"kind": "str", "name": "str", "count": "int64"},
        grouping="inner",
    )
    entries = {"url": "str", "score": "float64"}
    merge = cbp.stage(
        f"{name}.merge",
        merge_score_threshold,
        key={"site": "str"},
        inputs={
            "url_counts": cbp.Flow(count["url_counts"], order_by="url"),
            "site_counts": count["site_counts"],
            "crawled": cbp.Flow(extract["crawled"], order_by="url"),
        },
        outputs={"enter": entries, "leave": entries},
        state={
            "site": "str",
            "url": "str",
            "url_inlinks": "int64",
            "site_inlinks": "int64",
            "crawled": "bool",
        },
        grouping="inner",
        runnable=cbp.RunnableANY,
    )
    queue = merge["enter"].concat(merge["leave"].negate())
    return CrawlQueue(extract, count, merge, queue)


def crawl_queue(
    pages: Collection,
    *,
    threshold: float = 2.0,
    site_weight: float = 0.5,
    name: str = "crawl",
) -> Collection:
    """The crawl queue (the paper's §1.1, Figures 1 and 10) of the crawled ``pages``.

    ``pages`` has the columns ``url`` (str), a crawled page, and ``links`` (``list[str]``, or a
    str of URLs separated by white space), the URLs it links to; each epoch brings the pages of
    a crawl. The *site* of a URL is its host (:func:`site_of`). A URL's in-links are the links
    to it in the pages crawled so far (each element of a page's ``links``, each time the page
    is fed), its site's in-links those to any URL of the site, and its score

        ``score = url_inlinks + site_weight * site_inlinks``

    The result, columns ``url`` (str) and ``score`` (float64), holds every URL linked to and
    not crawled whose score is at least ``threshold``: the next crawl. No lag: the snapshot at
    a complete epoch ``e`` is the queue after the pages of epochs ``0..e``; a URL leaves the
    queue (a retraction) in the epoch it is crawled, and is retracted and inserted again with
    its new score in an epoch that rescores it (new in-links to it or to its site).

    Built by :func:`crawl_queue_stages` (extract links, count in-links, merge with score and
    threshold); ``pages`` must only grow.
    """
    return crawl_queue_stages(pages, threshold=threshold, site_weight=site_weight, name=name).queue
