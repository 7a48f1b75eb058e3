"""FedMT's stand-in data for the algorithm tests: 8 fine classes over 4 coarse ones, 8x8 images, and a
federation of 2 clients with a small labelled server set (papers.fedmt.data's own pool builder and split)."""
import numpy as np
import pytest

from fedpaper.engine import Federation
from fedpaper.papers.fedmt.data import build_pools, split

STAND_IN = {"num_classes": 8, "coarse_classes": 4, "n_train": 320, "n_test": 40, "shape": [3, 8, 8], "seed": 3}


@pytest.fixture(scope="module")
def pools():
    return build_pools({"stand_in": STAND_IN}, None, "cpu")


def fed(pools, seed=0):
    server, p = split(pools, {"n": 4, "num_clients": 2, "samples_per_client": 40, "seed": seed})
    return Federation([np.asarray(c) for c in p.client_indices], np.arange(len(pools.y_test)),
                      server_indices=server, seed=seed)
