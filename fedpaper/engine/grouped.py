"""Stacked-tensor layouts and the "grouped" forward pass: G copies of a CNN in one pass.

CPU speed notes (measured by benchmarks/bench_engine.py): convolutions run in channels_last layout (conv
weights are stacked so that each slot's weight is a channels_last view), except for models that
`channels_last_ok` rules out (a oneDNN bug on AVX2-only CPUs, docs/onednn-avx2-1x1-stride2.md). On
CPUs without AVX-512 the convolutions of 3-channel images run slot by slot (per_slot_rule).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedpaper.engine.randomness import slot_dropout


def fast_layout(t):
    """channels_last for 4-D tensors (images, conv weights): faster convolutions on CPU (strides
    and all: a tensor with one channel gets channels_last strides too)."""
    if isinstance(t, dict):
        return {k: fast_layout(v) for k, v in t.items()}
    if t.dim() != 4:
        return t
    if t.shape[1] == 1 and t.stride(1) != 1:
        # one channel: a contiguous [N, 1, H, W] tensor already counts as channels_last contiguous, so
        # .contiguous() keeps its NCHW strides, and the convolution (which reads the layout from the
        # strides) then runs in NCHW and hands NCHW on to every later layer, slower from conv1 on
        # (benchmarks/micro_loop_backend.py). clone() writes true channels_last strides
        return t.clone(memory_format=torch.channels_last)
    return t.contiguous(memory_format=torch.channels_last)



def channels_last_ok(model: nn.Module) -> tuple[bool, str]:
    """(ok, rule): may the engine train `model` in channels_last layout?

    Not when it has a 1x1 convolution with stride > 1 and fewer than 8 input channels per group
    (e.g. a small ResNet's downsampling shortcut after a 4-channel stage): the weight gradient of
    such a convolution in channels_last layout runs oneDNN's AVX2 1x1 kernel (the one CPUs without
    AVX-512 get), which writes outside its buffers there: heap corruption, a crash or different
    gradients on each call (docs/onednn-avx2-1x1-stride2.md; torch 2.13 / oneDNN 3.12). Such a
    model trains in the default (contiguous) layout, whose convolutions do not use that kernel. The
    rule reads the model alone, never the CPU, so a model runs the same kernels on every CPU."""
    for name, mod in model.named_modules():
        if (isinstance(mod, nn.Conv2d) and tuple(mod.kernel_size) == (1, 1) and tuple(mod.stride) != (1, 1)
                and mod.in_channels // mod.groups < 8):
            return False, (f"contiguous: {name} is a 1x1 stride-{tuple(mod.stride)} convolution with "
                           f"{mod.in_channels // mod.groups} input channels (oneDNN AVX2 bug, see channels_last_ok)")
    return True, "channels_last"


def stacked_layout(t: torch.Tensor) -> torch.Tensor:
    """Stacked conv weights [G, O, I, kh, kw] stored as (G, O, kh, kw, I), so that each slot's
    weight t[g] is a channels_last tensor and a [G*O, I, kh, kw] reshape (grouped backend) is a
    channels_last view; no copy when t already has this layout. Other tensors are returned as they are."""
    if t.dim() != 5:
        return t
    if t.permute(0, 1, 3, 4, 2).is_contiguous():
        return t
    return t.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


def pool_before_relu(ops: list) -> list:
    """`ops` with every ReLU that is directly followed by a max-pool moved after it. The two commute
    exactly: ReLU is monotone, so max(relu(a), relu(b), ...) = relu(max(a, b, ...)) bit for bit; the
    max-pool routes the gradient to the same first maximum, and where the window's maximum is <= 0 both
    orders give it a zero gradient. The ReLU (forward and backward) then runs on the pooled
    activations, a quarter of them for a 2x2 pool, so a step is faster and its results unchanged
    (tests/engine/test_cpu.py)."""
    ops = list(ops)
    for i in range(len(ops) - 1):
        (k1, m1, *_), (k2, m2, *_) = ops[i], ops[i + 1]
        if k1 == k2 == "per_channel" and isinstance(m1, nn.ReLU) and isinstance(m2, nn.MaxPool2d) \
                and not m2.return_indices:
            ops[i], ops[i + 1] = ops[i + 1], ops[i]
    return ops


#: torch CPU capabilities (torch.backends.cpu.get_cpu_capability()) on which the grouped pass keeps every
#: convolution grouped over the slots
GROUPED_CONV_CAPABILITIES = ("AVX512",)
PER_SLOT_MIN_CHANNELS = 3


def per_slot_rule(in_channels: int, device, capability: str | None = None) -> tuple[str, str]:
    """(per_slot, rule): which leading layers of the grouped pass run slot by slot (GroupedForward's
    `per_slot`, per_slot_ops) for a model whose images have `in_channels` channels, on `device`.

    On CPUs where torch runs AVX2 (not AVX-512) kernels, oneDNN's grouped convolution over G slots of
    3 input channels each is much slower than G ordinary convolutions (an ordinary 3-channel
    convolution gets oneDNN's first-layer kernel), and the later grouped convolutions gain little over
    ordinary ones: there a model on images with PER_SLOT_MIN_CHANNELS or more channels runs every
    layer up to its Flatten slot by slot ("features"; the linear layers stay batched matrix products).
    On an AVX2-only CPU (benchmarks/bench_first_conv.py measures it, one thread, one training step of
    the grouped pass) "features" was faster than "none" for the FedPALS LeNet and the privlabels CNNs
    on 3-channel images; on
    one-channel images it was slower, so they keep the grouped convolutions ("none"), as do CPUs with
    AVX-512 (not measured).
    A rule on the model's input and the CPU's reported kernels (`capability` overrides
    torch.backends.cpu.get_cpu_capability(), which follows ATEN_CPU_CAPABILITY), never a timing, so
    that every run on one machine computes the same. A slot's numbers stay independent of its
    batch-mates either way (its own convolution sees its own rows only)."""
    if torch.device(device).type != "cpu":
        return "none", "convolutions grouped (not a CPU)"
    cap = capability or torch.backends.cpu.get_cpu_capability()
    if cap.startswith(GROUPED_CONV_CAPABILITIES):
        return "none", f"convolutions grouped (torch capability {cap})"
    if in_channels < PER_SLOT_MIN_CHANNELS:
        return "none", f"convolutions grouped ({in_channels}-channel images, torch capability {cap})"
    return "features", f"convolutions per slot ({in_channels}-channel images, torch capability {cap})"


def per_slot_ops(ops: list, per_slot: str) -> int:
    """How many leading `ops` (GroupedForward's) of an image input run slot by slot: "none" 0; "first" the
    first convolution (1, where the first op is one); "features" every op up to and including the
    Flatten (none of them a Dropout: its masks are drawn for the grouped layout), else as "first"."""
    if per_slot not in ("none", "first", "features"):
        raise ValueError(f"per_slot={per_slot!r}; choose 'none', 'first' or 'features'")
    if per_slot == "none" or not ops or ops[0][0] != "conv":
        return 0
    if per_slot == "features":
        kinds = [op[0] for op in ops]
        if "flatten" in kinds and "dropout" not in kinds[:kinds.index("flatten")]:
            return kinds.index("flatten") + 1
    return 1


GROUPED_SAMPLES = 640  # the grouped backend trains at most this many samples (slots x batch) per pass
# (smaller passes stay in cache: on the benchmark CPU a few hundred samples ran faster than 2048 for LeNet)


class GroupedForward:
    """The forward pass of G copies of a model (stacked parameters [G, ...]) on inputs [G, B, ...].

    For models whose forward is `classifier(features(x))` with `features` one of the LAYERS below
    or an nn.Sequential of them, and `classifier` an nn.Linear (LeNet, PrivLabelsCNN, LogisticRegression). Image
    activations are kept as one [B, G*C, H, W] channels_last tensor, so slot g's channels are the
    block g*C..(g+1)*C-1: every Conv2d is one convolution with groups=G (channels_last is
    faster than the default layout on CPU), pooling and ReLU act per channel, and Flatten reorders
    to [G, B, C*H*W] in the model's own (C, H, W) order, after which Linear layers are batched
    matmuls. With `per_slot` (per_slot_ops; per_slot_rule picks it), the leading layers run instead as G
    ordinary ones, each slot's on its own [B, C, H, W] channels_last tensor, and their outputs are joined
    into that layout (or, after the Flatten, into [G, B, C*H*W]). `build` checks the result against
    functional_call on a random input before use."""

    LAYERS = "Conv2d, Linear, ReLU, MaxPool2d, AvgPool2d, Flatten, Dropout, Identity"

    def __init__(self, ops, per_slot: str = "none"):
        self.ops = ops  # [(kind, module, weight name, bias name)]
        # how many leading ops of an image input run slot by slot (per_slot_ops; 0: none)
        self.n_per_slot = per_slot_ops(ops, per_slot)

    @classmethod
    def build(cls, model: nn.Module, input_shape: tuple, per_slot: str = "none"):
        """The grouped pass of `model` for inputs of `input_shape` (one sample's), or None where the
        model is not supported. per_slot: which leading layers of an image input run slot by slot
        ("none", "first", "features": per_slot_ops)."""
        feats, head = getattr(model, "features", None), getattr(model, "classifier", None)
        if not isinstance(feats, nn.Module) or not isinstance(head, nn.Linear) or list(model.buffers()):
            return None
        if not channels_last_ok(model)[0]:  # the grouped pass runs in channels_last layout
            return None
        prefix = {mod: name for name, mod in model.named_modules()}
        ops = []
        for mod in [*(feats if isinstance(feats, nn.Sequential) else [feats]), head]:
            w = f"{prefix[mod]}.weight" if getattr(mod, "weight", None) is not None else None
            b = f"{prefix[mod]}.bias" if getattr(mod, "bias", None) is not None else None
            if isinstance(mod, nn.Conv2d) and mod.padding_mode == "zeros" and not isinstance(mod.padding, str):
                ops.append(("conv", mod, w, b))
            elif isinstance(mod, nn.Linear):
                ops.append(("linear", mod, w, b))
            elif isinstance(mod, nn.Flatten) and mod.start_dim == 1 and mod.end_dim == -1:
                ops.append(("flatten", mod, None, None))
            elif isinstance(mod, (nn.ReLU, nn.MaxPool2d, nn.AvgPool2d, nn.Dropout, nn.Identity)):
                ops.append(("dropout" if isinstance(mod, nn.Dropout) else "per_channel", mod, None, None))
            else:
                return None
        net = cls(pool_before_relu(ops), per_slot if len(input_shape) == 3 else "none")
        try:  # the same function as the model itself? (eval mode: no dropout)
            model.eval()
            with torch.no_grad():
                dev = next(model.parameters()).device
                params = {k: stacked_layout(torch.stack([v, v * 0.5])) for k, v in model.named_parameters()}
                x = torch.randn(2, 3, *input_shape, device=dev)
                out = net(params, x, train=False)
                ref = torch.stack([functional_call(model, {k: v[g] for k, v in params.items()}, (x[g],))
                                   for g in range(2)])
            if out.shape != ref.shape or not torch.allclose(out, ref, rtol=1e-3, atol=1e-4):
                return None
        except Exception:  # noqa: BLE001 - any failure means: not supported, use another backend
            return None
        finally:
            model.train(True)
        return net

    def __call__(self, params: dict, x: torch.Tensor, train: bool = True, gens: list | None = None) -> torch.Tensor:
        """Outputs [G, B, ...]. gens: one torch.Generator (or None) per slot for the dropout masks
        (randomness.slot_dropout); without it dropout draws from the global RNG."""
        G, B = x.shape[:2]
        ops, flat = self.ops, x.dim() != 5
        if x.dim() == 5 and self.n_per_slot:  # the leading ops slot by slot, as G ordinary models
            hs = [fast_layout(x[g]) for g in range(G)]
            for kind, mod, wn, bn in ops[:self.n_per_slot]:
                if kind == "conv":
                    hs = [F.conv2d(h, params[wn][g], params[bn][g] if bn else None, mod.stride, mod.padding,
                                   mod.dilation, mod.groups) for g, h in enumerate(hs)]
                elif kind == "flatten":  # -> [G, B, C*H*W] in the model's (C, H, W) order
                    hs, flat = [h.reshape(B, -1) for h in hs], True
                else:  # "per_channel"
                    hs = [mod(h) for h in hs]
            # joined: [G, B, features] after a flatten, else the grouped layout [B, G*C', H', W'], channels_last
            h = torch.stack(hs) if flat else torch.cat(hs, 1).contiguous(memory_format=torch.channels_last)
            ops = ops[self.n_per_slot:]
        elif x.dim() == 5:  # images [G, B, C, H, W] -> [B, G*C, H, W], channels_last
            C, H, W = x.shape[2:]
            h = x.permute(1, 3, 4, 0, 2).contiguous().view(B, H, W, G * C).permute(0, 3, 1, 2)
        else:
            h = x
        for kind, mod, wn, bn in ops:
            if kind == "conv":
                w = params[wn]
                w = w.reshape(G * w.shape[1], *w.shape[2:])
                b = params[bn].reshape(-1) if bn else None
                h = F.conv2d(h, w.contiguous(memory_format=torch.channels_last), b, mod.stride, mod.padding,
                             mod.dilation, G * mod.groups)
            elif kind == "linear":
                w = params[wn].transpose(1, 2)  # [G, in, out]
                h = torch.baddbmm(params[bn].unsqueeze(1), h, w) if bn else torch.bmm(h, w)
            elif kind == "flatten":
                if not flat:  # [B, G*C, H, W] -> [G, B, C*H*W] in (C, H, W) order per slot
                    h = h.reshape(B, G, -1, *h.shape[2:]).permute(1, 0, 2, 3, 4).reshape(G, B, -1)
                else:
                    h = h.reshape(G, B, -1)
                flat = True
            elif kind == "dropout":
                h = slot_dropout(h, mod.p, gens, flat) if train and gens is not None else \
                    F.dropout(h, mod.p, training=train)
            else:  # "per_channel": ReLU, Identity and pooling act on each channel alone
                h = mod(h)
        return h



# the names the engine module used before it became a package (benchmarks and tests import them)
_GroupedForward, _stacked_layout, _fast_layout, _GROUPED_SAMPLES = (
    GroupedForward, stacked_layout, fast_layout, GROUPED_SAMPLES)
