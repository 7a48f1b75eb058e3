"""FedMT: federated learning with mixed-type labels (Zhang et al. 2024, Sec. 3.3-3.4, Algorithm 1).

The server holds images labelled in the desired K-class (fine) space; the clients hold images
labelled only in a J-class (coarse) space; every centre trains the same K-output network f.
Per round (Algorithm 1):

- A (server): SGD on the K-class cross-entropy over its data (`ServerTraining`; here after the
  aggregation, before the next broadcast: the same sequence except for the first round);
- B (client): pseudo-label every local image with the broadcast model (eval mode),
  y_hat = argmax_k f_k(x); keep S_fix = {i : max_k softmax(f(x_i))_k > xi}; an empty S_fix skips
  the round (aggregation weight 0). Draw S_mix: |S_fix| rows with replacement from all local data.
  Train on batches of S_fix and S_mix with the client loss of eq. (5)
      R_reg = R_p + lambda2 (L_fix + lambda1 L_mix),
  R_p = CE(M softmax(f(x)), coarse label) over S_fix (eq. 3 restricted to S_fix, targets vague-9),
  L_fix = CE(f(A(x_fix)), y_hat_fix), A = torchvision RandAugment (2 ops, magnitude 10),
  L_mix = lam CE(f(x_mix), y_hat_fix) + (1 - lam) CE(f(x_mix), y_hat_mix),
  x_mix = lam x_fix + (1 - lam) x_mix', lam ~ Beta(a, a), a = 0.75 (weak augmentation: flip and
  4-pixel reflect-padded crop, targets vague-8);
- C: plain average of the client models (targets vague-5).

M is the true J x K correspondence matrix (FedMT (T)) or, per client and per round, the estimate of
eq. (4) from the round's confident pseudo-labels (FedMT (E)), optionally averaged over the clients
("+ Average", Table 9). A client reads only its coarse labels: the part's batches come from the
pool's "coarse" label space (Part.label_space), never from the fine labels of its rows.

SemiFL (Diao et al. 2022) is the same client step without R_p (algorithms.semifl).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from fedpaper.engine.batching import gather
from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.models import logits_of
from fedpaper.algorithms.base import Part

ESTIMATORS = ("true", "estimate", "estimate_average", "learnable", "learnable_average")


# ----------------------------------------------------------------------------- formulas
def estimate_correspondence(coarse, y_hat, J: int, K: int, prev=None) -> torch.Tensor:
    """Eq. (4): M_hat[j, k] = #{i : coarse_i = j, y_hat_i = k} / #{i : y_hat_i = k} over the
    confident rows S_fix (coarse [n], y_hat [n]). A column k with no confident row is 0/0: it keeps
    `prev`'s column (the client's last estimate), or the uniform column 1/J (targets vague-10)."""
    coarse = torch.as_tensor(coarse, dtype=torch.int64).reshape(-1)
    y_hat = torch.as_tensor(y_hat, dtype=torch.int64).reshape(-1)
    counts = torch.zeros(J * K, dtype=torch.float64).index_add_(
        0, coarse * K + y_hat, torch.ones(len(coarse), dtype=torch.float64)).view(J, K)
    tot = counts.sum(0, keepdim=True)
    fallback = torch.full((J, K), 1.0 / J, dtype=torch.float64) if prev is None else \
        torch.as_tensor(prev, dtype=torch.float64).cpu()
    return torch.where(tot > 0, counts / tot.clamp(min=1), fallback).float()


def projected_log_probs(logits: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """log P(coarse = j | x) = log sum_k M[j, k] softmax(f(x))_k (eq. 3): logits [..., B, K],
    M [..., J, K] -> [..., B, J]."""
    probs = torch.softmax(logits.float(), -1)
    return torch.log(torch.matmul(probs, M.float().transpose(-1, -2)).clamp_min(1e-12))


def projected_loss(logits: torch.Tensor, coarse: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """R_p per row: the coarse-class cross-entropy of the projected scores M softmax(f(x))
    (eq. 3 / eq. 5): logits [..., B, K], coarse [..., B], M [..., J, K] -> [..., B]."""
    logp = projected_log_probs(logits, M)
    return -torch.gather(logp, -1, coarse.unsqueeze(-1)).squeeze(-1)


def _ce(logits, y):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1), reduction="none").view(y.shape)


# ----------------------------------------------------------------------------- augmentation
def weak_augment(x: torch.Tensor, rng: np.random.Generator, pad: int = 4) -> torch.Tensor:
    """Random horizontal flip and a random crop of the 4-pixel reflect-padded image (SemiFL's weak
    augmentation, targets vague-8), per image of x [B, C, H, W]."""
    B, _, H, W = x.shape
    flip = torch.as_tensor(rng.random(B) < 0.5, device=x.device)
    x = torch.where(flip.view(B, 1, 1, 1), x.flip(-1), x)
    xp = F.pad(x, (pad, pad, pad, pad), mode="reflect")
    dy, dx = rng.integers(0, 2 * pad + 1, size=B), rng.integers(0, 2 * pad + 1, size=B)
    return torch.stack([xp[b, :, dy[b]:dy[b] + H, dx[b]:dx[b] + W] for b in range(B)])


def strong_augment(x: torch.Tensor, rng: np.random.Generator, mean: torch.Tensor, std: torch.Tensor,
                   num_ops: int = 2, magnitude: int = 10) -> torch.Tensor:
    """torchvision RandAugment (Cubuk et al. 2020; SemiFL/FedMT's A, n = 2, m = 10) on the batch
    x [B, C, H, W] of standardised images: back to uint8, RandAugment per image (its random draws
    seeded from rng), standardised again; then the weak flip and crop."""
    from torchvision.transforms import RandAugment

    ra = RandAugment(num_ops=num_ops, magnitude=magnitude)
    m, s = mean.view(1, -1, 1, 1).to(x), std.view(1, -1, 1, 1).to(x)
    u8 = ((x.float() * s + m) * 255).round().clamp(0, 255).to(torch.uint8)
    if u8.shape[1] == 1:
        u8 = u8.expand(-1, 3, -1, -1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(rng.integers(2**62)))
        out = torch.stack([ra(img) for img in u8])
    out = out[:, : x.shape[1]].to(x.dtype) / 255
    return weak_augment((out - m) / s, rng)


def beta_lambdas(rngs: list, alpha: float) -> np.ndarray:
    return np.array([rng.beta(alpha, alpha) for rng in rngs])


# ----------------------------------------------------------------------------- the objective
class FixMixObjective:
    """R_reg = w_p R_p + lambda2 (L_fix + lambda1 L_mix) per row, averaged over the real rows (eq. 5).

    Batch rows are [weak x_fix | strong A(x_fix) | x_mix] (3B); batch: y (coarse, [.., B]), yfix,
    ymix (pseudo-labels), lam ([..]: per slot), Mp ([.., J, K]), mask. w_p = 0 is SemiFL."""

    def __init__(self, projected_weight: float, lambda1: float, lambda2: float):
        self.wp, self.l1, self.l2 = projected_weight, lambda1, lambda2

    def terms(self, logits, batch, M=None) -> dict:
        """Per-row losses; M: a learnable correspondence matrix from the model's outputs (App. D.4),
        else the batch's Mp."""
        B = batch["mask"].shape[-1]
        lw, ls, lm = logits[..., :B, :], logits[..., B:2 * B, :], logits[..., 2 * B:, :]
        lam = batch["lam"].unsqueeze(-1)
        out = {"fix": _ce(ls, batch["yfix"]),
               "mix": lam * _ce(lm, batch["yfix"]) + (1 - lam) * _ce(lm, batch["ymix"])}
        Mp = batch["Mp"] if M is None else M
        out["projected"] = projected_loss(lw, batch["y"], Mp) if self.wp else torch.zeros_like(out["fix"])
        return out

    def __call__(self, outputs, batch, present, params, anchor):
        M = outputs.get("M") if isinstance(outputs, dict) else None
        t = self.terms(logits_of(outputs), batch, M)
        row = self.wp * t["projected"] + self.l2 * (t["fix"] + self.l1 * t["mix"])
        mask = batch["mask"]
        s = (row * mask).sum(-1)
        return s / mask.sum(-1).clamp(min=1), s.detach()


# ----------------------------------------------------------------------------- the client part
class FixMixClient(Part):
    """FedMT's client procedure B (module docstring); `estimator` picks the M of R_p: "true"
    (FedMT (T)), "estimate" (eq. 4 per client and round, FedMT (E)), "estimate_average" (the mean of
    the round's client estimates, Table 9); projected_weight = 0 drops R_p (SemiFL).

    Declared state: M_hat [R, M, J, K] (each client's last estimate; uniform at the start),
    err [R, M] (its Frobenius distance to the true M, fig3) and n_fix [G] of the round."""

    key = "fixmix"
    label_space = "coarse"
    batch_rows = True

    def __init__(self, threshold=0.95, lambda1=1.0, lambda2=1 / 16, mix_alpha=0.75, estimator="estimate",
                 projected_weight=1.0, randaugment=(2, 10)):
        if estimator not in ESTIMATORS:
            raise BadParameterError(f"estimator={estimator!r}; choose one of {ESTIMATORS}")
        if not 0 < threshold <= 1:
            raise BadParameterError(f"threshold={threshold} must lie in (0, 1]")
        self.threshold, self.lambda1, self.lambda2, self.mix_alpha = threshold, lambda1, lambda2, mix_alpha
        self.estimator, self.projected_weight, self.randaugment = estimator, projected_weight, tuple(randaugment)

    def check(self, ctx):
        if "coarse" not in ctx.pools.labels or getattr(ctx.pools, "correspondence", None) is None:
            raise BadParameterError("FedMT needs pools with a 'coarse' label space and a correspondence matrix "
                                    "(pools.correspondence, J x K); build them with fedpaper.papers.fedmt.data")

    def client_objective(self, classifier):
        return FixMixObjective(self.projected_weight, self.lambda1, self.lambda2)

    def init_state(self, ctx):
        M = torch.as_tensor(ctx.pools.correspondence, dtype=torch.float32)
        J, K = M.shape
        return {"M": M, "M_hat": torch.full((ctx.R, ctx.M, J, K), 1.0 / J), "err": torch.full((ctx.R, ctx.M), np.nan),
                "n_fix": None, "fix_count": np.zeros((ctx.R, ctx.M), dtype=np.int64)}

    def prepare_round(self, ctx, state, params, slots, buffers):
        """Pseudo-labels, S_fix, the eq. (4) estimates and S_mix of every participating slot."""
        state = state[self.key]
        M = state["M"]
        J, K = M.shape
        rows = [np.asarray(ctx.feds[r].client_indices[c], dtype=np.int64) for r, c in slots]
        logits = ctx.predict(params, ctx.pools.x_train, rows, buffers=buffers)
        coarse_pool = ctx.pools.labels["coarse"][0]
        lookup = torch.zeros(len(slots), len(ctx.pools.x_train), dtype=torch.int64, device=ctx.device)
        fix, mix, n_fix = [], [], []
        for g, ((r, c), rr, lg) in enumerate(zip(slots, rows, logits)):
            conf, y_hat = torch.softmax(lg.float(), -1).max(-1)
            keep_t = conf > self.threshold  # S_fix (Alg. 1: max_k f_k(x) > xi)
            keep = keep_t.cpu().numpy()
            lookup[g, torch.as_tensor(rr, device=ctx.device)] = y_hat
            if self.projected_weight:  # SemiFL (no R_p) never reads its clients' labels
                coarse = coarse_pool[torch.as_tensor(rr[keep], device=ctx.device)].cpu()
                state["M_hat"][r, c] = estimate_correspondence(coarse, y_hat[keep_t].cpu(), J, K,
                                                               prev=state["M_hat"][r, c])
                state["err"][r, c] = torch.linalg.norm(state["M_hat"][r, c] - M).item()
            fix.append(rr[keep])
            n_fix.append(int(keep.sum()))
        aug = [np.random.default_rng([ctx.feds[r].seed, 104729, int(c), ctx.round]) for r, c in slots]
        for g, rr in enumerate(rows):
            mix.append(rr[aug[g].integers(0, len(rr), size=n_fix[g])] if n_fix[g] else rr[:0])
        state["n_fix"] = np.array(n_fix)
        state["fix_count"][:] = 0
        state["fix_count"][slots[:, 0], slots[:, 1]] = state["n_fix"]
        return {"fix": fix, "mix": mix, "lookup": lookup, "M": self._round_M(state, slots).to(ctx.device)}

    def _round_M(self, state, slots) -> torch.Tensor:
        """The M each slot's R_p uses this round: [G, J, K]."""
        if self.estimator in ("true", "learnable", "learnable_average"):  # learnable: M comes from the model
            return state["M"].expand(len(slots), *state["M"].shape).clone()
        own = state["M_hat"][slots[:, 0], slots[:, 1]]
        if self.estimator == "estimate":
            return own
        out = own.clone()
        for r in np.unique(slots[:, 0]):  # + Average: the mean of the run's confident clients' estimates
            g = np.flatnonzero((slots[:, 0] == r) & (state["n_fix"] > 0))
            if len(g):
                out[slots[:, 0] == r] = own[g].mean(0)
        return out

    def round_rows(self, ctx, data, slots, rows):
        return data["fix"]

    def begin_epoch(self, data, steps, aug_rngs, batch_size, device):
        """This epoch's order of each slot's S_mix rows, padded to [G, steps * B]."""
        if data is None:
            return None
        out = np.zeros((len(data["mix"]), steps * batch_size), dtype=np.int64)
        for g, (m, rng) in enumerate(zip(data["mix"], aug_rngs)):
            out[g, :len(m)] = m[rng.permutation(len(m))]
        return torch.as_tensor(out, device=device).view(len(data["mix"]), steps, batch_size)

    def augment(self, ctx, batch, mask_np, aug_rngs, data, epoch, step):
        if data is None:
            return None
        rows, x = batch["rows"], batch["x"]
        mix_rows = epoch[:, step]
        mean, std = ctx.pools.norm
        weak = torch.stack([weak_augment(x[g], aug_rngs[g]) for g in range(len(x))])
        strong = torch.stack([strong_augment(x[g], aug_rngs[g], mean, std, *self.randaugment) for g in range(len(x))])
        xm = gather(ctx.pools.x_train, mix_rows)
        xm = torch.stack([weak_augment(xm[g], aug_rngs[g]) for g in range(len(x))])
        lam = torch.as_tensor(beta_lambdas(aug_rngs, self.mix_alpha), dtype=x.dtype, device=x.device)
        lx = lam.view(-1, 1, 1, 1, 1)
        batch["x"] = torch.cat([weak, strong, lx * weak + (1 - lx) * xm], 1)
        batch["yfix"] = torch.gather(data["lookup"], 1, rows)
        batch["ymix"] = torch.gather(data["lookup"], 1, mix_rows)
        batch["lam"] = lam
        batch["Mp"] = data["M"]
        return None

    def weights(self, ctx, state, slots, part, losses):
        """Plain average of the clients that trained (targets vague-5): weight n_c over the run's
        clients with a non-empty S_fix; a run where none did keeps its model (all weights equal)."""
        state = state[self.key]
        n = ctx.sizes[slots[:, 0], slots[:, 1]] * (state["n_fix"] > 0)
        w = np.zeros(len(slots))
        for r in np.unique(slots[:, 0]):
            g = slots[:, 0] == r
            w[g] = n[g] / n[g].sum() if n[g].sum() > 0 else 1.0 / g.sum()
        return w

    def round_metrics(self, ctx, state, glob, bufs):
        """Per run: each client's Frobenius error ||M_hat_c - M||_F (fig3) and their mean; the share
        of clients whose S_fix was non-empty in the last round and their mean |S_fix| (fix_stats); after the
        last round also the 20-class test accuracy of the global model projected with the true M
        (test_acc_coarse_true) and with the mean of the clients' last estimates (test_acc_coarse_est,
        targets vague-22)."""
        state = state[self.key]
        out = []
        final = ctx.round >= ctx.cfg.rounds
        if final:
            test = [f.test_indices for f in ctx.feds]
            logits = ctx.predict(glob, ctx.pools.x_test, test)
            coarse = ctx.pools.labels["coarse"][1]
        for r in range(ctx.R):
            e = state["err"][r].numpy()
            d = {f"m_err_c{c}": float(v) for c, v in enumerate(e)}
            d["m_err_mean"] = float(np.nanmean(e)) if np.isfinite(e).any() else float("nan")
            d["m_err_sd"] = float(np.nanstd(e, ddof=1)) if np.isfinite(e).sum() > 1 else float("nan")
            d.update(fix_stats(state["fix_count"][r]))
            if final:
                y = coarse[torch.as_tensor(np.asarray(test[r]), device=coarse.device)]
                d["test_acc_coarse_true"] = coarse_accuracy(logits[r], y, state["M"])
                d["test_acc_coarse_est"] = coarse_accuracy(logits[r], y, state["M_hat"][r].mean(0))
            out.append(d)
        return out


def fix_stats(counts) -> dict:
    """Of one run's clients in the last round: the share with a non-empty S_fix (the clients that
    trained, Algorithm 1 line 11) and the mean |S_fix| over all clients."""
    counts = np.asarray(counts, dtype=np.float64)
    return {"fix_clients_share": float((counts > 0).mean()), "fix_rows_mean": float(counts.mean())}


def coarse_accuracy(logits: torch.Tensor, coarse: torch.Tensor, M: torch.Tensor) -> float:
    """20-class accuracy of K-class scores projected with M (App. D.2): argmax_j (M softmax(f(x)))_j."""
    pred = projected_log_probs(logits, M.to(logits.device)).argmax(-1)
    return (pred == coarse.to(pred.device)).float().mean().item()


class LearnableCorrespondence(Part):
    """App. D.4 "Learnable" (Table 9, Fig. 3): each client keeps its own correspondence logits m
    (the model's `m_logits`, fedpaper.blocks.nets.resnet.WithCorrespondence), trained with the network in
    R_p; they never leave the client (handed to its slot at the broadcast, stored back after), and
    with `average` ("Learnable + Average") the round's learned matrices softmax(m) are averaged over
    the run's clients and used as every client's next initial value. Reports each client's
    ||softmax(m_c) - M||_F (replacing the eq. (4) errors) and, after the last round, the 20-class
    accuracy projected with the mean learned matrix."""

    key = "learnable_m"
    PARAM = "m_logits"

    def __init__(self, average: bool = False):
        self.average = average

    def check(self, ctx):
        if self.PARAM not in ctx.init_params:
            raise BadParameterError("a learnable correspondence needs the model 'with_correspondence'")

    def init_state(self, ctx):
        J, K = ctx.init_params[self.PARAM].shape[1:]
        logits = torch.zeros(ctx.R, ctx.M, J, K)
        for r, f in enumerate(ctx.feds):
            gen = torch.Generator().manual_seed(int(f.seed) * 1000 + 7)
            logits[r] = torch.randn(ctx.M, J, K, generator=gen) * 0.01  # targets vague-16
        return {"logits": logits.to(ctx.device)}

    def broadcast(self, ctx, state, params, slots):
        state = state[self.key]
        params = dict(params)
        params[self.PARAM] = state["logits"][slots[:, 0], slots[:, 1]].clone()
        return params

    def aggregate(self, ctx, state, agg, glob):
        state = state[self.key]
        new = agg.new[self.PARAM].detach()
        if self.average:
            for r in np.unique(agg.slots[:, 0]):
                g = agg.slots[:, 0] == r
                mean = torch.softmax(new[g], 1).mean(0)
                state["logits"][r] = torch.log(mean.clamp_min(1e-12))
        else:
            state["logits"][agg.slots[:, 0], agg.slots[:, 1]] = new
        glob[self.PARAM] = agg.prev[self.PARAM]
        return glob

    def round_metrics(self, ctx, state, glob, bufs):
        st = state[self.key]
        M = torch.as_tensor(ctx.pools.correspondence, dtype=torch.float32, device=ctx.device)
        learned = torch.softmax(st["logits"], 2)  # [R, M, J, K]
        final = ctx.round >= ctx.cfg.rounds
        if final:
            test = [f.test_indices for f in ctx.feds]
            logits = ctx.predict(glob, ctx.pools.x_test, test)
            coarse = ctx.pools.labels["coarse"][1]
        out = []
        for r in range(ctx.R):
            e = torch.linalg.norm((learned[r] - M).flatten(1), dim=1).cpu().numpy()
            d = {f"m_err_c{c}": float(v) for c, v in enumerate(e)}
            d.update(m_err_mean=float(e.mean()), m_err_sd=float(e.std(ddof=1)) if len(e) > 1 else float("nan"))
            if final:
                y = coarse[torch.as_tensor(np.asarray(test[r]), device=coarse.device)]
                d["test_acc_coarse_est"] = coarse_accuracy(logits[r], y, learned[r].mean(0))
            out.append(d)
        return out
