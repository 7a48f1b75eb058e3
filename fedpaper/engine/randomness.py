"""Per-run random streams for what the forward pass draws (dropout), so that a run's numbers never
depend on the runs it is batched with.

Each run already draws its batches from its own numpy generator (`np.random.default_rng([seed,
7919])`, the trainer's `rngs`). The forward pass's random numbers (dropout masks) come from a torch
generator tied to that numpy generator: seeded once from the numpy generator's seed sequence (not
from its state, so nothing is drawn from it and the batches stay as they were), kept for the
generator's life, and shared by the run's slots, which draw in slot order. The global torch RNG,
whose position depends on what the other runs drew before, is never read for them.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch


class RunGenerators:
    """torch.Generator of each numpy generator (by identity), created on first use."""

    def __init__(self, device):
        self.device = torch.device(device)
        self._gens: dict = {}  # id(numpy generator) -> (numpy generator, torch generator)

    def __call__(self, rng: np.random.Generator) -> torch.Generator:
        hit = self._gens.get(id(rng))
        if hit is None or hit[0] is not rng:
            ss = rng.bit_generator.seed_seq
            key = [int(e) for e in np.atleast_1d(ss.entropy)] + [int(k) for k in ss.spawn_key] + [104729]
            seed = int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0] >> 1)
            hit = self._gens[id(rng)] = (rng, torch.Generator(device=self.device).manual_seed(seed))
        return hit[1]

    def of(self, rngs) -> list:
        return [self(r) for r in rngs]


def generator_at(rng: np.random.Generator, device="cpu") -> torch.Generator:
    """A torch.Generator seeded from the current state of numpy generator `rng` (read, not drawn
    from): a fresh stream per call site and moment of the run, for code outside the trainer's
    slots (e.g. central tuning's dropout)."""
    state = repr(sorted(rng.bit_generator.state.items())).encode()
    seed = int(np.random.SeedSequence(list(state)).generate_state(1, np.uint64)[0] >> 1)
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


@contextlib.contextmanager
def global_rng_from(gen: torch.Generator | None):
    """Run a block whose random draws use the global torch RNG (e.g. nn.Dropout inside
    functional_call) on a stream taken from `gen`: the global RNG is forked, seeded with a number
    drawn from `gen`, and restored afterwards. gen None: the block draws from the global RNG as is."""
    if gen is None:
        yield
        return
    devices = [gen.device] if gen.device.type == "cuda" else []
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=gen, device=gen.device).item())
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def slot_dropout(h: torch.Tensor, p: float, gens: list, flat: bool) -> torch.Tensor:
    """Dropout of stacked slots with each slot's mask drawn from its own generator gens[g] (None:
    the global RNG, for padding slots whose outputs are dropped). h: [G, B, F] (flat) or a grouped
    image tensor [B, G*C, H, W] whose channel block g is slot g's."""
    if p == 0:
        return h
    G = len(gens)
    if flat:
        shapes = [h.shape[1:]] * G
    else:
        C = h.shape[1] // G
        shapes = [(h.shape[0], C, *h.shape[2:])] * G
    masks = [torch.empty(s, device=h.device, dtype=h.dtype).bernoulli_(1 - p, generator=g)
             for s, g in zip(shapes, gens)]
    mask = torch.stack(masks) if flat else torch.cat(masks, 1).contiguous(memory_format=torch.channels_last)
    return h * mask * (1.0 / (1 - p))
