"""Memory budget of an engine call (fedpaper.engine.memory): the saved-for-backward measurement,
its linear model in the batch size, and groups of runs bounded by the device's available memory
(never more than max_batch, so today's CPU groups do not change)."""
import numpy as np
import pytest
import torch
from torch import nn

from fedpaper.algorithms import get_method
from fedpaper.engine import Federation, TrainConfig
from fedpaper.engine import memory as MEM
from fedpaper.runs.experiment import RunSetup, get_pools, group_setups, pools_key_of
from fedpaper.blocks.models import build_model

POOL = pools_key_of({"name": "synthetic-images", "options": dict(num_classes=4, n_train=200, n_test=40, seed=0)},
                    device="cpu")


def test_saved_tensors_are_counted_once_without_parameters_or_input():
    """Linear saves its input (the batch: not counted) and weight (a parameter: not counted); ReLU
    saves its output, which the second Linear saves again (one storage, counted once)."""
    net = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    assert MEM.saved_tensor_bytes(net, torch.zeros(3, 10)) == 3 * 20 * 4
    assert MEM.saved_tensor_bytes(net, torch.zeros(7, 10)) == 7 * 20 * 4


def test_step_memory_is_linear_in_the_batch_and_counts_parameters():
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28), optimizer="adam", batch_size=32)
    m = MEM.step_memory(cfg, (1, 28, 28))
    net = build_model("lenet", in_channels=1, image_size=28)
    assert m.param_bytes == sum(p.numel() * 4 for p in net.parameters())
    assert m.state_copies == 2 and m.input_row_bytes == 28 * 28 * 4
    assert m.activations(9) == MEM.saved_tensor_bytes(net.train(), torch.zeros(9, 1, 28, 28))
    assert m.backend == "grouped"  # the CPU rule for a grouped-capable CNN (backends.choose_backend)
    sgd = MEM.step_memory(TrainConfig("lenet", dict(in_channels=1, image_size=28), momentum=0.9), (1, 28, 28))
    assert sgd.state_copies == 1 and MEM.step_memory(TrainConfig("lenet", dict(in_channels=1, image_size=28)),
                                                     (1, 28, 28)).state_copies == 0


def test_measuring_leaves_the_global_rng_alone():
    torch.manual_seed(5)
    want = torch.rand(3)
    torch.manual_seed(5)
    MEM.step_memory(TrainConfig("privlabels_cnn", dict(in_channels=3, image_size=16, widths=(2, 2, 4, 4), hidden=8)),
                    (3, 16, 16))
    assert torch.equal(torch.rand(3), want)


def test_vmap_holds_every_slots_activations_loop_one():
    base = dict(param_bytes=100, state_copies=2, saved_fixed=10, saved_per_sample=50, input_row_bytes=4)
    vmap, loop = MEM.StepMemory(backend="vmap", **base), MEM.StepMemory(backend="loop", **base)
    assert vmap.run_bytes(slots=3, batch=8) == 3 * (6 * 100 + 8 * 4 + 10 + 8 * 50)
    assert loop.run_bytes(slots=3, batch=8) == 3 * (6 * 100 + 8 * 4)
    assert loop.group_bytes(batch=8, eval_batch=16) == 10 + 8 * 50 + 16 * 4
    assert vmap.group_bytes(batch=8, eval_batch=16) == 16 * 4


def test_captured_holds_every_slots_activations_and_a_static_copy_of_its_inputs():
    base = dict(param_bytes=100, state_copies=2, saved_fixed=10, saved_per_sample=50, input_row_bytes=4)
    vmap, cap = MEM.StepMemory(backend="vmap", **base), MEM.StepMemory(backend="captured", **base)
    assert cap.run_bytes(slots=3, batch=8) == vmap.run_bytes(slots=3, batch=8) + 3 * (vmap.slot_params() + 8 * 4)
    assert cap.group_bytes(batch=8, eval_batch=16) == vmap.group_bytes(batch=8, eval_batch=16)


