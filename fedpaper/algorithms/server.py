"""Server side of a round: aggregation weights, private-label row averaging, SCAFFOLD control
variates, AFL mixture updates, the server's own training (FedMT) and central tuning, all on
stacked [slot, ...] tensors.

Each function takes the FederatedTrainer `tr` (pools, runs, label counts, state) and the
participating slots (rows of (run, client)).
"""
from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from . import weights as W
from .methods import Method


def init_server_state(method, tr) -> dict:
    """Per-run server state: SCAFFOLD control variates (zero, Karimireddy et al. Alg. 1) and the
    AFL mixture (uniform, Mohri et al. 2019)."""
    state = {"fedpals_cache": {}}
    if method.client == "scaffold":
        state["c"] = {k: torch.zeros_like(v) for k, v in tr.global_params.items()}
        state["c_i"] = {k: torch.zeros((tr.R, tr.M, *v.shape[1:]), device=v.device) for k, v in tr.global_params.items()}
    if method.server == "afl":
        state["mixture"] = np.full((tr.R, tr.M), 1.0 / tr.M)
    return state


def scaffold_correction(tr, slots) -> dict:
    """SCAFFOLD's gradient correction c - c_i per slot (Karimireddy et al. 2020, Alg. 1 line 10)."""
    st, r, c = tr.server_state, slots[:, 0], slots[:, 1]
    return {k: st["c"][k][r] - st["c_i"][k][r, c] for k in st["c"]}


def restrict_classifier(tr, params, slots) -> dict:
    """privlabels Alg. 1, broadcast: client k receives only the classifier rows of Y_k (the
    others are zeroed, so nothing it computes can depend on them)."""
    present = tr.present[slots[:, 0], slots[:, 1]].to(params[tr.cls_w].dtype)  # [G, K]
    params = dict(params)
    params[tr.cls_w] = params[tr.cls_w] * present.unsqueeze(-1)
    params[tr.cls_b] = params[tr.cls_b] * present
    return params


def client_weights(tr, slots, part, losses) -> torch.Tensor:
    """Aggregation weight of each slot, summing to one within each run.

    fedavg: n_i / sum of participating n (fedpals eq. 4). fedpals: alpha^lambda of eq. (9) over the
    participating clients (re-optimised when participation changes, fedpals App B.3). afl: the
    current agnostic mixture restricted to the participants (Mohri et al. 2019)."""
    m, w = tr.method, np.zeros(len(slots))
    for r in range(tr.R):
        sel = np.nonzero(slots[:, 0] == r)[0]
        clients = part[r]
        n = tr.sizes[r, clients]
        if m.server == "fedavg" or m.private:
            w[sel] = W.fedavg_weights(n)
        elif m.server == "fedpals":
            w[sel] = fedpals_weights_cached(tr, r, clients)
        elif m.server == "afl":
            mix = tr.server_state["mixture"][r, clients]
            w[sel] = mix / mix.sum()
    return torch.as_tensor(w, dtype=torch.float32, device=tr.device)


def fedpals_weights_cached(tr, r, clients) -> np.ndarray:
    key = (r, tuple(clients))
    cache = tr.server_state["fedpals_cache"]
    if key not in cache:
        counts = tr.counts[r, clients]
        S = counts / counts.sum(1, keepdims=True)
        cache[key] = W.fedpals_weights(S, counts.sum(1), tr.feds[r].target_marginal, tr.method.lam)
    return cache[key]


def _weighted_sum(tr, new, w, slots) -> dict:
    run = torch.as_tensor(slots[:, 0], device=tr.device)
    out = {}
    for k, v in new.items():
        wk = w.view(-1, *([1] * (v.dim() - 1)))
        out[k] = torch.zeros_like(tr.global_params[k]).index_add_(0, run, wk * v)
    return out


def aggregate(tr, new, anchor, steps, losses, slots, part) -> dict:
    """theta_{t+1} = sum_i alpha_i theta_i (fedpals eq. 3/9 with the chosen weights); with private
    label sets, classifier rows are averaged per label (privlabels Alg. 1)."""
    w = client_weights(tr, slots, part, losses)
    glob = _weighted_sum(tr, new, w, slots)
    if tr.method.private:
        glob = _private_rows(tr, new, slots, glob)
    if tr.method.client == "scaffold":
        _scaffold_update(tr, new, anchor, steps, slots)
    if tr.method.server == "afl":
        _afl_update(tr, losses, slots, part)
    return glob


def aggregate_buffers(tr, bufs, slots, part) -> dict:
    """Average the clients' float buffers (BatchNorm running statistics) with sample-size weights;
    integer buffers (num_batches_tracked) take the first client's value."""
    if not bufs:
        return bufs
    n = torch.as_tensor(tr.sizes[slots[:, 0], slots[:, 1]], dtype=torch.float32, device=tr.device)
    run = torch.as_tensor(slots[:, 0], device=tr.device)
    tot = torch.zeros(tr.R, device=tr.device).index_add_(0, run, n)
    w = n / tot[run]
    out = {}
    for k, v in bufs.items():
        if v.is_floating_point():
            out[k] = torch.zeros_like(tr.global_buffers[k]).index_add_(0, run, w.view(-1, *([1] * (v.dim() - 1))) * v)
        else:
            out[k] = v[np.unique(slots[:, 0], return_index=True)[1]]
    return out


