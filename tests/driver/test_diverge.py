"""A run that diverges (a non-finite loss or parameter) is held, not fatal: FedPALS Table 1 at the
paper's 150 rounds had a Fashion-MNIST run turn NaN ~80% of the way, and AFL's loss-weighted step
then stopped the whole artifact (issue #28). The engine records the round, keeps the rounds before
it, and the runs batched with it train exactly as they would alone."""
import numpy as np
import pytest
import torch

from fedpaper.algorithms import get_method
from fedpaper.driver import FederatedTrainer, train
from fedpaper.engine import Federation, Pools
from fedpaper.runs.experiment import _result

from engine_harness import lenet_config, two_runs


def _poisoned():
    """(pools, fed A, fed B): B's second client also holds 10 rows whose pixels are NaN."""
    pools, (a, _) = two_runs()
    x = pools.x_train[torch.arange(len(pools.x_train))].clone()  # float rows, so a pixel can be NaN
    bad = np.arange(150, 160)
    x[bad] = float("nan")
    x_test = pools.x_test[torch.arange(len(pools.x_test))]
    pools = Pools(x, pools.y_train, x_test, pools.y_test, pools.num_classes)
    b = Federation([a.client_indices[0], np.concatenate([a.client_indices[1], bad])], a.test_indices, seed=1)
    return pools, a, b


@pytest.mark.parametrize("method", [get_method("FedAvg"), get_method("AFL"),
                                    get_method("SCAFFOLD")])
def test_a_diverged_run_is_held_and_the_others_train_as_alone(method):
    pools, a, b = _poisoned()
    cfg = lenet_config(backend="grouped")
    both = train(method, cfg, pools, [a, b], progress=False)
    alone = train(method, cfg, pools, [a], progress=False)
    assert both.diverged == [None, 1] and alone.diverged == [None]
    assert set(both.history["run"]) == {0}
    h0 = both.history.drop(columns=["run"]).reset_index(drop=True)
    h1 = alone.history.drop(columns=["run"]).reset_index(drop=True)
    assert h0.equals(h1)
    for k, v in alone.final_params.items():
        assert torch.equal(both.final_params[k][0], v[0]), k
    assert all(torch.isfinite(v).all() for v in both.final_params.values())
    r = _result(both, 1)
    assert r["diverged_at"] == 1 and r["history"] == [] and np.isnan(r["best"]["test_acc"])
    assert _result(both, 0)["diverged_at"] is None


def test_a_run_diverging_mid_way_keeps_the_rounds_before(monkeypatch):
    """Run 1's training turns NaN in round 2: its history ends at round 1 and its final model is
    its round-1 model, exactly what one round of it alone gives; run 0 trains all 3 rounds."""
    pools, feds = two_runs()
    cfg = lenet_config(backend="grouped", rounds=3)
    one_round = train(get_method("FedAvg"), lenet_config(backend="grouped", rounds=1), pools, [feds[1]],
                      progress=False)
    real = FederatedTrainer.local_train

    def poisoned(self, rnd, params, slots, rngs, buffers=None):
        new, anchor, steps, loss = real(self, rnd, params, slots, rngs, buffers)
        if rnd == 2:
            loss = torch.where(torch.as_tensor(slots[:, 0] == 1), torch.full_like(loss, float("nan")), loss)
        return new, anchor, steps, loss

    monkeypatch.setattr(FederatedTrainer, "local_train", poisoned)
    res = train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    assert res.diverged == [None, 2]
    assert sorted(res.history[res.history["run"] == 0]["round"]) == [1, 2, 3]
    assert sorted(res.history[res.history["run"] == 1]["round"]) == [1]
    for k, v in one_round.final_params.items():
        assert torch.equal(res.final_params[k][1], v[0]), k
    r = _result(res, 1)
    assert r["diverged_at"] == 2 and r["best"]["round"] == 1 and r["final"]["test_acc"] == r["history"][-1]["test_acc"]


def test_when_every_run_diverges_the_rounds_stop():
    pools, a, b = _poisoned()
    b0 = Federation(b.client_indices, b.test_indices, seed=0)
    calls = []
    from fedpaper.ground import progress

    with progress.on_rounds(lambda rnd, rounds, n: calls.append(rnd)):
        res = train(get_method("FedAvg"), lenet_config(rounds=5), pools, [b0, b], progress=False)
    assert res.diverged == [1, 1] and res.history.empty
    assert calls == [1, 2, 3, 4, 5]  # the sweep's progress still reaches the end
    assert res.log["samples"] == sum(len(c) for c in b.client_indices) * 2


def test_fedpals_table_names_a_diverged_seed():
    """FedPALS Table 1's summary keeps a diverged seed's earlier snapshot and says so (column,
    notes, a † in the drawn cell)."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from fedpaper.papers.fedpals import train as TR

    rec = pd.DataFrame({"dataset": ["FMNIST"] * 3, "label_split": ["C=3"] * 3, "clients": [10] * 3,
                        "method": ["AFL"] * 3, "seed": [0, 1, 2], "lam": [None] * 3,
                        "test_acc": [70.0, 71.0, 40.0], "val_acc": [70.0, 71.0, 41.0],
                        "diverged_at": [None, None, 121]})
    tab = TR.summary(rec, ["dataset", "label_split", "clients", "method"])
    assert tab["diverged"].tolist() == ["seed 2 at round 121"]
    assert TR.diverged_notes(tab) == ["FMNIST C=3 AFL: diverged (seed 2 at round 121; non-finite training loss); "
                                      "that seed's best-validation snapshot before it is used (marked †)"]
    assert "diverged" not in TR.summary(rec.assign(diverged_at=None), ["dataset", "label_split", "clients", "method"])
    fig = TR.draw_table(tab, {"notes": []}, None, "t")
    texts = [c.get_text().get_text() for c in fig.axes[0].tables[0].get_celld().values()]
    assert any(t.endswith("†") for t in texts)
    assert any("seed 2 at round 121" in t.get_text() for t in fig.texts)
