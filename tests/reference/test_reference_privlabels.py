"""Private label sets and central tuning (privlabels Sec 4.1-4.2, Alg. 1, eqs. 5-6) against an
independent plain-torch reference (one full-batch round, float64)."""
import numpy as np
import pytest
import torch
from reference_harness import BACKENDS, assert_params_close, config, final_params, initial_params, make_problem, max_diff
from reference_math import (cross_entropy, forward, sgd, softmax_over, tuning_mse, tuning_pairwise,
                            weighted)

from fedpaper.algorithms.methods import Method

CLIENTS = [(5, [0, 1]), (8, [1, 2, 3]), (3, [0, 3])]  # label 4: nobody; label 2: only client 1
# K = 6: a client with ONE row (label 4) declares Y = {3, 4} (Federation.label_sets), so label 4 is held
# by it alone (n'_4 = 1) and its row is trained; label 5 is held by nobody
CLIENTS_ONE_ROW = [(5, [0, 1]), (8, [1, 2, 3]), (1, [4]), (3, [0, 3])]
LABEL_SETS_ONE_ROW = [[0, 1], [1, 2, 3], [3, 4], [0, 3]]
CLS_W, CLS_B = "classifier.weight", "classifier.bias"
N_SERVER = 7


def _problem(clients=CLIENTS, K=5, label_sets=None):
    n_clients = sum(n for n, _ in clients)
    return make_problem(clients, K=K, d=3, extra_rows=N_SERVER,
                        server_rows=np.arange(n_clients, n_clients + N_SERVER), label_sets=label_sets)


def _received(theta, labels):
    """What a private client receives: the body, and only the classifier rows of its labels."""
    keep = torch.zeros(theta[CLS_B].shape[0])
    keep[list(labels)] = 1.0
    out = dict(theta)
    out[CLS_W], out[CLS_B] = theta[CLS_W] * keep[:, None], theta[CLS_B] * keep
    return out


def _private_clients(p, theta, lr, steps=1, mu=None):
    """Each client's model after local training with its softmax over its own labels only."""
    labels, out = p.label_sets(), []
    for i in range(len(p.client_rows)):
        x, y = p.client_xy(i)
        start = _received(theta, labels[i])

        def loss(q, x=x, y=y, L=labels[i], start=start):
            ce = cross_entropy(forward(q, x), y, labels=L)
            if mu is None:
                return ce
            return ce + 0.5 * mu * sum(((q[k] - start[k]) ** 2).sum() for k in q if k not in (CLS_W, CLS_B))

        out.append(sgd(start, loss, lr, steps))
    return out


def _private_aggregate(p, theta, states):
    """Body: n_k/N. Classifier row y: sum over clients holding y of n_k / n'_y row_k (Alg. 1 line 11);
    a row no client holds keeps its previous value."""
    n, labels = p.sizes, p.label_sets()
    glob = weighted(states, n / n.sum())
    for key in (CLS_W, CLS_B):
        rows = theta[key].clone()
        for y in range(rows.shape[0]):
            holders = [i for i in range(len(states)) if y in labels[i]]
            if holders:
                n_y = sum(n[i] for i in holders)
                rows[y] = sum(n[i] / n_y * states[i][key][y] for i in holders)
        glob[key] = rows
    return glob


@pytest.mark.float32
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("clients, K, sets", [(CLIENTS, 5, None), (CLIENTS_ONE_ROW, 6, LABEL_SETS_ONE_ROW)],
                         ids=["3clients", "one-row-client"])
def test_private_fedavg_per_label_rows(backend, clients, K, sets):
    p, cfg = _problem(clients, K, sets), config(model="ref_mlp", backend=backend, K=K)
    theta = initial_params(cfg, 0)
    states = _private_clients(p, theta, cfg.lr)
    want = _private_aggregate(p, theta, states)
    got = final_params(Method("FedAvg (private)", private=True), p, cfg)
    assert_params_close(got, want)
    torch.testing.assert_close(got[CLS_W][K - 1], theta[CLS_W][K - 1])  # nobody holds the last label: unchanged
    # the per-label average differs from averaging every row over all clients by n_k/N
    assert float((want[CLS_W] - weighted(states, p.sizes / p.sizes.sum())[CLS_W]).abs().max()) > 1e-2


@pytest.mark.float32
@pytest.mark.parametrize("backend", BACKENDS)
def test_private_fedprox_has_no_proximal_term_on_the_classifier(backend):
    """FedProx (private): mu/2 ||w - w_t||^2 on the body only (privlabels Sec 4.1), two local steps."""
    p, cfg = _problem(), config(model="ref_mlp", local_epochs=2, backend=backend)
    theta, mu = initial_params(cfg, 0), 0.7
    want = _private_aggregate(p, theta, _private_clients(p, theta, cfg.lr, steps=2, mu=mu))
    got = final_params(Method("FedProx (private)", client="fedprox", private=True, mu=mu), p, cfg)
    assert_params_close(got, want)
    no_prox = _private_aggregate(p, theta, _private_clients(p, theta, cfg.lr, steps=2))
    assert max_diff(want, no_prox) > 1e-3


def _client_probs(p, states, private):
    """h_k(y|x) on the server rows: the private client's softmax over Y_k, or a public client's full
    softmax, each zero outside Y_k."""
    xs = p.x[torch.as_tensor(p.fed.server_indices)]
    out = []
    for s, labels in zip(states, p.label_sets()):
        z = forward(s, xs)
        out.append(softmax_over(z, labels) if private else softmax_over(z, range(p.K)) * _mask(labels, p.K))
    return xs, out


def _mask(labels, K):
    m = torch.zeros(K)
    m[list(labels)] = 1.0
    return m


@pytest.mark.parametrize("private", [False, pytest.param(True, marks=pytest.mark.float32)])
@pytest.mark.parametrize("kind", ["mse", "pairwise"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_central_tuning_steps(kind, private, optimizer):
    """Central tuning (privlabels Sec 4.2): after aggregation, `tuning_epochs` full-batch steps of
    the tuning optimiser on eq. 6 (mse) or eq. 5 (pairwise) over the server rows, with the clients'
    models as targets and w_k = n_k/N."""
    p, cfg = _problem(), config(model="ref_mlp", backend="loop")
    theta, tlr, epochs = initial_params(cfg, 0), 0.3, 2
    if private:
        states = _private_clients(p, theta, cfg.lr)
        agg = _private_aggregate(p, theta, states)
    else:
        states = [sgd(theta, lambda q, i=i: cross_entropy(forward(q, p.client_xy(i)[0]), p.client_xy(i)[1]),
                      cfg.lr, 1) for i in range(3)]
        agg = weighted(states, p.sizes / p.sizes.sum())
    xs, probs = _client_probs(p, states, private)
    w = p.sizes / p.sizes.sum()
    loss_fn = {"mse": tuning_mse, "pairwise": tuning_pairwise}[kind]
    params = {k: v.clone().requires_grad_(True) for k, v in agg.items()}
    opt = (torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam)(params.values(), lr=tlr)
    for _ in range(epochs):
        opt.zero_grad()
        loss_fn(torch.softmax(forward(params, xs), 1), probs, w, p.label_sets()).backward()
        opt.step()
    want = {k: v.detach() for k, v in params.items()}
    method = Method("tuned", private=private, tuning=kind, tuning_epochs=epochs, tuning_optimizer=optimizer,
                    tuning_lr=tlr)
    got = final_params(method, p, cfg)
    assert_params_close(got, want)
    assert max_diff(want, agg) > 1e-4  # tuning is not a no-op here
