"""How far the engine is from what the card does with each paper-profile model: the engine at the
paper profile's group sizes against a plain per-client PyTorch loop, the large-batch single-model
ceiling, and a "plain PyTorch best" (vmap of grad over the clients, one CUDA graph), all in ONE
invocation on one device.

    # there (CUDA): the table, and the engine's rates into what `fedpaper plan` reads
    PYTHONPATH=. python3 benchmarks/gpu_ceiling.py --out-md OUT/gpu_ceiling.md --out-json OUT/gpu_ceiling.json \
        [--update-gpu-json benchmarks/results/gpu.json] [--max-seconds 150] [--per-cell 2]

    # here (CPU): the same code paths at tiny sizes, in seconds (plumbing only: not a result)
    .venv/bin/python benchmarks/gpu_ceiling.py --tiny --out-md /tmp/c.md --out-json /tmp/c.json

The models (MODELS; each one's model key is the paper profile's costliest key of that model and
input shape in benchmarks/results/paper_models.json, written by gpu_throughput.py --collect):
LeNet 3x32x32 batch 32 (FedPALS), the privlabels CNN 3x32x32 batch 64, FedMT's CIFAR ResNet-18
3x32x32 batch 10, FedNCA-ML's ResNet-18 3x224x224 batch 32. Training samples per second on random
data of the input shape (labels of the model's kind), for each model:

- engine: fedpaper.driver.FederatedTrainer (FedAvg, the backend it picks on the device), as
  gpu_throughput.py and gpu_groups.py time it: R runs of the key's clients side by side in one engine
  call, R = the runs the paper profile's sweeps put in one engine call (runs that differ only in
  their seed share a method, training settings and data, experiment.group_setups: the profile's
  seeds, at most run_specs' 16), --batches batches per client per round; one warm-up round, then
  rounds until --per-cell seconds, torch.cuda.synchronize at the engine's round callbacks, the median
  round (a round includes the aggregation and each run's evaluation of one test batch).
- engine captured (CUDA only; skipped with a note elsewhere): the engine cell with
  TrainConfig.backend="captured", its local step replayed from CUDA graphs
  (fedpaper/engine/backends/captured.py); the cell records how many shape signatures were captured
  and any rule under which it ran the eager step instead.
- engine captured bf16 (CUDA only, measured last): the same at TrainConfig.precision="bf16" (bf16
  autocast, fp32 master weights), a speed measurement for every model; a paper's profile trains in
  bf16 only where its fp32/bf16 parity check holds.
- plain loop: FedAvg as the papers' public code writes it (benchmarks/plain_loop.py), one client at
  a time: a copy of the global model, a fresh optimiser of the key's kind, --batches steps at the
  paper batch, the state_dicts averaged; fp32 with torch's default TF32 settings; the clients of one
  run per round.
- ceiling fp32+TF32 and ceiling bf16: one model of the same architecture at a large batch
  (`ceiling_batch`), channels_last, TF32 matmuls and convolutions on (fp32) or bf16 autocast, the
  key's optimiser (fused on CUDA); the card's practical ceiling for that model.
- vmap+graph fp32 and bf16: one step of K = R x clients clients at the paper batch as
  torch.func.vmap of torch.func.grad over the stacked parameters (BatchNorm in training mode without
  running statistics: torch.func.replace_all_batch_norm_modules_), an in-place SGD update
  (torch._foreach_add_), the whole step captured as one CUDA graph on CUDA (eager on the CPU);
  parameters and inputs fp32 or bf16, the loss in fp32.

Every cell but the engine is timed with CUDA events (median of repeats after warm-up steps; on the
CPU, time.perf_counter). A cell that fails records its error line and the next one runs; cells past
--max-seconds are listed as not run. The json and markdown (naming the device and torch version)
are rewritten after each model, so a run stopped by a timeout keeps the models it finished.

--update-gpu-json PATH (CUDA only): each measured model key's train_samples_per_s in PATH (the
gpu.json that `fedpaper plan` reads: fedpaper/runs/model_costs.py gpu_rates) becomes the engine's
rate measured here, with what timed it; the other keys and every evaluation rate are kept. A card
other than PATH's is refused (a file holds one card's rates).

Not in the numbers: data loading, the methods' own extra work, evaluation beyond one test batch.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime as _dt
import json
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_throughput import time_rounds  # noqa: E402 - the engine's round timing, as the throughput table

PAPER_MODELS = REPO / "benchmarks" / "results" / "paper_models.json"
MAX_BATCH = 16  # executors.run_specs' runs per engine call at most


def _fedpals_seeds():
    from fedpaper.papers.fedpals import profiles

    return profiles.RUNS["paper"]["seeds"]


def _settings_seeds(paper):
    def seeds():
        import importlib

        return importlib.import_module(f"fedpaper.papers.{paper}.profiles").settings("paper")["seeds"]
    return seeds


#: name, model, input shape, the paper whose profile gives its runs per engine call (its seeds per
#: setting), the large batch of the single-model ceiling (large enough to keep the card busy).
MODELS = [
    {"name": "LeNet (FedPALS)", "model": "lenet", "shape": [3, 32, 32], "seeds": _fedpals_seeds,
     "paper": "fedpals", "ceiling_batch": 8192},
    {"name": "privlabels CNN", "model": "privlabels_cnn", "shape": [3, 32, 32], "seeds": _settings_seeds("privlabels"),
     "paper": "privlabels", "ceiling_batch": 4096},
    {"name": "ResNet-18 (FedMT)", "model": "resnet18_fedmt", "shape": [3, 32, 32], "seeds": _settings_seeds("fedmt"),
     "paper": "fedmt", "ceiling_batch": 1024},
    {"name": "ResNet-18 (FedNCA-ML)", "model": "fednca_net", "shape": [3, 224, 224],
     "seeds": _settings_seeds("fednca"), "paper": "fednca", "ceiling_batch": 256},
]
#: --tiny: every size cut so the CPU runs all cells in seconds (plumbing, not results).
TINY = {"runs": 1, "clients": 2, "batches": 1, "batch": 4, "side": 32, "ceiling_batch": 8, "per_cell": 0.05,
        "warmup": 1}
CELLS = ("engine", "engine_captured", "plain_loop", "ceiling_fp32_tf32", "ceiling_bf16", "vmap_graph_fp32",
         "vmap_graph_bf16", "engine_captured_bf16")
#: cells that run on CUDA only, and the note the row keeps where they are skipped
_CAPTURED_NOTE = "CUDA only: the captured backend replays CUDA graphs (off CUDA it trains as vmap)"
CUDA_ONLY = {"engine_captured": _CAPTURED_NOTE, "engine_captured_bf16": _CAPTURED_NOTE}


def _refuse(msg: str):
    print(f"gpu_ceiling: {msg}", file=sys.stderr)
    raise SystemExit(2)


def _one_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0][:200] if lines else ''}"


# ----------------------------------------------------------------------------- the models
def paper_key(model: str, shape: list, keys_file: Path = PAPER_MODELS):
    """The paper profile's costliest model key of `model` at input `shape` (the --collect file lists
    keys by training samples, the costliest first)."""
    from fedpaper.runs.model_costs import ModelKey

    for e in json.loads(Path(keys_file).read_text(encoding="utf-8"))["keys"]:
        k = e["key"]
        if k["model"] == model and list(k["input_shape"]) == list(shape):
            return ModelKey(**{**k, "input_shape": tuple(k["input_shape"])})
    raise LookupError(f"no key of {model} {shape} in {keys_file} (run gpu_throughput.py --collect)")


def tiny_key(key):
    """`key` cut for --tiny: batch, clients and image side at most TINY's."""
    side = min(key.input_shape[-1], TINY["side"])
    kw = json.loads(key.model_kwargs)
    if "image_size" in kw:
        kw["image_size"] = side
    return dataclasses.replace(key, model_kwargs=json.dumps(kw, sort_keys=True, separators=(",", ":")),
                               input_shape=(*key.input_shape[:-2], side, side),
                               batch_size=min(key.batch_size, TINY["batch"]), clients=min(key.clients, TINY["clients"]))


