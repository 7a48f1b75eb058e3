"""What one model costs, measured: MACs, the memory of one training step, CPU time per sample.

Used by `fedpaper plan` (fedpaper.plan); `step_memory` is pure and usable on its own (e.g. to size
groups of runs by memory). Per `ModelKey` (model, its arguments, input shape, batch size,
optimiser, precision, clients, label kind, evaluation batch):

- MACs: torch.utils.flop_counter.FlopCounterMode on the model the project's factory builds
  (fedpaper.blocks.models.build_model), FLOPs / 2; training = forward + backward of one batch, evaluation
  = forward, per sample.
- peak memory of one training step (`step_memory`): parameters + gradients + optimiser state after
  one step + the float32 input batch + the tensors the model's forward pass saves for backward, as
  the engine counts them (fedpaper.engine.memory.saved_tensor_bytes), at the batch size given. Not
  counted: the loss's own saved tensors, the allocator's slack and temporaries freed within the step.
- time here: CPU seconds (time.process_time) per training sample of the engine itself training
  the model (`engine_timing`: FedAvg, the backend the engine picks, on random data of the input
  shape at the batch size, as many clients side by side as the run has, up to 10; the second of
  two rounds timed), and per evaluation sample of a no-grad forward at the run's evaluation batch
  (at most 256); a plain training step of the model alone (`timing`) only where the engine cannot
  train it so. The method's own extra work (FedPALS's QP, SCAFFOLD's corrections, FedMT's server
  training) is not in the timing. Cached per model key and CPU in cache_dir("plan").
- GPU: a measured throughput per model signature from benchmarks/results/gpu.json, else "not
  measured".
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from fedpaper.algorithms.methods import Method
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.engine.memory import saved_tensor_bytes
from fedpaper.ground.files import atomic_write_text
from fedpaper.blocks.models import build_model
from fedpaper.ground import paths
from fedpaper.ground.paths import cache_dir
from fedpaper.ground.progress import on_rounds

TIMED_STEPS = 3
#: A measured GPU throughput per model (benchmarks/results/gpu.json): {"card": "...", "models":
#: {model signature (`ModelKey.signature()`): {"train_samples_per_s": x, "eval_samples_per_s": y}}}.
GPU_RESULTS = Path("benchmarks") / "results" / "gpu.json"
NOT_MEASURED = "not measured"


def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"


@dataclass(frozen=True)
class ModelKey:
    """What a model's measured costs depend on."""

    model: str
    model_kwargs: str  # canonical JSON
    input_shape: tuple
    batch_size: int
    optimizer: str
    momentum: float
    precision: str
    clients: int = 1  # the engine's rate depends on how many clients it trains side by side
    multilabel: bool = False
    eval_batch: int = 2048

    def signature(self) -> str:
        return json.dumps([self.model, json.loads(self.model_kwargs), list(self.input_shape), self.batch_size,
                           self.optimizer, self.momentum, self.precision, self.clients, self.multilabel,
                           self.eval_batch], sort_keys=True)

    def label(self) -> str:
        kw = json.loads(self.model_kwargs)
        bb = kw.get("backbone")
        name = self.model + (f"/{bb}" if isinstance(bb, str) else "")
        return f"{name} {'x'.join(map(str, self.input_shape))} b{self.batch_size}"


def _optimizer(net, key: ModelKey):
    import torch

    params = [p for p in net.parameters() if p.requires_grad]
    if key.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=key.momentum)
    return {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[key.optimizer](params, lr=1e-6)


def _logits(out):
    if isinstance(out, dict):
        out = out.get("logits", next(iter(out.values())))
    return out


def _loss(out):
    return _logits(out).float().square().mean()  # a surrogate: backward through the network costs the same


def _autocast(key: ModelKey):
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16) if key.precision == "bf16" else contextlib.nullcontext()


def timing_model_kwargs(key: ModelKey) -> dict:
    """The model arguments a timing builds `key`'s model with: lists as tuples, and no pretrained
    weights (speed does not depend on them, and ImageNet weights may be absent)."""
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(key.model_kwargs).items()}
    if kw.get("pretrained"):
        kw["pretrained"] = False
    return kw


def _build(key: ModelKey):
    import torch


    torch.manual_seed(0)
    return build_model(key.model, **timing_model_kwargs(key))


class _TotalOnly:
    """FlopCounterMode's module tracker reduced to the total: its per-module hooks fail on inputs
    that need grad but have no grad_fn (the LADM's query parameters); only the total is used here."""

    parents = {"Global"}

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return None


