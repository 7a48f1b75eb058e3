"""Flower's Ray simulation running the same FedAvg workload as the other contenders.

Used by benchmarks/bench_engine.py (contender "flower"). Flower's legacy `start_simulation`
(flwr[simulation], Ray's virtual client engine) with:
- each client's data loaded inside the Ray actor that runs it (`_client_data`, cached per actor
  process as Flower's tutorials do with their dataset cache), not held by the client_fn closure;
  data "prestd" (default): minibatches sliced from the pool standardised once, the same tensors the
  other contenders get (plain_loop.client_batches); "per-sample": the papers' per-sample
  normalising DataLoader (plain_loop.client_loader);
- the same local training as the plain loop (plain_loop.local_train: per-sample-normalising
  Dataset, DataLoader(batch 64, shuffle), fresh Adam, model.train(), cross-entropy);
- the FedAvg strategy (sample-weighted averaging), no client-side or server-side evaluation,
  initial parameters given by the server (no start-up round trip to a client).

Start-up (ray.init, actor creation) is timed apart from the rounds: it is the time from the
`ray.init` call to the first `configure_fit`. A round is timed from its `configure_fit`
to the end of its `aggregate_fit`.

Ray start-up (`start_ray`): this module calls `ray.init` itself and hands the running instance to
`start_simulation(..., keep_initialised=True)` (Flower's documented way to bring your own Ray), so
that it can set up a Ray that tolerates a loaded machine and say why one failed:
- no dashboard (`include_dashboard=False`; Ray 2.55 still starts its API-server process, whose
  failure to come up is then only logged), no usage stats (RAY_USAGE_STATS_ENABLED=0), no Flower
  telemetry (FLWR_TELEMETRY_ENABLED=0), node address 127.0.0.1 (no address look-up);
- RAY_DASHBOARD_STARTUP_TIMEOUT_S=180 (default 60): `ray.init` waits for the API server to come up
  before it starts the raylet, so the raylet's agents do not start while it is still importing;
- a temporary directory of its own per run (`_temp_dir`), so that on a failure the tails of this
  run's raylet.err, raylet.out and agent logs go to stderr (a failed `ray.init` only says "The
  current node timed out during startup"). The directory is removed after a successful run.
The raylet's own 15-second wait for its dashboard agent's port files is fixed in Ray 2.55
(ray-project/ray#65983): when the agent starts slower than that on a loaded machine the raylet
aborts and `ray.init` fails 30 s later. That cannot be configured; bench_engine.py runs such a
contender again in a fresh process (`--retries`).
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import cpu_meter
import plain_loop

_CACHE: dict = {}
# Set (unless already set) before Ray and Flower are imported: they read them at import time.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "FLWR_TELEMETRY_ENABLED": "0", "RAY_DASHBOARD_STARTUP_TIMEOUT_S": "180"}
RAY_LOGS = ("raylet.err", "dashboard_agent.err", "dashboard_agent.log", "runtime_env_agent.err", "runtime_env_agent.log",
            "dashboard.err", "gcs_server.err")


_KEY_LINE = re.compile(r"Check failed|Timed out|Traceback|\bERROR\b|FATAL")


def ray_log_tails(temp_dir, lines: int = 6, width: int = 600) -> str:
    """Ray's start-up logs under `temp_dir` (each session once): per file its first `lines` key lines
    (a failed check, a time-out, an error) and its last `lines` lines, each cut to `width` characters."""
    out = []
    sessions = sorted(d for d in Path(temp_dir).glob("session_*") if d.is_dir() and not d.is_symlink())
    for d in sessions:
        for name in RAY_LOGS:
            f = d / "logs" / name
            try:
                text = [ln[:width] for ln in f.read_text(errors="replace").splitlines() if ln.strip()]
            except OSError:
                continue
            if not text:
                continue
            key = [ln for ln in text[:-lines] if _KEY_LINE.search(ln)][:lines]
            out += [f"--- {f} ({len(text)} lines" + (f"; {len(key)} key line(s), then" if key else ";")
                    + f" the last {min(lines, len(text))})", *key, *(["[...]"] if key else []), *text[-lines:]]
    return "\n".join(out) if out else f"(no Ray start-up log under {temp_dir})"


def start_ray(num_cpus: int, env_vars: dict) -> dict:
    """ray.init for the simulation (see the module doc); returns {"init_s", "temp_dir"}. On failure the
    Ray logs' tails go to stderr and the exception propagates."""
    for k, v in RAY_ENV.items():
        os.environ.setdefault(k, v)
    import ray

    temp_dir = tempfile.mkdtemp(prefix="rayb")  # short: Ray's socket paths live under it
    t0 = time.perf_counter()
    try:
        ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=temp_dir,
                 runtime_env={"env_vars": env_vars})
    except BaseException:
        print(f"ray.init failed after {time.perf_counter() - t0:.1f} s; Ray's logs:\n{ray_log_tails(temp_dir)}",
              file=sys.stderr, flush=True)
        raise
    return {"init_s": time.perf_counter() - t0, "temp_dir": temp_dir}


def _setting() -> dict:
    """The workload, passed to the Ray actors through environment variables."""
    return {
        "model": os.environ["BENCH_MODEL"],
        "clients": int(os.environ["BENCH_CLIENTS"]),
        "samples": int(os.environ["BENCH_SAMPLES"]),
        "batch": int(os.environ["BENCH_BATCH"]),
        "lr": float(os.environ["BENCH_LR"]),
        "seed": int(os.environ["BENCH_SEED"]),
        "threads": int(os.environ.get("BENCH_CLIENT_THREADS", "1")),
        "data": os.environ.get("BENCH_DATA", "prestd"),
    }


