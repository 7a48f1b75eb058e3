"""The tiny set-up the engine tests share: two runs on a 4-class 16x16 synthetic task (each run two
clients with overlapping labels) and a LeNet config small enough to train 3 rounds in a blink."""
import numpy as np

from fedpaper.blocks.data import synthetic_images
from fedpaper.engine import Federation, Pools, TrainConfig


def two_runs(with_val: bool = False):
    """(pools, [Federation] x 2 seeds): clients on labels {0, 1} and {1, 2, 3}, 40 test rows."""
    ds = synthetic_images(num_classes=4, n_train=160, n_test=40, shape=(1, 16, 16), seed=0)
    pools = Pools.from_dataset(ds)
    y = pools.y_train.numpy()
    val = np.arange(120, 160) if with_val else None
    feds = [Federation([np.flatnonzero(y < 2)[:30], np.flatnonzero(y >= 1)[:20]], np.arange(40),
                       val_indices=val, seed=s) for s in (0, 1)]
    return pools, feds


def lenet_config(**kw) -> TrainConfig:
    base = dict(model="lenet", model_kwargs=dict(in_channels=1, image_size=16, num_classes=4, c1=4, c2=6),
                lr=0.05, batch_size=8, rounds=3)
    base.update(kw)
    return TrainConfig(**base)
