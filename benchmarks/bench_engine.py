"""Samples per second of FedAvg rounds: fedpaper's engines against a plain PyTorch loop and Flower.

    nice -n 10 .venv/bin/python benchmarks/bench_engine.py --invocations 3 --threads 1

Workload (issue 14, "Speed first"): 10 clients x --samples real Fashion-MNIST training samples
(privlabels' private_label_partition with L = 10), FedAvg, Adam lr 1e-3 (privlabels Table 2),
batch 64, one local epoch per round, for two networks:
- privlabels_cnn: the privlabels CNN as fedpaper defines it (widths 32-32-64-64, hidden 512,
  dropout 0.5, 28x28x1 input), compute-bound;
- lenet: the LeNet-size CNN (conv 1->6->12, FC 192-120-84-10).

Fairness (issue 14): every contender gets the same data and the same allocator settings.
- Data (--data): "prestd" (default) standardises the pool once, before timing, and every contender
  draws its minibatches from those float tensors (plain loop and Flower: shuffled slices,
  plain_loop.client_batches; fedpaper: its own row gathering); "per-sample" gives the plain loop
  and Flower the papers' per-sample-normalising DataLoader instead (the earlier, unfair set-up).
- Allocator (--malloc): "tuned" (default) sets glibc's MALLOC_TRIM_THRESHOLD_/MALLOC_MMAP_THRESHOLD_
  in the environment of every contender process (Ray's actors inherit it), the same thresholds the
  engine's cpu._tune_cpu_allocator sets (which is switched off, FEDPAPER_MALLOC_TUNING=0, so that it
  adds nothing); "default": no contender changes malloc.
- Threads (--threads): every contender process uses the same torch thread count; Flower gets
  Ray num_cpus = --threads and client_resources num_cpus = 1 (--threads actors at once, one
  thread each).

Contenders (each in its own fresh Python process per invocation; fp32 and bf16 rows side by side):
plain / plain-bf16 (benchmarks/plain_loop.py: deepcopy of the global model per client, fresh
torch.optim.Adam, cross-entropy, weighted state_dict averaging; bf16 = torch.autocast around forward
and loss), flower (Flower's Ray simulation, benchmarks/flower_sim.py, training with the plain loop's
local_train, fp32 as its users run it), batched-grouped / batched-grouped-bf16 (fedpaper.engine,
backend grouped, TrainConfig.precision), and optional references: sequential, batched-vmap,
batched-loop, batched-auto, plain_cl (channels_last plain loop).

Every contender runs `--warmup` rounds and then `--rounds` timed rounds (a round = local training
of all clients + aggregation; no evaluation) and reports its median round. The whole contender list
runs `--invocations` times (invocation after invocation, contenders in the same order); a
contender's figure is the median over invocations with the min-max spread, and a ratio (e.g.
batched / Flower) is computed within each invocation and reported as the median with its spread.
On a shared machine other processes take CPU: the table also gives samples per CPU-second of the
contender's own process tree, which load inflates less than wall time.

Failures: a contender process that fails (exit status, no result, a Flower round with a failed
client, or --timeout) runs again in a fresh process, at most --retries times (default 1); the json
keeps every failed attempt's error and the last lines of its stderr ("failed_attempts",
"stderr_tail"), and the md names each retried or failed invocation with its reason.

ISA: the md names the CPU and its instruction-set flags, and the ISA every contender process was
allowed: `--emulate-avx2` sets ONEDNN_MAX_CPU_ISA=AVX2 and ATEN_CPU_CAPABILITY=avx2 for every contender
process (Ray's actors inherit them), i.e. the AVX2 path on an AVX-512 CPU, and the md says
"AVX2 emulated on <cpu>"; the same variables set by hand are passed on and named as well.

Writes benchmarks/results/engine.md and engine.json (--out PATH.md: PATH.md and PATH.json instead).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from machine import AVX2_EMULATION_ENV, cpu_line, isa_line, loadavg, machine  # noqa: E402  (benchmarks/machine.py)

MODELS = {
    "privlabels_cnn": dict(in_channels=1, image_size=28),
    "lenet": dict(in_channels=1, image_size=28),
}
MODEL_TEXT = {
    "privlabels_cnn": "privlabels CNN as defined in fedpaper (conv 32-32-pool-64-64-pool, FC 3136-512, dropout 0.5, 10 classes)",
    "lenet": "LeNet-size CNN (conv 1-6 5x5, pool, conv 6-12 5x5, pool, FC 192-120-84-10)",
}
FOREIGN_MAX = 0.25  # a timed round counts as undisturbed when other processes used < this many cores
CONTENDERS = ["plain", "plain-bf16", "flower", "batched-grouped", "batched-grouped-bf16"]
OPTIONAL = ["plain_cl", "plain_cl-bf16", "sequential", "batched-auto", "batched-auto-bf16", "batched-vmap",
            "batched-loop", "batched-loop-bf16"]
LABEL = {
    "plain": "plain PyTorch loop, fp32",
    "plain-bf16": "plain PyTorch loop, bf16 autocast",
    "plain_cl": "plain loop + channels_last (reference)",
    "plain_cl-bf16": "plain loop + channels_last, bf16 autocast (reference)",
    "batched-loop-bf16": "fedpaper batched (loop), bf16",
    "sequential": "fedpaper sequential",
    "batched-auto": "fedpaper batched, backend auto",
    "batched-auto-bf16": "fedpaper batched, backend auto, bf16",
    "batched-vmap": "fedpaper batched, backend vmap",
    "batched-loop": "fedpaper batched, backend loop",
    "batched-grouped": "fedpaper batched (grouped), fp32",
    "batched-grouped-bf16": "fedpaper batched (grouped), bf16",
    "flower": "Flower simulation (Ray), fp32",
}
MALLOC_ENV = {"MALLOC_TRIM_THRESHOLD_": str(1 << 30), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}  # as cpu.py
# Every contender process: no Flower telemetry, no Ray usage stats (no network), a patient Ray API-server wait.
QUIET_ENV = {"FLWR_TELEMETRY_ENABLED": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_DASHBOARD_STARTUP_TIMEOUT_S": "180"}
TAIL_LINES = 40  # lines of a failed contender's stderr kept in the json
# Lines in a failed contender's stderr that name a cause its exception does not (Ray's raylet abort).
CAUSE_PATTERNS = [re.compile(r"Timed out waiting for file \S+"), re.compile(r"Check failed: .{0,160}")]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Expired)(: |$)")


def _precision(contender: str) -> str:
    return "bf16" if contender.endswith("-bf16") else "fp32"


# ----------------------------------------------------------------------------- workers
def _setup(args):
    import numpy as np
    import torch

    from fedpaper.blocks.data import load_dataset
    from flower_sim import client_rows

    torch.set_num_threads(args.threads)
    ds = load_dataset("fashion-mnist")
    rows = client_rows(ds, args.clients, args.samples, args.seed)
    assert all(len(r) == args.samples for r in rows)
    return ds, rows, np, torch


def _rounds(fn, args) -> dict:
    """Warm-up calls, then timed calls until `rounds` of them ran on an otherwise idle machine
    (other processes below FOREIGN_MAX cores), at most rounds + extra timed calls."""
    import cpu_meter

    warm = []
    for _ in range(args.warmup):
        a = cpu_meter.snapshot()
        fn()
        warm.append(cpu_meter.snapshot()[0] - a[0])
    wall, own, foreign = [], [], []
    while len(wall) < args.rounds + args.extra:
        a = cpu_meter.snapshot()
        fn()
        b = cpu_meter.snapshot()
        wall.append(b[0] - a[0])
        own.append(cpu_meter.own_cores(a, b))
        foreign.append(cpu_meter.foreign_cores(a, b))
        if len(wall) >= args.rounds and sum(f < FOREIGN_MAX for f in foreign) >= args.rounds:
            break
    return {"warmup_s": warm, "round_s": wall, "own_cores": own, "foreign_cores": foreign}


def worker(args) -> dict:
    c, n_total = args.worker, args.warmup + args.rounds
    info: dict = {"contender": c, "model": args.model, "precision": _precision(c)}
    t_start = time.perf_counter()
    if c == "flower":
        import flower_sim

        r = flower_sim.run(args.model, args.clients, args.samples, args.batch, args.lr, args.seed,
                           n_total + args.extra, 1, data=args.data, ray_cpus=args.threads)
        w = args.warmup
        info.update(startup_s=r["startup_s"], warmup_s=r["round_s"][:w], round_s=r["round_s"][w:],
                    own_cores=r["own_cores"][w:], foreign_cores=r["foreign_cores"][w:], flwr=r["flwr"],
                    failures=r["failures"], results=r["results"], total_s=r["total_s"], ray_init_s=r["ray_init_s"])
        if any(r["failures"] or []) or any(n != args.clients for n in r["results"] or []) \
                or len(r["round_s"]) != n_total + args.extra:
            raise RuntimeError(f"Flower rounds incomplete: {len(r['round_s'])} of {n_total + args.extra} rounds, "
                               f"client results per round {r['results']}, failures {r['failures']}")
        import ray
        import torch

        info["ray"] = ray.__version__
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        return info

    ds, rows, np, torch = _setup(args)
    kw = MODELS[args.model]
    if c.startswith("plain"):
        import plain_loop
        from fedpaper.blocks.models import build_model

        torch.manual_seed(args.seed)
        g = build_model(args.model, **kw)
        if args.data == "prestd":
            x_std = ds.standardize(ds.x_train)
            loaders = [plain_loop.client_batches(x_std, ds, r, args.batch, args.seed + i) for i, r in enumerate(rows)]
        else:
            loaders = [plain_loop.client_loader(ds, r, args.batch, args.seed + i) for i, r in enumerate(rows)]
        if c.startswith("plain_cl"):
            g = g.to(memory_format=torch.channels_last)
            loaders = [_ChannelsLast(ld) for ld in loaders]
        info["startup_s"] = time.perf_counter() - t_start
        times = _rounds(lambda: plain_loop.fedavg_round(g, loaders, args.lr, 1, _precision(c)), args)
    else:
        from fedpaper.algorithms import get_method
        from fedpaper.driver import FederatedTrainer
        from fedpaper.engine import Federation, Pools, TrainConfig

        pools = Pools.from_dataset(ds)
        fed = Federation(rows, np.arange(10), seed=args.seed)  # 10 test samples: evaluation ~free
        backend = c.split("-")[1] if c.startswith("batched") else "loop"
        cfg = TrainConfig(model=args.model, model_kwargs=kw, optimizer="adam", lr=args.lr, batch_size=args.batch,
                          local_epochs=1, rounds=1, backend=backend, precision=_precision(c))
        method = get_method("FedAvg")
        if c == "sequential":
            from fedpaper.driver.sequential import train_sequential

            info["startup_s"] = time.perf_counter() - t_start
            times = _rounds(lambda: train_sequential(method, cfg, pools, fed), args)
        else:
            t0 = time.perf_counter()
            tr = FederatedTrainer(method, cfg, pools, [fed], progress=False)
            info["trainer_init_s"] = time.perf_counter() - t0
            info["startup_s"] = time.perf_counter() - t_start
            info["backend"] = tr.backend
            times = _rounds(tr.run, args)
    info.update(times, threads=torch.get_num_threads(), cpu_capability=torch.backends.cpu.get_cpu_capability())
    return info


class _ChannelsLast:
    """Wrap a DataLoader so that its image batches come out in channels_last layout."""

    def __init__(self, loader):
        self.loader, self.dataset = loader, loader.dataset

    def __iter__(self):
        import torch

        for x, y in self.loader:
            yield x.contiguous(memory_format=torch.channels_last), y

    def __len__(self):
        return len(self.loader)


# ----------------------------------------------------------------------------- orchestration
def run_contender(args, model: str, contender: str) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", contender, "--model", model,
           "--rounds", str(args.rounds), "--warmup", str(args.warmup), "--extra", str(args.extra), "--clients", str(args.clients),
           "--samples", str(args.samples), "--batch", str(args.batch), "--lr", str(args.lr),
           "--seed", str(args.seed), "--threads", str(args.threads), "--data", args.data]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BENCH), str(REPO), os.environ.get("PYTHONPATH", "")]),
               RAY_DEDUP_LOGS="0", PYTHONUNBUFFERED="1", FEDPAPER_MALLOC_TUNING="0",
               OMP_NUM_THREADS=str(args.threads), **QUIET_ENV)
    for k in MALLOC_ENV:
        env.pop(k, None)
    if args.malloc == "tuned":  # every contender process (and Ray's actors, which inherit it)
        env.update(MALLOC_ENV)
    env.update(isa_env(args))  # the same (already there unless --emulate-avx2), named in the md
    load = loadavg()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        status, stdout, stderr = proc.returncode and f"exit {proc.returncode}", proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        status, stdout, stderr = f"killed after the {args.timeout} s timeout", _text(exc.stdout), _text(exc.stderr)
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    if status or not lines:
        return {"contender": contender, "model": model,
                "error": f"{status or 'exit 0 without a RESULT line'}: {failure_reason(stderr, stdout)}",
                "stderr_tail": tail_lines(stderr), "stdout_tail": tail_lines(stdout, 10), "load_before": load,
                "process_s": time.perf_counter() - t0}
    res = json.loads(lines[-1][len("RESULT "):])
    res["load_before"] = load
    res["process_s"] = time.perf_counter() - t0
    return res


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def isa_env(args) -> dict:
    """The ISA-capping variables every contender process gets: AVX2_EMULATION_ENV with --emulate-avx2,
    else those of them already set in this environment (passed on unchanged)."""
    if getattr(args, "emulate_avx2", False):
        return dict(AVX2_EMULATION_ENV)
    return {k: os.environ[k] for k in AVX2_EMULATION_ENV if k in os.environ}


def tail_lines(text: str, n: int = TAIL_LINES) -> list:
    """The last `n` non-empty lines of `text`, colour codes removed."""
    lines = [_ANSI.sub("", ln).rstrip() for ln in (text or "").splitlines()]
    return [ln for ln in lines if ln.strip()][-n:]


def failure_reason(stderr: str, stdout: str = "") -> str:
    """Why a contender process failed, in one line: the last exception line of its stderr (else its last
    non-empty line, else stdout's), with a known underlying cause found in stderr in brackets (the
    raylet's "Timed out waiting for file ..." when Ray's start-up failed)."""
    lines = tail_lines(stderr, 10**9) or tail_lines(stdout, 10**9)
    exc = [ln for ln in lines if _EXC_LINE.match(ln)]
    reason = (exc[-1] if exc else lines[-1] if lines else "(no output)").strip()
    text = _ANSI.sub("", stderr or "")
    for pat in CAUSE_PATTERNS:
        m = pat.search(text)
        if m and m.group(0) not in reason:
            reason += f" [{m.group(0).strip()}]"
            break
    return reason


def run_with_retries(run, retries: int) -> dict:
    """`run()` (one contender process) until it returns a result without "error", at most 1 + `retries`
    times. The result gets "attempts" (how many processes ran), "retried" (attempts > 1) and
    "failed_attempts" (each earlier failed attempt's error, stderr tail, load and seconds); when the
    last attempt failed as well, the result is that attempt's error."""
    failed = []
    for attempt in range(1 + max(0, retries)):
        r = run()
        if "error" not in r or attempt == retries:
            break
        failed.append({k: r[k] for k in ("error", "stderr_tail", "load_before", "process_s") if k in r})
    r.update(attempts=attempt + 1, retried=attempt > 0, failed_attempts=failed)
    return r


def _cell(text: str, n: int = 220) -> str:
    """Text for a markdown table cell: one line, no pipes, at most n characters."""
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= n else text[:n - 3] + "..."


def error_reason(err: dict) -> str:
    """A failed attempt's error in one line. Runs before 2026-11-26 stored the process's whole output
    (stdout, then stderr) in "error", without "stderr_tail": its reason is worked out from that text."""
    if "stderr_tail" in err or "\n" not in err.get("error", ""):
        return err.get("error", "")
    head, _, text = err["error"].partition(": ")
    return f"{head}: {failure_reason(text)}"


def attempt_notes(rows: list) -> list:
    """The notes-column sentences on retries and failures of one contender's invocations."""
    out = []
    for r in sorted(rows, key=lambda r: r.get("invocation", 0)):
        inv = r.get("invocation", 0) + 1
        if "error" in r:
            n = r.get("attempts", 1)
            out.append(f"invocation {inv} FAILED ({n} attempt{'s' if n > 1 else ''}): {_cell(error_reason(r))}")
        elif r.get("retried"):
            first = error_reason((r.get("failed_attempts") or [{}])[0])
            out.append(f"invocation {inv} retried in a fresh process after a failed attempt ({_cell(first)})")
    return out


def completion_line(results: list) -> str:
    """One line: how many contender runs completed, how many after a retry, which failed."""
    ok = [r for r in results if "error" not in r]
    retried = [r for r in ok if r.get("retried")]
    failed = [r for r in results if "error" in r]
    line = (f"**Completion: {len(ok)} of {len(results)} contender runs completed**"
            + (f", {len(retried)} of them on a retry in a fresh process "
               f"({', '.join(sorted({r['model'] + ' ' + r['contender'] for r in retried}))})" if retried else
               ", none needed a retry"))
    if failed:
        line += (f"; **{len(failed)} failed** "
                 f"({', '.join(sorted({r['model'] + ' ' + r['contender'] for r in failed}))})")
    return line + "."


def summarise(res: dict, samples_per_round: int, rounds: int) -> dict:
    """Median over the timed rounds that ran with other processes below FOREIGN_MAX cores (all
    timed rounds, flagged as disturbed, when fewer than `rounds` of them did)."""
    if "error" in res or not res.get("round_s"):
        return res
    clean = [i for i, f in enumerate(res["foreign_cores"]) if f < FOREIGN_MAX]
    res["disturbed"] = len(clean) < rounds
    used = list(range(len(res["round_s"]))) if res["disturbed"] else clean
    res["rounds_used"] = used
    med = statistics.median(res["round_s"][i] for i in used)
    res["median_s"] = med
    res["samples_per_s"] = samples_per_round / med
    res["samples_per_cpu_s"] = statistics.median(samples_per_round / (res["round_s"][i] * res["own_cores"][i])
                                                 for i in used if res["own_cores"][i] > 0) \
        if any(res["own_cores"][i] > 0 for i in used) else None
    res["own_cores_median"] = statistics.median(res["own_cores"][i] for i in used)
    res["foreign_cores_median"] = statistics.median(res["foreign_cores"][i] for i in used)
    return res


def fmt(x, nd=2):
    return "–" if x is None else f"{x:.{nd}f}"


def _spread(vals, nd=0, suffix=""):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "–"
    f = (lambda v: f"{v:,.{nd}f}{suffix}")  # noqa: E731
    return f"{f(statistics.median(vals))} ({f(min(vals))}-{f(max(vals))})"


#: issue 28's targets per model: (contender, baseline, ratio, why); judged on the medians of the wall and
#: the CPU-second ratios within invocations (both must reach it)
TARGETS = {
    "privlabels_cnn": [("batched-grouped", "flower", 1.2, "fp32, as Flower's users run it"),
                       ("batched-grouped", "plain", 1.0, "fp32: never slower than the plain loop"),
                       ("batched-auto", "flower", 1.2, "fp32, the backend the engine picks (auto)"),
                       ("batched-auto", "plain", 1.0, "fp32, auto: never slower than the plain loop"),
                       ("batched-grouped-bf16", "flower", 3.0, "bf16 where the CPU has it natively"),
                       ("batched-auto-bf16", "flower", 3.0, "bf16 where the CPU has it natively, the backend auto picks"),
                       ("batched-auto-bf16", "plain_cl-bf16", 1.0,
                        "item 2: as fast as one model with bf16 + channels_last")],
    "lenet": [("batched-grouped", "flower", 3.0, "fp32"),
              ("batched-grouped", "plain", 1.0, "fp32: never slower than the plain loop")],
}
#: a run whose contenders saw at most this many cores of other processes' work (median over its timed
#: rounds) ran on a quiet machine
QUIET_CORES = 0.1


def bf16_native(m: dict, isa: dict | None, capabilities=()) -> bool:
    """Native bf16 in the contenders' processes, by the engine's own rule (fedpaper.engine.cpu
    .cpu_bf16_native) on the recorded facts: the CPU's flags (avx512_bf16 or AMX), the torch CPU
    capability the contender processes reported (else the one an ISA cap sets, else AVX512: a CPU with
    AVX-512 BF16 has AVX-512), and the oneDNN cap --emulate-avx2 sets."""
    from fedpaper.engine.cpu import cpu_bf16_native

    isa = isa or {}
    hw = bool(set(m.get("cpu_flags") or ()) & {"avx512_bf16", "amx_bf16", "amx_tile"})
    cap = next(iter(capabilities), None) or isa.get("ATEN_CPU_CAPABILITY", "AVX512").upper()
    return cpu_bf16_native(hw, cap, isa.get("ONEDNN_MAX_CPU_ISA"))[0]


def load_line(results: list) -> str:
    """Quiet or shared, from the `other processes` column (cores other processes kept busy while the
    contenders' timed rounds ran, median per contender run)."""
    other = [r["foreign_cores_median"] for r in results if r.get("foreign_cores_median") is not None]
    common = ("Wall-clock rates are noisy under load; the CPU-second rate (samples per CPU-second of the "
              "contender's own process tree) is less sensitive to it, and ratios are taken within one invocation.")
    if other and max(other) <= QUIET_CORES:
        return (f"**Quiet machine**: other processes kept at most {max(other):.2f} cores busy during any contender's "
                f"timed rounds (the `other processes` column, median per run). {common}")
    return (f"**The machine was shared**: other processes kept up to {max(other, default=float('nan')):.2f} cores "
            f"busy during a contender's timed rounds (the `other processes` column, median per run). {common}")


RATIOS = [("batched-grouped", "flower"), ("batched-grouped-bf16", "flower"), ("batched-grouped", "plain"),
          ("batched-grouped-bf16", "plain-bf16"), ("plain-bf16", "plain"), ("batched-grouped-bf16", "batched-grouped"),
          ("flower", "plain"), ("batched-auto", "flower"), ("batched-auto", "plain"),
          ("batched-auto", "batched-grouped"), ("batched-loop-bf16", "flower"), ("batched-loop-bf16", "plain-bf16"),
          ("batched-loop-bf16", "plain_cl-bf16"), ("batched-grouped-bf16", "plain_cl-bf16"), ("plain_cl-bf16", "plain"),
          ("batched-auto-bf16", "flower"), ("batched-auto-bf16", "plain_cl-bf16"), ("batched-auto-bf16", "plain-bf16")]


def ratio_table(results: list, model: str, key: str) -> dict:
    """{(a, b): [a/b per invocation]} from the invocations where both ran."""
    by = {}
    for r in results:
        if r["model"] == model and r.get(key):
            by[(r["invocation"], r["contender"])] = r[key]
    inv = sorted({i for i, _ in by})
    return {(a, b): [by[(i, a)] / by[(i, b)] for i in inv if (i, a) in by and (i, b) in by] for a, b in RATIOS}


def write_markdown(path: Path, meta: dict, results: list, args) -> None:
    spr = args.clients * args.samples
    L = []
    m = meta["machine"]
    L += ["# Engine benchmark: FedAvg samples per second", "",
          f"Generated by `benchmarks/bench_engine.py` on {meta['finished']} (UTC). Raw measurements: "
          f"[`{path.with_suffix('.json').name}`]({path.with_suffix('.json').name}). All numbers below come from "
          "that one command:", "",
          f"    {meta['command']}", "",
          "## Machine", "",
          f"- CPU: {cpu_line(m)}",
          f"- {isa_line(m, meta.get('isa_env'), [r['cpu_capability'] for r in results if r.get('cpu_capability')])}",
          f"- GPU: {m['gpu']}",
          f"- Python {m['python']}, torch {m['torch']}, **{args.threads} torch thread(s) per contender process** "
          f"({'; '.join(m['torch_parallel'])}); Flower: Ray num_cpus {args.threads}, one thread per actor",
          f"- flwr {m.get('flwr')}, ray {m.get('ray', '–')}; kernel {m['kernel']}",
          f"- Load average (1, 5, 15 min) before: {meta['load_before']}; after: {meta['load_after']}; wall "
          f"{meta['wall_s']:.0f} s. {load_line(results)}",
          f"- {completion_line(results)} " + (
              f"A contender process that failed ran again in a fresh process, at most {args.retries} time(s) "
              "(`--retries`); the notes column names each retry and failure with its reason, the json keeps "
              "every failed attempt's stderr tail." if getattr(args, "retries", 0) else
              "Failed contender processes were not retried."), "",
          "## Workload and fairness", "",
          f"FedAvg, {args.clients} clients x {args.samples} real Fashion-MNIST training samples "
          f"(private_label_partition, L=10, seed {args.seed}), Adam lr {args.lr}, batch {args.batch}, 1 local "
          f"epoch per round: {spr} samples per round. {args.warmup} warm-up round(s), then {args.rounds} timed "
          f"rounds per contender (its median round counts); the contender list ran **{args.invocations} times** "
          "(each contender in a fresh process each time); figures are the median over invocations with the "
          "min-max spread in brackets. A round = local training of every client + aggregation; no evaluation.", "",
          f"- Data: **{args.data}**" + (" — the pool is standardised once before timing and every contender "
                                        "(plain loop, Flower, fedpaper) draws minibatches from the same float "
                                        "tensors." if args.data == "prestd" else
                                        " — plain loop and Flower normalise one sample at a time in a DataLoader "
                                        "(the papers' way); fedpaper standardises once (not the same tensors)."),
          f"- Allocator: **{args.malloc}**" + (" — every contender process (Ray actors included) runs with glibc "
                                               f"{', '.join(f'{k}={v}' for k, v in MALLOC_ENV.items())}, the "
                                               "thresholds fedpaper's engine sets (its own call switched off)."
                                               if args.malloc == "tuned" else
                                               " — no contender changes malloc (the engine's call switched off)."),
          ""]
    for model in args.models:
        rows = [r for r in results if r["model"] == model]
        L += [f"## {model}: {MODEL_TEXT[model]}", "",
              "| contender | samples / s, wall (median, min-max) | samples / CPU-s (median, min-max) | "
              "s / round | own CPU (cores) | other processes (cores) | notes |",
              "|---|---:|---:|---:|---:|---:|---|"]
        for c in [c for c in CONTENDERS + OPTIONAL if any(r["contender"] == c for r in rows)]:
            rc = [r for r in rows if r["contender"] == c]
            errs = [r for r in rc if "error" in r]
            ok = [r for r in rc if "error" not in r]
            if not ok:
                L.append(f"| {LABEL[c]} | failed in all {len(errs)} invocations | | | | | "
                         f"{'; '.join(attempt_notes(rc))} |")
                continue
            note = [f"invocation medians (s/round): {', '.join(fmt(r['median_s']) for r in ok)}"]
            if errs:
                note.append(f"{len(errs)} invocation(s) failed")
            note += attempt_notes(rc)
            if c == "flower":
                note.append(f"start-up {', '.join(fmt(r.get('startup_s'), 1) for r in ok)} s, warm-up round "
                            f"{', '.join(fmt(r['warmup_s'][0] if r.get('warmup_s') else None, 1) for r in ok)} s "
                            "(not counted)")
            L.append(f"| {LABEL[c]} | {_spread([r['samples_per_s'] for r in ok])} | "
                     f"{_spread([r.get('samples_per_cpu_s') for r in ok])} | "
                     f"{_spread([r['median_s'] for r in ok], 2)} | "
                     f"{_spread([r.get('own_cores_median') for r in ok], 2)} | "
                     f"{_spread([r.get('foreign_cores_median') for r in ok], 2)} | {'; '.join(note)} |")
        L += ["", "Ratios, computed within each invocation (median, min-max over invocations):", "",
              "| ratio | wall samples/s | samples / CPU-s |", "|---|---:|---:|"]
        wall, cpu = ratio_table(rows, model, "samples_per_s"), ratio_table(rows, model, "samples_per_cpu_s")
        for a, b in RATIOS:
            if wall[(a, b)]:
                L.append(f"| {LABEL[a]} / {LABEL[b]} | {_spread(wall[(a, b)], 2, 'x')} | "
                         f"{_spread(cpu[(a, b)], 2, 'x')} |")
        L.append("")
        native = bf16_native(m, meta.get("isa_env"), sorted({r["cpu_capability"] for r in rows if r.get("cpu_capability")}))
        ran = {r["contender"] for r in rows}
        for a, b, goal, why in TARGETS.get(model, ()):
            if a not in ran:  # a target of a contender not in this run's list
                continue
            w, cp = wall.get((a, b)), cpu.get((a, b))
            if a.endswith("-bf16") and not native:
                L.append(f"Target {LABEL[a]} >= {goal:g}x {LABEL[b]} ({why}): not applicable, bf16 is not native on "
                         "this CPU or ISA (the profiles then train in fp32: fedpaper/engine/cpu.py).")
            elif w:
                ok = statistics.median(w) >= goal and statistics.median(cp) >= goal
                L.append(f"Target {LABEL[a]} >= {goal:g}x {LABEL[b]} ({why}): wall **{statistics.median(w):.2f}x** "
                         f"(spread {min(w):.2f}-{max(w):.2f}), CPU-s **{statistics.median(cp):.2f}x** -> "
                         f"**{'met' if ok else 'NOT met'}** (both medians must reach it).")
        L.append("")
    L += ["The privlabels CNN's single-model rates and the matmul bound on this CPU: [roofline.md](roofline.md), "
          "from `benchmarks/roofline.py`.", ""]
    L += ["## GPU targets", "",
          "Not measured: no GPU in this session. No CPU-based projection is given.", ""]
    L += meta.get("notes_md", [])
    from fedpaper.ground.files import atomic_write_text

    atomic_write_text(path, "\n".join(L) + "\n")


NOTES = """## Notes

- What "batched" changes on a CPU. The `grouped` backend runs all clients' steps as one forward and
  backward pass: the clients' images are stacked along the channel axis of one channels_last tensor
  and every convolution is one grouped convolution (groups = clients), the linear layers are batched
  matmuls.
- bf16: `torch.autocast("cpu", dtype=torch.bfloat16)` around forward and loss, fp32 parameters and
  Adam state (fedpaper: TrainConfig.precision; plain loop: the same autocast around its forward).
  Flower runs fp32, as its users run it. Whether bf16 changes accuracy: benchmarks/results/precision.md.
- Flower on a loaded machine: Ray's raylet waits a fixed ~15 s for its dashboard agent's port
  files and aborts when the agent (a Python process) starts slower than that
  (ray-project/ray#65983); `ray.init` then fails 30 s later with "The current node timed out during
  startup" (raylet.err: "Timed out waiting for file .../metrics_agent_port_..."). The wait cannot be
  configured in Ray 2.55. benchmarks/flower_sim.py starts Ray itself (no dashboard, no usage stats,
  node address 127.0.0.1, a longer API-server wait so that the raylet's agents do not start beside
  it) and prints the Ray logs' tails when it fails; a failed contender runs once more in a fresh
  process (`--retries`), which the notes column says. On the 2026-11-24 run (load 8-11 on 2 cores)
  Flower failed to start that way in 3 of 6 runs, without a retry. The
  idle-machine run (2026-11-21, the old set-up: per-sample normalisation for plain loop and
  Flower, malloc setting for the engine only, 2 threads) had Flower with two one-thread actors at
  1.19x (privlabels CNN) and 1.75x (LeNet) the 2-thread plain loop, and the grouped engine at
  1.28x and 2.24x Flower (git history of benchmarks/results/engine.md).
- Earlier versions of this benchmark gave the plain loop and Flower a per-sample-normalising
  DataLoader while fedpaper standardised once before timing, and set the malloc thresholds for the
  engine only; both are now the same for every contender (`--data per-sample` / `--malloc default`
  reproduce the other variants).
"""


def render(out: Path) -> None:
    """engine.md from engine.json: the measurements as they are (an interrupted run: its finished part)."""
    data = json.loads(out.with_suffix(".json").read_text())
    results = data.pop("results")
    meta = dict(data)
    args = argparse.Namespace(**meta["settings"])
    args.models = args.models.split(",") if isinstance(args.models, str) else args.models
    done = {r["invocation"] for r in results}
    meta.setdefault("finished", max(r.get("finished", meta["started"]) for r in results) if results else meta["started"])
    meta.setdefault("load_after", "–")
    meta.setdefault("wall_s", float("nan"))
    meta["notes_md"] = NOTES.splitlines()
    if len(done) < args.invocations or len(results) < args.invocations * len(args.models) * len(args.contenders.split(",")):
        meta["notes_md"] += ["", f"**Rendered from an interrupted run**: {len(results)} contender runs finished "
                                 f"({len(done)} of {args.invocations} invocations started)."]
    args.invocations = len(done)
    write_markdown(out, meta, results, args)
    print(out.read_text())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="privlabels_cnn,lenet")
    ap.add_argument("--contenders", default=",".join(CONTENDERS), help=f"also: {','.join(OPTIONAL)}")
    ap.add_argument("--invocations", type=int, default=3, help="times the whole contender list runs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--extra", type=int, default=0,
                    help="extra timed rounds allowed to replace rounds disturbed by other processes")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", choices=["prestd", "per-sample"], default="prestd")
    ap.add_argument("--malloc", choices=["tuned", "default"], default="tuned")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per contender process")
    ap.add_argument("--retries", type=int, default=1,
                    help="times a failed contender process runs again in a fresh process (named in the md)")
    ap.add_argument("--emulate-avx2", action="store_true",
                    help="ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 for every contender process (the AVX2 path "
                         "on an AVX-512 CPU); the md says so")
    ap.add_argument("--out", default=str(BENCH / "results" / "engine.md"),
                    help="the md to write; the json goes beside it (same name, .json)")
    ap.add_argument("--render", action="store_true",
                    help="rewrite engine.md from engine.json (e.g. of an interrupted run), no measuring")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.render:
        return render(Path(args.out))
    if args.worker:
        import torch

        torch.set_num_threads(args.threads)
        print("RESULT " + json.dumps(worker(args)), flush=True)
        return
    args.models = args.models.split(",")
    contenders = args.contenders.split(",")
    unknown = [c for c in contenders if c not in LABEL]
    if unknown:
        raise SystemExit(f"unknown contender {unknown[0]!r}; known: {', '.join(LABEL)}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    niceness = os.nice(0)  # the command as it ran: its nice level, if any
    meta = {"command": " ".join([*(["nice", "-n", str(niceness)] if niceness else []),
                                 ".venv/bin/python benchmarks/bench_engine.py", *sys.argv[1:]]),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "load_before": loadavg(), "machine": machine(), "isa_env": isa_env(args),
            "settings": {k: v for k, v in vars(args).items() if k not in ("worker", "model")}}
    from fedpaper.ground.files import atomic_write_text

    results = []
    t0 = time.perf_counter()
    for inv in range(args.invocations):
        for model in args.models:
            for c in contenders:
                print(f"[{datetime.now().strftime('%H:%M:%S')}] invocation {inv + 1} {model} {c} "
                      f"(load {loadavg()[0]})", flush=True)
                r = summarise(run_with_retries(lambda: run_contender(args, model, c), args.retries),
                              args.clients * args.samples, args.rounds)
                r["invocation"] = inv
                r["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
                results.append(r)
                print("   ", {k: r.get(k) for k in ("median_s", "samples_per_s", "samples_per_cpu_s", "own_cores_median",
                                                 "foreign_cores_median", "attempts", "error")}, flush=True)
                for a in r["failed_attempts"]:
                    print("    failed attempt (retried):", a["error"], flush=True)
                atomic_write_text(out.with_suffix(".json"), json.dumps({**meta, "results": results}, indent=1))
    meta["wall_s"] = time.perf_counter() - t0
    meta["load_after"] = loadavg()
    meta["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    meta["notes_md"] = NOTES.splitlines()
    atomic_write_text(out.with_suffix(".json"), json.dumps({**{k: v for k, v in meta.items() if k != "notes_md"},
                                                            "results": results}, indent=1))
    write_markdown(out, meta, results, args)
    print(out.read_text())


if __name__ == "__main__":
    main()
