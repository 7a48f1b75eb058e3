"""A dry run of the paper profile: every artifact at the paper's settings and
code paths, cut only in rounds, seeds and images.

    fedpaper reproduce --profile paper --dry-run [--only ID ...] [--out-dir SCRATCH]

The dry run travels through the notebooks' own parameters, so a notebook in JupyterLab does the
same dry run by setting them to what `parameters(paper, out_dir)` returns: `seeds=1`, a scratch
`out_dir` and `overrides` = the paper's cut (CUTS) plus `dry_run: True`. Everything else is the
paper profile's: backbone, input size, optimiser, augmentation, client count, aggregation,
evaluation, figure and csv writing. The cut is applied as every override is, when the pipeline settles
an artifact job's settings (`fedpaper.outputs.parameters.settle`), so it acts BEFORE any data are built: the images loaded
(per class, per client, per server set) are cut, not only those trained on (a full FedNCA-ML pool
at 224 px as float32 is ~24 GB).

The cuts live here, not in each paper's profiles.py, because a paper's source files are the cache
key of its runs (fedpaper.runs.versions.paper_files): declaring a cut there would invalidate every cached
run of the paper.

Each cut also cuts test/validation images where a paper evaluates on all of them at the paper
profile with a slow model (FedMT's ResNet-18 on 10,000 test images each round), and epochs counted
like rounds (FedMT's local, server, Single and FedTrans fine-tuning epochs, privlabels' epoch
ablation): said beside each cut.

A dry run checks what can break, not every run: of an artifact's runs it trains one per distinct
*configuration* (`configuration`: data set, model, method parts, batch shape; not seeds, rounds or the
per-run numbers of a partition or a method) and hands every other run its configuration's result
(`DryRunExecutor`, the executor of every sweep of a dry run: the pipeline puts it in the artifact's
sweep scope). So the artifact's summarise and draw see every row, the figure and its files are
made in the scratch folder, stamped as a dry run, and the provenance says how many runs were
declared and how many configurations trained (`DryRunExecutor.record`): the cells of the other
runs repeat their configuration's result and are no result of their own.

Its runs train in groups of GROUP_RUNS runs per engine call (unless $FEDPAPER_EXECUTOR names an
executor) and are stored in a results cache of their own (cache_dir("dry-run", "results")), never
mixed with real ones.

Artifacts whose data or weights are absent here are skipped with one line (`missing_weights`,
and the CLI's plan for data sets).
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Callable, Optional

from fedpaper.outputs.artifacts import check_output_folder, profile_figures_dir
from fedpaper.ground.errors import BadParameterError
from fedpaper.outputs.parameters import DRY_RUN_KEY, DRY_RUN_PROFILE, FAITHFUL_ORDER
from fedpaper.ground.paths import cache_dir, figures_dir, unwritable_reason

PROFILE = DRY_RUN_PROFILE
SEEDS = 1  # one seed (the paper's first)
#: Free space the scratch folder must have before a dry run starts: the four files of ~75 artifacts
#: (a few MB each), the executed notebooks and the dry run's results cache.
MIN_FREE_BYTES = 1 * 2**30
#: Runs per engine call in a dry run (unless $FEDPAPER_EXECUTOR names an executor): a group holds
#: every client's parameters and optimiser state of each of its runs, ~180 MB per client for the
#: paper profile's ResNet-18s (45 MB of parameters, times the copies a step and Adam hold).
GROUP_RUNS = 1

_FEWER_COMPOSITES = {"singles": {"train": 3, "val": 2, "test": 3}, "pairs": {"train": 1, "val": 1, "test": 1}}

#: The paper-profile settings each paper's dry run changes (override keys of its profile dict).
CUTS: dict[str, dict] = {
    # 1 round; each partition (clients and target) keeps 0.5% of its images (~30 per Fashion-MNIST client,
    # about one batch of 32): fedpaper.blocks.partition.thin_partition keeps the clients' ratios and T(Y).
    "fedpals": {"rounds": 1, "data_fraction": {"fashion-mnist": 0.005, "cifar10": 0.005}},
    # 1 round (the epoch ablation too); 128 images per client (2 batches of 64), 128 unlabeled server
    # images, 256-image validation and test subsets.
    "privlabels": {"rounds": 1, "samples_per_client": 128, "server_size": {"cifar10": 128, "fashion-mnist": 128},
                   "val_eval": 256, "test_eval": 256, "epochs.rounds": 1},
    # 1 round, 1 Single epoch, 1 FedTrans fine-tuning epoch, 1 local and 1 server epoch (FedMT, SemiFL:
    # 5 each); 20 images per client (2 batches of 10), 1-5 labeled server images per class instead of
    # 5-25 (n; n_default 1), N_c grid 10-40 for Fig 3 and 80 images over all clients for Fig 2c, 200
    # test images.
    "fedmt": {"rounds": 1, "single_rounds": 1, "finetune_epochs": 1, "local_epochs": 1, "server_epochs": 1,
              "samples_per_client": 20,
              "n_values": [1, 2, 3, 4, 5], "n_default": 1, "fig3_sizes": [10, 20, 30, 40], "client_total": 80,
              "test_cap": 200},
    # 1 round; composites of 3 single-label images per class (2 validation, 3 test) and 1 per class
    # pair in each split, at the paper's 224 px.
    "fednca": {"rounds": 1, "data.cifar10": copy.deepcopy(_FEWER_COMPOSITES),
               "data.dermamnist": copy.deepcopy(_FEWER_COMPOSITES)},
}

#: Weights a paper profile's runs load, by artifact data set: {paper: {data set: torchvision arch}}.
#: FedNCA-ML starts DermaMNIST (and VOC, ChestX-ray14) from ImageNet weights (Sec. 5.2).
WEIGHTS = {"fednca": {"dermamnist": "resnet18", "voc2007": "resnet18", "chestxray14": "resnet18"}}


def cut(paper: str) -> dict:
    """The overrides of `paper`'s dry run (a copy): its cut plus dry_run: True."""
    return {**copy.deepcopy(CUTS[paper]), DRY_RUN_KEY: True}


