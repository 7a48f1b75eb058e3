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
"""
from __future__ import annotations

import contextlib
import contextvars

import torch
import torch.nn.functional as F
from torch import nn

_KEEP: contextvars.ContextVar = contextvars.ContextVar("fedpaper_bn_keep", default=None)


@contextlib.contextmanager
def real_rows(keep: torch.Tensor | None):
    """Within the block, patched BatchNorm layers take statistics over the rows where keep [N] is True."""
    token = _KEEP.set(keep)
    try:
        yield
    finally:
        _KEEP.reset(token)


def input_keep(batch: dict, g: int | None = None) -> torch.Tensor | None:
    """The keep mask [N] of slot g's model input batch["x"][g] (or of batch["x"] when g is None), or
    None when every row is real. N = B (the mask), k*B (k stacked views of the batch) or B + B_u
    (the unlabeled rows, batch["umask"], appended)."""
    pick = (lambda t: t) if g is None else (lambda t: t[g])
    mask = pick(batch["mask"]).bool()
    n = pick(batch["x"]).shape[0]
    if n == mask.shape[0]:
        keep = mask
    elif "umask" in batch and n == mask.shape[0] + pick(batch["umask"]).shape[0]:
        keep = torch.cat([mask, pick(batch["umask"]).bool()])
    elif n % mask.shape[0] == 0:
        keep = mask.repeat(n // mask.shape[0])
    else:
        raise ValueError(f"BatchNorm row mask: the model input has {n} rows, the batch mask {mask.shape[0]}: "
                         f"an algorithm's augment must stack whole views of the batch (or append umask rows)")
    return None if bool(keep.all()) else keep


def _masked_forward(self, x):
    keep = _KEEP.get()
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
