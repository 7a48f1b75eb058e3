"""Tests for fedpaper.algorithms.weights (FedPALS eq. 8/9, FedAvg eq. 4, ESS, App. A.1, AFL)."""

import math

import numpy as np
import pytest

from fedpaper.algorithms.weights import (
    afl_step,
    effective_sample_size,
    fedavg_weights,
    fedpals_weights,
    lambda_for_ess,
    project_to_simplex,
    projection_distance,
)
from fedpaper.ground.errors import BadParameterError

# synthetic task of App. A.5: two clients, three labels
S_SYN = np.array([[0.5, 0.5, 0.0], [0.5, 0.0, 0.5]])
N_SYN = np.array([40.0, 18.0])


def t_delta(d):
    return (1 - d) * np.array([0.5, 0.25, 0.25]) + d * np.array([0.0, 0.5, 0.5])


def random_problem(rng, m, k, conc=0.5, in_hull=False, duplicates=False):
    S = rng.dirichlet(np.full(k, conc), size=m)
    if duplicates:
        S[1::2] = S[0::2][: S[1::2].shape[0]]
    n = rng.integers(20, 3000, size=m).astype(float)
    T = rng.dirichlet(np.full(m, 0.7)) @ S if in_hull else rng.dirichlet(np.full(k, conc))
    return S, n, T


def assert_on_simplex(a, atol=1e-12):
    assert np.all(a >= 0)
    assert abs(a.sum() - 1) < atol


def eq9(S, n, T, lam, a):
    return float(np.sum((T - a @ S) ** 2) + lam * np.sum(a**2 / n))


def cvxpy_max_ess(S, n, p):
    """Reference for the lambda -> 0 limit: max ESS among alpha with alpha^T S = p (cvxpy)."""
    cp = pytest.importorskip("cvxpy")
    a = cp.Variable(S.shape[0], nonneg=True)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(cp.multiply(1 / np.sqrt(n), a))), [S.T @ a == p])
    prob.solve(solver="CLARABEL")
    assert prob.status == "optimal"
    v = np.clip(a.value, 0, None)
    return v / v.sum()


# ------------------------------------------------------------------------------ basic weights


def test_fedavg_weights_eq4():
    np.testing.assert_allclose(fedavg_weights([1, 3, 4]), [0.125, 0.375, 0.5])


def test_effective_sample_size():
    n = np.array([10.0, 30.0, 60.0])
    assert effective_sample_size(fedavg_weights(n), n) == pytest.approx(100.0)  # ESS(FedAvg) = N
    assert effective_sample_size([0, 1, 0], n) == pytest.approx(30.0)  # all weight on one client
    assert effective_sample_size([1 / 3] * 3, n) == pytest.approx(1 / (1 / 90 + 1 / 270 + 1 / 540))


# ------------------------------------------------------------------------------ eq. (8)/(9)


@pytest.mark.parametrize("d", [0.0, 0.3, 1.0])
def test_synthetic_task_projection_lambda0(d):
    """App. A.5: T_delta projects to [0.5, 0.25, 0.25]; alpha0 = (0.5, 0.5); d(T,S) = 0.375 d^2."""
    T = t_delta(d)
    alpha = fedpals_weights(S_SYN, N_SYN, T, 0.0)
    np.testing.assert_allclose(alpha, [0.5, 0.5], atol=1e-10)
    dist, proj = projection_distance(S_SYN, T, return_projection=True)
    assert dist == pytest.approx(0.375 * d**2, abs=1e-14)
    np.testing.assert_allclose(proj, [0.5, 0.25, 0.25], atol=1e-12)


@pytest.mark.parametrize("lam", [0.5, 7.0, 100.0, 1e4])
@pytest.mark.parametrize("d", [0.0, 0.6])
def test_synthetic_task_closed_form_lambda(lam, d):
    """Two clients: f(t) = const + (c - t/2)^2 + (c - 1/2 + t/2)^2 + lam (t^2/n1 + (1-t)^2/n2),
    minimised at t = (1/2 + 2 lam/n2) / (1 + 2 lam (1/n1 + 1/n2)) (independent of d)."""
    n1, n2 = N_SYN
    t = (0.5 + 2 * lam / n2) / (1 + 2 * lam * (1 / n1 + 1 / n2))
    alpha = fedpals_weights(S_SYN, N_SYN, t_delta(d), lam)
    np.testing.assert_allclose(alpha, [t, 1 - t], atol=1e-10)