def _flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    fc = FlopCounterMode(display=False)
    fc.mod_tracker = _TotalOnly()
    return fc


def macs(key: ModelKey, batch: int = 2) -> tuple[float, float]:
    """(training, evaluation) multiply-accumulates per sample: FlopCounterMode's FLOPs / 2 of one
    forward + backward (training) and one forward without grad (evaluation) of `batch` samples."""
    import torch

    net = _build(key).train()
    x = torch.randn(batch, *key.input_shape)
    with _flop_counter() as fc:
        _loss(net(x)).backward()
    train = fc.get_total_flops() / 2 / batch
    net.eval()
    with _flop_counter() as fc, torch.no_grad():
        net(x)
    return train, fc.get_total_flops() / 2 / batch


#: The step-memory measure the cache's entries were made with (an entry with another is re-measured).
STEP_MEMORY_MEASURE = "engine.memory.saved_tensor_bytes + input batch"


def step_memory(net, input_shape: tuple, batch_size: int, optimizer_factory, precision: str = "fp32") -> dict:
    """Bytes of one training step of `net` at `batch_size` (pure: nothing is kept): "params" (one
    copy of the parameters), "grads" (their gradients), "optimizer" (the optimiser's state after one
    step), "saved": the float32 input batch (B x input_shape x 4 bytes) plus the tensors one forward
    pass of `net` saves for backward as the engine counts them (fedpaper.engine.memory.
    saved_tensor_bytes: each storage once, parameters and the input excluded, autocast copies of the
    weights included under bf16); "total" is their sum."""
    import torch


    opt = optimizer_factory(net)
    x = torch.randn(batch_size, *input_shape)
    saved = int(x.nbytes) + saved_tensor_bytes(net, x, precision)
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    with ctx:
        loss = _loss(net(x))
    loss.backward()
    opt.step()
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in net.parameters() if p.grad is not None)
    state = sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                if isinstance(v, torch.Tensor))
    opt.zero_grad(set_to_none=True)
    return {"params": params, "grads": grads, "optimizer": state, "saved": saved,
            "total": params + grads + state + saved}


#: The engine's timing trains at most this many clients side by side, and fewer for a large model
#: (at most ENGINE_TIMING_MACS training multiply-accumulates per timed round).
ENGINE_TIMING_CLIENTS = 10
ENGINE_TIMING_MACS = 2e11


def timing_federation(key: ModelKey, clients: int, batches: int, rounds: int, device="cpu"):
    """(pools, federation, TrainConfig, training samples per round) of a timing run: `clients`
    clients of `batches` batches each of random data of `key`'s input shape (labels of its kind),
    one test batch, FedAvg's settings of `key` for `rounds` rounds on `device`."""
    import numpy as np
    import torch


    kw = timing_model_kwargs(key)
    per_client = batches * key.batch_size
    g = torch.Generator().manual_seed(0)
    k = int(kw.get("num_classes", 10))
    n = clients * per_client
    x = torch.randn(n, *key.input_shape, generator=g)
    xt = torch.randn(key.batch_size, *key.input_shape, generator=g)
    if key.multilabel:
        y, yt = (torch.rand(n, k, generator=g) < 0.2).float(), (torch.rand(len(xt), k, generator=g) < 0.2).float()
    else:
        y, yt = torch.randint(0, k, (n,), generator=g), torch.randint(0, k, (len(xt),), generator=g)
    pools = Pools(x.to(device), y.to(device), xt.to(device), yt.to(device), k)
    fed = Federation([np.arange(i * per_client, (i + 1) * per_client) for i in range(clients)], np.arange(len(xt)))
    cfg = TrainConfig(model=key.model, model_kwargs=kw, optimizer=key.optimizer, lr=1e-4, batch_size=key.batch_size,
                      local_epochs=1, rounds=rounds, momentum=key.momentum, precision=key.precision,
                      device=str(device))
    return pools, fed, cfg, n


