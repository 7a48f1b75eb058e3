"""Fixed classifiers: the simplex equiangular tight frame of neural collapse (FedNCA-ML Sec. 4.2,
eqs. 1-2 and 6; Papyan et al. 2020) and SphereFed's fixed orthonormal classifier (Dong et al.
2022, Sec. 3).

simplex_etf(d, C): M = sqrt(C / (C - 1)) U (I_C - (1/C) 1 1^T) with U in R^{d x C}, U^T U = I_C
(eq. 1). Its columns have unit norm and pairwise inner product -1 / (C - 1) (eq. 2).
- layout "rotated" (the paper's eq. 1, targets vague-7 default): U from the QR decomposition of a
  Gaussian d x C matrix drawn with a fixed seed, so every client builds the same M;
- layout "code" (the official code's head): U = the first C standard basis vectors (no rotation)
  and M divided by its Frobenius norm (columns of norm 1/sqrt(C)).

ETFClassifier holds M as the parameter `weight` [C, d] (row c = m_c) next to a learnable logit
scale s (initial 10) and per-class bias b, as the official code: logit_c(h) = s h^T m_c + b_c;
with logit_scale=None and bias=False it is the paper's eq. 9, logit = h^T m_c. M is a parameter so
that the query-ablation rows (Tables 6, 8) can learn it; the FedNCA-ML algorithm lists it as
frozen (algorithms.frozen) so it never changes when fixed.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from fedpaper.ground.errors import BadParameterError

ETF_LAYOUTS = ("rotated", "code")


def orthonormal_columns(d: int, C: int, seed: int = 0) -> torch.Tensor:
    """U [d, C] with U^T U = I from the QR decomposition of a seeded Gaussian matrix."""
    if d < C:
        raise BadParameterError(f"feature dimension d={d} is smaller than C={C}; an orthonormal d x C basis needs "
                                f"d >= C (widen the backbone)")
    g = torch.Generator().manual_seed(int(seed))
    q, r = torch.linalg.qr(torch.randn(d, C, generator=g, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r))).float()  # unique QR: positive diagonal of R


def simplex_etf(d: int, C: int, layout: str = "rotated", seed: int = 0) -> torch.Tensor:
    """The simplex ETF M [d, C] (eq. 1), see the module docstring for the two layouts."""
    if C < 2:
        raise BadParameterError(f"C={C}: a simplex ETF needs at least 2 classes")
    if layout not in ETF_LAYOUTS:
        raise BadParameterError(f"etf_layout={layout!r}; choose one of {ETF_LAYOUTS}")
    centre = torch.eye(C) - torch.full((C, C), 1.0 / C)
    if layout == "rotated":
        return math.sqrt(C / (C - 1)) * orthonormal_columns(d, C, seed) @ centre
    if d < C:
        raise BadParameterError(f"feature dimension d={d} is smaller than C={C}; widen the backbone")
    m = torch.zeros(d, C)
    m[:C] = math.sqrt(C / (C - 1)) * centre
    return m / m.norm()


class ETFClassifier(nn.Module):
    """logit_c(h) = s h^T m_c + b_c with M = [m_c] a simplex ETF (fixed unless the algorithm
    trains it), s a learnable scale (None: 1, not learned) and b a learnable bias (or none).
    `scores(h)` accepts h [..., d] (one feature per image: [.., C] logits) and class-wise
    features [..., C, d] (every feature against every prototype: [..., C, C])."""

    def __init__(self, d: int, C: int, layout: str = "rotated", seed: int = 0, logit_scale: float | None = 10.0,
                 bias: bool = True, init: str = "etf"):
        super().__init__()
        if init == "etf":
            w = simplex_etf(d, C, layout, seed).T.contiguous()
        elif init == "random":
            g = torch.Generator().manual_seed(int(seed) + 1)
            w = torch.randn(C, d, generator=g) / math.sqrt(d)
        else:
            raise BadParameterError(f"query_init={init!r}; choose 'etf' or 'random'")
        self.weight = nn.Parameter(w)
        self.scale = nn.Parameter(torch.tensor(float(logit_scale))) if logit_scale is not None else None
        self.bias = nn.Parameter(torch.zeros(C)) if bias else None

    def scores(self, h: torch.Tensor) -> torch.Tensor:
        s = h @ self.weight.T
        if self.scale is not None:
            s = self.scale * s
        return s + self.bias if self.bias is not None else s

    def forward(self, h):
        return self.scores(h)


class SphereClassifier(nn.Module):
    """SphereFed's head (Dong et al. 2022, Sec. 3): features projected on the unit hypersphere and
    scored against a fixed orthonormal classifier W [C, d], logits = scale * W h / ||h||
    (targets vague-10: scale 16, no closed-form calibration). W is the parameter `weight`, listed
    as frozen by the SphereFed algorithm."""

    def __init__(self, d: int, C: int, seed: int = 0, scale: float = 16.0):
        super().__init__()
        self.weight = nn.Parameter(orthonormal_columns(d, C, seed).T.contiguous())
        self.scale = float(scale)

    def forward(self, h):
        return self.scale * nn.functional.normalize(h, dim=-1) @ self.weight.T