def _private_rows(tr, new, slots, glob) -> dict:
    """Row y of the classifier = sum over clients holding y of n_k/n'_y * row_k (Alg. 1, line 11);
    a row no participating client holds keeps its previous value (targets vague-10)."""
    present = tr.present[slots[:, 0], slots[:, 1]].float()  # [G, K]
    n = torch.as_tensor(tr.sizes[slots[:, 0], slots[:, 1]], dtype=torch.float32, device=tr.device)
    run = torch.as_tensor(slots[:, 0], device=tr.device)
    wy = n[:, None] * present  # [G, K]
    tot = torch.zeros(tr.R, tr.K, device=tr.device).index_add_(0, run, wy)  # n'_y per run
    held = tot > 0
    wy = wy / tot[run].clamp(min=1e-12)
    for k, ndim_extra in ((tr.cls_w, 1), (tr.cls_b, 0)):
        v = new[k]
        wk = wy.view(*wy.shape, *([1] * ndim_extra))
        rows = torch.zeros_like(tr.global_params[k]).index_add_(0, run, wk * v)
        keep = held.view(*held.shape, *([1] * ndim_extra))
        glob[k] = torch.where(keep, rows, tr.global_params[k])
    return glob


def _scaffold_update(tr, new, anchor, steps, slots):
    """Option II control variates: c_i+ = c_i - c + (x - y_i) / (K_i * lr), with K_i the client's
    local STEPS; c += (1/N) sum_i (c_i+ - c_i) (Karimireddy et al. 2020, Alg. 1 lines 12-17)."""
    st, lr = tr.server_state, tr.cfg.lr
    r, c = slots[:, 0], slots[:, 1]
    run = torch.as_tensor(r, device=tr.device)
    for k in st["c"]:
        ksteps = steps.clamp(min=1).view(-1, *([1] * (new[k].dim() - 1)))
        ci_old = st["c_i"][k][r, c]
        ci_new = ci_old - st["c"][k][r] + (anchor[k] - new[k]) / (ksteps * lr)
        st["c_i"][k][r, c] = ci_new
        st["c"][k] = st["c"][k] + torch.zeros_like(st["c"][k]).index_add_(0, run, ci_new - ci_old) / tr.M


def _afl_update(tr, losses, slots, part):
    """AFL: projected gradient ascent of the mixture on the client losses (Mohri et al. 2019)."""
    mix = tr.server_state["mixture"]
    loss = losses.detach().cpu().numpy()
    for r in range(tr.R):
        sel = slots[:, 0] == r
        full = np.zeros(tr.M)
        full[slots[sel, 1]] = loss[sel]
        mix[r] = W.afl_step(mix[r], full, tr.method.afl_step)


# ----------------------------------------------------------------------------- server training
def server_train(tr, rngs) -> dict:
    """The server trains each run's global model on its own labelled data (FedMT, Zhang et al.
    2024, Alg. 1 procedure A, lines 2-5: f_s <- f, then SGD steps on the cross-entropy over D_s):
    `server_train_epochs` epochs over Federation.server_indices WITH their labels, plain CE (no
    client penalties, mixup or pseudo-labels), the clients' optimiser, lr and batch size, a fresh
    optimiser state each round, batches from the runs' generators `rngs`. It runs after
    aggregation and before central tuning; FedMT runs it at the start of a round, which differs
    only in that our first round's clients start from the initial model. BatchNorm running
    statistics are updated by the server's batches (loop backend)."""
    rows = [np.asarray(f.server_indices, dtype=np.int64) for f in tr.feds]
    present = torch.ones(tr.R, tr.K, dtype=torch.bool, device=tr.device)
    bufs = {k: v.clone() for k, v in tr.global_buffers.items()}
    params, *_ = tr.train_slots(tr.global_params, rows, present, rngs, Method("server"),
                                tr.method.server_train_epochs, bufs)
    tr.global_buffers = bufs
    return params