def parameters(paper: str, out_dir) -> dict:
    """The notebook parameters (besides profile and data_root) of `paper`'s dry run."""
    return {"seeds": SEEDS, "out_dir": str(out_dir), "overrides": cut(paper)}


def check_scratch(out: Path) -> Path:
    """`out`, or one BadParameterError when a dry run cannot write there: a committed figures folder,
    not writable, or less than MIN_FREE_BYTES free. Checked before anything runs."""
    out = Path(out).expanduser().absolute()
    committed = [figures_dir()] + [profile_figures_dir(p) for p in FAITHFUL_ORDER]
    if any(out == c.absolute() or c.absolute() in out.parents for c in committed):
        raise BadParameterError(f"--out-dir {out} is inside the committed figures folder; a dry run writes to a "
                                "scratch folder: leave --out-dir out (default: the cache) or name another folder")
    why = unwritable_reason(out, MIN_FREE_BYTES)
    if why:
        raise BadParameterError(f"cannot write the dry run to {out}: {why}; free space there or pass "
                                "--out-dir with another folder")
    return check_output_folder(out, "the dry run's scratch folder")


def weights_file(arch: str) -> Path:
    """Where torchvision keeps the ImageNet weights of `arch` (IMAGENET1K_V1) once downloaded."""
    import os

    import torch
    import torchvision

    url = torchvision.models.get_weight(f"{arch.replace('resnet', 'ResNet')}_Weights.IMAGENET1K_V1").url
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(url)


def missing_weights(artifact_id: str, datasets) -> Optional[str]:
    """One line naming the ImageNet weights the paper profile of this artifact needs and are absent
    here (None when it needs none or they are present)."""
    paper = artifact_id.split("/", 1)[0]
    for d in datasets:
        arch = WEIGHTS.get(paper, {}).get(d.split(":", 1)[0])
        if d.endswith(":labels") or arch is None:
            continue
        path = weights_file(arch)
        if not path.is_file():
            return (f"ImageNet {arch} weights absent ({path}); the paper profile starts {d} from them: fetch once "
                    f"with internet (torchvision.models.{arch}(weights='IMAGENET1K_V1'))")
    return None


# ------------------------------------------------------------------------ one run per configuration
#: Partition settings that set a run's batch shape (how many clients, how many images each): kept
#: as they are in a configuration, while the partition's other numbers are per-run values.
SHAPE_KEYS = frozenset({"num_clients", "clients", "samples_per_client", "server_size"})
#: Training settings that set a run's shape (kept as they are); `rounds` is left out (the cut sets it).
TRAINING_SHAPE_KEYS = frozenset({"batch_size", "model_kwargs"})


def _is_seed(key: str) -> bool:
    return key == "seed" or key.endswith("_seed")