def test_weights_on_simplex_and_optimal_vs_cvxpy():
    rng = np.random.default_rng(0)
    for m, k in [(3, 7), (10, 10), (30, 10), (12, 4)]:
        for in_hull in (False, True):
            S, n, T = random_problem(rng, m, k, in_hull=in_hull)
            N = n.sum()
            for lam in [1e-3 * N, 0.1 * N, N, 100 * N]:
                a = fedpals_weights(S, n, T, lam)
                assert_on_simplex(a)
                b = fedpals_weights(S, n, T, lam, solver="cvxpy")
                assert_on_simplex(b)
                # ours is at least as good as the interior-point solution, and they agree
                assert eq9(S, n, T, lam, a) <= eq9(S, n, T, lam, b) + 1e-9
                np.testing.assert_allclose(a, b, atol=1e-4)


def test_optimality_conditions_many_random_problems():
    """KKT of eq. (9): the gradient is minimal and equal on the support of alpha."""
    rng = np.random.default_rng(1)
    for trial in range(60):
        m, k = int(rng.integers(2, 40)), int(rng.integers(2, 12))
        S, n, T = random_problem(rng, m, k, conc=float(rng.choice([0.1, 0.5, 3])),
                                 in_hull=trial % 2 == 0, duplicates=trial % 3 == 0)
        lam = float(rng.choice([0.0, 1e-6, 1e-2, 1.0, 1e3])) * n.sum()
        a = fedpals_weights(S, n, T, lam, solver="exact")
        assert_on_simplex(a)
        grad = 2 * S @ (a @ S - T) + 2 * lam * a / n
        gap = a @ grad - grad.min()  # Frank-Wolfe gap >= objective - optimum
        assert gap <= 1e-9 * (1 + eq9(S, n, T, lam, a))


def test_lambda_to_infinity_gives_fedavg_claim30():
    """Prop. 2: alpha^lambda -> n/N; the distance to FedAvg shrinks monotonically with lambda."""
    rng = np.random.default_rng(2)
    S, n, T = random_problem(rng, 8, 5, conc=0.3)
    fa = fedavg_weights(n)
    N = n.sum()
    dists = [np.abs(fedpals_weights(S, n, T, lam) - fa).sum() for lam in N * np.logspace(-3, 8, 12)]
    assert all(d2 <= d1 + 1e-9 for d1, d2 in zip(dists, dists[1:]))
    assert dists[0] > 0.1 and dists[-1] < 1e-6
    np.testing.assert_allclose(fedpals_weights(S, n, T, math.inf), fa)


def test_fedavg_minimises_variance_term_prop3():
    """Prop. 3: n/N minimises sum alpha_i^2/n_i on the simplex (so has the largest ESS)."""
    rng = np.random.default_rng(3)
    n = rng.integers(5, 500, size=6).astype(float)
    best = effective_sample_size(fedavg_weights(n), n)
    for _ in range(200):
        assert effective_sample_size(rng.dirichlet(np.ones(6)), n) <= best + 1e-9


@pytest.mark.parametrize("duplicates", [False, True])
def test_covered_target_small_lambda_matches_and_max_ess_claim31(duplicates):
    """Sec. 3.1 Case 2: T in Conv(S), M > K: small lambda matches T and has the largest ESS among
    the exact matches (checked against cvxpy); lambda = 0 returns that same limit."""
    rng = np.random.default_rng(4 + duplicates)
    S, n, T = random_problem(rng, 12, 4, conc=0.5, in_hull=True, duplicates=duplicates)
    ref = cvxpy_max_ess(S, n, T)
    ess_ref = effective_sample_size(ref, n)
    for lam in [0.0, 1e-8 * n.sum()]:
        a = fedpals_weights(S, n, T, lam)
        assert np.linalg.norm(a @ S - T) < 1e-7
        assert effective_sample_size(a, n) >= ess_ref * (1 - 1e-6)
        np.testing.assert_allclose(a, ref, atol=1e-4)  # the interior-point reference is ~1e-5 accurate
    assert projection_distance(S, T) < 1e-14


