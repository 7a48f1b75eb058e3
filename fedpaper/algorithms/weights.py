"""Server-side aggregation weights: FedAvg, FedPALS and AFL (pure numpy; cvxpy only as a fallback).

Notation follows the FedPALS paper (Listo Zec, Breitholtz, Johansson, arXiv 2411.03799):
``S`` is the ``[M, K]`` matrix of client label marginals S_i(Y) (one row per client), ``n`` the
``[M]`` client sample sizes (N = sum n_i), ``T`` the ``[K]`` target label marginal T(Y) and
``alpha`` a point of the simplex Delta^{M-1}.

* :func:`fedavg_weights` -- eq. (4): alpha_i = n_i / N.
* :func:`fedpals_weights` -- eq. (9): alpha^lambda = argmin_{alpha in simplex}
  ||T - alpha^T S||_2^2 + lambda * sum_i alpha_i^2 / n_i  (lambda = 0 is eq. (8)).
* :func:`effective_sample_size` -- Sec. 3: ESS = 1 / sum_i alpha_i^2 / n_i.
* :func:`projection_distance` -- Sec. 5: d(T, S) = min_alpha ||T - alpha^T S||_2^2 (squared L2).
* :func:`lambda_for_ess` -- App. A.1: binary search on lambda for a target ESS fraction.
* :func:`afl_step`, :func:`project_to_simplex` -- AFL (Mohri et al. 2019) mixture update.

How eq. (9) is solved
---------------------
The problem is called every round, so it is solved by a small exact solver instead of a generic QP
interface.  With w = n / N, lam~ = lambda / N and u_i = alpha_i / sqrt(w_i), eq. (9) is a ridge
problem with a non-negativity and one linear constraint; its dual has only K + 1 variables,

    max_y  b.y - lam~/2 ||y[:K]||^2 - 1/2 ||(Z y)_+||^2,   Z = diag(sqrt w) [S, 1],  b = [T; 1],

and the primal weights are alpha = sqrt(w) * (Z y)_+ (non-negative by construction).  The dual is
concave and piecewise quadratic; a semismooth Newton method with an exact line search, started at
the FedAvg weights, identifies the active set and then solves the piece exactly (a few iterations;
well under a millisecond for M = 100, K = 10).  For tiny lam~ (dual variables ~ 1/lam~) a primal
active-set step on the support restores full accuracy.

lambda = 0 (eq. 8) can have many minimisers when M > K or when clients share a label marginal.  We
return the limit of alpha^lambda as lambda -> 0+, i.e. the minimiser of eq. (8) with the largest
ESS (Sec. 3.1, Case 2): first the projection p* of T onto Conv(S) is computed exactly (a
Lawson-Hanson NNLS), then eq. (9) is solved with target p* and lam~ = 1e-12 and 1e-9 (p* is in
Conv(S), so these are within O(lam~) of the answer), and on their supports the weights of largest
ESS that reproduce p* exactly are computed by a minimum-norm least-squares solve.  If that fails
(a degenerate case) a minimiser of eq. (8) is still returned, without the tie-break.

Every result is checked against the optimality conditions of eq. (9) (its Frank-Wolfe gap); if the
check fails the problem is re-solved with cvxpy (a cached, parametrised problem; CLARABEL, then OSQP,
then SCS), the solver status is checked and slightly negative weights are clipped and renormalised.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.optimize import nnls

from fedpaper.ground.errors import BadParameterError

__all__ = [
    "fedavg_weights",
    "fedpals_weights",
    "effective_sample_size",
    "projection_distance",
    "lambda_for_ess",
    "project_to_simplex",
    "afl_step",
]

# Tolerance for "sums to 1" of label marginals and weights given by the caller.
SUM_TOL = 1e-6
# Accept a solution when its Frank-Wolfe gap (an upper bound on objective - optimum) is below this.
_GAP_TOL = 1e-9
_SOLVERS = ("auto", "exact", "cvxpy")


# --------------------------------------------------------------------------------------------
# input validation


def _as_float_array(x, name, ndim):
    try:
        arr = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=float)
    except (TypeError, ValueError):
        raise BadParameterError(f"{name} must be a numeric array; got {type(x).__name__}") from None
    if arr.ndim != ndim:
        raise BadParameterError(f"{name} must be {ndim}-D; got shape {arr.shape}")
    if arr.size == 0:
        raise BadParameterError(f"{name} must not be empty; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise BadParameterError(f"{name} contains NaN or inf; pass finite values")
    return arr


def _check_distribution(arr, name, axis=None):
    if np.any(arr < 0):
        raise BadParameterError(f"{name} has negative entries (min {arr.min():.3g}); it must be a probability vector")
    sums = arr.sum(axis=axis)
    bad = np.abs(sums - 1.0) > SUM_TOL
    if np.any(bad):
        worst = float(np.atleast_1d(sums)[np.argmax(np.atleast_1d(np.abs(sums - 1.0)))])
        where = "rows of " if axis is not None else ""
        raise BadParameterError(
            f"{where}{name} must sum to 1 (within {SUM_TOL:g}); found a sum of {worst:.6g}; normalise it first"
        )
    return arr / (sums[..., None] if axis is not None else sums)


def _check_sizes(n, m=None):
    n = _as_float_array(n, "n", 1)
    if m is not None and n.shape[0] != m:
        raise BadParameterError(f"n has {n.shape[0]} entries but S has {m} rows (clients); they must match")
    if np.any(n <= 0):
        raise BadParameterError(f"client sizes n must be > 0 (min {n.min():g}); drop empty clients first")
    return n


def _check_problem(S, n, T):
    S = _as_float_array(S, "S", 2)
    m, k = S.shape
    S = _check_distribution(S, "S", axis=1)
    n = _check_sizes(n, m)
    T = _as_float_array(T, "T", 1)
    if T.shape[0] != k:
        raise BadParameterError(f"T has {T.shape[0]} classes but S has {k} columns; they must match")
    T = _check_distribution(T, "T")
    return S, n, T


def _check_lambda(lam):
    try:
        lam = float(lam)
    except (TypeError, ValueError):
        raise BadParameterError(f"lam must be a number >= 0 (or inf); got {lam!r}") from None
    if math.isnan(lam) or lam < 0:
        raise BadParameterError(f"lam={lam!r} is out of range; it must lie in [0, inf]")
    return lam


# --------------------------------------------------------------------------------------------
# simple weights


def fedavg_weights(n):
    """FedAvg aggregation weights alpha_i = n_i / N (FedPALS paper, eq. 4; McMahan et al. 2017).

    Also the limit of FedPALS as lambda -> inf and the minimiser of sum alpha_i^2/n_i on the
    simplex, i.e. the weights of largest ESS (Props. 2 and 3, App. C.2).
    """
    n = _check_sizes(n)
    return n / n.sum()


def effective_sample_size(alpha, n):
    """Effective sample size ESS = 1 / sum_i alpha_i^2 / n_i of an aggregate (FedPALS Sec. 3, after Kong 1992).

    Equals N = sum n_i for the FedAvg weights (its maximum on the simplex) and n_i when all
    weight is on client i.
    """
    n = _check_sizes(n)
    alpha = _as_float_array(alpha, "alpha", 1)
    if alpha.shape != n.shape:
        raise BadParameterError(f"alpha has shape {alpha.shape} but n has shape {n.shape}; they must match")
    return float(1.0 / np.sum(alpha**2 / n))


# --------------------------------------------------------------------------------------------
# exact solver for eq. (9)


def _objective(S, T, lamt, w, alpha):
    """eq. (9) in normalised units: ||T - alpha^T S||^2 + lamt * sum alpha^2 / w (lamt = lam/N, w = n/N)."""
    r = S.T @ alpha - T
    pen = 0.0 if lamt == 0 else lamt * float(np.sum(alpha**2 / w))
    return float(r @ r) + pen


def _fw_gap(S, T, lamt, w, alpha):
    """Frank-Wolfe gap of eq. (9) at alpha: >= objective(alpha) - optimum, and 0 exactly at optima."""
    grad = 2.0 * (S @ (S.T @ alpha - T))
    if lamt > 0:
        grad = grad + 2.0 * lamt * alpha / w
    return float(alpha @ grad - grad.min())


def _projection_nnls(S, T):
    """Exact Euclidean projection of T onto Conv(rows of S) (eq. 8 / d(T,S)); returns (alpha, p).

    On the simplex S^T alpha - T = B alpha with B = S^T - T 1^T.  The NNLS problem
    min_{y>=0} ||B y||^2 + (1^T y - 1)^2 has minimiser y = u / (1 + q) along each simplex
    direction u with value q / (1 + q), q = ||B u||^2; so y / sum(y) minimises ||B u||^2.
    """
    m, k = S.shape
    A = np.empty((k + 1, m))
    A[:k] = S.T - T[:, None]
    A[k] = 1.0
    b = np.zeros(k + 1)
    b[k] = 1.0
    y, _ = nnls(A, b, maxiter=50 * (m + k))
    alpha = y / y.sum()
    return alpha, S.T @ alpha


def _line_max(z, delta, c0, c1):
    """argmax_{t >= 0} of a concave piecewise quadratic along a search direction (exact).

    Its derivative is  c0 - c1 t - sum_i delta_i max(z_i + t delta_i, 0): piecewise linear and
    non-increasing, with breakpoints t_i = -z_i / delta_i where a term switches on or off.
    """
    act = (z > 0) | ((z == 0) & (delta > 0))
    a0 = c0 - delta[act] @ z[act]
    b0 = c1 + delta[act] @ delta[act]
    with np.errstate(divide="ignore", invalid="ignore"):
        tb = -z / delta
    cross = (delta != 0) & (tb > 0) & np.isfinite(tb) & (act == (delta < 0))
    # at a breakpoint a term switches on (delta > 0, from inactive) or off (delta < 0, from active)
    idx = np.flatnonzero(cross)
    if idx.size == 0:
        return a0 / b0 if b0 > 0 else np.inf
    order = idx[np.argsort(tb[idx])]
    t_k = tb[order]
    sign = np.where(delta[order] > 0, 1.0, -1.0)  # +1: switches on
    da = -sign * delta[order] * z[order]
    db = sign * delta[order] ** 2
    alphas = a0 + np.concatenate(([0.0], np.cumsum(da)))
    betas = b0 + np.concatenate(([0.0], np.cumsum(db)))
    deriv_at = alphas[:-1] - betas[:-1] * t_k  # derivative at each breakpoint, from the left
    hit = np.flatnonzero(deriv_at <= 0)
    if hit.size:
        kk = int(hit[0])
    else:
        kk = t_k.size
    a, b_ = alphas[kk], betas[kk]
    lo = 0.0 if kk == 0 else t_k[kk - 1]
    if b_ <= 0:
        return lo if a <= 0 else np.inf
    t = a / b_
    return max(t, lo)


def _dual_newton(S, w, b, lamt, max_iter=100, tol=1e-13):
    """Maximise the K+1 dimensional dual of eq. (9) (module docstring) by semismooth Newton.

    Each Newton direction is followed by an exact line search (the dual is piecewise quadratic).
    Returns (alpha, converged).
    """
    m, k = S.shape
    s = np.sqrt(w)
    Z = np.empty((m, k + 1))
    Z[:, :k] = S * s[:, None]
    Z[:, k] = s
    reg = np.full(k + 1, lamt)
    reg[k] = 0.0

    y = np.zeros(k + 1)
    y[k] = 1.0  # alpha = w: the FedAvg weights (the lambda -> inf solution)
    z = Z @ y
    converged = False
    for _ in range(max_iter):
        u = np.maximum(z, 0.0)
        g = b - reg * y - Z.T @ u
        if np.abs(g).max() <= tol:
            converged = True
            break
        Za = Z[z > 0]
        H = Za.T @ Za
        H.flat[:: k + 2] += reg
        try:
            d = np.linalg.solve(H, g)
            if not np.all(np.isfinite(d)):
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            d = np.linalg.lstsq(H, g, rcond=1e-13)[0]
        if g @ d <= 0:  # should not happen (H is PSD); use steepest ascent
            d = g
        delta = Z @ d
        t = _line_max(z, delta, b @ d - lamt * (y[:k] @ d[:k]), lamt * (d[:k] @ d[:k]))
        if not np.isfinite(t) or t <= 0:
            break
        y = y + t * d
        z = Z @ y
    alpha = s * np.maximum(z, 0.0)
    total = alpha.sum()
    if not np.isfinite(total) or total <= 0:
        return None, False
    return alpha / total, converged


def _polish(S, T, lamt, w, alpha, max_iter=10):
    """Primal active-set refinement of eq. (9) (lamt > 0) started from the support of alpha.

    For tiny lamt the dual variables grow like 1/lamt and the dual solution loses digits to
    cancellation; solving the KKT system of eq. (9) on the support directly restores equal
    gradients on the support.  Returns the refined weights, or None if refinement fails.
    """
    m = S.shape[0]
    F = alpha > 0
    for _ in range(max_iter):
        idx = np.flatnonzero(F)
        f = idx.size
        if f == 0:
            return None
        Sf = S[idx]
        A = np.zeros((f + 1, f + 1))
        A[:f, :f] = 2.0 * (Sf @ Sf.T)
        A[np.arange(f), np.arange(f)] += 2.0 * lamt / w[idx]
        A[:f, f] = 1.0
        A[f, :f] = 1.0
        rhs = np.append(2.0 * (Sf @ T), 1.0)
        try:
            sol = np.linalg.solve(A, rhs)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(sol)):
            return None
        a = np.zeros(m)
        a[idx] = sol[:f]
        if np.any(a[idx] < 0):
            F[idx[a[idx] < 0]] = False  # drop clients pushed below zero, re-solve
            continue
        grad = 2.0 * (S @ (S.T @ a - T)) + 2.0 * lamt * a / w
        c = -sol[f]  # common gradient value on the support
        viol = np.where(~F, c - grad, -np.inf)
        j = int(np.argmax(viol))
        if viol[j] > 1e-15 * max(1.0, abs(c)):
            F[j] = True
            continue
        return a / a.sum()
    return None


def _exact_on_support(S, w, p, alpha):
    """Minimum-ESS-loss weights reproducing p exactly on the support of alpha, or None.

    Solves min sum_{i in F} alpha_i^2 / w_i s.t. alpha_F^T S_F = p, sum(alpha_F) = 1 (a
    minimum-norm least-squares problem) on F = support(alpha); clients it pushes below zero are
    dropped and the solve repeated.  If F contains the support of the optimum this is the optimum.
    """
    target = np.append(p, 1.0)
    F = alpha > 0
    for _ in range(10):
        idx = np.flatnonzero(F)
        if idx.size == 0:
            return None
        sw = np.sqrt(w[idx])
        B = np.vstack([S[idx].T, np.ones(idx.size)]) * sw
        exact = sw * np.linalg.lstsq(B, target, rcond=None)[0]
        if np.any(exact < 0):
            F[idx[exact < 0]] = False
            continue
        if np.abs(S[idx].T @ exact - p).max() > 1e-13 or abs(exact.sum() - 1.0) > 1e-13:
            return None
        out = np.zeros_like(alpha)
        out[idx] = exact
        return out / out.sum()
    return None


def _max_ess_weights(S, w, p, lamts=(1e-12, 1e-9)):
    """Largest-ESS weights that reproduce the marginal p (in Conv(S)): the lambda -> 0+ limit of eq. 9.

    Solves min_alpha sum_i alpha_i^2 / w_i  s.t.  alpha^T S = p, alpha in the simplex.  For each
    tiny lamt in ``lamts``, eq. (9) with target p is solved (its solution is within O(lamt) of the
    answer; as p is in Conv(S) the dual variables stay bounded, so the dual Newton method is
    accurate), then the exact solution on that support is computed (:func:`_exact_on_support`).
    Returns the exact candidate of largest ESS (candidates whose ESS falls more than 0.1% below that
    of their approximation are discarded: their support missed a client), else the approximation.
    """
    best, best_pen, fallback = None, np.inf, None
    for lamt in lamts:
        alpha, converged = _dual_newton(S, w, np.append(p, 1.0), lamt)
        if alpha is None:
            continue
        if not converged:
            polished = _polish(S, p, lamt, w, alpha)
            if polished is not None and _fw_gap(S, p, lamt, w, polished) < _fw_gap(S, p, lamt, w, alpha):
                alpha = polished
        if fallback is None:
            fallback = alpha
        exact = _exact_on_support(S, w, p, alpha)
        if exact is None:
            continue
        pen = np.sum(exact**2 / w)
        # the O(lamt) approximation may have a slightly larger ESS than the optimum (it need not
        # reproduce p exactly); a much larger one means the support missed a client
        if pen <= np.sum(alpha**2 / w) * (1.0 + 1e-3) and pen < best_pen:
            best, best_pen = exact, pen
    return best if best is not None else fallback


def _solve_exact(S, n, T, lam):
    w = n / n.sum()
    if math.isinf(lam):
        return w.copy()
    lamt = lam / n.sum()
    if lamt > 0:
        alpha, converged = _dual_newton(S, w, np.append(T, 1.0), lamt)
        if alpha is None:
            return None
        gap = _fw_gap(S, T, lamt, w, alpha)
        if not converged or gap > 1e-13:
            polished = _polish(S, T, lamt, w, alpha)
            if polished is not None:
                gap_p = _fw_gap(S, T, lamt, w, polished)
                if gap_p < gap:
                    alpha, gap = polished, gap_p
        return alpha if gap <= _GAP_TOL * (1.0 + _objective(S, T, lamt, w, alpha)) else None
    # lam = 0: projection first, then the largest-ESS weights that reproduce the projection.
    alpha1, p = _projection_nnls(S, T)
    alpha = _max_ess_weights(S, w, p)
    if alpha is not None and _fw_gap(S, T, 0.0, w, alpha) <= _GAP_TOL:
        if np.sum(alpha**2 / w) <= np.sum(alpha1**2 / w) + 1e-12:
            return alpha
    if _fw_gap(S, T, 0.0, w, alpha1) <= _GAP_TOL:
        return alpha1  # a minimiser of eq. (8), without the largest-ESS tie-break
    return None


# --------------------------------------------------------------------------------------------
# cvxpy fallback (cached parametrised problems)

_CVX_CACHE: dict = {}


def _cvx_problem(m, k):
    import cvxpy as cp

    key = (m, k)
    if key not in _CVX_CACHE:
        a = cp.Variable(m, nonneg=True)
        S_p = cp.Parameter((m, k))
        T_p = cp.Parameter(k)
        c_p = cp.Parameter(m, nonneg=True)  # c_i = sqrt(lamt / w_i): lamt sum a_i^2/w_i = ||c * a||^2
        obj = cp.sum_squares(S_p.T @ a - T_p) + cp.sum_squares(cp.multiply(c_p, a))
        prob = cp.Problem(cp.Minimize(obj), [cp.sum(a) == 1])
        _CVX_CACHE[key] = (prob, a, S_p, T_p, c_p)
    return _CVX_CACHE[key]


def _solve_cvxpy(S, n, T, lam):
    """eq. (9) with cvxpy; status checked, tiny negative weights clipped, renormalised."""
    import cvxpy as cp

    w = n / n.sum()
    if math.isinf(lam):
        return w.copy()
    lamt = lam / n.sum()
    m, k = S.shape
    prob, a, S_p, T_p, c_p = _cvx_problem(m, k)
    S_p.value, T_p.value, c_p.value = S, T, np.sqrt(lamt / w)
    installed = set(cp.installed_solvers())
    errors = []
    for solver in ("CLARABEL", "OSQP", "SCS"):
        if solver not in installed:
            continue
        kwargs = {"eps_abs": 1e-10, "eps_rel": 1e-10, "polish": True, "max_iter": 100000} if solver == "OSQP" else {}
        try:
            prob.solve(solver=solver, **kwargs)
        except (cp.error.SolverError, ValueError) as exc:  # pragma: no cover - solver-specific
            errors.append(f"{solver}: {exc}")
            continue
        if prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and a.value is not None:
            alpha = np.clip(np.asarray(a.value, dtype=float), 0.0, None)
            if alpha.sum() > 0:
                return alpha / alpha.sum()
        errors.append(f"{solver}: status {prob.status}")
    raise RuntimeError("cvxpy could not solve the FedPALS problem (eq. 9): " + "; ".join(errors))


# --------------------------------------------------------------------------------------------
# public API


def fedpals_weights(S, n, T, lam, *, solver="auto"):
    """FedPALS aggregation weights alpha^lambda (FedPALS paper, eq. 9).

    alpha^lambda = argmin_{alpha in Delta^{M-1}} ||T(Y) - sum_i alpha_i S_i(Y)||_2^2
                                                 + lambda * sum_i alpha_i^2 / n_i.

    Args:
        S: ``[M, K]`` client label marginals (rows are probability vectors, sums within 1e-6).
        n: ``[M]`` client sample sizes (> 0; only their ratios and lambda / N matter).
        T: ``[K]`` target label marginal.
        lam: lambda >= 0.  ``lam = 0`` is eq. (8); when eq. (8) has several minimisers
            (M > K, or clients with equal marginals) the one with the largest ESS is returned,
            i.e. the limit lambda -> 0+ (Sec. 3.1, Case 2).  ``lam = inf`` gives the FedAvg
            weights n / N (Prop. 2).
        solver: ``"auto"`` (exact dual Newton solver, cvxpy if its optimality check fails),
            ``"exact"`` (no fallback: raises RuntimeError on failure) or ``"cvxpy"``.

    Returns:
        ``[M]`` float64 numpy array on the simplex (non-negative, sums to 1).
    """
    S, n, T = _check_problem(S, n, T)
    lam = _check_lambda(lam)
    if solver not in _SOLVERS:
        raise BadParameterError(f"solver={solver!r} is not allowed; choose one of {list(_SOLVERS)}")
    if solver == "cvxpy":
        return _solve_cvxpy(S, n, T, lam)
    alpha = _solve_exact(S, n, T, lam)
    if alpha is not None:
        alpha[alpha < 1e-15] = 0.0  # rounding-level weights (e.g. 1e-16 off the support)
        return alpha / alpha.sum()
    if solver == "exact":
        raise RuntimeError("the exact FedPALS solver did not converge; retry with solver='cvxpy'")
    warnings.warn("exact FedPALS solver did not converge; falling back to cvxpy", RuntimeWarning, stacklevel=2)
    return _solve_cvxpy(S, n, T, lam)


def projection_distance(S, T, *, return_projection=False):
    """Projection distance d(T, S) = min_{alpha in simplex} ||T(Y) - alpha^T S(Y)||_2^2 (squared L2).

    FedPALS paper, Sec. 5 (the objective of eq. 8, i.e. eq. 9 with lambda = 0).  It is 0 exactly
    when T lies in the convex hull of the client marginals (up to ~1e-15 of rounding).

    Returns the distance (float), or ``(distance, projection)`` with ``projection`` the ``[K]``
    closest point of Conv(S) to T (unique, unlike the weights that produce it).
    """
    S = _check_distribution(_as_float_array(S, "S", 2), "S", axis=1)
    T = _as_float_array(T, "T", 1)
    if T.shape[0] != S.shape[1]:
        raise BadParameterError(f"T has {T.shape[0]} classes but S has {S.shape[1]} columns; they must match")
    T = _check_distribution(T, "T")
    _, p = _projection_nnls(S, T)
    d = float(np.sum((T - p) ** 2))
    return (d, p) if return_projection else d


def lambda_for_ess(S, n, T, ess_fraction, *, tol=1e-4, lam_max=None, max_iter=200):
    """lambda such that ESS(alpha^lambda) = ess_fraction * N, by bisection on log(lambda) (App. A.1).

    ESS(alpha^lambda) is non-decreasing in lambda: it starts at ESS(alpha^0) (the largest ESS among
    the minimisers of eq. 8) and tends to N (FedAvg, Prop. 2) as lambda -> inf.  Hence:

    * ``ess_fraction * N <= ESS(alpha^0)``: returns ``0.0`` (lambda = 0 already has at least that ESS);
    * ``ess_fraction >= 1``: returns ``math.inf`` (only FedAvg has ESS = N, unless alpha^0 already
      is FedAvg, then 0.0); ``fedpals_weights(..., lam=math.inf)`` gives the FedAvg weights;
    * otherwise a lambda with |ESS(alpha^lambda) / N - ess_fraction| <= tol.  If that needs
      lambda > ``lam_max`` (default 1e12 * N) the function returns ``lam_max``.

    The ESS is a fraction of the N of the clients passed in (the paper's convention).
    """
    S, n, T = _check_problem(S, n, T)
    try:
        frac = float(ess_fraction)
    except (TypeError, ValueError):
        raise BadParameterError(f"ess_fraction must be a number in [0, 1]; got {ess_fraction!r}") from None
    if not (0.0 <= frac <= 1.0):
        raise BadParameterError(f"ess_fraction={ess_fraction!r} is out of range; it must lie in [0, 1]")
    if not (0 < tol < 1):
        raise BadParameterError(f"tol={tol!r} is out of range; it must lie in (0, 1)")
    N = float(n.sum())
    lam_max = 1e12 * N if lam_max is None else float(lam_max)

    def ess_frac(lam):
        return effective_sample_size(fedpals_weights(S, n, T, lam), n) / N

    f0 = ess_frac(0.0)
    if frac <= f0 + tol:
        return 0.0
    if frac >= 1.0:
        return math.inf
    # bracket: ess_frac(lo) < frac <= ess_frac(hi), searched on a log grid around lambda = N
    lo, hi = 0.0, N
    f_hi = ess_frac(hi)
    while f_hi < frac - tol:
        lo, hi = hi, hi * 10.0
        if hi > lam_max:
            return lam_max
        f_hi = ess_frac(hi)
    if abs(f_hi - frac) <= tol:
        return hi
    if lo == 0.0:
        lo = hi
        while lo > 1e-14 * N:
            lo /= 10.0
            f_lo = ess_frac(lo)
            if f_lo <= frac:
                break
            hi, f_hi = lo, f_lo
        else:
            return hi
        if abs(f_lo - frac) <= tol:
            return lo
    for _ in range(max_iter):
        mid = math.sqrt(lo * hi)
        f_mid = ess_frac(mid)
        if abs(f_mid - frac) <= tol:
            return mid
        if f_mid < frac:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-12:
            break
    return hi


def project_to_simplex(v):
    """Euclidean projection of v onto the probability simplex (sort-based; Held et al. 1974,
    Duchi et al. 2008, Algorithm 1): argmin_{x in simplex} ||x - v||_2.  Used by AFL (Mohri et al.
    2019) for its mixture-weight update."""
    v = _as_float_array(v, "v", 1)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    idx = np.arange(1, v.size + 1)
    rho = np.nonzero(u - css / idx > 0)[0][-1]
    theta = css[rho] / (rho + 1.0)
    x = np.maximum(v - theta, 0.0)
    return x / x.sum()


def afl_step(mixture, client_losses, step_size):
    """One AFL mixture update (Mohri et al. 2019, Agnostic Federated Learning, Alg. 1 / eq. 5):
    projected gradient ascent on the mixture weights of the minimax objective
    max_{lambda in simplex} sum_i lambda_i L_i(theta), whose gradient in lambda is the vector of
    client losses:  lambda <- Proj_simplex(lambda + step_size * losses).

    Args:
        mixture: ``[M]`` current mixture weights (on the simplex).
        client_losses: ``[M]`` current (average) loss of the global model on each client.
        step_size: gamma_lambda >= 0 (our default elsewhere: 0.01, FedPALS vague-9).
    Returns the new ``[M]`` mixture (on the simplex).
    """
    mixture = _as_float_array(mixture, "mixture", 1)
    mixture = _check_distribution(mixture, "mixture")
    losses = _as_float_array(client_losses, "client_losses", 1)
    if losses.shape != mixture.shape:
        raise BadParameterError(
            f"client_losses has shape {losses.shape} but mixture has shape {mixture.shape}; they must match"
        )
    try:
        step = float(step_size)
    except (TypeError, ValueError):
        raise BadParameterError(f"step_size must be a number >= 0; got {step_size!r}") from None
    if not (step >= 0 and math.isfinite(step)):
        raise BadParameterError(f"step_size={step_size!r} is out of range; it must lie in [0, inf)")
    return project_to_simplex(mixture + step * losses)