def test_available_memory_of_the_cpu_is_read():
    total = next(int(l.split()[1]) * 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal:"))
    assert 0 < MEM.available_bytes("cpu") <= total


def _setups(n, clients=4):
    y = get_pools(POOL).y_train.numpy()
    cfg = TrainConfig("lenet", dict(in_channels=1, image_size=28, num_classes=4), batch_size=16, rounds=1)
    out = []
    for s in range(n):
        rows = np.random.default_rng(s).permutation(len(y))
        fed = Federation(np.array_split(rows, clients), np.arange(40), seed=s)
        out.append(RunSetup(get_method("FedAvg"), cfg, POOL, fed))
    return out


def test_groups_keep_max_batch_when_memory_is_plenty(monkeypatch, capsys):
    monkeypatch.setattr(MEM, "available_bytes", lambda device: 1 << 40)
    assert group_setups(_setups(5), 2) == [[0, 1], [2, 3], [4]]
    assert group_setups(_setups(20), 16) == [list(range(16)), [16, 17, 18, 19]]
    assert "memory budget" not in capsys.readouterr().out


def test_the_budget_shrinks_groups_with_one_notice(monkeypatch, capsys):
    from fedpaper.runs import experiment

    monkeypatch.setattr(experiment, "_BUDGET_NOTICES", set())  # whatever ran before in this process
    setups = _setups(7)
    s0 = setups[0]
    fit = MEM.runs_that_fit(s0.method, s0.config, get_pools(POOL), 4, 16)
    # room for exactly 3 runs besides the shared part, at MEMORY_FRACTION of what is available
    avail = (fit.fixed + 3 * fit.per_run + fit.per_run // 2) / MEM.MEMORY_FRACTION
    monkeypatch.setattr(MEM, "available_bytes", lambda device: int(avail))
    assert group_setups(setups, 16, "table9") == [[0, 1, 2], [3, 4, 5], [6]]
    assert group_setups(setups, 16, "table9") == [[0, 1, 2], [3, 4, 5], [6]]
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("table9: memory budget: 3 run(s) per engine call instead of 16")
    monkeypatch.setattr(MEM, "available_bytes", lambda device: 0)  # nothing fits: still one run at a time
    assert group_setups(setups, 16) == [[i] for i in range(7)]


def test_a_run_that_needs_more_than_the_machine_has_is_said_in_one_line(monkeypatch, capsys):
    """Even one run over all the memory available (FedMT fig2c's 80 ResNet-18 clients at the paper
    profile: ~18 GB of stacked parameter copies): it still trains, one run per call, and one line
    says what it needs and what to do, instead of a silent kill for memory."""
    from fedpaper.runs import experiment

    monkeypatch.setattr(experiment, "_BUDGET_NOTICES", set())
    setups = _setups(2)
    s0 = setups[0]
    fit = MEM.runs_that_fit(s0.method, s0.config, get_pools(POOL), 4, 16)
    monkeypatch.setattr(MEM, "available_bytes", lambda device: int(fit.fixed + fit.per_run // 2))
    assert group_setups(setups, 16, "fig2c") == [[0], [1]]
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("fig2c: one run needs about") and "fedpaper plan" in out[0]
    monkeypatch.setattr(MEM, "available_bytes", lambda device: 1 << 40)
    assert not MEM.runs_that_fit(s0.method, s0.config, get_pools(POOL), 4, 16).one_run_too_big()


@pytest.mark.parametrize("participation,slots", [(1.0, 4), (0.5, 2)])
def test_a_run_counts_its_participating_clients(participation, slots):
    s0 = _setups(1)[0]
    cfg = TrainConfig(**{**s0.config.__dict__, "participation": participation})
    fit = MEM.runs_that_fit(s0.method, cfg, get_pools(POOL), 4, 16)
    mem = MEM.step_memory(cfg, (1, 28, 28))
    assert fit.per_run == mem.run_bytes(slots, 16)


def test_evaluation_rows_are_capped_for_large_inputs_only():
    """eval_batch_that_fits: the configured rows unless a pass would plan for more than EVAL_BYTES
    (saved-for-backward bytes per sample x rows): FedNCA-ML's 224 px ResNet-18 (21 MiB per sample)
    evaluates 195 rows at a time, the CPU profiles' models keep 2,048."""
    from dataclasses import replace

    mib = 1 << 20
    mem = MEM.StepMemory(param_bytes=1, state_copies=0, saved_fixed=0, saved_per_sample=21 * mib,
                         input_row_bytes=3 * 224 * 224 * 4, backend="loop")
    assert MEM.eval_batch_that_fits(mem, 2048) == 4 * 1024 // 21 == 195
    assert MEM.eval_batch_that_fits(replace(mem, saved_per_sample=534 * 1024), 2048) == 2048  # privlabels CNN
    assert MEM.eval_batch_that_fits(replace(mem, saved_per_sample=0), 2048) == 2048
    assert MEM.eval_batch_that_fits(replace(mem, saved_per_sample=1 << 40), 2048) == 1
    # the group's shared bytes count the capped evaluation batch of inputs
    assert mem.group_bytes(32, 2048) == mem.activations(32) + 195 * mem.input_row_bytes


def test_the_trainer_evaluates_in_capped_passes_with_the_same_results(monkeypatch):
    """With EVAL_BYTES lowered so that 16 rows fit, the trainer evaluates in passes of 16 rows (not
    cfg.eval_batch) and the run's numbers are those of uncapped evaluation (a LeNet on CPU)."""
    from fedpaper.driver import trainer as T
    from fedpaper.runs.experiment import train_group

    setups = _setups(1)
    full = train_group(setups, False)[0]
    rows_seen = []
    real = T.predict

    def spy(*args, **kwargs):
        rows_seen.append(args[6])  # eval_batch
        return real(*args, **kwargs)

    per_sample = MEM.step_memory(setups[0].config, tuple(get_pools(POOL).x_train.shape[1:])).saved_per_sample
    monkeypatch.setattr(MEM, "EVAL_BYTES", 16 * per_sample)
    monkeypatch.setattr(T, "predict", spy)
    capped = train_group(setups, False)[0]
    assert rows_seen and set(rows_seen) == {16}
    assert full["history"] == capped["history"] and full["final"] == capped["final"]  # 40 test rows: 3 passes


# ----------------------------------------------------------------- a round's clients in parts (issue 30)
def _chunk_case(monkeypatch, limit, model="small_resnet", kw=None, backend="auto", epochs=2, method=None,
                seeds=(0, 1)):
    import numpy as np

    import fedpaper.engine.memory as MEM
    from fedpaper.algorithms import Method
    from fedpaper.blocks.data import synthetic_images
    from fedpaper.driver import train
    from fedpaper.engine import Federation, Pools, TrainConfig

    ds = synthetic_images(num_classes=8, n_train=200, n_test=40, shape=(3, 16, 16), seed=0)
    pools = Pools.from_dataset(ds)
    perm = np.random.default_rng(0).permutation(200)
    feds = [Federation([perm[i * 40:(i + 1) * 40 - 7 * i] for i in range(5)], np.arange(40), seed=s) for s in seeds]
    cfg = TrainConfig(model=model, model_kwargs=kw or {"num_classes": 8, "widths": (4, 8)}, optimizer="sgd",
                      lr=0.05, momentum=0.9, batch_size=8, rounds=2, local_epochs=epochs, backend=backend)
    if limit is not None:
        monkeypatch.setattr(MEM, "SLOT_BYTES", limit)
    return train(method or Method("FedAvg"), cfg, pools, feds, progress=False)


def test_a_round_trained_in_parts_gives_the_same_numbers_where_slots_share_no_draws(monkeypatch):
    """BatchNorm small ResNet (loop backend: one slot at a time), FedAvg, 2 local epochs: 10 client
    slots trained in parts of 1-4 (a tiny SLOT_BYTES) end with the same parameters, BatchNorm
    statistics and history, bit for bit, as in one part; the log says how they were split."""
    import pandas as pd
    import torch

    whole = _chunk_case(monkeypatch, None)
    assert "slot_chunk" not in whole.log
    for limit in (1, 60_000):
        parts = _chunk_case(monkeypatch, limit)
        assert 1 <= parts.log["slot_chunk"] < 10
        pd.testing.assert_frame_equal(parts.history, whole.history, check_exact=True)
        for k in whole.final_params:
            assert torch.equal(parts.final_params[k], whole.final_params[k]), k


def test_one_run_in_parts_starts_from_views_of_the_global_model_with_the_same_numbers(monkeypatch):
    """One run per engine call (as a run too large to group trains): its clients start from views of
    the global model (trainer._slot_starts: no copies), and FedAvg, FedProx (its penalty reads the
    anchor) and SCAFFOLD (its aggregation reads agg.anchor) in parts of one slot end bit for bit as
    in one part."""
    import pandas as pd
    import torch

    from fedpaper.algorithms import Method

    for m in (Method("FedAvg"), Method("FedProx", client="fedprox", mu=0.01), Method("SCAFFOLD", client="scaffold")):
        whole = _chunk_case(monkeypatch, None, method=m, seeds=(3,))
        parts = _chunk_case(monkeypatch, 1, method=m, seeds=(3,))
        assert parts.log["slot_chunk"] == 1 and "slot_chunk" not in whole.log
        pd.testing.assert_frame_equal(parts.history, whole.history, check_exact=True)
        for k in whole.final_params:
            assert torch.equal(parts.final_params[k], whole.final_params[k]), (m.name, k)
        monkeypatch.undo()


def test_slots_that_fit_keeps_two_copies_per_slot_and_never_drops_below_one():
    from fedpaper.engine.memory import StepMemory, slots_that_fit

    mem = StepMemory(param_bytes=100, state_copies=1, saved_fixed=0, saved_per_sample=10, input_row_bytes=1,
                     backend="loop")
    assert mem.run_bytes(80, 4) == 80 * (500 + 4)
    assert slots_that_fit(mem, 80, 4, limit=80 * 504) == 80  # fits whole
    # 80 slots keep 2 copies (16,000 B); each slot training adds 304 B: (20,000 - 16,000) // 304 = 13
    assert slots_that_fit(mem, 80, 4, limit=20_000) == 13
    assert slots_that_fit(mem, 80, 4, limit=10) == 1


def test_fedmt_trains_in_parts_with_its_pseudo_labels_per_slot(monkeypatch):
    """FedMT (E) (prepare_round's per-slot pseudo-labels, S_fix, S_mix rows and M estimates, taken per
    part: memory.slots_of) trains in parts of one slot: the same rounds and columns, every number
    finite, the threshold still acting, and the log says so. Its augmentation draws come from each
    run's generator in another order, so its numbers are not compared with one part's."""
    import numpy as np

    import fedpaper.engine.memory as MEM
    from fedpaper.driver import train
    from fedpaper.runs.experiment import get_pools
    from fedpaper.papers.fedmt import runs
    from fedpaper.papers.fedmt.profiles import settings

    p = settings("smoke")
    s = runs.spec(p, "FedMT (E)", 0, threshold=0.055, lambda2=1).build()
    whole = train(s.method, s.config, get_pools(s.pools_key), [s.federation], progress=False)
    monkeypatch.setattr(MEM, "SLOT_BYTES", 1)
    parts = train(s.method, s.config, get_pools(s.pools_key), [s.federation], progress=False)
    assert parts.log["slot_chunk"] == 1 and "slot_chunk" not in whole.log
    assert list(parts.history.columns) == list(whole.history.columns)
    assert list(parts.history["round"]) == list(whole.history["round"])
    assert np.isfinite(parts.history["test_acc"]).all()
    assert parts.history["fix_rows_mean"].max() > 0  # S_fix is not empty: the mechanism ran in parts
