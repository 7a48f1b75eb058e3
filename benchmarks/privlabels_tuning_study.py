"""privlabels: the central-tuning effect against the server-set size and the tuning optimiser (issue 29,
item 4), a ladder of its own. Claims 5 and 14 say central tuning (Tuning-MSE, Tuning-Pairwise: the server
fine-tunes the aggregated model on its unlabeled set after every FedAvg round, Sec 4.2) beats adapted
FedAvg in the private-label setting. This study measures the tuning - FedAvg margin on CIFAR-10, private
setting, at a profile's settings, over

- the server-set size: multiples of the profile's paper-ratio size (`profiles.paper_ratio_server`: the
  paper's 5,000 CIFAR-10 images per 10 x 2,000 client images), by default x1/4, x1, x4 (16x), and with
  --paper-size also the paper's absolute 5,000;
- the tuning optimiser: Adam at the clients' lr (the paper's main setting, vague-9: `Method.tuning_lr`
  None) and SGD at the epoch ablation's lr (App C.3, figs 11-13: the profile's `epochs` dict);
- L: the smallest L of Fig. 2 at the profile and its mid L (`rounds_L`, the L of Figs 5-8 and 11);
- the same seeds everywhere (the profile's, 3 at quick and long).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/privlabels_tuning_study.py --profile quick \
        --out benchmarks/results/privlabels_tuning_study

Specs are the package's own: the artifacts' settings as the pipeline settles them (`pipeline.declared_jobs`,
with the seeds), the server size set by an override `{"server_size": {...}}` as the ladder's rungs set it, and
`runs.run_spec(p, "cifar10", name, "private", L, seed)` for FedAvg and Adam tuning (the main sweep's
runs: at the paper-ratio size they are Fig. 2's runs). SGD tuning at E = 1 is the same spec with the
method `runs.method_for(name, "private", p, sgd_tuning=True)` (`RunSpec.with_(replace_method=...)`);
where the profile's epoch ablation runs at the main sweep's rounds (every profile here) it is checked to
be the ablation's E = 1 spec, `run_spec(..., epochs=1)`, so the two share cache entries. No package
code is changed. Runs go through `runs.sweep` into $FEDPAPER_CACHE.

What stays fixed across server sizes, and what does not (`runs._federation`): the validation split,
the per-seed label sets, the evaluation subsets, the initialisation and the data order depend on the
seed only; but `partition.privlabels_split` draws the server set from the training part and the clients
sample from what is left, so a different server size gives the clients a different draw of images
(the json's `federations` records, per size, the share of client images also in the paper-ratio
federation). FedAvg never reads the server set, yet its spec (the cache key) holds the server size:
it is rerun at every size and each margin is paired within (size, seed). FedAvg does not depend on
the tuning optimiser: one FedAvg run per (size, L, seed) serves both (checked: identical specs).

Per (server size, optimiser, L): each method's mean test accuracy (best-validation snapshot, as the
figures) +- seed std; per seed the margins worse tuning method - FedAvg and better tuning method -
FedAvg (min / max of Tuning-MSE, Tuning-Pairwise on that seed), their mean and std. NOISE RULE: a
margin is outside seed noise when every seed has the same sign and |mean| > 2 x std / sqrt(n_seeds);
else "within noise". Models at chance (the package's one rule, claims.chance.at_chance, the
claims' CHANCE of 10 %) are flagged: a margin between models at chance tests nothing. TREND RULE: per
(optimiser, L, margin), the ordinary least-squares slope of the per-seed margins against
log10(server size) (sizes x seeds points; SE from the residuals, n - 2 dof) in points per decade:
rising if slope > 2 SE, falling if slope < -2 SE, else flat. The findings are sentences written from
these numbers by the script.

Timings: process CPU seconds of this process (one thread) per group of runs (one method at one size,
optimiser, all L and seeds), and how many of them were trained rather than read from the cache.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import loadavg, machine, run_line  # noqa: E402

from fedpaper.runs.experiment import store_key  # noqa: E402
from fedpaper.outputs.pipeline import declared_jobs  # noqa: E402
from fedpaper.papers import privlabels as PL  # noqa: E402
from fedpaper.claims.chance import at_chance  # noqa: E402
from fedpaper.claims.rows import Cell  # noqa: E402
from fedpaper.papers.privlabels import profiles as P  # noqa: E402
from fedpaper.papers.privlabels import runs as R  # noqa: E402
from fedpaper.papers.privlabels.claims import CHANCE, TUNE  # noqa: E402
from fedpaper.runs.store import ResultStore  # noqa: E402

DATASET, SETTING, BASE = "cifar10", "private", "FedAvg"
METHODS = [BASE, *TUNE]
OPTIMIZERS = ("adam", "sgd")
MARGINS = ("worse", "better")  # worse / better tuning method - FedAvg, per seed
NOISE_RULE = "every seed the same sign and |mean| > 2 x std / sqrt(n_seeds)"
TREND_RULE = ("OLS slope of the per-seed margins vs log10(server size), SE from the residuals (n - 2 dof): "
              "rising if slope > 2 SE, falling if slope < -2 SE, else flat")


# ----------------------------------------------------------------------------------------- specs
def labels_of(p: dict) -> list[int]:
    """Fig. 2's smallest L below 10 at this profile and its mid L (`rounds_L`, else the middle one)."""
    ls = sorted(L for L in p["labels"] if L < R.NUM_CLASSES)
    mid = p.get("rounds_L") if p.get("rounds_L") in ls[1:] else ls[len(ls) // 2]
    return list(dict.fromkeys([ls[0], mid]))


def settled(profile: str, seeds, overrides=None) -> dict:
    """The artifacts' settings of `profile` as the pipeline settles them (the overrides, the seeds)."""
    return declared_jobs(PL.tables, profile=profile, seeds=seeds, overrides=overrides)[0].params


def sized(profile: str, seeds, size: int) -> dict:
    """The profile dict with the CIFAR-10 server set at `size` (an override, as the ladder's rungs set it)."""
    p = settled(profile, seeds)
    return settled(profile, seeds, {"server_size": dict(p["server_size"], **{DATASET: int(size)})})


def spec_of(p: dict, name: str, opt: str, L: int, seed: int):
    """The run of `name` with central tuning by `opt` ("adam": the main sweep's spec; "sgd": the same
    with the epoch ablation's SGD tuning, E = 1)."""
    s = R.run_spec(p, DATASET, name, SETTING, L, seed)
    if opt == "adam":
        return s
    sgd = s.with_(replace_method=R.method_for(name, R.method_setting(SETTING, L), p, sgd_tuning=True).algorithm().spec())
    if p["epochs"]["rounds"] == p["rounds"]:  # the ablation's E = 1 run: the same key
        assert sgd.to_json() == R.run_spec(p, DATASET, name, SETTING, L, seed, epochs=1).to_json()
    if name == BASE:  # FedAvg has no tuning: the optimiser does not enter its spec
        assert sgd.to_json() == s.to_json()
    return sgd


def server_sizes(p: dict, factors, paper_size: bool) -> list[dict]:
    ratio = p["server_size"][DATASET]
    out = [{"size": max(1, int(round(ratio * f))), "label": f"x{f:g} paper ratio"} for f in factors]
    if paper_size:
        out.append({"size": P.settings("paper")["server_size"][DATASET], "label": "paper's absolute size"})
    by = {}
    for s in out:
        by.setdefault(s["size"], s)
    return sorted(by.values(), key=lambda s: s["size"])


def federation_facts(p_ref: dict, sizes: list[dict], labels, seeds, data_root) -> list[dict]:
    """Per (size, L, seed): are the label sets and validation rows those of the paper-ratio size, and
    what share of the clients' images is also in it."""
    rows = []
    for L in labels:
        for s in seeds:
            ref, ref_part = R.federation(R.run_spec(p_ref, DATASET, BASE, SETTING, L, s), data_root)
            ref_imgs = set(np.concatenate(ref.client_indices).tolist())
            for sz in sizes:
                q = sized(p_ref["profile"], seeds, sz["size"])
                fed, part = R.federation(R.run_spec(q, DATASET, BASE, SETTING, L, s), data_root)
                imgs = np.concatenate(fed.client_indices)
                rows.append({"size": sz["size"], "L": L, "seed": s, "server_rows": len(fed.server_indices),
                             "same_label_sets": part.meta["label_sets"] == ref_part.meta["label_sets"],
                             "same_val_rows": bool(np.array_equal(fed.val_indices, ref.val_indices)),
                             "same_test_rows": bool(np.array_equal(fed.test_indices, ref.test_indices)),
                             "client_images_shared": round(float(np.mean([int(i) in ref_imgs for i in imgs])), 3)})
    return rows


# ------------------------------------------------------------------------------------ statistics
def stats(v) -> dict:
    v = np.asarray(v, float)
    sd = float(v.std(ddof=1)) if len(v) > 1 else float("nan")
    return {"mean": float(v.mean()), "std": sd, "per_seed": [round(float(x), 2) for x in v]}


def noise_verdict(v) -> str:
    v = np.asarray(v, float)
    n = len(v)
    if n < 2:
        return "within noise"
    se = v.std(ddof=1) / math.sqrt(n)
    same = bool(np.all(v > 0) or np.all(v < 0))
    if same and abs(v.mean()) > 2 * se:
        return "tuning above" if v.mean() > 0 else "tuning below"
    return "within noise"


def trend(x, y) -> dict:
    """OLS slope of y on x (x = log10 size) with its SE and the TREND_RULE class."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < 3 or len(set(x.tolist())) < 2:
        return {"slope": None, "se": None, "n_points": n, "trend": "undefined (fewer than 2 sizes)"}
    xc = x - x.mean()
    slope = float((xc * (y - y.mean())).sum() / (xc ** 2).sum())
    resid = y - y.mean() - slope * xc
    se = float(math.sqrt((resid ** 2).sum() / (n - 2) / (xc ** 2).sum()))
    cls = "rising" if slope > 2 * se else "falling" if slope < -2 * se else "flat"
    return {"slope": slope, "se": se, "n_points": n, "trend": cls}


def analyse(acc: dict, sizes, labels, seeds, optimizers) -> tuple[list, list]:
    """acc[(size, opt, L, method)] = per-seed accuracies in % (FedAvg under both optimisers)."""
    cells = []
    for sz in sizes:
        for opt in optimizers:
            for L in labels:
                a = {m: np.asarray(acc[(sz["size"], opt, L, m)]) for m in METHODS}
                tune = np.vstack([a[m] for m in TUNE])
                margins = {"worse": tune.min(axis=0) - a[BASE], "better": tune.max(axis=0) - a[BASE]}
                chance = at_chance({m: Cell(float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else float("nan"),
                                            len(v), tuple(float(x) for x in v)) for m, v in a.items()}, CHANCE)
                cells.append({"size": sz["size"], "size_label": sz["label"], "optimizer": opt, "L": L,
                              "methods": {m: stats(v) for m, v in a.items()},
                              "margins": {k: dict(stats(v), verdict=noise_verdict(v)) for k, v in margins.items()},
                              "per_method_margins": {m: stats(a[m] - a[BASE]) for m in TUNE},
                              "at_chance": chance})
    trends = []
    for opt in optimizers:
        for L in labels:
            for k in MARGINS:
                cs = [c for c in cells if c["optimizer"] == opt and c["L"] == L]
                x = [math.log10(c["size"]) for c in cs for _ in c["margins"][k]["per_seed"]]
                y = [v for c in cs for v in c["margins"][k]["per_seed"]]
                trends.append({"optimizer": opt, "L": L, "margin": k, **trend(x, y),
                               "cells_at_chance": sum(bool(c["at_chance"]) for c in cs), "cells": len(cs)})
    return cells, trends


# -------------------------------------------------------------------------------------- findings
def _n(k: int, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"


def findings(cells: list, trends: list, optimizers, labels) -> list[str]:
    out = []
    n = len(cells)
    chance = [c for c in cells if c["at_chance"]]
    base_chance = [c for c in cells if BASE in c["at_chance"]]
    if chance:
        out.append(f"{len(chance)} of {n} cells have at least one model at chance by the package's rule "
                   f"(FedAvg in {len(base_chance)}); accuracies span "
                   f"{min(c['methods'][m]['mean'] for c in cells for m in METHODS):.1f}-"
                   f"{max(c['methods'][m]['mean'] for c in cells for m in METHODS):.1f} % (chance {CHANCE:.0f} %). "
                   + ("Every cell has a model at chance: at this profile the margins compare models that have not "
                      "learned CIFAR-10 and say nothing about claims 5 and 14; the study needs a profile where "
                      "FedAvg learns (e.g. long)." if len(chance) == n else
                      "Margins in those cells test nothing."))
    else:
        out.append(f"No cell has a model at chance (accuracies {min(c['methods'][m]['mean'] for c in cells for m in METHODS):.1f}-"
                   f"{max(c['methods'][m]['mean'] for c in cells for m in METHODS):.1f} %).")
    for opt in optimizers:
        cs = [c for c in cells if c["optimizer"] == opt]
        for k in MARGINS:
            v = [c["margins"][k]["verdict"] for c in cs]
            means = [c["margins"][k]["mean"] for c in cs]
            ok = [c["margins"][k]["verdict"] for c in cs if not c["at_chance"]]
            learnt = (f"; in the {len(ok)} cells where no model is at chance: {ok.count('tuning above')} above, "
                      f"{ok.count('tuning below')} below, {ok.count('within noise')} within noise" if ok else
                      "; every cell has a model at chance")
            out.append(f"{opt.upper()} tuning, {k} tuning method - FedAvg: above FedAvg outside seed noise in "
                       f"{v.count('tuning above')} of {len(cs)} cells, below in {v.count('tuning below')}, within "
                       f"noise in {v.count('within noise')}; the cell means range {min(means):+.2f} to "
                       f"{max(means):+.2f} points (mean over cells {np.mean(means):+.2f}){learnt}.")
    if len(optimizers) > 1:
        mag = {opt: float(np.mean([abs(x) for c in cells if c["optimizer"] == opt
                                   for m in TUNE for x in c["per_method_margins"][m]["per_seed"]]))
               for opt in optimizers}
        sd = {opt: float(np.mean([c["methods"][m]["std"] for c in cells if c["optimizer"] == opt for m in TUNE]))
              for opt in optimizers}
        out.append("Mean |tuning method - FedAvg| per seed: " + ", ".join(f"{o.upper()} {mag[o]:.2f}" for o in optimizers)
                   + " points; the tuning methods' mean seed std: " + ", ".join(f"{o.upper()} {sd[o]:.2f}" for o in optimizers)
                   + " points. " + ("SGD tuning moves the tuned model's accuracy away from FedAvg's less than Adam "
                                    "tuning does." if mag.get("sgd", 0) < mag.get("adam", 0) else
                                    "SGD tuning moves the accuracy away from FedAvg's at least as much as Adam tuning."))
    if set(OPTIMIZERS) <= set(optimizers):
        for k in MARGINS:
            v = [noise_verdict(np.subtract(c["margins"][k]["per_seed"], d["margins"][k]["per_seed"]))
                 for c in cells if c["optimizer"] == "sgd"
                 for d in cells if d["optimizer"] == "adam" and (d["size"], d["L"]) == (c["size"], c["L"])]
            out.append(f"SGD minus Adam on the {k} tuning method - FedAvg margin, paired by seed in each (size, L): "
                       f"higher outside seed noise in {v.count('tuning above')} of {len(v)}, lower in "
                       f"{v.count('tuning below')}, within noise in {v.count('within noise')}.")
    for opt in optimizers:
        for L in labels:
            ts = [t for t in trends if t["optimizer"] == opt and t["L"] == L]
            parts = [f"{t['margin']} {t['trend']}" + (f" ({t['slope']:+.2f} +- {t['se']:.2f} points per decade)"
                                                     if t["slope"] is not None else "") for t in ts]
            ch = ts[0]["cells_at_chance"] if ts else 0
            out.append(f"{opt.upper()} tuning, L = {L}: margin vs server size: " + "; ".join(parts)
                       + (f" ({ch} of {ts[0]['cells']} sizes have a model at chance)" if ch else "") + ".")
    return out


# ------------------------------------------------------------------------------------------- run
def run_group(specs, p, data_root, desc) -> tuple[list, dict]:
    store = ResultStore()
    cached = sum(store_key(s, data_root) in store for s in specs)
    c0, w0 = time.process_time(), time.perf_counter()
    res = R.sweep(specs, p, data_root, desc=desc)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    trained = len(specs) - cached
    return res, {"runs": len(specs), "trained": trained, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                 "cpu_s_per_trained_run": round(cpu / trained, 2) if trained else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="quick", help="privlabels profile (smoke: synthetic data, seconds)")
    ap.add_argument("--factors", type=float, nargs="+", default=[0.25, 1.0, 4.0],
                    help="server-set sizes as multiples of the profile's paper-ratio size")
    ap.add_argument("--paper-size", action="store_true", help="also the paper's absolute server set (5,000)")
    ap.add_argument("--optimizers", nargs="+", default=list(OPTIMIZERS), choices=OPTIMIZERS)
    ap.add_argument("--labels", type=int, nargs="+", default=None, help="L values (default: smallest and mid of Fig. 2)")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default: the profile's)")
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    ap.add_argument("--rerender", action="store_true",
                    help="recompute cells, findings and OUT.md from OUT.json's accuracies (no training)")
    a = ap.parse_args(argv)
    if a.rerender:
        return rerender(a.out)
    os.environ.setdefault("FEDPAPER_PROGRESS", "0")
    data_root = os.environ.get("FEDPAPER_DATA")
    t_start = time.process_time()
    p0 = settled(a.profile, a.seeds)
    seeds, labels = p0["seeds"], a.labels or labels_of(p0)
    sizes = server_sizes(p0, a.factors, a.paper_size)
    m = machine(frameworks=False)
    import torch

    head = (f"# privlabels central tuning vs server-set size and tuning optimiser ({a.profile} profile, CIFAR-10, "
            f"private setting, L in {labels}, seeds {seeds})\n{run_line(m)}")
    print(head, flush=True)
    c0 = time.process_time()
    R.pools(R.data_spec(DATASET, p0), data_root)  # load the data once, outside the groups' timings
    load_cpu = time.process_time() - c0
    opt_lr = {"adam": p0["lr"], "sgd": p0["epochs"]["tuning_lr"]}
    assert p0["epochs"]["tuning_optimizer"] == "sgd"

    acc, groups, specs_seen = {}, [], {}
    for sz in sizes:
        p = sized(a.profile, a.seeds, sz["size"])
        for opt in a.optimizers:
            for name in METHODS:
                if name == BASE and opt != a.optimizers[0]:  # one FedAvg run serves both optimisers
                    for L in labels:
                        acc[(sz["size"], opt, L, name)] = acc[(sz["size"], a.optimizers[0], L, name)]
                    continue
                specs = [spec_of(p, name, opt, L, s) for L in labels for s in seeds]
                res, t = run_group(specs, p, data_root, f"{name} {opt} server {sz['size']}")
                groups.append({"size": sz["size"], "optimizer": opt if name != BASE else "-", "method": name, **t})
                print(f"server {sz['size']:>5} {opt:>4} {name:<16} {t['trained']:>2}/{t['runs']} trained, "
                      f"{t['cpu_s']:.1f} CPU s", flush=True)
                for L in labels:
                    acc[(sz["size"], opt, L, name)] = [100 * r["best"]["test_acc"] for s_, r in zip(specs, res)
                                                       if s_.partition["L"] == L]
                for s_ in specs:
                    specs_seen[s_.to_json()] = True
    ref = next((s for s in sizes if s["label"] == "x1 paper ratio"), sizes[0])
    feds = federation_facts(sized(a.profile, a.seeds, ref["size"]), sizes, labels, seeds, data_root)
    total_cpu = time.process_time() - t_start
    out = {"head": head, "machine": m, "profile": a.profile, "dataset": DATASET, "setting": SETTING,
           "labels": labels, "seeds": seeds, "server_sizes": sizes, "paper_ratio_size": p0["server_size"][DATASET],
           "optimizers": {o: {"optimizer": o, "lr": opt_lr[o], "source": "the clients' lr (vague-9, Method.tuning_lr "
                              "None)" if o == "adam" else "the epoch ablation's (profile epochs dict)"}
                          for o in a.optimizers},
           "rounds": p0["rounds"], "samples_per_client": p0["samples_per_client"], "tuning_epochs": p0["tuning_epochs"],
           "batch_size": p0["batch_size"], "precision": p0.get("precision"), "chance": CHANCE,
           "accuracies": [{"size": k[0], "optimizer": k[1], "L": k[2], "method": k[3], "per_seed": v}
                          for k, v in acc.items()],
           "federations": feds, "timings": {"data_load_cpu_s": round(load_cpu, 2), "groups": groups,
                                            "total_cpu_s": round(total_cpu, 1)},
           "unique_runs": len(specs_seen), "optimizer_order": list(a.optimizers),
           "command": " ".join(["python", "benchmarks/privlabels_tuning_study.py", *(argv if argv is not None else sys.argv[1:])]),
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "nice": os.nice(0), "load_after": loadavg()}
    return finish(out, a.out)


def finish(out: dict, dest: str | None) -> int:
    """Cells, trends and findings from out["accuracies"]; print the findings, write DEST.{json,md}."""
    acc = {(r["size"], r["optimizer"], r["L"], r["method"]): r["per_seed"] for r in out["accuracies"]}
    out["cells"], out["trends"] = analyse(acc, out["server_sizes"], out["labels"], out["seeds"], out["optimizer_order"])
    out["noise_rule"], out["trend_rule"] = NOISE_RULE, TREND_RULE
    out["findings"] = findings(out["cells"], out["trends"], out["optimizer_order"], out["labels"])
    for f in out["findings"]:
        print("- " + f, flush=True)
    if dest:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest + ".json").write_text(json.dumps(out, indent=1, default=str))
        Path(dest + ".md").write_text(markdown(out))
    return 0


def rerender(dest: str) -> int:
    """Recompute the analysis, findings and md from DEST.json's recorded accuracies (no training): the
    timings stay those of the run that trained them."""
    out = json.loads(Path(dest + ".json").read_text())
    out["rerendered"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return finish(out, dest)


def _ms(s: dict) -> str:
    return f"{s['mean']:.2f} ± {s['std']:.2f}"


def markdown(o: dict) -> str:
    fed = o["federations"]
    shared = [r["client_images_shared"] for r in fed if r["size"] != o["paper_ratio_size"]]
    lines = [o["head"].replace("# ", "", 1).replace("\n# ", "\n\n"), "",
             f"Command: `OMP_NUM_THREADS={o.get('omp_num_threads') or '?'} "
             + (f"nice -n {o['nice']} " if o.get("nice") else "") + f"{o['command']}`"
             + (f" (md re-rendered from the json with --rerender on {o['rerendered']})" if o.get("rerendered") else ""), "",
             f"Settings: {o['rounds']} rounds, {o['samples_per_client']} images per client, batch {o['batch_size']}, "
             f"{o['tuning_epochs']} tuning epochs per round, precision {o['precision']}; server sizes "
             + ", ".join(f"{s['size']} ({s['label']})" for s in o["server_sizes"])
             + "; tuning optimisers " + ", ".join(f"{v['optimizer']} lr {v['lr']:g} ({v['source']})"
                                                 for v in o["optimizers"].values()) + ".", "",
             f"Federations: label sets the same at every size in {sum(r['same_label_sets'] for r in fed)} of {len(fed)} "
             f"(size, L, seed); validation rows the same in {sum(r['same_val_rows'] for r in fed)}, test rows in "
             f"{sum(r['same_test_rows'] for r in fed)}; the clients' images differ (the server set is drawn from "
             f"the clients' pool): share also in the x1 federation "
             + (f"{min(shared):.2f}-{max(shared):.2f}" if shared else "-") + " at the other sizes.", "",
             f"Noise rule: {o['noise_rule']}. Trend rule: {o['trend_rule']}. At chance: the package's rule "
             f"(claims.chance, one-class score {o['chance']:.0f} %).", "",
             "## Findings", ""] + [f"- {f}" for f in o["findings"]] + [
             "", "## Cells (test accuracy %, mean ± seed std; margins in points, per seed)", "",
             "| server | optimiser | L | FedAvg | Tuning-MSE | Tuning-Pairwise | worse - FedAvg (per seed) | mean ± std | "
             "verdict | better - FedAvg (per seed) | mean ± std | verdict | at chance |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in o["cells"]:
        w, b = c["margins"]["worse"], c["margins"]["better"]
        lines.append(f"| {c['size']} | {c['optimizer']} | {c['L']} | {_ms(c['methods']['FedAvg'])} | "
                     f"{_ms(c['methods']['Tuning-MSE'])} | {_ms(c['methods']['Tuning-Pairwise'])} | "
                     f"{' / '.join(f'{x:+.2f}' for x in w['per_seed'])} | {_ms(w)} | {w['verdict']} | "
                     f"{' / '.join(f'{x:+.2f}' for x in b['per_seed'])} | {_ms(b)} | {b['verdict']} | "
                     f"{', '.join(c['at_chance']) or '-'} |")
    lines += ["", "## Margin vs server size (slope in points per decade of server size)", "",
              "| optimiser | L | margin | slope ± SE | points | trend | sizes with a model at chance |", "|---|---|---|---|---|---|---|"]
    for t in o["trends"]:
        sl = f"{t['slope']:+.2f} ± {t['se']:.2f}" if t["slope"] is not None else "-"
        lines.append(f"| {t['optimizer']} | {t['L']} | {t['margin']} | {sl} | {t['n_points']} | {t['trend']} | "
                     f"{t['cells_at_chance']} of {t['cells']} |")
    tm = o["timings"]
    lines += ["", f"## Timings (process CPU s, one thread; data load {tm['data_load_cpu_s']:.1f} s; whole script "
              f"{tm['total_cpu_s']:.0f} s; {o['unique_runs']} unique runs)", "",
              "| server | optimiser | method | runs | trained | CPU s | CPU s per trained run | wall s |",
              "|---|---|---|---|---|---|---|---|"]
    for g in tm["groups"]:
        per = f"{g['cpu_s_per_trained_run']:.2f}" if g["cpu_s_per_trained_run"] is not None else "- (cached)"
        lines.append(f"| {g['size']} | {g['optimizer']} | {g['method']} | {g['runs']} | {g['trained']} | "
                     f"{g['cpu_s']:.1f} | {per} | {g['wall_s']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
