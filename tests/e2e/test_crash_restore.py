"""The crash harness (:mod:`benchmarks.crash`, which runs it for 100 trials): a pipeline killed
with SIGKILL three times, at random moments, and restarted until it finishes ends with the
change logs and the snapshot of a run that was never interrupted: nothing lost, nothing written
twice. A handful of trials: one worker, two in one process, two processes, one worker with the
reduces in the native core; checkpoints every epoch and every three."""

from __future__ import annotations

import pytest
from benchmarks import crash


@pytest.mark.parametrize(
    ("every", "workers", "seed"),
    [(1, "1", 1), (3, "1", 2), (1, "2", 3), (3, "2", 4), (1, "2p", 5), (1, "1n", 6)],
)
def test_killed_and_restarted_it_ends_as_a_run_never_interrupted(tmp_path, every, workers, seed):
    got = crash.trial(str(tmp_path), every, workers, seed)
    assert len(got["landed"]) == crash.KILLS
    assert any(epoch != "None" for epoch in got["restored"])
