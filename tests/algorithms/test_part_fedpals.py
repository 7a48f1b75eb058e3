"""FedPALS (eq. 9): with the target inside the clients' label-marginal hull and lambda -> 0 the
weights reproduce the target; a huge lambda gives FedAvg's weights."""
from types import SimpleNamespace

import numpy as np
from part_harness import full_slots, make_ctx

from fedpaper.algorithms.fedpals import FedPALSWeights


def _ctx(target):
    return make_ctx([[[10, 0], [0, 30]]], feds=[SimpleNamespace(target_marginal=np.asarray(target))])


def test_weights_match_target_and_approach_fedavg():
    slots, part = full_slots(1, 2)
    p = FedPALSWeights(0.0)
    w = p.weights(_ctx([0.7, 0.3]), {p.key: {}}, slots, part, None)
    np.testing.assert_allclose(w, [0.7, 0.3], atol=1e-6)
    p = FedPALSWeights(1e9)
    w = p.weights(_ctx([0.7, 0.3]), {p.key: {}}, slots, part, None)
    np.testing.assert_allclose(w, [0.25, 0.75], atol=1e-4)
