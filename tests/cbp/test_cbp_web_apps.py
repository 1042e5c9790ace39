"""The web applications of ``ddflow.cbp.apps.web`` (cbp-socc2010's URL count, crawl set
difference and crawl queue), each against a plain-Python oracle after every increment, with
random increments, on one worker, three worker threads, two worker processes and two workers
hosted by Spark; and the properties the paper builds them for: the URL count's inner grouping
reads only the state of the URLs in the increment, and FrameBy with Runnable keep two crawls
aligned when one skips an hour (and, once a crawl is marked finished, read the other alone).

Every test feeds a dataflow epoch by epoch (insert, ``advance_to(e + 1)``, ``run()``), checks
the snapshot at epoch ``e``, then closes the inputs, runs, and checks the rest."""

from __future__ import annotations

import collections
from collections import deque

import pytest
from cbp_runtimes import RUNTIMES, new_flow
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.cbp.apps.web import (
    crawl_queue,
    crawl_set_difference,
    crawl_set_difference_stage,
    site_of,
    url_count,
    url_count_stage,
)


def examples(runtime, n):
    """Fewer examples with worker processes (each example's dataflow is slower to start)."""
    return max(4, n // 3) if runtime == (2, True) else n


def url(site, page):
    return f"http://s{site}.example/p{page}"


# a stream of each kind that has it all (several epochs, an empty one, repeats; skipped hours
# and a crawl ending first; rescoring and crawled URLs leaving the queue), run on every
# runtime before the drawn ones, and on Spark
URL_EXAMPLE = [[url(0, 0), url(1, 1), url(0, 0)], [url(1, 1), url(2, 2)], [], [url(0, 0)]]
CRAWLS_EXAMPLE = (
    [[(1, "u1"), (1, "u2"), (2, "u3")], [(3, "u4"), (3, "u5")], [(5, "u6")]],
    [[(1, "u1"), (3, "u4")], [(3, "u3"), (4, "u5")], [(4, "u7")]],
    {"a": 2, "b": 3},
    True,
)
PAGES_EXAMPLE = (
    [
        [(url(0, 0), [url(1, 1), url(1, 1), url(1, 2)])],
        [(url(1, 1), [url(1, 2), url(2, 3)]), (url(0, 5), [])],
        [(url(2, 4), [url(1, 2), url(0, 0)]), (url(1, 2), [])],
    ],
    2.0,
    0.5,
    False,
)


def rows(out, epoch=None):
    """A snapshot as a Counter of its records (tuples of the columns) and multiplicities."""
    snap = out.snapshot(epoch)
    cols = [c for c in snap.columns if c != out.count_column]
    got = collections.Counter()
    for rec, n in zip(snap[cols].itertuples(index=False), snap[out.count_column], strict=True):
        got[tuple(rec)] += int(n)
    return got


def run_cases(flow, cases):
    """Feed every case epoch by epoch in one dataflow, checking each after every epoch, then
    close the inputs and check what follows."""
    epochs = max(c.epochs for c in cases)
    with flow:
        for e in range(epochs):
            for c in cases:
                c.feed(e)
            flow.run()
            for c in cases:
                c.check(e)
        for c in cases:
            c.close(epochs)
        flow.run()
        for c in cases:
            c.check_final()


# ---------------------------------------------------------------------- URL count


class UrlCountCase:
    """URLs per epoch; the oracle: the running count of each URL."""

    def __init__(self, flow, stream, name="url_count"):
        self.stream, self.epochs = stream, len(stream)
        self.urls = flow.input(f"{name}.urls", schema={"url": "str", "n": "int64"})
        self.out = url_count(self.urls, name=name).output(count="multiplicity")
        self.totals = collections.Counter()

    def feed(self, e):
        if e < self.epochs:
            # (a second column, ignored: equal URLs with distinct n are distinct records)
            self.urls.insert([(u, i) for i, u in enumerate(self.stream[e])])
            self.totals.update(self.stream[e])
        self.urls.advance_to(e + 1)

    def want(self):
        return collections.Counter({(u, n): 1 for u, n in self.totals.items()})

    def check(self, e):
        assert rows(self.out, e) == self.want(), f"URL counts at epoch {e}"

    def close(self, epoch):
        self.urls.close()

    def check_final(self):
        assert rows(self.out) == self.want()
        assert set(self.out.changes()["time"]) <= set(range(self.epochs)), "nothing after"


URLS = st.sampled_from([url(i % 3, i) for i in range(8)])
URL_STREAMS = st.lists(st.lists(URLS, max_size=8), min_size=1, max_size=5)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_url_count_matches_a_running_count_after_every_increment(runtime):
    @settings(max_examples=examples(runtime, 15), deadline=None)
    @given(stream=URL_STREAMS)
    @example(stream=URL_EXAMPLE)
    def check(stream):
        flow = new_flow(runtime)
        run_cases(flow, [UrlCountCase(flow, stream)])

    check()


@pytest.mark.parametrize("runtime", ["embedded", (3, False)])
@settings(max_examples=10, deadline=None)
@given(stream=URL_STREAMS)
def test_url_count_reads_only_the_state_of_the_urls_in_the_increment(runtime, stream):
    """Inner grouping: in every epoch translate is called once per distinct URL of the
    increment, and the state records read (``metrics``' ``state_read``, over the workers) are
    those of its URLs already counted, one each, however many URLs are known."""
    flow = new_flow(runtime)
    urls = flow.input("urls", schema={"url": "str"})
    stage = url_count_stage(urls)
    metrics = stage.metrics.output()
    updates = stage["updates"].output(count="multiplicity")
    with flow:
        for e, batch in enumerate(stream):
            urls.insert([(u,) for u in batch])
            urls.advance_to(e + 1)
        urls.close()
        flow.run()
        m = metrics.changes().groupby("time")[["calls", "state_read", "state_size"]].sum()
        changed = updates.changes()
    known: set[str] = set()
    totals = collections.Counter()
    for e, batch in enumerate(stream):
        distinct = set(batch)
        read = calls = size = 0
        if e in m.index:
            calls, read, size = (int(v) for v in m.loc[e])
        assert calls == len(distinct), f"translate calls at epoch {e}"
        assert read == len(distinct & known), f"state records read at epoch {e}"
        if distinct:
            assert size == len(known), f"state kept before epoch {e}"
        known |= distinct
        totals.update(batch)
        # the paper's output flow: the new totals of the URLs of the increment alone
        at = changed[changed["time"] == e]
        assert sorted(zip(at["url"], at["count"], strict=True)) == sorted(
            (u, totals[u]) for u in distinct
        )


# ---------------------------------------------------------------------- crawl set difference


def frame_hours(epochs, end):
    """A crawl's complete hours, ``(epoch complete, hour, urls)``: an hour is complete at the
    epoch a later hour arrives, the last one at the epoch its input closes (``end``)."""
    done, cur = [], None
    for e, recs in enumerate(epochs[:end]):
        for h, u in sorted(recs):
            if cur is not None and h != cur[0]:
                done.append((e, *cur))
                cur = None
            if cur is None:
                cur = (h, set())
            cur[1].add(u)
    if cur is not None:
        done.append((end, *cur))
    return done


def set_difference_model(a, b, end_a, end_b, mark):
    """The URLs reported at each epoch: one step an epoch (both first hours when equal, the
    smaller alone otherwise, a crawl alone once the other is finished and has none left), run
    in an epoch that brings a complete hour or a finished mark, or that follows a step while
    hours are left; a URL is reported once, when first seen, if one crawl alone found it."""
    arrivals = collections.defaultdict(list)
    for crawl, epochs, end in (("a", a, end_a), ("b", b, end_b)):
        for e, h, urls in frame_hours(epochs, end):
            arrivals[e].append((crawl, (h, urls)))
        if mark:
            arrivals[end].append((f"{crawl}_done", None))
    queues = {f: deque() for f in ("a", "b", "a_done", "b_done")}
    finished = {"a": False, "b": False}
    seen: set[str] = set()
    reports = collections.defaultdict(set)
    again, t = None, 0
    while t <= max(arrivals, default=-1) or again == t:
        got = arrivals.get(t, [])
        for f, item in got:
            queues[f].append(item)
        if got or again == t:
            again = None
            marks = [c for c in "ab" if queues[f"{c}_done"]]
            for c in marks:
                finished[c] = True
                queues[f"{c}_done"].popleft()
            qa, qb = queues["a"], queues["b"]
            if qa and qb:
                step = "ab" if qa[0][0] == qb[0][0] else ("a" if qa[0][0] < qb[0][0] else "b")
            elif qa and finished["b"]:
                step = "a"
            elif qb and finished["a"]:
                step = "b"
            else:
                step = ""
            read = {c: queues[c].popleft() for c in step}
            urls = {c: read[c][1] if c in read else set() for c in "ab"}
            for u in urls["a"] | urls["b"]:
                if u in seen:
                    continue
                seen.add(u)
                if u not in urls["b"]:
                    reports[t].add((u, "a", read["a"][0]))
                elif u not in urls["a"]:
                    reports[t].add((u, "b", read["b"][0]))
            if (step or marks) and any(queues.values()):
                again = t + 1
        t += 1
    return reports


class SetDifferenceCase:
    """Two crawls, ``(hour, url)`` per epoch, each closing at its end epoch (``ends``), marked
    finished then if ``mark``."""

    def __init__(self, flow, stream, name="crawl_set_difference"):
        a, b, self.ends, self.mark = stream
        self.recs = {"a": a, "b": b}
        self.epochs = len(a)
        schema = {"url": "str", "hour": "int64"}
        self.inputs = {c: flow.input(f"{name}.{c}", schema=schema) for c in "ab"}
        self.finished = flow.input(f"{name}.finished", schema={"crawl": "str"})
        out = crawl_set_difference(self.inputs["a"], self.inputs["b"], self.finished, name=name)
        self.out = out.output()
        self.reports = set_difference_model(a, b, self.ends["a"], self.ends["b"], self.mark)

    def want(self, e):
        return collections.Counter(r for t, rs in self.reports.items() if t <= e for r in rs)

    def feed(self, e):
        for c, handle in self.inputs.items():
            if e == self.ends[c]:
                self.end(c)
            elif e < self.ends[c]:
                handle.insert([(u, h) for h, u in self.recs[c][e]])
                handle.advance_to(e + 1)
        self.finished.advance_to(e + 1)

    def end(self, c):
        if self.mark:
            self.finished.insert([(c,)])
        self.inputs[c].close()

    def check(self, e):
        assert rows(self.out, e) == self.want(e), f"crawl set difference at epoch {e}"

    def close(self, epoch):
        for c in "ab":
            if self.ends[c] == epoch:
                self.end(c)
        self.finished.close()

    def check_final(self):
        got = collections.defaultdict(collections.Counter)
        for r in self.out.changes().itertuples(index=False):
            assert r.diff > 0, "a report is never withdrawn"
            got[r.time][(r.url, r.crawl, r.hour)] += r.diff
        want = {t: collections.Counter(rs) for t, rs in self.reports.items() if rs}
        assert dict(got) == want, "the epoch of each report"
        assert rows(self.out) == self.want(max(self.reports, default=0))


@st.composite
def crawl_streams(draw, epochs=None):
    """Two crawls over a few epochs: hours that never decrease, each epoch's a step of 0 (the
    hour goes on), 1 or 2 (an hour skipped) on from the last; each crawl's input closes at an
    end epoch (maybe before the other's), both marked finished then or neither."""
    n = epochs or draw(st.integers(1, 4))
    crawls = []
    for _ in "ab":
        hour, per_epoch = 0, []
        for _ in range(n):
            recs = []
            for u in draw(st.lists(URLS, max_size=5)):
                hour += draw(st.sampled_from([0, 0, 1, 2]))
                recs.append((hour, u))
            per_epoch.append(recs)
        crawls.append(per_epoch)
    ends = {c: draw(st.integers(1, n)) for c in "ab"}
    return crawls[0], crawls[1], ends, draw(st.booleans())


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_crawl_set_difference_matches_the_model_after_every_increment(runtime):
    @settings(max_examples=examples(runtime, 15), deadline=None)
    @given(stream=crawl_streams())
    @example(stream=CRAWLS_EXAMPLE)
    def check(stream):
        flow = new_flow(runtime)
        run_cases(flow, [SetDifferenceCase(flow, stream)])

    check()


def test_the_set_difference_example_of_the_docstring():
    """The example of ``crawl_set_difference``'s docstring: the model gives what it says, and
    the application what the model gives, at every epoch."""
    a = [[(1, "x"), (1, "y"), (2, "z")]]
    b = [[(1, "x"), (3, "z"), (3, "w")]]
    assert frame_hours(a, 1) == [(0, 1, {"x", "y"}), (1, 2, {"z"})]
    assert set_difference_model(a, b, 1, 1, mark=False) == {0: {("y", "a", 1)}, 1: {("z", "a", 2)}}
    flow = dd.Dataflow()
    case = SetDifferenceCase(flow, (a, b, {"a": 1, "b": 1}, True))
    assert case.reports == {0: {("y", "a", 1)}, 1: {("z", "a", 2)}, 2: {("w", "b", 3)}}
    run_cases(flow, [case])


@pytest.mark.parametrize("runtime", ["embedded", (3, False)])
def test_frame_by_and_runnable_keep_the_crawls_aligned_when_one_skips_an_hour(runtime):
    """Crawl b skips hour 2: hour 2 of a is read alone, one epoch, then hour 3 of both, so
    that u3 (a at 2, b at 3) is a's alone, found an hour earlier, and u4 (both at 3) nobody's;
    were the two read in turn regardless of hours, u3 would be in both and u4 b's alone."""
    flow = new_flow(runtime)
    a = flow.input("a", schema={"url": "str", "hour": "int64"})
    b = flow.input("b", schema={"url": "str", "hour": "int64"})
    stage = crawl_set_difference_stage(a, b)
    only_a, only_b = stage["only_a"].output(), stage["only_b"].output()
    with flow:
        a.insert([("u1", 1), ("u2", 1), ("u3", 2), ("u4", 3), ("u5", 3)])
        b.insert([("u1", 1), ("u4", 3), ("u3", 3)])
        a.advance_to(1)
        b.advance_to(1)
        flow.run()
        a.insert([("u6", 4)])
        b.insert([("u6", 4), ("u7", 4)])
        a.advance_to(2)
        b.advance_to(2)
        flow.run()
        a.close()
        b.close()
        flow.run()
        got = {
            (c, r.url, r.hour, r.time)
            for c, out in (("a", only_a), ("b", only_b))
            for r in out.changes().itertuples(index=False)
        }
    # epoch 0: hour 1 of both (hours 2, 3 of a wait); 1: hour 2 of a alone (b's hour 3 is
    # complete, a later hour); 2: hour 3 of both; 3: hour 4 of both (complete at the close)
    assert got == {("a", "u2", 1, 0), ("a", "u3", 2, 1), ("a", "u5", 3, 2), ("b", "u7", 4, 3)}


def test_a_finished_crawl_lets_the_other_be_read_alone():
    """Crawl a ends after hour 1 while b goes on with hours 2 and 3: without a finished mark
    b's later hours wait for a, forever; with ``("a",)`` marked when a closes they are read
    alone, one an epoch."""
    flow = dd.Dataflow()
    a = flow.input("a", schema={"url": "str", "hour": "int64"})
    b = flow.input("b", schema={"url": "str", "hour": "int64"})
    finished = flow.input("finished", schema={"crawl": "str"})
    waits = crawl_set_difference(a, b, name="waits").output()
    goes_on = crawl_set_difference(a, b, finished, name="goes_on").output()
    with flow:
        a.insert([("x", 1), ("y", 1)])
        b.insert([("x", 1), ("z", 2), ("y", 3), ("w", 3)])
        for i in (a, b, finished):
            i.advance_to(1)
        flow.run()
        finished.insert([("a",)])
        a.close()
        b.advance_to(2)
        finished.advance_to(2)
        flow.run()
        b.close()
        finished.close()
        flow.run()
        changes = goes_on.changes()
        cols = [changes[c] for c in ("url", "crawl", "hour", "time")]
        got = sorted(zip(*cols, strict=True))
        waiting = rows(waits)
    # epoch 0: b's hours 1 and 2 are complete, a's hour 1 is not (a later hour or the close
    # completes it); 1: a closes, marked finished: hour 1 of both (y is a's); 2: b's hour 2
    # alone (z); 3: its hour 3, complete when b closed at 2 (w; y is known)
    assert got == [("w", "b", 3, 3), ("y", "a", 1, 1), ("z", "b", 2, 2)]
    assert waiting == collections.Counter({("y", "a", 1): 1})  # b's hours 2 and 3 wait


# ---------------------------------------------------------------------- crawl queue


def site(url):
    return url.split("/")[2]


def queue_model(pages, threshold, weight):
    """The crawl queue from scratch: in-links per URL and per site over the pages crawled, the
    URLs linked to and not crawled whose score passes the threshold."""
    url_in, site_in, crawled = collections.Counter(), collections.Counter(), set()
    for url, links in pages:
        crawled.add(url)
        for link in links:
            url_in[link] += 1
            site_in[site(link)] += 1
    scores = {u: n + weight * site_in[site(u)] for u, n in url_in.items() if u not in crawled}
    return collections.Counter({(u, s): 1 for u, s in scores.items() if s >= threshold})


class CrawlQueueCase:
    """Pages crawled per epoch; ``as_text``: their links given as one string (an input of
    ``str``), else as a list (mapped from such an input)."""

    def __init__(self, flow, stream, name="crawl"):
        self.pages, self.threshold, self.weight, self.as_text = stream
        self.epochs = len(self.pages)
        self.input = flow.input(f"{name}.pages", schema={"url": "str", "links": "str"})
        pages = self.input
        if not self.as_text:
            pages = pages.map(
                lambda r: (r[0], r[1].split()), schema={"url": "str", "links": "list[str]"}
            )
        self.out = crawl_queue(
            pages, threshold=self.threshold, site_weight=self.weight, name=name
        ).output()
        self.seen: list = []

    def feed(self, e):
        if e < self.epochs:
            self.input.insert([(u, " ".join(links)) for u, links in self.pages[e]])
            self.seen += self.pages[e]
        self.input.advance_to(e + 1)

    def want(self):
        return queue_model(self.seen, self.threshold, self.weight)

    def check(self, e):
        assert rows(self.out, e) == self.want(), f"crawl queue at epoch {e}"

    def close(self, epoch):
        self.input.close()

    def check_final(self):
        assert rows(self.out) == self.want()
        assert set(self.out.changes()["time"]) <= set(range(self.epochs)), "nothing after"


PAGES = st.lists(st.tuples(URLS, st.lists(URLS, max_size=4)), max_size=4)
QUEUE_STREAMS = st.tuples(
    st.lists(PAGES, min_size=1, max_size=4),
    st.sampled_from([1.0, 2.0, 3.5]),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.booleans(),
)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_crawl_queue_matches_a_recount_after_every_increment(runtime):
    @settings(max_examples=examples(runtime, 15), deadline=None)
    @given(stream=QUEUE_STREAMS)
    @example(stream=PAGES_EXAMPLE)
    def check(stream):
        flow = new_flow(runtime)
        run_cases(flow, [CrawlQueueCase(flow, stream)])

    check()


def test_crawl_queue_rescores_and_drops_crawled_urls():
    """A URL enters with its score, is retracted and inserted again when new links to its
    site rescore it, and leaves when crawled."""
    flow = dd.Dataflow()
    pages = flow.input("pages", schema={"url": "str", "links": "str"})
    queue = crawl_queue(pages, threshold=2.0, site_weight=0.5).output()
    with flow:
        pages.insert([("http://a.org/", "http://b.org/1 http://b.org/1 http://c.org/")])
        pages.advance_to(1)
        pages.insert([("http://c.org/", "http://b.org/2")])
        pages.advance_to(2)
        pages.insert([("http://x.org/", "http://b.org/1 http://c.org/"), ("http://b.org/1", "")])
        pages.close()
        flow.run()
        changes = queue.changes()
    cols = [changes[c] for c in ("time", "url", "score", "diff")]
    got = sorted(zip(*cols, strict=True))
    assert got == [
        (0, "http://b.org/1", 3.0, 1),  # 2 in-links, its site 2: 2 + 0.5 * 2
        (1, "http://b.org/1", 3.0, -1),  # its site gets a third in-link
        (1, "http://b.org/1", 3.5, 1),
        (1, "http://b.org/2", 2.5, 1),  # (c.org/, crawled at 1, never entered: 1.5)
        (2, "http://b.org/1", 3.5, -1),  # crawled
        (2, "http://b.org/2", 2.5, -1),  # its site's fourth in-link: 1 + 0.5 * 4
        (2, "http://b.org/2", 3.0, 1),
    ]


def test_site_of_is_the_host():
    assert site_of("http://A.com:8080/x?y") == "a.com"
    assert site_of("https://b.org") == "b.org"
    assert site_of("c.net/page") == "c.net"


# ---------------------------------------------------------------------- Spark


def test_the_three_apps_on_spark(spark):
    """All three in one dataflow on two workers hosted by Spark, a few epochs each."""
    flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2))
    try:
        cases = [
            UrlCountCase(flow, URL_EXAMPLE),
            SetDifferenceCase(flow, CRAWLS_EXAMPLE),
            CrawlQueueCase(flow, PAGES_EXAMPLE),
        ]
        run_cases(flow, cases)
    finally:
        flow.close()  # (the two workers hold Spark task slots)
