"""The grouped pass's convolutions slot by slot (engine.grouped.per_slot_rule, per_slot_ops): the rule, the
same function as the model, a run's bits independent of its batch-mates, and what the trainer records (a slot's
gradient bits at every safe width, per_slot included: tests/engine/test_cpu.py).
`make test` runs this file again under the AVX2 emulation, where the trainer takes the per-slot path."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedpaper.blocks.models import build_model
from fedpaper.engine.grouped import GroupedForward, per_slot_ops, per_slot_rule, stacked_layout


@pytest.mark.parametrize("channels,device,cap,expect", [
    (3, "cpu", "AVX2", "features"), (3, "cpu", "DEFAULT", "features"), (4, "cpu", "AVX2", "features"),
    (1, "cpu", "AVX2", "none"), (2, "cpu", "AVX2", "none"),
    (3, "cpu", "AVX512", "none"), (3, "meta", "AVX2", "none"),
])
def test_rule_per_slot_only_for_3_channel_images_on_cpus_without_avx512(channels, device, cap, expect):
    per_slot, rule = per_slot_rule(channels, device, cap)
    assert per_slot == expect
    assert rule.startswith("convolutions per slot" if expect != "none" else "convolutions grouped")


def test_rule_follows_torchs_own_capability():
    cap = torch.backends.cpu.get_cpu_capability()
    assert per_slot_rule(3, "cpu")[0] == ("none" if cap.startswith("AVX512") else "features")


def test_per_slot_ops_counts_the_leading_ops():
    ops = GroupedForward.build(_lenet3(), (3, 16, 16)).ops
    kinds = [op[0] for op in ops]
    assert per_slot_ops(ops, "none") == 0 and per_slot_ops(ops, "first") == 1
    assert per_slot_ops(ops, "features") == kinds.index("flatten") + 1
    drop = [("conv", None, "w", None), ("dropout", None, None, None), ("flatten", None, None, None)]
    assert per_slot_ops(drop, "features") == 1  # a Dropout before the Flatten: its masks are drawn grouped
    assert per_slot_ops([("linear", None, "w", None)], "features") == 0
    with pytest.raises(ValueError, match="per_slot='all'"):
        per_slot_ops(ops, "all")


def _lenet3():
    return build_model("lenet", in_channels=3, image_size=16, num_classes=4, c1=4, c2=6)


@pytest.mark.parametrize("per_slot", ["first", "features"])
def test_per_slot_pass_is_the_model_slot_by_slot(per_slot):
    """Outputs match each slot's own model (functional_call), and gradients match the grouped pass's
    (float rounding apart), for 3-channel images."""
    from torch.func import functional_call

    model = _lenet3()
    per, grp = GroupedForward.build(model, (3, 16, 16), per_slot), GroupedForward.build(model, (3, 16, 16))
    assert per.n_per_slot > 0 and grp.n_per_slot == 0
    g = torch.Generator().manual_seed(0)
    G = 3
    params = {k: stacked_layout(torch.stack([v.detach() + 0.1 * torch.randn(v.shape, generator=g) for _ in range(G)]))
              .requires_grad_(True) for k, v in model.named_parameters()}
    x = torch.randn(G, 5, 3, 16, 16, generator=g)
    out = per(params, x)
    ref = torch.stack([functional_call(model, {k: v[s] for k, v in params.items()}, (x[s],)) for s in range(G)])
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-5)
    ga = torch.autograd.grad((out ** 2).sum(), list(params.values()))
    gb = torch.autograd.grad((grp(params, x) ** 2).sum(), list(params.values()))
    for name, a, b in zip(params, ga, gb):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), name


def test_one_channel_images_keep_the_grouped_pass():
    lenet1 = build_model("lenet", in_channels=1, image_size=16, num_classes=4, c1=4, c2=6)
    assert per_slot_rule(1, "cpu")[0] == "none"
    assert GroupedForward.build(lenet1, (1, 16, 16), per_slot_rule(1, "cpu")[0]).n_per_slot == 0


def test_trainer_records_the_rule_and_a_run_is_the_same_alone_and_in_a_group():
    """A 3-channel LeNet FedAvg run through the trainer (grouped backend): the log's layout names the
    per-slot rule this CPU gets, and the run trained alone and beside another one ends with
    the same parameters bit for bit."""
    from fedpaper.algorithms import Method
    from fedpaper.blocks.data import synthetic_images
    from fedpaper.driver import train
    from fedpaper.engine import Federation, Pools, TrainConfig

    pools = Pools.from_dataset(synthetic_images(num_classes=4, n_train=160, n_test=40, shape=(3, 16, 16), seed=0))
    cfg = TrainConfig(model="lenet", model_kwargs=dict(in_channels=3, image_size=16, num_classes=4, c1=4, c2=6),
                      optimizer="sgd", lr=0.05, momentum=0.9, batch_size=8, rounds=2, backend="grouped")

    def fed(seed):  # clients of unequal size: finished slots are skipped while the others step
        rows = np.split(np.random.default_rng(seed).permutation(160), [30, 80])
        return Federation(rows, np.arange(40), seed=seed)

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = train(Method("FedAvg"), cfg, pools, [fed(1)], progress=False)
        pair = train(Method("FedAvg"), cfg, pools, [fed(0), fed(1)], progress=False)
    finally:
        torch.set_num_threads(old)
    assert alone.log["backend"] == "grouped"
    assert alone.log["layout"] == f"channels_last; {per_slot_rule(3, 'cpu')[1]}"
    for k in alone.final_params:
        assert torch.equal(alone.final_params[k][0], pair.final_params[k][1]), k