def engine_timing(key: ModelKey, train_macs: float, batches: int = 2) -> dict:
    """CPU seconds per training sample of the engine itself (fedpaper.driver.train, FedAvg, the
    backend it picks) training `key`'s model: min(the run's clients, ENGINE_TIMING_CLIENTS) clients
    of `batches` batches each on random data of the input shape, two rounds, the second one timed
    (process CPU time between the engine's round callbacks, its aggregation included); and per
    evaluation sample a no-grad forward at the run's evaluation batch (at most 256)."""

    per_client = batches * key.batch_size
    m = max(1, min(key.clients, ENGINE_TIMING_CLIENTS, int(ENGINE_TIMING_MACS // max(1.0, train_macs * per_client))))
    pools, fed, cfg, n = timing_federation(key, m, batches, rounds=2)
    marks = []
    with on_rounds(lambda rnd, rounds, runs: marks.append(time.process_time())):
        train(Method("FedAvg"), cfg, pools, [fed], progress=False)
    train_s = (marks[-1] - marks[-2]) / n
    return {"cpu_s_per_train_sample": train_s, "cpu_s_per_eval_sample": _eval_timing(key),
            "timed_with": f"engine (FedAvg, {m} client(s) x {per_client} samples, 2nd round)"}


def _eval_timing(key: ModelKey, steps: int = 2) -> float:
    import torch

    net = _build(key).eval()
    b = max(1, min(key.eval_batch, 256))
    x = torch.randn(b, *key.input_shape)
    with torch.no_grad(), _autocast(key):
        net(x)
        t0 = time.process_time()
        for _ in range(steps):
            net(x)
    return (time.process_time() - t0) / (steps * b)


def timing(key: ModelKey, steps: int = TIMED_STEPS) -> dict:
    """CPU seconds per training sample and per evaluation sample of `key`'s model alone (a plain
    training step: the fallback where the engine cannot train it on random data)."""
    import torch

    net = _build(key).train()
    opt = _optimizer(net, key)
    x = torch.randn(key.batch_size, *key.input_shape)

    def step():
        opt.zero_grad(set_to_none=True)
        with _autocast(key):
            loss = _loss(net(x))
        loss.backward()
        opt.step()

    step()
    t0 = time.process_time()
    for _ in range(steps):
        step()
    train = (time.process_time() - t0) / (steps * key.batch_size)
    net.eval()
    with torch.no_grad(), _autocast(key):
        net(x)
        t0 = time.process_time()
        for _ in range(steps):
            net(x)
    ev = (time.process_time() - t0) / (steps * key.batch_size)
    return {"cpu_s_per_train_sample": train, "cpu_s_per_eval_sample": ev, "timed_with": "model alone"}


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def machine_key() -> str:
    import torch

    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "") + "/" + os.environ.get("ATEN_CPU_CAPABILITY", "")
    return f"{cpu_name()} | torch {torch.__version__} | {torch.get_num_threads()} thread(s) | isa {isa}"


def model_costs(key: ModelKey, cache_file: Optional[Path] = None) -> dict:
    """MACs, step memory and CPU timing of a model, cached per model key and machine."""

    cache_file = cache_file or _cache_file()
    ck = hashlib.sha256((key.signature() + machine_key()).encode()).hexdigest()[:20]
    try:
        cached = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached = {}
    mem = None
    if ck in cached:
        if cached[ck].get("step_memory_measure") == STEP_MEMORY_MEASURE:
            return cached[ck]
        # an entry from an older step-memory measure: re-measure the memory only, keep the timing
        mem = step_memory(_build(key).train(), key.input_shape, key.batch_size, lambda n: _optimizer(n, key),
                          key.precision)
        out = dict(cached[ck], step_memory=mem, step_memory_measure=STEP_MEMORY_MEASURE)
        cached[ck] = out
        atomic_write_text(cache_file, json.dumps(cached, indent=1, sort_keys=True))
        return out
    train_macs, eval_macs = macs(key)
    mem = step_memory(_build(key).train(), key.input_shape, key.batch_size, lambda n: _optimizer(n, key),
                      key.precision)
    try:
        timed = engine_timing(key, train_macs)
    except Exception as e:  # noqa: BLE001 - e.g. a model the engine trains only with its own method
        timed = dict(timing(key), engine_error=_one_line(e))
    out = {"signature": key.signature(), "machine": machine_key(), "train_macs": train_macs,
           "eval_macs": eval_macs, "step_memory": mem, "step_memory_measure": STEP_MEMORY_MEASURE, **timed}
    try:
        cached = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached = {}
    cached[ck] = out
    atomic_write_text(cache_file, json.dumps(cached, indent=1, sort_keys=True))
    return out


def _cache_file() -> Path:
    return cache_dir("plan") / "model-costs.json"


def gpu_rates() -> tuple[Optional[str], dict]:
    """(card, {signature: rates}) from benchmarks/results/gpu.json, or (None, {}) when absent."""

    try:
        data = json.loads((paths.REPO_ROOT / GPU_RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, {}
    return data.get("card"), dict(data.get("models") or {})
