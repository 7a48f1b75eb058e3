"""BatchNorm on a client's real rows only: the loop backend's statistics for padded batches.

A slot's minibatch is padded to the batch size (batching.epoch_batches) and the objective masks
the padding rows out of the loss; BatchNorm in training mode would still take its batch mean and
variance (and update its running statistics) over every row. `real_rows(keep)` makes each
BatchNorm layer of a model whose forward is patched by `mask_batchnorm` (done once per template by
backends.SlotGradients) compute its statistics from the rows where `keep` is True: torch's own
F.batch_norm runs on those rows (so its numbers, and the running-statistics update, are exactly
those of an unpadded batch of them) and the padding rows' outputs are zeros (masked out of the loss
anyway, and kept out of every later BatchNorm's statistics by the same mask). A batch without
padding runs the layer's own forward, unchanged.

`keep` is per row of the model's input: the objective's mask [B], tiled when an algorithm stacks
views of the batch (FedMT's weak/strong/mixed copies: 3B rows), or followed by the unlabeled mask
(semi-supervised extensions: B + B_u rows); see `input_keep`.

The vmap backend maps one slot's step over all slots with torch.func.vmap, where a buffer cannot
be updated in place: `returned_stats(keep, names)` makes the same patched layers compute the same
statistics functionally (masked mean and biased variance over the kept rows for the normalisation,
the unbiased variance, the momentum or cumulative factor and num_batches_tracked for the running
update, the same fall-back to the whole padded batch) and write the new running statistics into the
dict it yields, which the backend returns; the padding rows' outputs are zeros here too. The
numbers equal torch's F.batch_norm on the kept rows up to float rounding (another summation order).
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# Context variable: the patched BatchNorm forward runs inside the model's own forward, which takes no row mask
# (and under torch.func.vmap hands back running statistics that forward does not return).
_ROWS: contextvars.ContextVar = contextvars.ContextVar("fedpaper_bn_rows", default=None)


@dataclass(frozen=True)
class _Rows:
    """The rows the patched layers take statistics from (keep [N] bool, or None: every row), and,
    under torch.func.vmap (returned_stats), the layers' names and the dict receiving their new
    running statistics (None: the layers update their buffers in place)."""

    keep: torch.Tensor | None
    names: dict | None = None
    new: dict | None = None


@contextlib.contextmanager
def real_rows(keep: torch.Tensor | None):
    """Within the block, patched BatchNorm layers take statistics over the rows where keep [N] is True."""
    token = _ROWS.set(_Rows(keep))
    try:
        yield
    finally:
        _ROWS.reset(token)


@contextlib.contextmanager
def returned_stats(keep: torch.Tensor, names: dict):
    """Within the block (one slot's forward, under torch.func.vmap), patched BatchNorm layers in
    training mode take their statistics from the rows where keep [N] is True and leave their
    buffers as they are: the block yields a dict that receives each layer's new running statistics
    ({buffer name: tensor}, detached). names: {id(layer): its name prefix in the model, "" or
    "layer1.0.bn1."} (batchnorm_names)."""
    new = {}
    token = _ROWS.set(_Rows(keep, names, new))
    try:
        yield new
    finally:
        _ROWS.reset(token)


def batchnorm_names(model: nn.Module) -> dict:
    """{id(layer): name prefix} of every BatchNorm layer of `model` (returned_stats' names)."""
    return {id(m): f"{n}." if n else "" for n, m in model.named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm)}


def _keep_rows(mask: torch.Tensor, n: int, umask: torch.Tensor | None) -> torch.Tensor:
    """The keep mask [..., n] of a model input of n rows from the batch mask [..., B] (bool) and the
    unlabeled rows' mask umask [..., B_u] (or None); see input_keep."""
    b = mask.shape[-1]
    if n == b:
        return mask
    if umask is not None and n == b + umask.shape[-1]:
        return torch.cat([mask, umask.bool()], -1)
    if n % b == 0:
        return mask.repeat(*[1] * (mask.dim() - 1), n // b)
    raise ValueError(f"BatchNorm row mask: the model input has {n} rows, the batch mask {b}: "
                     f"an algorithm's augment must stack whole views of the batch (or append umask rows)")


def slots_keep(batch: dict) -> torch.Tensor:
    """Every slot's keep mask [G, N] of the model input batch["x"] [G, N, ...] (input_keep for all
    slots at once, all True where a slot has no padding)."""
    return _keep_rows(batch["mask"].bool(), batch["x"].shape[1], batch.get("umask"))


def input_keep(batch: dict, g: int | None = None) -> torch.Tensor | None:
    """The keep mask [N] of slot g's model input batch["x"][g] (or of batch["x"] when g is None), or
    None when every row is real. N = B (the mask), k*B (k stacked views of the batch) or B + B_u
    (the unlabeled rows, batch["umask"], appended)."""
    pick = (lambda t: t) if g is None else (lambda t: t[g])
    keep = _keep_rows(pick(batch["mask"]).bool(), pick(batch["x"]).shape[0],
                      pick(batch["umask"]) if "umask" in batch else None)
    return None if bool(keep.all()) else keep


def _masked_forward(self, x):
    rows = _ROWS.get()
    if rows is not None and rows.new is not None and self.training:
        return _returned_forward(self, x, rows.keep, rows.names, rows.new)
    keep = None if rows is None else rows.keep
    if keep is None or not self.training or keep.shape[0] != x.shape[0]:
        return type(self).forward(self, x)
    idx = keep.nonzero().view(-1)
    per_channel = idx.numel() * (x[0, 0].numel() if x.dim() > 2 else 1)
    if per_channel <= 1:  # torch cannot take a variance of one value: the padded batch, as before
        return type(self).forward(self, x)
    self._check_input_dim(x)
    factor = 0.0 if self.momentum is None else self.momentum
    if self.track_running_stats and self.num_batches_tracked is not None:  # nn.BatchNorm's own rule
        self.num_batches_tracked.add_(1)
        factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
    use_running = self.track_running_stats
    real = F.batch_norm(x.index_select(0, idx), self.running_mean if use_running else None,
                        self.running_var if use_running else None, self.weight, self.bias, True, factor, self.eps)
    return torch.zeros_like(x).index_copy(0, idx, real)


def _returned_forward(self, x, keep, names, new):
    """_masked_forward without in-place updates (returned_stats): for one slot under vmap, where the
    number of kept rows is a tensor, so the fall-back to the padded batch is a torch.where."""
    self._check_input_dim(x)
    shape = [1, -1] + [1] * (x.dim() - 2)
    spatial = x[0, 0].numel() if x.dim() > 2 else 1
    xs = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    if keep.shape[0] == x.shape[0]:
        real = keep.to(xs.dtype)
        padded = real.sum() * spatial <= 1  # torch cannot take a variance of one value: the padded batch
        w = torch.where(padded, torch.ones_like(real), real)
        out_rows = keep | padded
    else:  # not one row per input row: the layer's own batch, as _masked_forward
        w, out_rows = xs.new_ones(x.shape[0]), None
    count = w.sum() * spatial
    per_row = tuple(range(2, x.dim()))  # each row's sum per channel, then the rows' weighted sum: no copies

    def weighted_sum(t):
        return w @ (t.sum(per_row) if per_row else t)

    with torch.autocast(x.device.type, enabled=False):  # the statistics in float32 under bf16 autocast too
        mean = weighted_sum(xs) / count
        centred = xs - mean.view(shape)
        var = weighted_sum(centred.square()) / count
    scale = torch.rsqrt(var + self.eps)
    if self.weight is not None:
        scale = scale * self.weight
    # per row and channel [N or 1, C]: a padding row's scale and shift are 0, so its output is 0
    row = None if out_rows is None else out_rows.to(xs.dtype).unsqueeze(1)
    rowwise = [-1, x.shape[1]] + [1] * (x.dim() - 2)
    scale = (scale.unsqueeze(0) if row is None else row * scale).view(rowwise)
    if self.bias is None:
        out = centred * scale
    else:
        out = torch.addcmul((self.bias.unsqueeze(0) if row is None else row * self.bias).view(rowwise), centred, scale)
    out = out.to(x.dtype)
    if self.track_running_stats and self.running_mean is not None:
        prefix = names[id(self)]
        factor = 0.0 if self.momentum is None else self.momentum
        if self.num_batches_tracked is not None:  # nn.BatchNorm's own rule
            tracked = new.get(prefix + "num_batches_tracked", self.num_batches_tracked) + 1
            new[prefix + "num_batches_tracked"] = tracked
            factor = 1.0 / tracked if self.momentum is None else self.momentum
        unbiased = var.detach() * count / (count - 1).clamp(min=1)
        for name, stat in (("running_mean", mean.detach()), ("running_var", unbiased)):
            old = new.get(prefix + name, getattr(self, name))
            new[prefix + name] = (1 - factor) * old + factor * stat.to(old.dtype)
    return out


# a pickled model (a bound method pickles as getattr(module, name)) unpickles with the layer's own
# forward; mask_batchnorm patches it again
_masked_forward.__name__ = "forward"


def mask_batchnorm(model: nn.Module) -> int:
    """Patch every BatchNorm layer of `model` (in place, once) to honour `real_rows`; returns how many."""
    n = 0
    for mod in model.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm) and not isinstance(mod, nn.SyncBatchNorm):
            if getattr(mod.__dict__.get("forward"), "__func__", None) is not _masked_forward:
                mod.forward = _masked_forward.__get__(mod)
            n += 1
    return n