def client_rows(ds, clients: int, samples: int, seed: int) -> list:
    """The benchmark's partition: privlabels' private_label_partition with L = 10 (every client
    holds every label), `samples` samples per client."""
    from fedpaper.blocks.partition import private_label_partition

    part = private_label_partition(ds.y_train.numpy(), clients, 10, samples_per_client=samples, seed=seed)
    return [np.asarray(i) for i in part.client_indices]


def _client_data(pid: int):
    """Load the data set and this client's loader inside the actor process (cached per process)."""
    st = _setting()
    if "ds" not in _CACHE:
        from fedpaper.blocks.data import load_dataset

        torch.set_num_threads(st["threads"])
        _CACHE["ds"] = load_dataset("fashion-mnist")
        _CACHE["rows"] = client_rows(_CACHE["ds"], st["clients"], st["samples"], st["seed"])
        if st["data"] == "prestd":  # the same pre-standardised tensors as every other contender
            _CACHE["x_std"] = _CACHE["ds"].standardize(_CACHE["ds"].x_train)
    key = ("loader", pid)
    if key not in _CACHE:
        if st["data"] == "prestd":
            _CACHE[key] = plain_loop.client_batches(_CACHE["x_std"], _CACHE["ds"], _CACHE["rows"][pid], st["batch"],
                                                    st["seed"] + pid)
        else:
            _CACHE[key] = plain_loop.client_loader(_CACHE["ds"], _CACHE["rows"][pid], st["batch"], st["seed"] + pid)
    return _CACHE[key]


def build_model(name: str) -> torch.nn.Module:
    from fedpaper.blocks.models import build_model as fp_build

    return fp_build(name, in_channels=1, image_size=28)


def client_fn(context):
    from flwr.client import NumPyClient

    pid = int(context.node_config["partition-id"])
    st = _setting()

    class FlowerClient(NumPyClient):
        def fit(self, parameters, config):
            loader = _client_data(pid)
            model = build_model(st["model"])
            keys = list(model.state_dict())
            model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in zip(keys, parameters)})
            plain_loop.local_train(model, loader, st["lr"], 1)
            return [v.detach().cpu().numpy() for v in model.state_dict().values()], len(loader.dataset), {}

    return FlowerClient().to_client()


def run(model: str, clients: int, samples: int, batch: int, lr: float, seed: int, rounds: int,
        num_cpus_per_client: float, data: str = "prestd", ray_cpus: int | None = None) -> dict:
    """Run `rounds` Flower rounds; return start-up seconds and per-round seconds."""
    for k, v in RAY_ENV.items():
        os.environ.setdefault(k, v)
    import flwr
    from flwr.common import ndarrays_to_parameters
    from flwr.server import ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.simulation import start_simulation

    env = {"BENCH_MODEL": model, "BENCH_CLIENTS": str(clients), "BENCH_SAMPLES": str(samples),
           "BENCH_BATCH": str(batch), "BENCH_LR": str(lr), "BENCH_SEED": str(seed),
           "BENCH_CLIENT_THREADS": str(max(1, int(num_cpus_per_client))), "BENCH_DATA": data}
    os.environ.update(env)
    torch.manual_seed(seed)
    init = [v.detach().cpu().numpy() for v in build_model(model).state_dict().values()]
    marks: dict = {"fit_start": {}, "fit_end": {}}

    class TimedFedAvg(FedAvg):
        def configure_fit(self, server_round, parameters, client_manager):
            marks["fit_start"][server_round] = cpu_meter.snapshot()
            return super().configure_fit(server_round, parameters, client_manager)

        def aggregate_fit(self, server_round, results, failures):
            out = super().aggregate_fit(server_round, results, failures)
            marks["fit_end"][server_round] = cpu_meter.snapshot()
            marks.setdefault("failures", []).append(len(failures))
            marks.setdefault("results", []).append(len(results))
            return out

    strategy = TimedFedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=clients,
                           min_evaluate_clients=0, min_available_clients=clients,
                           initial_parameters=ndarrays_to_parameters(init))
    t0 = time.perf_counter()
    ray_info = start_ray(ray_cpus or os.cpu_count(), env)
    import ray

    try:
        start_simulation(client_fn=client_fn, num_clients=clients, config=ServerConfig(num_rounds=rounds),
                         strategy=strategy, client_resources={"num_cpus": num_cpus_per_client, "num_gpus": 0.0},
                         ray_init_args={"include_dashboard": False, "ignore_reinit_error": True},
                         keep_initialised=True)
    except BaseException:
        print(f"Flower simulation failed; Ray's logs:\n{ray_log_tails(ray_info['temp_dir'])}", file=sys.stderr,
              flush=True)
        raise
    t_end = time.perf_counter()
    ray.shutdown()
    shutil.rmtree(ray_info["temp_dir"], ignore_errors=True)
    done = sorted(marks["fit_end"])
    return {"startup_s": marks["fit_start"][1][0] - t0 if 1 in marks["fit_start"] else None,
            "round_s": [marks["fit_end"][r][0] - marks["fit_start"][r][0] for r in done],
            "own_cores": [cpu_meter.own_cores(marks["fit_start"][r], marks["fit_end"][r]) for r in done],
            "foreign_cores": [cpu_meter.foreign_cores(marks["fit_start"][r], marks["fit_end"][r]) for r in done],
            "total_s": t_end - t0, "ray_init_s": ray_info["init_s"], "failures": marks.get("failures"),
            "results": marks.get("results"),
            "flwr": flwr.__version__}