def test_lambda0_tie_break_outside_hull_splits_duplicates_by_size():
    """T outside Conv(S) with two identical clients: the projection is unique, the split between
    the duplicates is not; the lambda -> 0 limit splits their weight in proportion to n_i."""
    S = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5]])
    n = np.array([30.0, 10.0, 18.0])
    a = fedpals_weights(S, n, t_delta(0.5), 0.0)
    np.testing.assert_allclose(a, [0.375, 0.125, 0.5], atol=1e-10)


def test_projection_distance_zero_iff_in_hull():
    rng = np.random.default_rng(6)
    S, n, T = random_problem(rng, 6, 5, in_hull=True)
    assert projection_distance(S, T) < 1e-14
    S2 = np.array([[1.0, 0, 0], [0, 1.0, 0]])  # hull = edge; T off it
    d, p = projection_distance(S2, [0.2, 0.2, 0.6], return_projection=True)
    assert d == pytest.approx(0.6**2 + 0.3**2 * 2)
    np.testing.assert_allclose(p, [0.5, 0.5, 0.0], atol=1e-12)
    assert projection_distance(S2, [0.3, 0.7, 0.0]) < 1e-15


# ------------------------------------------------------------------------------ lambda for ESS


@pytest.mark.parametrize("frac", [0.25, 0.5, 0.75, 0.95])
def test_lambda_for_ess_hits_fraction(frac):
    rng = np.random.default_rng(7)
    S, n, T = random_problem(rng, 10, 6, conc=0.3)
    lam = lambda_for_ess(S, n, T, frac, tol=1e-5)
    assert 0 < lam < math.inf
    ess = effective_sample_size(fedpals_weights(S, n, T, lam), n)
    assert ess / n.sum() == pytest.approx(frac, abs=1e-5)


def test_lambda_for_ess_edge_cases():
    rng = np.random.default_rng(8)
    S, n, T = random_problem(rng, 10, 6, conc=0.3)
    f0 = effective_sample_size(fedpals_weights(S, n, T, 0.0), n) / n.sum()
    assert 0 < f0 < 1
    assert lambda_for_ess(S, n, T, f0 / 2) == 0.0
    assert lambda_for_ess(S, n, T, 0.0) == 0.0
    assert lambda_for_ess(S, n, T, 1.0) == math.inf


def test_ess_monotone_in_lambda():
    rng = np.random.default_rng(9)
    S, n, T = random_problem(rng, 15, 5, conc=0.3)
    ess = [effective_sample_size(fedpals_weights(S, n, T, lam), n) for lam in n.sum() * np.logspace(-4, 4, 17)]
    assert all(e2 >= e1 - 1e-9 * n.sum() for e1, e2 in zip(ess, ess[1:]))


# ------------------------------------------------------------------------------ AFL


