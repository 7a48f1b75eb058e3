"""GPU throughput of each paper-profile model: engine training and evaluation samples per second
(issue 30, item 5), in the format `fedpaper plan` reads (fedpaper/runs/model_costs.py, gpu_rates).

Two steps, so that the GPU machine needs no data sets:

    # here (CPU, the data sets present): every distinct model key of `fedpaper plan --profile paper`
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/gpu_throughput.py --collect benchmarks/results/paper_models.json

    # there (CUDA): time each key; writes gpu.json (what plan reads) and gpu.md (a table naming the card)
    PYTHONPATH=. python3 benchmarks/gpu_throughput.py --measure benchmarks/results/paper_models.json \
        --out-json benchmarks/results/gpu.json --out-md benchmarks/results/gpu.md [--max-seconds 150]

Per key (fedpaper.runs.model_costs.ModelKey: model, its arguments, input shape, batch size, optimiser,
precision, clients, label kind, evaluation batch):

- training: the engine itself (fedpaper.driver.train, FedAvg, the backend it picks on the device)
  trains min(the run's clients, ENGINE_TIMING_CLIENTS) clients of --batches batches each on random
  data of the input shape, as model_costs.engine_timing does on the CPU, but timed in wall time on
  the device: torch.cuda.synchronize + time.perf_counter at the engine's round callbacks. The first
  round is a warm-up (CUDA context, cuDNN algorithm choice, allocator); the following rounds are
  timed until --per-key seconds have passed (at least one, at most --rounds), and the median
  round gives samples/s (a round = the clients' local steps, the aggregation, and the engine's
  evaluation of a one-batch test set). Where the engine cannot train the model on random data, a
  plain training step of the model alone (SGD/Adam, surrogate loss) is timed instead, and said.
- evaluation: a no-grad forward of the model (eval mode, the run's precision under autocast) at the
  rows per pass the engine would use (engine.memory.eval_batch_that_fits of the run's eval batch),
  one warm-up pass, then passes until ~1 s, the median pass.

A key that fails records its error line and the next one runs; after --max-seconds in all, the keys
left are listed as not measured. gpu.json holds GPU numbers only: without CUDA the script refuses to
write (exit 2) unless --allow-cpu is given (for testing), and even then never to
benchmarks/results/gpu.json.

Not in the numbers: the methods' own extra work (FedPALS's QP, SCAFFOLD's corrections, FedMT's
server training), loading the data sets, and several runs grouped into one engine call (a sweep's
engine calls may train more than one run at once, which is faster per sample on a GPU).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FORMAT = "fedpaper-model-keys/1"
KEY_FIELDS = ("model", "model_kwargs", "input_shape", "batch_size", "optimizer", "momentum", "precision", "clients",
              "multilabel", "eval_batch")
GPU_JSON = REPO / "benchmarks" / "results" / "gpu.json"


def _refuse(msg: str):
    """Bad input or the wrong device: one line on stderr, exit code 2 (as the CLI's bad input)."""
    print(f"gpu_throughput: {msg}", file=sys.stderr)
    raise SystemExit(2)


class _Enough(BaseException):
    """Raised from the engine's round callback once the key's time is spent (stops training)."""


# ----------------------------------------------------------------------------- keys
def key_to_dict(k) -> dict:
    d = {f: getattr(k, f) for f in KEY_FIELDS}
    d["input_shape"] = list(d["input_shape"])
    return d


def key_from_dict(d: dict):
    from fedpaper.runs.model_costs import ModelKey

    kw = {f: d[f] for f in KEY_FIELDS}
    kw["input_shape"] = tuple(int(s) for s in kw["input_shape"])
    return ModelKey(**kw)


def collect(out: Path, profile: str = "paper", only=None, data_root=None) -> dict:
    """Every distinct ModelKey of `fedpaper plan --profile <profile>` over the selected artifacts
    (all papers by default), with its label, MACs per sample and the artifacts that use it."""
    from fedpaper import plan as P
    from fedpaper.cli import _resolve_data_root, _select

    root = _resolve_data_root(data_root)
    selected, _ = _select(only)
    t0 = time.perf_counter()
    plans = P.collect(selected, profile, root)
    keys: dict = {}
    for p in plans:
        for r in p.runs:
            if r.model is None:
                continue
            e = keys.setdefault(r.model, {"artifacts": [], "runs": 0, "train_samples": 0.0})
            if p.artifact_id not in e["artifacts"]:
                e["artifacts"].append(p.artifact_id)
    seen: dict = {}
    for p in plans:  # runs counted once per key
        for r in p.runs:
            if r.model is not None and r.ident not in seen:
                seen[r.ident] = r
    for r in seen.values():
        keys[r.model]["runs"] += 1
        keys[r.model]["train_samples"] += r.train_samples or 0.0
    rows = []
    for k, e in keys.items():
        try:
            tm, em = P.macs(k)
        except Exception as ex:  # noqa: BLE001 - MACs are informative only
            tm = em = None
            e["macs_error"] = P._one_line(ex)
        rows.append({"key": key_to_dict(k), "signature": k.signature(), "label": k.label(), "train_macs": tm,
                     "eval_macs": em, **e})
    rows.sort(key=lambda r: (-r["train_samples"], r["signature"]))  # the keys that cost most first
    data = {"format": FORMAT, "profile": profile, "made": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "artifacts": len(selected), "collect_s": round(time.perf_counter() - t0, 1),
            "not_planned": {p.artifact_id: p.status for p in plans if not p.runs}, "keys": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


# ----------------------------------------------------------------------------- timing
def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_rounds(make_trainer, device, seconds: float) -> tuple:
    """(trainer, wall seconds of each round after the first, seconds from building the trainer to
    the end of its first round) of `make_trainer().run()`, synchronised with the device at the engine's round callbacks; stops once the
    timed rounds have taken `seconds` (at least one is timed, at most the trainer's rounds)."""
    from fedpaper.ground.progress import on_rounds

    marks: list = []

    def mark(rnd, rounds, runs):
        _sync(device)
        marks.append(time.perf_counter())
        if len(marks) > 1 and marks[-1] - marks[0] >= seconds:
            raise _Enough

    _sync(device)
    t0 = time.perf_counter()
    trainer = make_trainer()
    try:
        with on_rounds(mark):
            trainer.run()
    except _Enough:
        pass
    rounds = [b - a for a, b in zip(marks, marks[1:])]
    if not rounds:
        raise RuntimeError(f"no round timed after the warm-up ({len(marks)} round(s) done)")
    return trainer, rounds, marks[0] - t0


def train_timing(key, device, per_key_s: float, batches: int, max_rounds: int) -> dict:
    """Samples/s of the engine training `key`'s model on `device` (see the module docstring)."""
    from fedpaper.algorithms.methods import Method
    from fedpaper.driver import FederatedTrainer
    from fedpaper.runs.model_costs import ENGINE_TIMING_CLIENTS, timing_federation

    per_client = batches * key.batch_size
    m = max(1, min(key.clients, ENGINE_TIMING_CLIENTS))
    pools, fed, cfg, n = timing_federation(key, m, batches, rounds=1 + max_rounds, device=device)
    trainer, rounds, warmup = time_rounds(  # what driver.train runs
        lambda: FederatedTrainer(Method("FedAvg"), cfg, pools, [fed], progress=False), device, per_key_s)
    med = statistics.median(rounds)
    return {"train_samples_per_s": n / med, "train_round_s": rounds, "warmup_s": warmup,
            "train_clients": m, "train_samples_per_round": n, "backend": trainer.backend,
            "timed_with": f"engine (FedAvg, {m} client(s) x {per_client} samples, median of {len(rounds)} "
                          f"round(s) after 1 warm-up)"}


def plain_train_timing(key, device, per_key_s: float) -> dict:
    """Samples/s of a plain training step of the model alone (where the engine cannot train it)."""
    import torch

    from fedpaper.engine.evaluate import autocast
    from fedpaper.runs.model_costs import _build, _loss, _optimizer

    net = _build(key).to(device).train()
    opt = _optimizer(net, key)
    x = torch.randn(key.batch_size, *key.input_shape, device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast(key.precision, device):
            loss = _loss(net(x))
        loss.backward()
        opt.step()

    times = _repeat(step, device, per_key_s)
    return {"train_samples_per_s": key.batch_size / statistics.median(times), "train_steps": len(times),
            "timed_with": f"model alone (plain step, batch {key.batch_size}, median of {len(times)})"}


def _repeat(fn, device, seconds: float, min_n: int = 3, max_n: int = 50) -> list:
    fn()  # warm-up
    _sync(device)
    times: list = []
    start = time.perf_counter()
    while len(times) < max_n and (len(times) < min_n or time.perf_counter() - start < seconds):
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return times


def eval_timing(key, device, seconds: float = 1.0) -> dict:
    """Samples/s of a no-grad forward at the engine's rows per evaluation pass."""
    import torch

    from fedpaper.engine import TrainConfig
    from fedpaper.engine.evaluate import autocast
    from fedpaper.engine.memory import eval_batch_that_fits, step_memory
    from fedpaper.runs.model_costs import _build, timing_model_kwargs

    cfg = TrainConfig(model=key.model, model_kwargs=timing_model_kwargs(key), optimizer=key.optimizer,
                      batch_size=key.batch_size, momentum=key.momentum, precision=key.precision,
                      eval_batch=key.eval_batch, device=str(device))
    rows = eval_batch_that_fits(step_memory(cfg, tuple(key.input_shape)), key.eval_batch)
    net = _build(key).to(device).eval()
    while True:
        try:
            x = torch.randn(rows, *key.input_shape, device=device)

            def fwd():
                with torch.no_grad(), autocast(key.precision, device):
                    net(x)

            times = _repeat(fwd, device, seconds)
            break
        except torch.OutOfMemoryError:
            if rows == 1:
                raise
            rows = max(1, rows // 2)
            torch.cuda.empty_cache()
    return {"eval_samples_per_s": rows / statistics.median(times), "eval_rows": rows, "eval_passes": len(times)}


def measure_key(key, device, per_key_s: float, batches: int, max_rounds: int) -> dict:
    try:
        tr = train_timing(key, device, per_key_s, batches, max_rounds)
    except Exception as e:  # noqa: BLE001 - e.g. a model the engine trains only with its own method
        from fedpaper.runs.model_costs import _one_line

        tr = dict(plain_train_timing(key, device, min(per_key_s, 2.0)), engine_error=_one_line(e))
    return {**tr, **eval_timing(key, device)}


def device_info(device) -> dict:
    import platform

    import torch

    info = {"device": device.type, "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(card=torch.cuda.get_device_name(device), memory_gib=round(p.total_memory / 2**30, 1),
                    tf32_matmul=torch.backends.cuda.matmul.allow_tf32, cudnn=torch.backends.cudnn.version())
    else:
        from fedpaper.runs.model_costs import cpu_name

        info.update(card=f"CPU, not a GPU ({cpu_name()}, {torch.get_num_threads()} thread(s)): test output only")
    return info


def measure(keys_file: Path, out_json: Path, out_md: Path, max_seconds: float = 150.0, per_key_s: float = 5.0,
            batches: int = 4, max_rounds: int = 5, allow_cpu: bool = False, limit=None) -> dict:
    import torch

    from fedpaper.runs.model_costs import _one_line

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda":
        if not allow_cpu:
            _refuse("no CUDA device (torch.cuda.is_available() is False): gpu.json holds "
                             "GPU numbers only; pass --allow-cpu to test on the CPU (written elsewhere)")
        if Path(out_json).resolve() == GPU_JSON.resolve():
            _refuse(f"--allow-cpu never writes {GPU_JSON.relative_to(REPO)}: "
                             "pass another --out-json")
    data = json.loads(Path(keys_file).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        _refuse(f"{keys_file} is not a --collect file (format {data.get('format')!r})")
    entries = data["keys"][:limit] if limit else data["keys"]
    info = device_info(device)
    models, errors, not_measured, detail = {}, {}, [], []
    t0 = time.perf_counter()
    for i, e in enumerate(entries):
        key = key_from_dict(e["key"])
        sig = key.signature()
        if sig != e["signature"]:
            errors[e["signature"]] = "the key does not round-trip (ModelKey changed since --collect)"
            continue
        if time.perf_counter() - t0 >= max_seconds:
            not_measured.append(sig)
            continue
        t = time.perf_counter()
        print(f"[{i + 1}/{len(entries)}] {e['label']} ({key.precision}, {key.clients} clients) ...", end=" ",
              flush=True)
        try:
            r = measure_key(key, device, per_key_s, batches, max_rounds)
            r["wall_s"] = round(time.perf_counter() - t, 2)
            models[sig] = {"train_samples_per_s": r["train_samples_per_s"],
                           "eval_samples_per_s": r["eval_samples_per_s"], "label": e["label"],
                           "timed_with": r["timed_with"]}
            print(f"train {r['train_samples_per_s']:,.0f}/s, eval {r['eval_samples_per_s']:,.0f}/s "
                  f"({r['wall_s']:.1f} s)", flush=True)
        except Exception as ex:  # noqa: BLE001 - one bad key: its error line, the next one runs
            r = {"error": _one_line(ex), "wall_s": round(time.perf_counter() - t, 2)}
            errors[sig] = r["error"]
            print(f"ERROR {r['error']}", flush=True)
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        detail.append({"signature": sig, **{k: e.get(k) for k in ("label", "train_macs", "eval_macs", "artifacts")},
                       "key": e["key"], **r})
    out = {**info, "keys_file": str(keys_file), "max_seconds": max_seconds, "per_key_s": per_key_s,
           "total_s": round(time.perf_counter() - t0, 1), "models": models, "errors": errors,
           "not_measured": not_measured, "detail": detail}
    Path(out_json).parent.mkdir(parents=True, exist_ok=True)
    Path(out_json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    Path(out_md).write_text(markdown(out, entries), encoding="utf-8")
    return out


def _g(x, unit=""):
    if x is None:
        return "-"
    for div, s in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f} {s}{unit}"
    return f"{x:.0f} {unit}".strip()


def _variants(detail: list) -> dict:
    """{signature: "k=v, ..."}: what tells apart keys that share a label (model arguments, eval batch,
    optimiser), "" where the label alone is unique."""
    groups: dict = {}
    for d in detail:
        groups.setdefault(d["label"], []).append(d)
    out = {}
    for same in groups.values():
        flat = [{**{f"{k}": v for k, v in json.loads(d["key"]["model_kwargs"]).items()},
                 "eval_batch": d["key"]["eval_batch"], "optimizer": d["key"]["optimizer"],
                 "multilabel": d["key"]["multilabel"]} for d in same]
        fields = sorted({f for x in flat for f in x if len({json.dumps(y.get(f)) for y in flat}) > 1})
        for d, x in zip(same, flat):
            out[d["signature"]] = ", ".join(f"{f}={x.get(f)}" for f in fields)
    return out


def markdown(out: dict, entries: list) -> str:
    lines = [f"# GPU throughput of the paper profile's models ({out['card']})", "",
             f"Measured {out['date']} by `benchmarks/gpu_throughput.py --measure {out['keys_file']}`: "
             f"{out['card']}" + (f", {out['memory_gib']} GiB" if out.get("memory_gib") else "") +
             f"; torch {out['torch']}, CUDA {out['cuda']}, Python {out['python']}"
             + (f", TF32 matmul {'on' if out.get('tf32_matmul') else 'off'} (torch default)" if out["device"] == "cuda"
                else "") + f". {len(out['models'])} of {len(entries)} model key(s) measured in {out['total_s']} s.",
             "",
             "Training: the engine (FedAvg, the backend it picks) training `clients timed` clients side by side on "
             "random data of the input shape, wall time with torch.cuda.synchronize, median round after a warm-up "
             "round. Evaluation: a no-grad forward at the engine's rows per pass. `fedpaper plan` reads "
             "benchmarks/results/gpu.json (train and eval samples/s per model signature).", "",
             "| model | variant | batch | precision | clients (run / timed) | backend | train samples/s | "
             "eval samples/s (rows/pass) | train MACs/sample | eval MACs/sample | artifacts |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    variant = _variants(out["detail"])
    for d in out["detail"]:
        k = d["key"]
        arts = d.get("artifacts") or []
        arts_s = ", ".join(arts[:3]) + (f" (+{len(arts) - 3})" if len(arts) > 3 else "")
        if "error" in d:
            lines.append(f"| {d['label']} | {variant[d['signature']]} | {k['batch_size']} | {k['precision']} | "
                         f"{k['clients']} / - | - | "
                         f"ERROR: {d['error']} | - | {_g(d.get('train_macs'))} | {_g(d.get('eval_macs'))} | {arts_s} |")
            continue
        timed = d.get("train_clients", "-") if "engine_error" not in d else "model alone"
        lines.append(f"| {d['label']} | {variant[d['signature']]} | {k['batch_size']} | {k['precision']} | "
                     f"{k['clients']} / {timed} | "
                     f"{d.get('backend') or '-'} | {d['train_samples_per_s']:,.0f} | {d['eval_samples_per_s']:,.0f} "
                     f"({d['eval_rows']}) | {_g(d.get('train_macs'))} | {_g(d.get('eval_macs'))} | {arts_s} |")
    if out["not_measured"]:
        labels = {e["signature"]: e["label"] for e in entries}
        lines += ["", f"Not measured (time budget of {out['max_seconds']:g} s spent): "
                  + "; ".join(labels.get(s, s) for s in out["not_measured"]) + "."]
    if any("engine_error" in d for d in out["detail"]):
        lines += ["", "Timed as the model alone (the engine could not train it on random data): "
                  + "; ".join(f"{d['label']}: {d['engine_error']}" for d in out["detail"] if "engine_error" in d) + "."]
    lines += ["", "Not in these numbers: the methods' own extra work (FedPALS's QP, SCAFFOLD's corrections, FedMT's "
              "server training), data loading, and several runs grouped into one engine call.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--collect", metavar="KEYS.json", help="write every model key of `fedpaper plan` (here, CPU)")
    mode.add_argument("--measure", metavar="KEYS.json", help="time each key of a --collect file (there, CUDA)")
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--only", nargs="*", help="artifact ids or papers (--collect; default: all)")
    ap.add_argument("--data-root")
    ap.add_argument("--out-json", default=str(GPU_JSON))
    ap.add_argument("--out-md", default=str(GPU_JSON.with_suffix(".md")))
    ap.add_argument("--max-seconds", type=float, default=150.0, help="total time budget of --measure (default 150)")
    ap.add_argument("--per-key", type=float, default=5.0, help="seconds of timed training rounds per key (default 5)")
    ap.add_argument("--batches", type=int, default=4, help="batches per client per round (default 4)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per key at most (default 5)")
    ap.add_argument("--limit", type=int, help="measure the first N keys only")
    ap.add_argument("--allow-cpu", action="store_true", help="test on the CPU (never into benchmarks/results/gpu.json)")
    a = ap.parse_args(argv)
    if a.collect:
        d = collect(Path(a.collect), a.profile, a.only, a.data_root)
        print(f"{len(d['keys'])} model key(s) of {d['artifacts']} artifact(s) ({d['collect_s']} s): {a.collect}")
        for e in d["keys"]:
            print(f"  {e['label']} {e['key']['precision']} clients {e['key']['clients']}: {e['runs']} run(s), "
                  f"{_g(e['train_samples'])} training samples")
        return 0
    out = measure(Path(a.measure), Path(a.out_json), Path(a.out_md), a.max_seconds, a.per_key, a.batches, a.rounds,
                  a.allow_cpu, a.limit)
    print(f"{out['card']}: {len(out['models'])} measured, {len(out['errors'])} error(s), "
          f"{len(out['not_measured'])} not measured, {out['total_s']} s -> {a.out_json}, {a.out_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