def _loss_fn(key):
    import torch.nn.functional as F

    from fedpaper.runs.model_costs import _logits

    if key.multilabel:
        return lambda out, y: F.binary_cross_entropy_with_logits(_logits(out).float(), y)
    return lambda out, y: F.cross_entropy(_logits(out).float(), y)


def _data(key, n_lead: tuple, device, dtype=None):
    """Random inputs of shape n_lead + input shape, labels of the key's kind."""
    import torch

    from fedpaper.runs.model_costs import timing_model_kwargs

    g = torch.Generator().manual_seed(0)
    k = int(timing_model_kwargs(key).get("num_classes", 10))
    x = torch.randn(*n_lead, *key.input_shape, generator=g)
    y = (torch.rand(*n_lead, k, generator=g) < 0.2).float() if key.multilabel else torch.randint(0, k, n_lead,
                                                                                                  generator=g)
    return x.to(device=device, dtype=dtype or torch.float32), y.to(device)


def _optimizer(params, key, device, fused=False):
    import torch

    kw = {"fused": True} if fused and device.type == "cuda" else {}
    if key.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=key.momentum, **kw)
    return {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[key.optimizer](params, lr=1e-6, **kw)


# ----------------------------------------------------------------------------- timing
def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step, device, seconds: float, warmup: int = 3, min_reps: int = 3, max_reps: int = 20) -> list:
    """Seconds per call of `step` after `warmup` calls: repeats of n calls (n sized so a repeat takes
    about a tenth of `seconds`), timed with CUDA events on CUDA, perf_counter on the CPU, until
    `seconds` have passed (at least `min_reps` repeats)."""
    import torch

    for _ in range(warmup):
        step()
    _sync(device)
    t = time.perf_counter()
    step()
    _sync(device)
    one = max(time.perf_counter() - t, 1e-6)
    n = max(1, int(0.1 * seconds / one))
    reps: list = []
    start = time.perf_counter()
    while len(reps) < max_reps and (len(reps) < min_reps or time.perf_counter() - start < seconds):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(n):
                step()
            b.record()
            b.synchronize()
            reps.append(a.elapsed_time(b) / 1e3 / n)
        else:
            t = time.perf_counter()
            for _ in range(n):
                step()
            reps.append((time.perf_counter() - t) / n)
    return reps