def test_project_to_simplex():
    np.testing.assert_allclose(project_to_simplex([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(project_to_simplex([1.0, 1.0]), [0.5, 0.5])
    np.testing.assert_allclose(project_to_simplex([2.0, 0.0, -1.0]), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(project_to_simplex([0.5, 0.4, -0.3]), [0.55, 0.45, 0.0])
    rng = np.random.default_rng(10)
    for _ in range(50):
        v = rng.normal(size=6) * 2
        x = project_to_simplex(v)
        assert_on_simplex(x)
        # optimality: v - x = theta on the support, <= theta off it
        r = v - x
        theta = r[x > 0].mean()
        np.testing.assert_allclose(r[x > 0], theta, atol=1e-12)
        assert np.all(r[x == 0] <= theta + 1e-12)


def test_afl_step_moves_weight_to_high_loss_clients():
    mix = np.full(4, 0.25)
    new = afl_step(mix, [1.0, 2.0, 3.0, 4.0], 0.01)
    assert_on_simplex(new)
    np.testing.assert_allclose(new, [0.235, 0.245, 0.255, 0.265])
    np.testing.assert_allclose(afl_step(mix, [1, 2, 3, 4], 0.0), mix)
    big = afl_step(mix, [0.0, 0.0, 0.0, 1.0], 10.0)
    np.testing.assert_allclose(big, [0, 0, 0, 1])


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "S,n,T,lam",
    [
        ([[0.5, 0.5], [1.0, 0.0]], [1, 2], [0.5, 0.5], -1.0),  # negative lambda
        ([[0.5, 0.5], [1.0, 0.0]], [1, 2], [0.5, 0.5], float("nan")),
        ([[0.5, 0.6], [1.0, 0.0]], [1, 2], [0.5, 0.5], 1.0),  # row does not sum to 1
        ([[1.5, -0.5], [1.0, 0.0]], [1, 2], [0.5, 0.5], 1.0),  # negative entry
        ([[0.5, 0.5], [1.0, 0.0]], [1, 2, 3], [0.5, 0.5], 1.0),  # n length
        ([[0.5, 0.5], [1.0, 0.0]], [1, 0], [0.5, 0.5], 1.0),  # empty client
        ([[0.5, 0.5], [1.0, 0.0]], [1, 2], [0.3, 0.3, 0.4], 1.0),  # T length
        ([[0.5, 0.5], [1.0, 0.0]], [1, 2], [0.5, 0.6], 1.0),  # T sum
        ([0.5, 0.5], [1], [0.5, 0.5], 1.0),  # S not 2-D
        ([[0.5, np.nan], [1.0, 0.0]], [1, 2], [0.5, 0.5], 1.0),
    ],
)
def test_bad_inputs_raise(S, n, T, lam):
    with pytest.raises(BadParameterError) as exc:
        fedpals_weights(S, n, T, lam)
    assert "\n" not in str(exc.value)


def test_bad_inputs_other_functions():
    S, n, T = S_SYN, N_SYN, t_delta(0.2)
    with pytest.raises(BadParameterError):
        fedpals_weights(S, n, T, 1.0, solver="osqp")
    with pytest.raises(BadParameterError):
        lambda_for_ess(S, n, T, 1.5)
    with pytest.raises(BadParameterError):
        effective_sample_size([0.5, 0.5, 0.0], n)
    with pytest.raises(BadParameterError):
        fedavg_weights([1.0, -2.0])
    with pytest.raises(BadParameterError):
        afl_step([0.5, 0.5], [1.0], 0.1)
    with pytest.raises(BadParameterError):
        afl_step([0.5, 0.5], [1.0, 2.0], -0.1)
    with pytest.raises(BadParameterError):
        projection_distance(S, [0.5, 0.5])


def test_accepts_lists_and_tensors():
    torch = pytest.importorskip("torch")
    a = fedpals_weights(torch.tensor(S_SYN), torch.tensor(N_SYN), torch.tensor(t_delta(0.3)), 0.0)
    np.testing.assert_allclose(a, [0.5, 0.5], atol=1e-10)
    b = fedpals_weights(S_SYN.tolist(), N_SYN.tolist(), t_delta(0.3).tolist(), 0.0)
    np.testing.assert_allclose(a, b)


# ------------------------------------------------------------------------------ issue 31: random mutation sample


def test_error_messages_name_the_bad_argument():
    """The message is the user's one line: it names the argument and the rule (mutants that drop it)."""
    with pytest.raises(BadParameterError, match=r"^T has negative entries \(min -0\.2\); it must be a probability"):
        projection_distance(S_SYN, [0.8, 0.4, -0.2])
    with pytest.raises(BadParameterError, match=r"^S has negative entries \(min -0\.5\)"):
        fedpals_weights([[1.5, -0.5], [1.0, 0.0]], [1, 2], [0.5, 0.5], 1.0)
    with pytest.raises(BadParameterError, match=r"^lam=-1\.0 is out of range; it must lie in \[0, inf\]"):
        fedpals_weights(S_SYN, N_SYN, t_delta(0.2), -1.0)


def test_solver_cvxpy_solves_with_cvxpy(monkeypatch):
    """solver='cvxpy' hands the problem to cvxpy (and its answer agrees with the exact solver's)."""
    cp = pytest.importorskip("cvxpy")
    calls = []
    real = cp.Problem.solve

    def counting(self, *a, **kw):
        calls.append(kw.get("solver"))
        return real(self, *a, **kw)

    monkeypatch.setattr(cp.Problem, "solve", counting)
    T = t_delta(0.4)
    exact = fedpals_weights(S_SYN, N_SYN, T, 5.0, solver="exact")
    assert calls == []
    via_cvxpy = fedpals_weights(S_SYN, N_SYN, T, 5.0, solver="cvxpy")
    assert len(calls) >= 1
    np.testing.assert_allclose(via_cvxpy, exact, atol=1e-5)


def test_line_max_matches_bisection_on_the_derivative():
    """_line_max's argmax of the concave piecewise quadratic (derivative c0 - c1 t - sum_i delta_i
    max(z_i + t delta_i, 0)) equals the root of that derivative found by plain bisection, here with
    one term switching off (z=1, delta=-1 at t=1) and one with 0 < delta < 1 switching on (t=2):
    by hand, the derivative is 3.5 - 0.35 t past t = 2, so the argmax is t = 10."""
    from fedpaper.algorithms.weights import _line_max

    def deriv(t, z, delta, c0, c1):
        return c0 - c1 * t - np.sum(delta * np.maximum(z + t * delta, 0.0))

    cases = [(np.array([1.0, -1.0]), np.array([-1.0, 0.5]), 3.0, 0.1, 10.0),
             (np.array([2.0, -1.0, 0.5]), np.array([-0.5, 0.25, 2.0]), 1.0, 0.2, None),
             (np.array([0.3, -2.0, 1.0]), np.array([0.7, 0.8, -3.0]), 4.0, 0.05, None)]
    for z, delta, c0, c1, by_hand in cases:
        lo, hi = 0.0, 1e3
        assert deriv(hi, z, delta, c0, c1) < 0 < deriv(lo, z, delta, c0, c1)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if deriv(mid, z, delta, c0, c1) > 0 else (lo, mid)
        t = _line_max(z, delta, c0, c1)
        assert t == pytest.approx(lo, rel=1e-9, abs=1e-12)
        if by_hand is not None:
            assert t == pytest.approx(by_hand, rel=1e-12)


def test_exact_on_support_by_hand():
    """Minimum sum alpha_i^2 / w_i with alpha^T S = p on the simplex, three clients e1, e2 and
    (1/2, 1/2), w = (1/2, 1/4, 1/4), p = (1/2, 1/2): alpha = (1/2 - c/2, 1/2 - c/2, c) and
    6 (1/2 - c/2)^2 + 4 c^2 is least at c = 3/11, so alpha = (4, 4, 3) / 11."""
    from fedpaper.algorithms.weights import _exact_on_support

    S = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    out = _exact_on_support(S, np.array([0.5, 0.25, 0.25]), np.array([0.5, 0.5]), np.full(3, 1 / 3))
    assert out is not None
    np.testing.assert_allclose(out, np.array([4.0, 4.0, 3.0]) / 11, rtol=0, atol=1e-14)


def test_polish_started_on_the_optimal_support_takes_one_solve():
    """_polish is an active-set method started from the support of its input: given the optimum
    (client 1 at weight 0), one KKT solve on that support reproduces it (reference: cvxpy)."""
    from fedpaper.algorithms.weights import _polish

    S = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    n = np.array([10.0, 10.0, 10.0, 10.0])
    T = np.array([0.9, 0.1, 0.0])
    lam = 1.0
    ref = fedpals_weights(S, n, T, lam, solver="cvxpy")
    assert ref[1] < 1e-6 and np.all(ref[[0, 2, 3]] > 1e-3)  # client 1 (class 2 only) is off the support
    alpha = fedpals_weights(S, n, T, lam, solver="exact")
    np.testing.assert_allclose(alpha, ref, atol=1e-6)
    polished = _polish(S, T, lam / n.sum(), n / n.sum(), alpha.copy(), max_iter=1)
    assert polished is not None
    np.testing.assert_allclose(polished, alpha, atol=1e-12)


def test_lambda_for_ess_with_a_tolerance_below_rounding_still_returns_a_lambda():
    """With tol below what the bisection can reach, it stops when lo and hi agree to 1e-12 and
    returns hi (a number whose ESS is the target to rounding), not nothing."""
    rng = np.random.default_rng(7)
    S, n, T = random_problem(rng, 10, 6, conc=0.3)
    lam = lambda_for_ess(S, n, T, 0.5, tol=1e-15)
    assert isinstance(lam, float) and 0 < lam < math.inf
    ess = effective_sample_size(fedpals_weights(S, n, T, lam), n)
    assert ess / n.sum() == pytest.approx(0.5, abs=1e-8)
