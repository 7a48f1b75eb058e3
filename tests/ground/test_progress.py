"""What a computation shows while it runs: bar labels, progress inside runs, each warning once."""
import logging

import pandas as pd
import pytest

from fedpaper.ground import progress as PG
from fedpaper.runs import sweep as W
from fedpaper.runs.store import ResultStore
from fedpaper.runs.sweep import run_sweep


@pytest.mark.parametrize("aid, desc, label", [
    ("fedmt/fig2a", "fedmt table2", "fedmt/fig2a"),  # another artifact's sweep name is dropped
    ("fedmt/fig2a", "fedmt table2 C=10", "fedmt/fig2a C=10"),
    ("fednca/table1", "fednca/table1", "fednca/table1"),  # never twice
    ("fedpals/table1", "fedpals table1 cifar10 C=3", "fedpals/table1 cifar10 C=3"),
    ("privlabels/fig2", "privlabels cifar10", "privlabels/fig2 cifar10"),
    ("", "fedmt table2", "fedmt table2"),  # outside an artifact: the sweep's own label
])
def test_a_bar_label_is_the_artifact_id_plus_the_sweeps_short_name_at_most_once(aid, desc, label):
    assert PG.bar_label(aid, desc) == label


class _Bars:
    """Records every bar the sweep opens (label, and its position at each update)."""

    def __init__(self, monkeypatch):
        self.bars = []
        real = W._progress

        def fake(total, initial, desc, enabled):
            bar = real(total, initial, desc, True)
            seen = []
            update = bar.update

            def rec(n=1):
                update(n)
                seen.append(bar.n)
            bar.update = rec
            self.bars.append((bar.desc, seen, total))
            return bar
        monkeypatch.setattr(W, "_progress", fake)
        monkeypatch.setenv("FEDPAPER_PROGRESS", "text")


def _trainer(rounds):
    """run_fn_many that reports `rounds` rounds for its whole chunk, as the engine does."""
    def many(chunk):
        for rnd in range(1, rounds + 1):
            PG.round_done(rnd, rounds, len(chunk))
        return [{"spec": s} for s in chunk]
    return many


def test_rounds_advance_the_bar_inside_runs_and_the_label_is_the_artifact_id(tmp_path, monkeypatch):
    bars = _Bars(monkeypatch)
    run_sweep([{"i": i} for i in range(4)], run_fn_many=_trainer(5), batch_size=2,
              store=ResultStore(tmp_path), desc="fedmt table2", scope=W.SweepScope(artifact="fedmt/fig2a"))
    (label, seen, total), = bars.bars
    assert label == "fedmt/fig2a" and total == 4
    # 5 rounds of 2 runs: the bar moves 0.4 runs a round, 10 moves, and ends at 4 runs
    assert len(seen) >= 10 and seen[0] == pytest.approx(0.4) and seen[-1] == pytest.approx(4)
    assert all(b >= a for a, b in zip(seen, seen[1:])) and max(seen) <= 4 + 1e-9
    assert len([x for x in seen if 0 < x < 1]) >= 2  # a long run is never a frozen 0%


def test_a_run_without_round_reports_still_counts_whole_runs(tmp_path, monkeypatch):
    bars = _Bars(monkeypatch)
    run_sweep([{"i": i} for i in range(3)], run_fn=lambda s: s, store=ResultStore(tmp_path), desc="x")
    (label, seen, total), = bars.bars
    assert label == "x" and seen == [1, 2, 3]


def test_the_engines_rounds_move_a_real_sweeps_bar(cache_tmp, monkeypatch):
    """Real training: the trainer reports each round (it names no method) and the bar of the
    sweep moves inside the runs before the first result is stored. Runs of two settings of Table 1,
    trained as the pipeline trains its declared runs (its job's sweeps, one per setting, in the
    artifact's scope): each bar is labelled by the artifact and its setting."""
    from pipeline_harness import declared_job

    from fedpaper.papers import fedpals
    from fedpaper.papers.fedpals import train as TR

    bars = _Bars(monkeypatch)
    job, p = declared_job(fedpals.table1, "fedpals/table1", profile="smoke")
    p = dict(p, seeds=[0, 1], rounds={"fashion-mnist": 4, "cifar10": 4})
    settings = [{"dataset": "fashion-mnist", "split": {"scheme": "sparsity", "C": c}, "methods": ["FedAvg"]}
                for c in (3, 2)]
    job.run_declared(TR.settings_specs(p, settings), None, W.SweepScope(artifact="fedpals/table1"))
    assert [(label, total) for label, _, total in bars.bars] == [("fedpals/table1 fashion-mnist C=3", 2),
                                                                 ("fedpals/table1 fashion-mnist C=2", 2)]
    _, seen, _ = bars.bars[0]
    # 2 runs of 4 rounds: 0.25 of a run a round per run trained (one or both per engine call)
    assert seen[0] in (pytest.approx(0.25), pytest.approx(0.5)) and seen[-1] == pytest.approx(2)
    assert len(seen) >= 4


def test_each_distinct_warning_is_logged_once_counted_after_the_block(caplog):
    log = logging.getLogger("fedpaper.blocks.partition")
    with caplog.at_level(logging.WARNING, logger="fedpaper"):
        with PG.warnings_once("fednca/table1"):
            for n in (6, 12, 6, 9):
                log.warning("class_presence_partition: %d images have no client allowed all their labels; dropped", n)
            log.warning("oracle_partition: sizes scaled by %.4f to fit the target's labels", 0.5)
            with PG.warnings_once("inner"):  # nested: the outer block collects
                log.warning("oracle_partition: sizes scaled by %.4f to fit the target's labels", 0.5)
            assert not caplog.records  # nothing printed while the sweeps (and their bars) run
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["fednca/table1: class_presence_partition: 6-12 images have no client allowed all their "
                     "labels; dropped (x4)",
                     "fednca/table1: oracle_partition: sizes scaled by 0.5000 to fit the target's labels (x2)"]
    log.warning("after: %d", 1)
    assert caplog.records[-1].getMessage() == "after: 1"  # the logger is back as it was