# ----------------------------------------------------------------------------- the cells
def engine_cell(key, runs: int, batches: int, device, seconds: float, max_rounds: int = 6,
                backend: str | None = None, precision: str | None = None) -> dict:
    """The engine training `runs` runs of key.clients clients in one call (see the module docstring);
    backend, precision: the TrainConfig's (None: the key's)."""
    from fedpaper.algorithms.methods import Method
    from fedpaper.driver import FederatedTrainer
    from fedpaper.runs.model_costs import timing_federation

    pools, fed, cfg, n = timing_federation(key, key.clients, batches, rounds=1 + max_rounds, device=device)
    feds = [dataclasses.replace(fed) for _ in range(runs)]
    if backend is not None:
        cfg = dataclasses.replace(cfg, backend=backend)
    if precision is not None:
        cfg = dataclasses.replace(cfg, precision=precision)
    trainer, rounds, warmup = time_rounds(
        lambda: FederatedTrainer(Method("FedAvg"), cfg, pools, feds, progress=False), device, seconds)
    med = statistics.median(rounds)
    extra = {}
    if trainer.backend == "captured":  # how many shape signatures were captured, and where it ran eagerly
        extra = {"graphs": len(trainer.local.graphs), "fallbacks": sorted(set(trainer.local.fallbacks.values()))}
    return {**extra, "samples_per_s": n * runs / med, "backend": trainer.backend, "precision": cfg.precision,
            "runs": runs, "clients": key.clients,
            "batches": batches, "rounds_timed": len(rounds), "warmup_s": round(warmup, 2),
            "timed_with": f"engine (FedAvg, {runs} run(s) x {key.clients} clients x {batches} batch(es) of "
                          f"{key.batch_size} per engine call, median of {len(rounds)} round(s) after 1 warm-up)"}


