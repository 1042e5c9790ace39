"""Progress tracking: cases that mutation testing (``python tools/mutation.py progress``) found
no test pinning. Each test names the mutant of ``src/ddflow/timely/progress.py`` it kills."""

from __future__ import annotations

from ddflow.timely.lattice import EPOCHS
from ddflow.timely.progress import ProgressGraph


def test_merging_node_1_leaves_the_second_input_of_another_node_tracked(make_tracker):
    # mutant: Tracker.__init__ keeps a target ``p[1] == 0 or p[1] not in merged`` (the port
    # number looked up among the merged *nodes*): with node 1 merged, every other node's port 1
    # went untracked and its frontier raised "not tracked"
    g = ProgressGraph()
    src = g.add_node([], [EPOCHS])
    merged = g.add_node([EPOCHS, EPOCHS], [])
    other = g.add_node([EPOCHS, EPOCHS], [])
    assert merged == 1
    for target in ((merged, 0), (merged, 1), (other, 0), (other, 1)):
        g.add_edge((src, 0), target)
    tracker = make_tracker(g, merged={merged})
    tracker.update_source(src, 0, (3,), +1)
    tracker.propagate()
    assert tracker.frontier(other, 1) == [(3,)]
    assert tracker.frontier(merged, 1) == [(3,)]


def test_on_demand_frontier_counts_two_pointstamps_at_one_time(make_tracker):
    # mutant: Tracker.count_pending adds a change to ``at.get(None, 0)`` (forgetting the count
    # already held): two capabilities at (5,) retired one at a time left the on-demand
    # frontier empty after the first retirement
    g = ProgressGraph()
    src = g.add_node([], [EPOCHS])
    join = g.add_node([EPOCHS], [])
    g.add_edge((src, 0), (join, 0))
    tracker = make_tracker(g, on_demand={join})
    tracker.update_source(src, 0, (5,), +1)
    tracker.update_source(src, 0, (5,), +1)
    tracker.propagate()
    assert tracker.frontier(join, 0) == [(5,)]
    tracker.update_source(src, 0, (5,), -1)
    tracker.propagate()
    assert tracker.frontier(join, 0) == [(5,)]
    tracker.update_source(src, 0, (5,), -1)
    tracker.propagate()
    assert tracker.frontier(join, 0) == []
    assert tracker.all_complete()
