"""What one model costs, measured: MACs, the memory of one training step, CPU time per sample.

Used by `fedpaper plan` (fedpaper.plan); `step_memory` is pure and usable on its own (e.g. to size
groups of runs by memory). Per `ModelKey` (model, its arguments, input shape, batch size,
optimiser, precision, clients, label kind, evaluation batch):

- MACs: torch.utils.flop_counter.FlopCounterMode on the model the project's factory builds
  (fedpaper.blocks.models.build_model), FLOPs / 2; training = forward + backward of one batch, evaluation
  = forward, per sample.
- peak memory of one training step (`step_memory`): parameters + gradients + optimiser state after
  one step + the float32 input batch + the tensors the model's forward pass saves for backward, as
  the engine counts them (fedpaper.engine.memory.saved_tensor_bytes), measured at batch 2 and 4 and
  extended linearly to the batch size given (saved bytes = fixed + batch x per sample, as the engine
  sizes its groups: fedpaper.engine.memory; measured directly at a batch of 4 or fewer). Not counted:
  the loss's own saved tensors, the allocator's slack and temporaries freed within the step. MACs and
  step memory do not depend on the machine: one measurement per architecture (`arch_signature`:
  model, arguments, input shape, precision, optimiser, batch size), cached in cache_dir("plan").
- time here: CPU seconds (time.process_time) per training sample of the engine itself training
  one model of the key's timing class (`timing_class`: model, backbone, input shape, batch size,
  optimiser, precision, label kind, clients side by side up to 10; a composite model's head and
  number of classes left out), measured once per class and
  machine (`engine_timing`: FedAvg, the backend the engine picks, random data of the input shape,
  the second of two rounds timed; a plain training step of the model alone, `timing`, only where
  the engine cannot train it so), and per evaluation sample of a no-grad forward (at most 256 rows,
  fewer for a large model). A key of a measured class takes the class's CPU seconds per training
  (evaluation) MAC times its own MACs: exactly the measured value for the model that was timed,
  scaled by MACs for the others of its class (another head, number of classes, pretrained flag).
  Each timing is cached in cache_dir("plan") with the machine (`machine_key`) and the UTC time it
  was measured, and every cost says which timing it comes from (`timed`). The method's own extra
  work (FedPALS's QP, SCAFFOLD's corrections, FedMT's server training) is not in the timing.
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
from fedpaper.ground.jsonio import now_iso
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
STEP_MEMORY_MEASURE = "engine.memory.saved_tensor_bytes at batch 2 and 4, linear + input batch"


def step_memory(net, input_shape: tuple, batch_size: int, optimizer_factory, precision: str = "fp32") -> dict:
    """Bytes of one training step of `net` at `batch_size` (pure: nothing is kept): "params" (one
    copy of the parameters), "grads" (their gradients), "optimizer" (the optimiser's state after one
    step), "saved": the float32 input batch (B x input_shape x 4 bytes) plus the tensors one forward
    pass of `net` saves for backward as the engine counts them (fedpaper.engine.memory.
    saved_tensor_bytes: each storage once, parameters and the input excluded, autocast copies of the
    weights included under bf16), measured at `batch_size` when it is 4 or less, else at batch 2 and
    4 and extended linearly (fixed + B x per sample, as fedpaper.engine.memory sizes a step);
    "total" is their sum; "saved_per_sample" the slope."""
    import torch

    def saved_at(b):
        return saved_tensor_bytes(net, torch.randn(b, *input_shape), precision)

    if batch_size <= 4:
        act, per = saved_at(batch_size), None
    else:
        s2, s4 = saved_at(2), saved_at(4)
        per = max(0, (s4 - s2) // 2)
        act = s2 + (batch_size - 2) * per
    row = 4
    for d in input_shape:
        row *= int(d)
    saved = batch_size * row + act
    opt = optimizer_factory(net)
    x = torch.randn(min(batch_size, 2), *input_shape)
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
    return {"params": params, "grads": grads, "optimizer": state, "saved": saved, "saved_per_sample": per,
            "total": params + grads + state + saved}


#: The engine's timing trains at most this many clients side by side, and fewer for a large model
#: (at most ENGINE_TIMING_MACS training multiply-accumulates per timed round); an evaluation timing
#: forwards at most 256 rows, fewer for a large model (at most EVAL_TIMING_MACS per forward).
ENGINE_TIMING_CLIENTS = 10
ENGINE_TIMING_MACS = 2e11
EVAL_TIMING_MACS = 2e10


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


def engine_timing(key: ModelKey, train_macs: float, eval_macs: float = 0.0, batches: int = 2) -> dict:
    """CPU seconds per training sample of the engine itself (fedpaper.driver.train, FedAvg, the
    backend it picks) training `key`'s model: min(the run's clients, ENGINE_TIMING_CLIENTS) clients
    of `batches` batches each on random data of the input shape, two rounds, the second one timed
    (process CPU time between the engine's round callbacks, its aggregation included); and per
    evaluation sample a no-grad forward (`_eval_timing`)."""

    per_client = batches * key.batch_size
    m = max(1, min(key.clients, ENGINE_TIMING_CLIENTS, int(ENGINE_TIMING_MACS // max(1.0, train_macs * per_client))))
    pools, fed, cfg, n = timing_federation(key, m, batches, rounds=2)
    marks = []
    with on_rounds(lambda rnd, rounds, runs: marks.append(time.process_time())):
        train(Method("FedAvg"), cfg, pools, [fed], progress=False)
    train_s = (marks[-1] - marks[-2]) / n
    ev, rows = _eval_timing(key, eval_macs)
    return {"cpu_s_per_train_sample": train_s, "cpu_s_per_eval_sample": ev,
            "timed_with": f"engine (FedAvg, {m} client(s) x {per_client} samples, 2nd round; evaluation "
                          f"{rows} rows)"}


def _eval_rows(key: ModelKey, eval_macs: float) -> int:
    return int(max(1, min(key.eval_batch, 256, EVAL_TIMING_MACS // max(1.0, eval_macs))))


def _eval_timing(key: ModelKey, eval_macs: float = 0.0, steps: int = 2) -> tuple[float, int]:
    """(CPU seconds per evaluation sample, rows per forward) of a no-grad forward of `key`'s model."""
    import torch

    net = _build(key).eval()
    b = _eval_rows(key, eval_macs)
    x = torch.randn(b, *key.input_shape)
    with torch.no_grad(), _autocast(key):
        net(x)
        t0 = time.process_time()
        for _ in range(steps):
            net(x)
    return (time.process_time() - t0) / (steps * b), b


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


def arch_signature(key: ModelKey) -> str:
    """What a key's MACs and step memory depend on (not the machine, clients or evaluation batch)."""
    return json.dumps(["arch", key.model, json.loads(key.model_kwargs), list(key.input_shape), key.batch_size,
                       key.optimizer, key.momentum, key.precision, STEP_MEMORY_MEASURE], sort_keys=True)


#: A composite model's arguments (one with a "backbone" argument, e.g. fednca_net, two_head) that
#: make its backbone; the others (its head's, the number of classes, pretrained weights) leave a
#: key in its backbone's timing class.
BACKBONE_ARGS = ("backbone", "in_channels", "width", "dim", "norm")


def timing_class(key: ModelKey) -> str:
    """The keys one CPU timing stands for: same model (all its arguments; for a composite model its
    BACKBONE_ARGS), input shape, batch size, optimiser, precision, label kind and clients side by
    side (up to ENGINE_TIMING_CLIENTS); their CPU seconds per MAC are taken as equal."""
    kw = json.loads(key.model_kwargs)
    arch = {k: kw.get(k) for k in BACKBONE_ARGS} if isinstance(kw.get("backbone"), str) else kw
    return json.dumps(["timing", key.model, arch, list(key.input_shape), key.batch_size, key.optimizer,
                       key.momentum, key.precision, key.multilabel, min(key.clients, ENGINE_TIMING_CLIENTS)],
                      sort_keys=True)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _arch_costs(key: ModelKey) -> dict:
    train_macs, eval_macs = macs(key)
    mem = step_memory(_build(key).train(), key.input_shape, key.batch_size, lambda n: _optimizer(n, key),
                      key.precision)
    return {"train_macs": train_macs, "eval_macs": eval_macs, "step_memory": mem}


def _class_timing(key: ModelKey, train_macs: float, eval_macs: float) -> dict:
    try:
        timed = engine_timing(key, train_macs, eval_macs)
    except Exception as e:  # noqa: BLE001 - e.g. a model the engine trains only with its own method
        timed = dict(timing(key), engine_error=_one_line(e))
    return {"cpu_s_per_train_mac": timed["cpu_s_per_train_sample"] / max(train_macs, 1.0),
            "cpu_s_per_eval_mac": timed["cpu_s_per_eval_sample"] / max(eval_macs, 1.0),
            "timed_key": key.label(), "timed_signature": key.signature(), "timed_with": timed["timed_with"],
            "machine": machine_key(), "measured_at": now_iso(),
            **({"engine_error": timed["engine_error"]} if "engine_error" in timed else {})}


def model_costs(key: ModelKey, cache_file: Optional[Path] = None) -> dict:
    """MACs, step memory and CPU timing of a model: MACs and memory measured once per architecture
    (`arch_signature`), the CPU timing once per timing class and machine (`timing_class`), both
    cached in `cache_file` (default cache_dir("plan")/model-costs.json). "timed" says which timing
    a key's CPU seconds come from, where and when it was measured, and whether they were scaled."""
    return model_costs_of([key], cache_file)[key]


def model_costs_of(keys, cache_file: Optional[Path] = None, progress=None, time_cpu: bool = True) -> dict:
    """{key: model_costs(key)} of `keys`, each architecture measured and each timing class timed
    once (`progress(label)` before each measurement), the cache read and written once. With
    time_cpu=False no model is timed: a class without a cached timing on this machine gets no CPU
    seconds (None) and `timed` says so."""
    cache_file = cache_file or _cache_file()
    try:
        cached = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached = {}
    machine, changed, out = machine_key(), False, {}
    for key in keys:
        ak = "arch:" + _digest(arch_signature(key))
        if ak not in cached:
            if progress:
                progress(f"measuring MACs and step memory of {key.label()}")
            cached[ak], changed = _arch_costs(key), True
        arch = cached[ak]
        tk = "timing:" + _digest(timing_class(key) + machine)
        if tk not in cached and time_cpu:
            if progress:
                progress(f"timing {key.label()} on this CPU (once per model class and machine)")
            cached[tk], changed = _class_timing(key, arch["train_macs"], arch["eval_macs"]), True
        t = cached.get(tk)
        if t is None:  # time_cpu=False and no timing cached on this machine
            timed, per_train, per_eval = {"not_timed": True}, None, None
        else:
            timed = {k: t[k] for k in ("timed_key", "timed_with", "machine", "measured_at") if k in t}
            timed["scaled_by_macs"] = t["timed_signature"] != key.signature()
            per_train, per_eval = t["cpu_s_per_train_mac"] * arch["train_macs"], t["cpu_s_per_eval_mac"] * arch["eval_macs"]
        timed["cached_in"] = str(cache_file)
        out[key] = {"signature": key.signature(), "machine": machine, "train_macs": arch["train_macs"],
                    "eval_macs": arch["eval_macs"], "step_memory": arch["step_memory"],
                    "cpu_s_per_train_sample": per_train, "cpu_s_per_eval_sample": per_eval, "timed": timed}
    if changed:
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
