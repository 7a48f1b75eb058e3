"""Results do not move: every method on every backend against a committed before/after fixture.

tests/fixtures/engine_before.json holds, per (case, backend), the sha256 of each final parameter
tensor's bytes after 2 rounds of training on tiny synthetic data (2 runs batched together, 3 clients
with different label sets and sizes), recorded with the engine as it was BEFORE the engine refactor
of issue 13 (commit 8bc9045). Equal digests mean bitwise-equal parameters (torch.equal). The one
BatchNorm case ("batchnorm resnet18|loop") was re-recorded for issue 31, when BatchNorm statistics
came to be taken from a client's real rows only (engine/batchnorm.py): its client of 12 rows has a
padded batch of 8; every other entry is the issue 13 recording.

Bitwise results depend on the CPU's kernels: the fixture holds one recording per kind of machine,
each naming torch's version, the CPU capability, the CPU vendor and the CPU family (two AMD EPYC
generations with AVX-512 give different bits for the loop backend). A test compares with every
recording whose machine matches this one (a recording without a family matches any family of its
vendor) and passes when its digests equal one of them; it skips (saying why) where none matches.
Each recording names the commit whose code made it: a recording added for a new kind of machine is
made from the code of a commit recorded before, never from code under test.

Record this machine (only from such a commit, or when a change is MEANT to move results, saying so
in the commit): PYTHONPATH=$PWD python tests/engine/test_fixture.py COMMIT
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fedpaper.algorithms import Method, get_method
from fedpaper.blocks.data import synthetic_images
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.runs.provenance import cpu_vendor

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "engine_before.json"
BACKENDS = ("vmap", "loop", "grouped")
K = 10
LABEL_SETS = ([0, 1, 2, 3], [3, 4, 5, 6, 7], [6, 7, 8, 9, 0])
SIZES = (48, 33, 21)  # unequal sizes exercise the masks


def _cpu_family() -> str | None:
    """/proc/cpuinfo's "cpu family" (None where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu family"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _machine() -> dict:
    # the vendor and family too: MKL and oneDNN take vendor and generation paths
    return {"torch": torch.__version__.split("+")[0], "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_vendor": cpu_vendor() or "unknown", "cpu_family": _cpu_family()}


def _matches(recorded: dict, here: dict) -> bool:
    return all(recorded.get(k) == here[k] for k in ("torch", "cpu_capability", "cpu_vendor")) \
        and recorded.get("cpu_family") in (None, here["cpu_family"])


def _pools(image=16) -> Pools:
    ds = synthetic_images(num_classes=K, n_train=600, n_test=120, shape=(1, image, image), seed=0)
    return Pools.from_dataset(ds)


def _feds(pools: Pools, seeds=(0, 1)) -> list:
    """Per run: 3 clients holding different label sets and sizes, a labelled server set, per-client
    unlabeled rows (pseudo-labels), a validation split and a non-uniform target marginal (FedPALS)."""
    y = pools.y_train.numpy()
    out = []
    for s in seeds:
        rng = np.random.default_rng(100 + s)
        perm = rng.permutation(len(y))
        taken = np.zeros(len(y), bool)

        def take(rows_pool, n):
            rows = [i for i in rows_pool if not taken[i]][:n]
            taken[rows] = True
            return np.asarray(rows, dtype=np.int64)

        clients = [take([i for i in perm if y[i] in ls], n) for ls, n in zip(LABEL_SETS, SIZES)]
        unlabeled = [take([i for i in perm if y[i] in ls], 12) for ls in LABEL_SETS]
        server = take(perm, 40)
        val = take(perm, 30)
        target = np.linspace(1.0, 2.0, K)
        out.append(Federation(clients, np.arange(120), val_indices=val, server_indices=server,
                              client_unlabeled_indices=unlabeled, target_marginal=target / target.sum(), seed=s))
    return out


def _cfg(**kw) -> TrainConfig:
    base = dict(model="lenet", model_kwargs=dict(in_channels=1, image_size=16, c1=4, c2=6), optimizer="sgd",
                lr=0.05, batch_size=8, rounds=2)
    base.update(kw)
    return TrainConfig(**base)


