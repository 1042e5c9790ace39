"""Worked examples from the papers, checked exactly as small tables of changes.

naiad-tech-report Figure 13 (§3.1): ``Distinct`` over times ``t = 0..3``. At ``t = 1`` the input
receives ``{A, A, B, C}`` and the operator emits ``+A, +B, +C``; at ``t = 2`` one ``A`` is removed,
which changes the operator's state but not its output; at ``t = 3`` the other ``A`` is removed and
the operator emits ``-A``.
"""

from __future__ import annotations

from harness import changes_table, check_stream

FIGURE_13 = [
    [],  # t = 0: {}
    [("xs", ("A",), 1), ("xs", ("A",), 1), ("xs", ("B",), 1), ("xs", ("C",), 1)],
    [("xs", ("A",), -1)],  # t = 2: {A, B, C}
    [("xs", ("A",), -1)],  # t = 3: {B, C}
]


def test_distinct_of_figure_13(runtime):
    run = check_stream(
        lambda flow, i: i["xs"].distinct(), {"xs": {"r": "str"}}, FIGURE_13, runtime, run_points=[]
    )
    (out,) = run.outputs
    #                         record time diff
    assert changes_table(out) == [
        ("A", 1, 1),
        ("A", 3, -1),
        ("B", 1, 1),
        ("C", 1, 1),
    ]
    snapshots = [out.snapshot(epoch=t).to_dict("list") for t in range(4)]
    assert snapshots == [
        {"r": [], "count": []},
        {"r": ["A", "B", "C"], "count": [1, 1, 1]},
        {"r": ["A", "B", "C"], "count": [1, 1, 1]},
        {"r": ["B", "C"], "count": [1, 1]},
    ]


def test_distinct_of_figure_13_one_epoch_at_a_time(runtime):
    run = check_stream(lambda flow, i: i["xs"].distinct(), {"xs": {"r": "str"}}, FIGURE_13, runtime)
    assert changes_table(run.outputs[0]) == [("A", 1, 1), ("A", 3, -1), ("B", 1, 1), ("C", 1, 1)]