# ----------------------------------------------------------------------------- central tuning
def tuning_loss(probs_model, client_probs, client_w, present, kind) -> torch.Tensor:
    """Central-tuning objective of privlabels Sec 4.2 for one batch, averaged over samples.

    probs_model h: [B, K]; client_probs h_k: [M, B, K] (zero outside Y_k); client_w w_k: [M];
    present: [M, K]. "mse" is eq. (6): sum_k w_k sum_{y in Y_k} (h_k(y|x) - h(y|x))^2.
    "pairwise" is eq. (5): sum_k w_k sum_{y<y' in Y_k} (h_k(y|x) h(y'|x) - h_k(y'|x) h(y|x))^2,
    computed with Lagrange's identity |a|^2|b|^2 - (a.b)^2. "pairwise_all" lets y' range over all
    labels (h not restricted to Y_k), the form privlabels App B analyses (targets vague-7)."""
    pres = present.to(probs_model.dtype).unsqueeze(1)  # [M, 1, K]
    a = client_probs
    if kind == "mse":
        per = ((a - probs_model.unsqueeze(0) * pres) ** 2 * pres).sum(-1)
    else:
        b = probs_model.unsqueeze(0) * pres if kind == "pairwise" else probs_model.unsqueeze(0).expand_as(a)
        per = (a * a).sum(-1) * (b * b).sum(-1) - (a * b).sum(-1) ** 2
    return (client_w.view(-1, 1) * per).sum(0).mean()


def client_probabilities(tr, new, slots) -> torch.Tensor:
    """h_k(y|x) of each participating client model on its run's unlabeled server set: [G, N_u, K],
    zero outside Y_k (private clients: softmax over Y_k; public: the full softmax's entries)."""
    rows = [tr.feds[r].server_indices for r in slots[:, 0]]
    present = tr.present[slots[:, 0], slots[:, 1]]
    logits = tr.predict(new, tr.pools.x_train, rows)
    out = []
    for lg, pr in zip(logits, present):
        if tr.method.private:
            lg = torch.where(pr, lg, torch.full_like(lg, -1e9))
        out.append(torch.softmax(lg, -1) * pr)
    return torch.stack(out)


def central_tuning(tr, new, slots, part, rngs) -> dict:
    """Train the aggregated model for `tuning_epochs` epochs over the unlabeled server set so its
    predictions match the round's client models (privlabels Sec 4.2, eqs. 5-6), Adam (App A) or
    SGD (App C.3) with a fresh optimiser each round."""
    from ..engine import epoch_batches, opt_init, opt_step

    m, cfg = tr.method, tr.cfg
    sizes = {len(f.server_indices) for f in tr.feds}
    if len(sizes) != 1:
        raise ValueError("runs tuned together need unlabeled server sets of one size")
    probs = client_probabilities(tr, new, slots)  # [G, N_u, K]
    Mp = part.shape[1]
    probs = probs.view(tr.R, Mp, *probs.shape[1:])
    present = tr.present[slots[:, 0], slots[:, 1]].view(tr.R, Mp, tr.K)
    n = torch.as_tensor(tr.sizes[slots[:, 0], slots[:, 1]], dtype=torch.float32, device=tr.device).view(tr.R, Mp)
    w = n / n.sum(1, keepdim=True)
    server_rows = torch.as_tensor(np.stack([np.asarray(f.server_indices) for f in tr.feds]), device=tr.device)
    params = {k: v.clone() for k, v in tr.global_params.items()}
    opt = opt_init(params, m.tuning_optimizer)
    lr = m.tuning_lr if m.tuning_lr is not None else cfg.lr
    local = [np.arange(server_rows.shape[1])] * tr.R

    def loss_fn(p, x, cp, cw, pres, mask):
        h = torch.softmax(functional_call(tr.template, (p, tr.buffers), (x,)), -1)
        return tuning_loss(h[mask], cp[:, mask], cw, pres, m.tuning)

    gfn = grad(loss_fn)
    for _ in range(m.tuning_epochs):
        pos, bmask = epoch_batches(local, cfg.batch_size, rngs)
        for s in range(pos.shape[1]):
            p_s = torch.as_tensor(pos[:, s], device=tr.device)  # [R, B] positions in the server set
            mk = torch.as_tensor(bmask[:, s], device=tr.device)
            x = tr.pools.x_train[torch.gather(server_rows, 1, p_s)]
            cp = torch.stack([probs[r][:, p_s[r]] for r in range(tr.R)])  # [R, M', B, K]
            if bool(mk.all()):
                mk_r = [slice(None)] * tr.R
                if tr.backend == "vmap":
                    grads = vmap(lambda p, x, c, ww, pr: gfn(p, x, c, ww, pr, slice(None)),
                                 randomness="different")(params, x, cp, w, present)
                else:
                    grads = _loop_grads(gfn, params, x, cp, w, present, mk_r)
            else:  # the epoch's last, partial batch: per-run boolean masks, looped
                grads = _loop_grads(gfn, params, x, cp, w, present, [mk[r] for r in range(tr.R)])
            params, opt = opt_step(params, grads, opt, m.tuning_optimizer, lr,
                                   torch.ones(tr.R, dtype=torch.bool, device=tr.device))
    return params


def _loop_grads(gfn, params, x, cp, w, present, masks) -> dict:
    outs = [gfn({k: v[r] for k, v in params.items()}, x[r], cp[r], w[r], present[r], masks[r])
            for r in range(x.shape[0])]
    return {k: torch.stack([o[k] for o in outs]) for k in params}