def plain_loop_cell(key, batches: int, device, seconds: float, warmup: int) -> dict:
    """One FedAvg round of key.clients clients, one at a time, as benchmarks/plain_loop.py writes it."""
    import torch

    from fedpaper.runs.model_costs import _build

    glob = _build(key).to(device).train()
    loss = _loss_fn(key)
    x, y = _data(key, (key.clients, batches, key.batch_size), device)

    def one_round():
        states = []
        for c in range(key.clients):
            net = copy.deepcopy(glob)
            opt = _optimizer([p for p in net.parameters() if p.requires_grad], key, device)
            for b in range(batches):
                opt.zero_grad()
                loss(net(x[c, b]), y[c, b]).backward()
                opt.step()
            states.append(net.state_dict())
        with torch.no_grad():
            avg = {k: (sum(s[k].float() for s in states) / len(states)).to(v.dtype) for k, v in states[0].items()}
        glob.load_state_dict(avg)

    t = time_steps(one_round, device, seconds, warmup=warmup, max_reps=10)
    n = key.clients * batches * key.batch_size
    return {"samples_per_s": n / statistics.median(t), "clients": key.clients, "batches": batches,
            "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32}}


def ceiling_cell(key, batch: int, precision: str, device, seconds: float, warmup: int) -> dict:
    """One model at a large batch, channels_last, TF32 (fp32) or bf16 autocast, fused optimiser."""
    import contextlib

    import torch

    from fedpaper.runs.model_costs import _build

    net = _build(key).to(device).train()
    cl = len(key.input_shape) == 3
    if cl:
        net = net.to(memory_format=torch.channels_last)
    opt = _optimizer([p for p in net.parameters() if p.requires_grad], key, device, fused=True)
    loss = _loss_fn(key)
    x, y = _data(key, (batch,), device)
    if cl:
        x = x.contiguous(memory_format=torch.channels_last)
    ctx = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext

    def step():
        opt.zero_grad(set_to_none=True)
        with ctx():
            out = net(x)
        loss(out, y).backward()
        opt.step()

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        t = time_steps(step, device, seconds, warmup=warmup)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    return {"samples_per_s": batch / statistics.median(t), "batch": batch, "channels_last": cl}


def vmap_graph_cell(key, clients: int, dtype_name: str, device, seconds: float, warmup: int) -> dict:
    """One step of `clients` clients: vmap(grad) over stacked parameters, in-place SGD, one CUDA graph."""
    import torch
    from torch.func import functional_call, grad, replace_all_batch_norm_modules_, vmap

    from fedpaper.runs.model_costs import _build

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    net = _build(key).to(device).train()
    replace_all_batch_norm_modules_(net)  # BatchNorm in training mode, no running statistics
    names = [n for n, p in net.named_parameters() if p.requires_grad]
    params = {n: p.detach().to(dtype).unsqueeze(0).repeat(clients, *[1] * p.dim()).contiguous()
              for n, p in net.named_parameters() if p.requires_grad}
    fixed = {n: p.detach().to(dtype) for n, p in net.named_parameters() if not p.requires_grad}
    buffers = {n: (b.to(dtype) if b.is_floating_point() else b) for n, b in net.named_buffers()}
    loss = _loss_fn(key)
    x, y = _data(key, (clients, key.batch_size), device, dtype)

    def client_loss(p, xb, yb):
        return loss(functional_call(net, ({**p, **fixed}, buffers), (xb,)), yb)

    grads_of = vmap(grad(client_loss), randomness="different")
    plist = [params[n] for n in names]

    def step():
        g = grads_of(params, x, y)
        torch._foreach_add_(plist, [g[n] for n in names], alpha=-1e-3)

    how = "eager"
    run = step
    if device.type == "cuda":
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        run, how = graph.replay, "one CUDA graph"
    t = time_steps(run, device, seconds, warmup=warmup)
    return {"samples_per_s": clients * key.batch_size / statistics.median(t), "clients": clients, "how": how,
            "dtype": dtype_name}


# ----------------------------------------------------------------------------- one invocation
def device_info(device) -> dict:
    import torch

    from fedpaper.runs.model_costs import cpu_name

    info = {"device": device.type, "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(card=torch.cuda.get_device_name(device), memory_gib=round(p.total_memory / 2**30, 1))
    else:
        info.update(card=f"CPU: {cpu_name()}, {torch.get_num_threads()} thread(s)")
    return info


def measure_model(m: dict, device, a, tiny: bool, budget_left) -> dict:
    """Every cell of one model (each cell's error recorded, the next one runs)."""
    import torch

    key = paper_key(m["model"], m["shape"], a.keys_file)
    seeds = int(m["seeds"]())
    runs = min(seeds, MAX_BATCH)
    batches, per_cell, warmup, cbatch = a.batches, a.per_cell, 3, m["ceiling_batch"]
    if tiny:
        key, runs, batches = tiny_key(key), TINY["runs"], TINY["batches"]
        per_cell, warmup, cbatch = TINY["per_cell"], TINY["warmup"], TINY["ceiling_batch"]
    slots = runs * key.clients
    row = {"name": m["name"], "label": key.label(), "signature": key.signature(), "paper": m["paper"],
           "paper_side": m["shape"][-1],
           "paper_seeds": seeds, "runs_per_call": runs, "clients": key.clients, "batch": key.batch_size,
           "cells": {}, "errors": {}, "not_run": [], "skipped": {}}
    todo = {
        "engine": lambda: engine_cell(key, runs, batches, device, per_cell),
        "engine_captured": lambda: engine_cell(key, runs, batches, device, per_cell, backend="captured"),
        "engine_captured_bf16": lambda: engine_cell(key, runs, batches, device, per_cell, backend="captured",
                                                    precision="bf16"),
        "plain_loop": lambda: plain_loop_cell(key, batches, device, per_cell, min(warmup, 1)),
        "ceiling_fp32_tf32": lambda: ceiling_cell(key, cbatch, "fp32", device, per_cell, warmup),
        "ceiling_bf16": lambda: ceiling_cell(key, cbatch, "bf16", device, per_cell, warmup),
        "vmap_graph_fp32": lambda: vmap_graph_cell(key, slots, "fp32", device, per_cell, warmup),
        "vmap_graph_bf16": lambda: vmap_graph_cell(key, slots, "bf16", device, per_cell, warmup),
    }
    for cell in CELLS:
        if cell not in a.cells:
            continue
        if cell in CUDA_ONLY and device.type != "cuda":
            row["skipped"][cell] = CUDA_ONLY[cell]
            print(f"  {cell}: skipped ({CUDA_ONLY[cell]})", flush=True)
            continue
        if budget_left() <= 0:
            row["not_run"].append(cell)
            continue
        t = time.perf_counter()
        try:
            r = todo[cell]()
            r["wall_s"] = round(time.perf_counter() - t, 2)
            row["cells"][cell] = r
            print(f"  {cell}: {r['samples_per_s']:,.0f} samples/s ({r['wall_s']:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - one cell's error line, the next cell runs
            row["errors"][cell] = _one_line(e)
            print(f"  {cell}: ERROR {row['errors'][cell]}", flush=True)
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
    _ratios(row)
    return row


def _rate(row, cell):
    c = row["cells"].get(cell)
    return c["samples_per_s"] if c else None


def _ratios(row: dict) -> None:
    e = _rate(row, "engine")
    for name, cell in (("engine_over_ceiling_bf16", "ceiling_bf16"), ("engine_over_ceiling_fp32", "ceiling_fp32_tf32"),
                       ("engine_over_plain_loop", "plain_loop"), ("engine_over_vmap_graph_bf16", "vmap_graph_bf16")):
        other = _rate(row, cell)
        row[name] = e / other if e and other else None
    c = _rate(row, "engine_captured")
    for name, other in (("captured_over_engine", e), ("captured_over_ceiling_bf16", _rate(row, "ceiling_bf16"))):
        row[name] = c / other if c and other else None


def update_gpu_json(path: Path, out: dict) -> list:
    """The engine rates of `out` into gpu.json at `path` (see the module docstring); returns the
    labels of the keys updated."""
    from fedpaper.ground.files import atomic_write_text

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("card") and data["card"] != out["card"]:
        _refuse(f"{path} holds {data['card']} rates, this run measured {out['card']}: pass another --update-gpu-json")
    models = data.setdefault("models", {})
    done = []
    for row in out["models"]:
        e = row["cells"].get("engine")
        if not e:
            continue
        entry = models.get(row["signature"])
        if entry is None or "eval_samples_per_s" not in entry:
            print(f"gpu_ceiling: {row['label']} has no evaluation rate in {path} (gpu_throughput.py --measure "
                  "gives one): not added", file=sys.stderr)
            continue
        entry.update(train_samples_per_s=e["samples_per_s"], timed_with=f"gpu_ceiling.py: {e['timed_with']}",
                     train_measured=out["date"], label=row["label"])
        done.append(row["label"])
    data.setdefault("updated", []).append({"by": "benchmarks/gpu_ceiling.py", "date": out["date"], "card": out["card"],
                                           "torch": out["torch"], "keys": done})
    data["card"] = out["card"]
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    return done


def _n(x):
    return "-" if x is None else f"{x:,.0f}"


def _x(x):
    return "-" if x is None else (f"{x:.2f}x" if x < 10 else f"{x:.0f}x")


#: What the engine should reach per model: a fraction of the bf16 ceiling, and a multiple of the plain
#: loop for the models at 32 px.
TARGET_OF_CEILING, TARGET_OVER_PLAIN, PLAIN_TARGET_SIDE = 0.5, 10.0, 32


def targets_line(out: dict) -> str:
    """Which models' engine reaches TARGET_OF_CEILING of the bf16 ceiling and (32-px models)
    TARGET_OVER_PLAIN times the plain loop, computed from the measured ratios."""
    met, missed = [], []
    for r in out["models"]:
        checks = [("bf16 ceiling", r.get("engine_over_ceiling_bf16"), TARGET_OF_CEILING)]
        if r.get("paper_side") == PLAIN_TARGET_SIDE:
            checks.append(("plain loop", r.get("engine_over_plain_loop"), TARGET_OVER_PLAIN))
        for what, got, want in checks:
            text = f"{r['name']} {_x(got)} of the {what} (target {_x(want)})"
            (met if got is not None and got >= want else missed).append(text)
    return (f"Targets (engine >= {TARGET_OF_CEILING:g}x the bf16 ceiling; >= {TARGET_OVER_PLAIN:g}x the plain loop at "
            f"{PLAIN_TARGET_SIDE} px): met: {'; '.join(met) or 'none'}. Not met or not measured: "
            f"{'; '.join(missed) or 'none'}.")


def markdown(out: dict) -> str:
    L = [f"# The engine against the card's ceiling, per paper-profile model ({out['card']})", "",
         f"Measured {out['date']} by `benchmarks/gpu_ceiling.py {out['argv']}` in one invocation: {out['card']}"
         + (f", {out['memory_gib']} GiB" if out.get("memory_gib") else "")
         + f"; torch {out['torch']}, CUDA {out['cuda']}, Python {out['python']}; {out['total_s']} s."
         + (" **--tiny: CPU sizes cut to seconds, a check of the plumbing, not a result.**" if out["tiny"] else ""), "",
         "Training samples/s on random data (the module docstring says how each column is timed). engine: "
         "FedAvg through fedpaper.driver.FederatedTrainer, the paper profile's runs per engine call; plain loop: "
         "one client at a time at the paper batch, fp32; ceiling: one model at a large batch, channels_last, "
         "fp32+TF32 or bf16 autocast; vmap+graph: torch.func.vmap of grad over runs x clients clients at the "
         "paper batch, in-place SGD, one CUDA graph on CUDA (eager on the CPU); engine captured: the engine "
         "with backend='captured' (its local step replayed from CUDA graphs; CUDA only).", "",
         "| model | key | runs x clients per call | backend | engine | engine captured | engine captured bf16 | "
         "plain loop | ceiling fp32+TF32 (batch) | ceiling bf16 | vmap+graph fp32 | vmap+graph bf16 | "
         "engine / ceiling bf16 | engine / plain loop | captured / engine |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in out["models"]:
        c = r["cells"]
        cb = c.get("ceiling_fp32_tf32", {}).get("batch") or c.get("ceiling_bf16", {}).get("batch")
        L.append(f"| {r['name']} | {r['label']} | {r['runs_per_call']} x {r['clients']} | "
                 f"{c.get('engine', {}).get('backend', '-')} | {_n(_rate(r, 'engine'))} | "
                 f"{_n(_rate(r, 'engine_captured'))} | {_n(_rate(r, 'engine_captured_bf16'))} | "
                 f"{_n(_rate(r, 'plain_loop'))} | "
                 f"{_n(_rate(r, 'ceiling_fp32_tf32'))}" + (f" ({cb})" if cb else "") + f" | {_n(_rate(r, 'ceiling_bf16'))} | "
                 f"{_n(_rate(r, 'vmap_graph_fp32'))} | {_n(_rate(r, 'vmap_graph_bf16'))} | "
                 f"{_x(r['engine_over_ceiling_bf16'])} | {_x(r['engine_over_plain_loop'])} | "
                 f"{_x(r.get('captured_over_engine'))} |")
    L += ["", targets_line(out)]
    errs = [f"{r['name']} {cell}: {msg}" for r in out["models"] for cell, msg in r["errors"].items()]
    if errs:
        L += ["", "Errors: " + "; ".join(errs) + "."]
    notes = sorted({f"{cell}: {note}" for r in out["models"] for cell, note in r.get("skipped", {}).items()})
    if notes:
        L += ["", "Skipped on this device: " + "; ".join(notes) + "."]
    fell = [f"{r['name']} {cell}: {'; '.join(c['fallbacks'])}" for r in out["models"]
            for cell in ("engine_captured", "engine_captured_bf16") if (c := r["cells"].get(cell)) and c.get("fallbacks")]
    if fell:
        L += ["", "engine captured ran eagerly where it could not capture: " + " | ".join(fell) + "."]
    skipped = [f"{r['name']} {cell}" for r in out["models"] for cell in r["not_run"]] + out.get("models_not_run", [])
    if skipped:
        L += ["", f"Not run (--max-seconds {out['max_seconds']:g} spent): " + "; ".join(skipped) + "."]
    if out.get("gpu_json_updated"):
        L += ["", f"{out['gpu_json']} updated from the engine column: " + "; ".join(out["gpu_json_updated"]) + "."]
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-md", required=True)
    ap.add_argument("--out-json", required=True)
    ap.add_argument("--tiny", action="store_true", help="tiny sizes (the CPU, seconds): a plumbing check")
    ap.add_argument("--models", default=None, help="model names to measure, comma-separated (default: all): "
                    + ", ".join(m["model"] for m in MODELS))
    ap.add_argument("--cells", default=",".join(CELLS), help="the cells to measure (default: all)")
    ap.add_argument("--batches", type=int, default=4, help="batches per client per round (engine, plain loop)")
    ap.add_argument("--per-cell", type=float, default=2.0, help="timed seconds per cell (default 2)")
    ap.add_argument("--max-seconds", type=float, default=150.0, help="the whole invocation's budget (default 150)")
    ap.add_argument("--keys-file", type=Path, default=PAPER_MODELS)
    ap.add_argument("--update-gpu-json", type=Path, default=None, metavar="PATH",
                    help="write the engine's rates into this gpu.json (CUDA only)")
    a = ap.parse_args(argv)
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if a.update_gpu_json is not None and device.type != "cuda":
        _refuse("--update-gpu-json writes GPU rates and this device is the CPU (torch.cuda.is_available() is "
                "False): run on CUDA, or leave --update-gpu-json out")
    if a.update_gpu_json is not None:
        if not Path(a.update_gpu_json).is_file():
            _refuse(f"--update-gpu-json {a.update_gpu_json} does not exist: pass a gpu.json to update "
                    "(benchmarks/gpu_throughput.py --measure writes one)")
        card = json.loads(Path(a.update_gpu_json).read_text(encoding="utf-8")).get("card")
        if card and card != torch.cuda.get_device_name(device):
            _refuse(f"{a.update_gpu_json} holds {card} rates and this card is {torch.cuda.get_device_name(device)}: "
                    "pass another --update-gpu-json")
    a.cells = [c for c in a.cells.split(",") if c]
    bad = [c for c in a.cells if c not in CELLS]
    names = [m["model"] for m in MODELS]
    wanted = names if a.models is None else [s for s in a.models.split(",") if s]
    bad += [s for s in wanted if s not in names]
    if bad:
        _refuse(f"unknown cell or model {', '.join(bad)}; cells: {', '.join(CELLS)}; models: {', '.join(names)}")
    t0 = time.perf_counter()
    out = {**device_info(device), "argv": " ".join(sys.argv[1:] if argv is None else argv), "tiny": a.tiny,
           "max_seconds": a.max_seconds, "per_cell": a.per_cell, "batches": a.batches, "models": [],
           "models_not_run": []}

    def save():
        from fedpaper.ground.files import atomic_write_text

        out["total_s"] = round(time.perf_counter() - t0, 1)
        for p in (a.out_json, a.out_md):
            Path(p).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(a.out_json, json.dumps(out, indent=1) + "\n")
        atomic_write_text(a.out_md, markdown(out))

    def budget_left():
        return a.max_seconds - (time.perf_counter() - t0)

    for m in MODELS:
        if m["model"] not in wanted:
            continue
        if budget_left() <= 0:
            out["models_not_run"].append(m["name"])
            continue
        print(f"{m['name']} ({budget_left():.0f} s left)", flush=True)
        try:
            out["models"].append(measure_model(m, device, a, a.tiny, budget_left))
        except Exception as e:  # noqa: BLE001 - e.g. a key absent from the keys file: the next model runs
            out["models"].append({"name": m["name"], "label": m["model"], "signature": None, "cells": {},
                                  "errors": {"setup": _one_line(e)}, "not_run": [], "runs_per_call": "-",
                                  "clients": "-", **{k: None for k in ("engine_over_ceiling_bf16",
                                                                       "engine_over_plain_loop")}})
            print(f"  ERROR {_one_line(e)}", flush=True)
        save()
    if a.update_gpu_json is not None:
        out["gpu_json"] = str(a.update_gpu_json)
        out["gpu_json_updated"] = update_gpu_json(a.update_gpu_json, out)
        print(f"{a.update_gpu_json}: {len(out['gpu_json_updated'])} key(s) updated", flush=True)
    save()
    print(f"{out['card']}, torch {out['torch']}: {len(out['models'])} model(s) in {out['total_s']} s -> "
          f"{a.out_md}, {a.out_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