def cases() -> dict:
    """name -> (method, config overrides, backends)."""
    lam = 0.1
    out = {name: (get_method(name), {}, BACKENDS) for name in (
        "FedAvg", "FedProx", "SCAFFOLD", "FedRS", "AFL", "FedAvg (private)", "FedProx (private)",
        "Tuning-MSE", "Tuning-Pairwise", "Tuning-MSE (private)", "Tuning-Pairwise (private)")}
    out.update({
        "FedPALS lam=0.1": (get_method("FedPALS", lam=lam), {}, BACKENDS),
        "FedProx+FedPALS lam=0.1": (get_method("FedProx+FedPALS", lam=lam), {}, BACKENDS),
        "FedPALS lam=0": (get_method("FedPALS"), {}, ("vmap",)),
        "pairwise_all": (Method("pairwise_all", tuning="pairwise_all"), {}, BACKENDS),
        "pairwise_all (private, sgd)": (Method("pa", private=True, tuning="pairwise_all", tuning_optimizer="sgd",
                                               tuning_lr=0.01, tuning_epochs=1), {}, BACKENDS),
        "mixup": (Method("mix", mixup_alpha=0.75), {}, BACKENDS),
        "pseudo-labels": (Method("pl", pseudo_label_threshold=0.11), {}, BACKENDS),
        "server_train": (Method("st", server_train_epochs=1), {}, BACKENDS),
        "l2": (Method("l2", penalties=("l2",), weight_decay=0.01), {}, BACKENDS),
        "FedAvg adam": (get_method("FedAvg"), {"optimizer": "adam", "lr": 1e-3}, BACKENDS),
        "FedProx (private) adam": (get_method("FedProx (private)"), {"optimizer": "adam", "lr": 1e-3}, BACKENDS),
        "SCAFFOLD local_epochs=2": (get_method("SCAFFOLD"), {"local_epochs": 2}, BACKENDS),
        "FedAvg partial": (get_method("FedAvg"), {"participation": 0.67}, BACKENDS),
        "SCAFFOLD partial": (get_method("SCAFFOLD"), {"participation": 0.67}, BACKENDS),
        "AFL partial": (get_method("AFL"), {"participation": 0.67}, BACKENDS),
        "FedPALS partial": (get_method("FedPALS", lam=lam), {"participation": 0.67}, BACKENDS),
        "all extensions": (Method("all", mixup_alpha=0.75, pseudo_label_threshold=0.11, penalties=("l2",),
                                  weight_decay=0.01, server_train_epochs=1), {}, BACKENDS),
        "privlabels_cnn dropout (private)": (get_method("FedAvg (private)"), {
            "model": "privlabels_cnn", "model_kwargs": dict(in_channels=1, image_size=16, widths=(4, 4, 6, 6),
                                                            hidden=16)}, BACKENDS),
        "batchnorm resnet18": (get_method("FedAvg"), {
            "model": "resnet18_cifar", "model_kwargs": dict(num_classes=K, in_channels=1), "batch_size": 8}, ("loop",)),
    })
    return out


def _small_pools_for(case: str, pools: Pools) -> tuple[Pools, list]:
    feds = _feds(pools)
    if case.startswith("batchnorm"):  # ResNet-18: a few rows only, at 8x8
        small = _pools(image=8)
        feds = _feds(small)
        for f in feds:
            f.client_indices = [c[:8 + 4 * i] for i, c in enumerate(f.client_indices)]
            f.test_indices, f.val_indices = np.arange(16), f.val_indices[:8]
        return small, feds
    return pools, feds


def run_case(case: str, backend: str, pools: Pools) -> dict:
    method, over, _ = cases()[case]
    pools, feds = _small_pools_for(case, pools)
    torch.manual_seed(1234)  # dropout under vmap draws from the global RNG
    res = train(method, _cfg(backend=backend, **over), pools, feds, progress=False)
    return res.final_params


def digest(params: dict) -> dict:
    return {k: hashlib.sha256(v.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:32]
            for k, v in sorted(params.items())}


def _all_keys():
    return [(c, b) for c, (_, _, bs) in cases().items() for b in bs]


@pytest.fixture(scope="module")
def fixture_pools():
    return _pools()


@pytest.fixture(scope="module")
def recorded():
    recordings = json.loads(FIXTURE.read_text())["recordings"]
    here = _machine()
    mine = [r["digests"] for r in recordings if _matches(r["machine"], here)]
    if not mine:
        pytest.skip(f"fixture recorded on {[r['machine'] for r in recordings]}, this machine is {here}: bitwise "
                    f"results differ across CPUs/torch versions; record this machine from a commit recorded before")
    return mine


@pytest.mark.parametrize("case,backend", _all_keys(), ids=[f"{c}-{b}" for c, b in _all_keys()])
def test_final_params_bitwise_equal_to_fixture(case, backend, fixture_pools, recorded):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        got = digest(run_case(case, backend, fixture_pools))
    finally:
        torch.set_num_threads(threads)
    wants = [r[f"{case}|{backend}"] for r in recorded]
    assert any(got == want for want in wants), \
        f"{case} on {backend}: parameters moved: {[k for k in wants[0] if got.get(k) != wants[0][k]]}"


def main(commit: str):
    """Record this machine's digests (the code of `commit` must be what runs), replacing a recording
    of the same machine."""
    torch.set_num_threads(1)
    pools = _pools()
    out = {}
    for case, backend in _all_keys():
        out[f"{case}|{backend}"] = digest(run_case(case, backend, pools))
        print(case, backend, flush=True)
    here = _machine()
    recordings = json.loads(FIXTURE.read_text())["recordings"] if FIXTURE.is_file() else []
    recordings = [r for r in recordings if r["machine"] != here]
    recordings.append({"machine": here, "digests": out, "recorded_at": commit})
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps({"recordings": recordings}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes, {len(out)} entries)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: PYTHONPATH=$PWD python tests/engine/test_fixture.py COMMIT (the commit whose code runs)")
    sys.exit(main(sys.argv[1]))