def _kind(value, keep=frozenset()):
    """`value` with every number reduced to whether it is zero (a zero switches a term off: a weight,
    a momentum, a penalty), seeds left out, the entries named in `keep` as they are."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return "0" if value == 0 else "x"
    if isinstance(value, dict):
        return {k: (v if k in keep else _kind(v)) for k, v in value.items() if not _is_seed(str(k))}
    if isinstance(value, (list, tuple)):
        return [_kind(v) for v in value]
    return repr(value)


def configuration(run) -> str:
    """What can change a code path of a run (a RunSpec, its dict, or a store key {"run": ...}), as a
    canonical JSON string: its paper, data set and data options, model and training settings (not
    `rounds`), batch shape (SHAPE_KEYS, TRAINING_SHAPE_KEYS, the evaluation's sizes), partition layout
    and method parts with their non-numeric arguments. Seeds, and the numbers of a partition or a
    method (labels per client, Dirichlet beta, server images per class, a penalty's weight), are
    per-run values: two runs that differ only in them have one configuration, except where a
    number is zero in one and not in the other."""
    if hasattr(run, "to_json"):
        run = json.loads(run.to_json())
    run = run.get("run", run)
    data = dict(run.get("data") or {})
    data["options"] = {k: v for k, v in (data.get("options") or {}).items() if not _is_seed(k)}
    training = {k: v for k, v in (run.get("training") or {}).items() if k != "rounds"}
    method = {k: v for k, v in (run.get("method") or {}).items() if k != "name"}  # the name is a label
    key = {"paper": run.get("paper"), "data": data, "evaluation": run.get("evaluation") or {},
           "partition": _kind(run.get("partition") or {}, SHAPE_KEYS),
           "training": _kind(training, TRAINING_SHAPE_KEYS), "method": _kind(method)}
    return json.dumps(key, sort_keys=True, default=repr)


class DryRunExecutor:
    """The executor of a dry run's sweeps (`fedpaper.runs.executors.run_specs` with
    executor=DryRunExecutor()): of the runs asked for, it trains the first of each `configuration`
    not trained yet by this executor, through `inner` (default: GROUP_RUNS runs per engine call, or
    the executor $FEDPAPER_EXECUTOR names), in the dry run's own results cache, and returns each
    other run its configuration's result (the same object). `record()` says how many runs were asked
    for and how many configurations trained. One per artifact (the pipeline makes it)."""

    name = "dry-run"
    is_local = False

    def __init__(self, inner=None, store=None):
        self._inner, self._store = inner, store
        self._done: dict = {}  # configuration -> result
        self._asked: dict = {}  # run key (JSON) -> configuration

    @property
    def inner(self):
        if self._inner is None:
            from fedpaper.runs import executors  # start-up time: torch, imported when a dry run trains

            name = os.environ.get(executors.EXECUTOR_ENV, "").strip()
            self._inner = executors.get_executor(name) if name else executors.SmallGroupExecutor(GROUP_RUNS)
        return self._inner

    @property
    def store(self):
        if self._store is None:
            from fedpaper.runs.store import ResultStore  # with `inner`: imported when a dry run trains

            self._store = ResultStore(cache_dir("dry-run", "results"))
        return self._store

    def run_specs(self, keys: list, build: Callable, *, desc="runs", store=None, **kw) -> list:
        """One result per key, in order (the executors' run_specs; `kw` passes on to `inner`)."""
        from fedpaper.runs.store import spec_json  # with `inner`: imported when a dry run trains

        confs = [configuration(k) for k in keys]
        for k, c in zip(keys, confs):
            self._asked.setdefault(spec_json(k), c)
        todo: dict = {}  # configuration -> its first key here
        for k, c in zip(keys, confs):
            if c not in self._done:
                todo.setdefault(c, k)
        if todo:
            print(f"{desc}: dry run trains {len(todo)} of {len({spec_json(k) for k in keys})} runs "
                  "(one per configuration; the others repeat its result)", flush=True)
            results = self.inner.run_specs(list(todo.values()), build, desc=desc,
                                           store=store if store is not None else self.store, **kw)
            self._done.update(zip(todo, results))
        return [self._done[c] for c in confs]

    def record(self) -> dict:
        """{"runs": distinct runs asked for, "configurations": trained (one run each), "note"}."""
        n, m = len(self._asked), len(set(self._asked.values()))
        return {"runs": n, "configurations": m,
                "note": f"one run per configuration trained ({m} of {n} runs); each other run was given its "
                        "configuration's result: its cells are not its own"}
