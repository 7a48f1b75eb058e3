"""Compact image pools (fedpaper.blocks.data.compact): uint8 at the native size, standardised (and resized)
per batch, give exactly the bits of the float32 pools that were built up front before (so results
cached or committed before are reproduced), hold 4x less memory, and read the same way."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedpaper.blocks.data import load_dataset, synthetic_images
from fedpaper.blocks.data.compact import CompactImages, compact_images
from fedpaper.engine import Pools, gather
from fedpaper.ground.paths import data_root


def _old_from_dataset(ds, x):
    """ImageDataset.standardize as it was, the whole pool at once (float32 pools before compact)."""
    mean, std = ds.channel_stats_cached()
    return (x.float().div(255) - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)


def _old_fednca(x: np.ndarray, mean, std, size):
    """papers/fednca/data.py _standardize as it was: the whole split resized up front."""
    t = torch.from_numpy(x).float().div_(255)
    if size and size != t.shape[-1]:
        t = F.interpolate(t, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return (t - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)


SHAPES = ((1,), (7,), (3, 5), (4, 32), (2, 333))  # flat rows and [G, B] batches, odd and even B
SMALL_SHAPES = ((1,), (5,), (2, 3), (3, 8))


def _assert_same_rows(pool, old, shapes=SHAPES):
    rng = np.random.default_rng(0)
    for idx in (torch.as_tensor(rng.integers(0, len(pool), size=s)) for s in shapes):
        assert torch.equal(pool[idx], old[idx])
        assert torch.equal(gather(pool, idx), gather(old, idx))  # the engine's whole-row read
    assert torch.equal(pool[np.array([0, 3, 2])], old[[0, 3, 2]])  # numpy rows (sequential backend)
    assert torch.equal(pool[:], old) and torch.equal(pool[5:9], old[5:9])


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (3, 16, 16)])
def test_per_batch_standardisation_is_the_full_pools_bits(shape):
    ds = synthetic_images(num_classes=4, n_train=400, n_test=50, shape=shape, seed=3)
    pools = Pools.from_dataset(ds)
    assert isinstance(pools.x_train, CompactImages) and pools.x_train.shape == (400, *shape)
    _assert_same_rows(pools.x_train, _old_from_dataset(ds, ds.x_train))
    _assert_same_rows(pools.x_test, _old_from_dataset(ds, ds.x_test))


@pytest.mark.parametrize("side,size", [(64, 32), (56, 32), (16, 16), (64, 224), (56, 224)])
def test_per_batch_resize_is_the_full_pools_bits(side, size):
    """FedNCA-ML's canvases: 64 / 56 px resized to 32 px (quick, long) or 224 px (paper), per batch
    (per image) as the whole split was resized before."""
    n = 12 if size == 224 else 200
    x = np.random.default_rng(side).integers(0, 256, size=(n, 3, side, side)).astype(np.uint8)
    ref = torch.from_numpy(x).float().div_(255)
    mean, std = ref.mean(dim=(0, 2, 3)), ref.std(dim=(0, 2, 3)).clamp(min=1e-6)
    pool = compact_images(x, mean, std, size)
    assert pool.shape == (n, 3, size, size) and pool.nbytes == x.nbytes
    _assert_same_rows(pool, _old_fednca(x, mean, std, size), SMALL_SHAPES if size == 224 else SHAPES)


def test_conversion_ignores_autocast():
    """Batches read inside a bf16 autocast (grouped evaluation, central tuning) are the float32
    rows the model saw before: the conversion (the resize included) runs outside autocast."""
    x = np.random.default_rng(0).integers(0, 256, size=(10, 3, 64, 64)).astype(np.uint8)
    pool = compact_images(x, torch.full((3,), 0.5), torch.full((3,), 0.25), 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = pool[torch.arange(10)]
    assert inside.dtype == torch.float32 and torch.equal(inside, pool[torch.arange(10)])


def test_compact_pools_hold_uint8_at_the_native_size():
    x = np.zeros((40, 3, 64, 64), np.uint8)
    pool = compact_images(x, torch.zeros(3), torch.ones(3), 224)
    assert pool.pixels.dtype == torch.uint8 and pool.nbytes == 40 * 3 * 64 * 64
    assert pool.float_nbytes() == 40 * 3 * 224 * 224 * 4  # what the float32 pool took
    assert pool.row_bytes() == 3 * 224 * 224 * 4 and len(pool) == 40 and pool.device.type == "cpu"
    assert pool.to("cpu") is pool  # on its device already: nothing is copied
    assert compact_images(x, torch.zeros(3), torch.ones(3), 64).size is None  # native side: no resize


def test_bad_pixels_are_refused():
    with pytest.raises(TypeError, match="uint8"):
        CompactImages(torch.zeros(2, 3, 4, 4), torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match="channels"):
        CompactImages(torch.zeros(2, 3, 4, 4, dtype=torch.uint8), torch.zeros(1), torch.ones(1))


def test_fednca_composite_pools_are_compact_and_the_old_bits():
    from fedpaper.papers.fednca.data import build_composites, composite_pools

    opts = {"source": "synthetic", "num_classes": 4, "side": 8, "n_train": 12, "n_val": 4, "n_test": 6,
            "singles": {}, "pairs": {"train": 2, "val": 1, "test": 2}, "input_size": 24}
    pools = composite_pools("synthetic", opts, None, "cpu")
    sp = build_composites("synthetic", opts)["splits"]
    ref = torch.from_numpy(sp["train"].x).float().div_(255)
    mean, std = ref.mean(dim=(0, 2, 3)), ref.std(dim=(0, 2, 3)).clamp(min=1e-6)
    old_train = torch.cat([_old_fednca(sp["train"].x, mean, std, 24), _old_fednca(sp["val"].x, mean, std, 24)])
    assert isinstance(pools.x_train, CompactImages) and pools.x_train.shape == (len(old_train), 3, 24, 24)
    assert torch.equal(pools.x_train[:], old_train)
    assert torch.equal(pools.x_test[:], _old_fednca(sp["test"].x, mean, std, 24))


@pytest.mark.parametrize("name", ["fashion-mnist"])
def test_real_data_sets_per_batch_bits(name):
    """A real pool that committed results were trained on (the synthetic tests above cover the
    shapes of the others: the conversion's bits depend on shapes, not pixel values; CIFAR-10 and
    CIFAR-100 are left out to keep the suite fast: 15-25 s each to load here)."""
    try:
        ds = load_dataset(name)
    except Exception as e:  # noqa: BLE001 - absent data: skip with the reason
        pytest.skip(f"{name} not under {data_root()}: {e}")
    pools = Pools.from_dataset(ds)
    _assert_same_rows(pools.x_test, _old_from_dataset(ds, ds.x_test))  # the whole test pool, as before
    assert pools.x_train.nbytes * 4 == pools.x_train.float_nbytes()
