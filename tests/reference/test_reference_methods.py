"""Each aggregator and client objective against an independent plain-torch reference (one or two
full-batch rounds, clients with different label sets and sizes, float64)."""
import numpy as np
import pytest
import torch
from reference_harness import (BACKENDS, Problem, assert_params_close, config, final_params, initial_params,
                      make_problem, max_diff, run)
from reference_math import (cross_entropy, fedpals_qp, fedrs_logits, forward, sgd, simplex_projection,
                            weighted)

from fedpaper.algorithms.methods import Method

# three clients: different sizes, different (overlapping) label sets; label 4 is held by nobody
CLIENTS = [(5, [0, 1]), (8, [1, 2, 3]), (3, [0, 3])]


def _problem(**kw):
    return make_problem(CLIENTS, K=5, d=3, **kw)


def _local(p, theta, i, lr, steps=1, extra=None, correction=None, logits_fn=None):
    """Client i's model after `steps` full-batch SGD steps from theta on CE (+ extra(params))."""
    x, y = p.client_xy(i)

    def loss(q):
        z = forward(q, x) if logits_fn is None else logits_fn(forward(q, x), i)
        return cross_entropy(z, y) + (extra(q) if extra else 0.0)

    return sgd(theta, loss, lr, steps, correction)


def test_initial_model_is_what_the_engine_starts_from():
    """The adapter's initial_params is the engine's starting point (lr = 0 leaves it unchanged)."""
    p, cfg = _problem(seed=3), config(lr=0.0)
    assert_params_close(final_params(Method("FedAvg"), p, cfg), initial_params(cfg, 3), rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", ["logreg", "ref_mlp"])
def test_fedavg_is_the_sample_size_weighted_mean(backend, model):
    """FedAvg (McMahan et al. 2017; fedpals eq. 4): theta = sum_i n_i/N theta_i."""
    p, cfg = _problem(), config(model=model, backend=backend)
    theta = initial_params(cfg, 0)
    states = [_local(p, theta, i, cfg.lr) for i in range(3)]
    want = weighted(states, p.sizes / p.sizes.sum())
    got = final_params(Method("FedAvg"), p, cfg)
    assert_params_close(got, want)
    assert max_diff(want, weighted(states, np.full(3, 1 / 3))) > 1e-3  # n_i/N is not the plain mean here


@pytest.mark.parametrize("method", [Method("FedAvg"), Method("FedPALS", server="fedpals", lam=0.3)],
                         ids=["fedavg", "fedpals"])
def test_runs_batched_together_keep_their_own_weights(method):
    """Two runs (other clients, sizes and seeds) trained as one batch: each run's aggregate uses only
    its own clients' weights, as when it is trained alone."""
    T = np.array([0.05, 0.05, 0.1, 0.4, 0.4])
    p1 = _problem(target=T)
    rows2 = [p1.client_rows[1][:6], p1.client_rows[0], p1.client_rows[2][:2]]
    p2 = Problem(p1.x, p1.y, rows2, 5, seed=7, target=T)
    cfg = config(model="ref_mlp")
    got = run(method, [p1, p2], cfg).final_params
    for r, p in enumerate((p1, p2)):
        alone = final_params(method, p, cfg)
        assert_params_close({k: v[r] for k, v in got.items()}, alone)
        if method.server == "fedavg":
            theta = initial_params(cfg, p.fed.seed)
            want = weighted([_local(p, theta, i, cfg.lr) for i in range(3)], p.sizes / p.sizes.sum())
            assert_params_close(alone, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fedprox_adds_the_proximal_gradient(backend):
    """FedProx (Li et al. 2020 eq. 2): CE + mu/2 ||w - w_t||^2; two local steps (the first starts at
    w_t, where the proximal gradient is zero)."""
    p, cfg = _problem(), config(model="ref_mlp", local_epochs=2, backend=backend)
    mu, theta = 0.7, initial_params(cfg, 0)
    prox = lambda q: 0.5 * mu * sum(((q[k] - theta[k]) ** 2).sum() for k in q)  # noqa: E731
    states = [_local(p, theta, i, cfg.lr, steps=2, extra=prox) for i in range(3)]
    want = weighted(states, p.sizes / p.sizes.sum())
    assert_params_close(final_params(Method("FedProx", client="fedprox", mu=mu), p, cfg), want)
    plain = weighted([_local(p, theta, i, cfg.lr, steps=2) for i in range(3)], p.sizes / p.sizes.sum())
    assert max_diff(want, plain) > 1e-3


@pytest.mark.parametrize("backend", BACKENDS)
def test_scaffold_control_variates_over_two_rounds(backend):
    """SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II): y_i = x - lr (g_i + c - c_i) per step;
    c_i+ = c_i - c + (x - y_i) / (K_i lr); c += (1/M) sum_i (c_i+ - c_i); x = sum n_i/N y_i."""
    p, cfg = _problem(), config(model="ref_mlp", local_epochs=2, rounds=2, backend=backend)
    x_glob, lr, M = initial_params(cfg, 0), cfg.lr, 3
    c = {k: torch.zeros_like(v) for k, v in x_glob.items()}
    c_i = [dict(c) for _ in range(M)]
    for _ in range(2):
        ys = [_local(p, x_glob, i, lr, steps=2, correction={k: c[k] - c_i[i][k] for k in c}) for i in range(M)]
        new_ci = [{k: c_i[i][k] - c[k] + (x_glob[k] - ys[i][k]) / (2 * lr) for k in c} for i in range(M)]
        c = {k: c[k] + sum(new_ci[i][k] - c_i[i][k] for i in range(M)) / M for k in c}
        c_i = new_ci
        x_glob = weighted(ys, p.sizes / p.sizes.sum())
    got = final_params(Method("SCAFFOLD", client="scaffold"), p, cfg)
    assert_params_close(got, x_glob)
    assert max_diff(got, final_params(Method("FedAvg"), p, cfg)) > 1e-3  # the correction matters


@pytest.mark.parametrize("backend", BACKENDS)
def test_fedrs_scales_missing_logits_by_alpha(backend):
    """FedRS (Li & Zhan 2021 eq. 6): logits of a client's missing classes are multiplied by alpha."""
    p, cfg = _problem(), config(model="ref_mlp", backend=backend)
    alpha, theta, labels = 0.3, initial_params(cfg, 0), p.label_sets()
    states = [_local(p, theta, i, cfg.lr, logits_fn=lambda z, i: fedrs_logits(z, labels[i], alpha))
              for i in range(3)]
    want = weighted(states, p.sizes / p.sizes.sum())
    assert_params_close(final_params(Method("FedRS", client="fedrs", fedrs_alpha=alpha), p, cfg), want)
    assert max_diff(want, final_params(Method("FedAvg"), p, cfg)) > 1e-3


def test_afl_mixture_is_projected_gradient_ascent_on_client_losses():
    """AFL (Mohri et al. 2019): round 1 aggregates with the uniform mixture, then
    lambda <- Proj_simplex(lambda + gamma * L_i(theta)) with L_i the client's mean CE of the global
    model; round 2 aggregates with the new lambda."""
    p, cfg = _problem(), config(model="ref_mlp", rounds=2)
    gamma, theta = 0.8, initial_params(cfg, 0)
    mix = np.full(3, 1 / 3)
    for _ in range(2):
        losses = np.array([float(cross_entropy(forward(theta, p.client_xy(i)[0]), p.client_xy(i)[1]))
                           for i in range(3)])
        theta_next = weighted([_local(p, theta, i, cfg.lr) for i in range(3)], mix)
        mix = simplex_projection(mix + gamma * losses)
        theta = theta_next
    assert np.abs(mix - 1 / 3).max() > 0.05  # the mixture moved
    assert_params_close(final_params(Method("AFL", server="afl", afl_step=gamma), p, cfg), theta)


@pytest.mark.parametrize("lam", [0.3, 3.0])
def test_fedpals_at_finite_lambda_uses_the_qp_weights(lam):
    """FedPALS (eq. 9) at a finite lambda: the aggregate is sum_i alpha_i^lambda theta_i with alpha^lambda
    the minimiser of ||T - alpha^T S||^2 + lambda sum alpha_i^2/n_i (cvxpy here), not FedAvg's n_i/N."""
    T = np.array([0.05, 0.05, 0.1, 0.4, 0.4])
    p, cfg = _problem(target=T), config(model="ref_mlp")
    counts = np.stack([np.bincount(p.client_xy(i)[1].numpy(), minlength=5) for i in range(3)]).astype(float)
    S, n = counts / counts.sum(1, keepdims=True), counts.sum(1)
    alpha = fedpals_qp(S, n, T, lam)
    assert np.abs(alpha - n / n.sum()).max() > 0.05 and np.abs(alpha - fedpals_qp(S, n, T, 0.0)).max() > 0.01
    theta = initial_params(cfg, 0)
    want = weighted([_local(p, theta, i, cfg.lr) for i in range(3)], alpha)
    assert_params_close(final_params(Method("FedPALS", server="fedpals", lam=lam), p, cfg), want)
