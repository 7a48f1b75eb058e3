"""FedMT: "FedMT: Federated Learning with Mixed-type Labels" (Zhang, Peng, Niu, Zhang, Talhouk, Li;
arXiv 2024). Artifacts of shared/papers/targets/fedmt.md.

Algorithms (fedpaper.algorithms): FedMT (T)/(E) and the fix/mix client of eq. (5), eq. (4) estimates
(fedmt), SemiFL with static BN (semifl), FedRep with client-kept heads (fedrep), FedTrans (fedtrans),
Single (FedAvg over the server's rows). This package:

- data      CIFAR-100 pools with fine and coarse label spaces + M; the "fedmt" layout (Sec. 4.1, App. C.1.1)
- profiles  smoke / quick / long / paper settings and every shrinkage
- runs      run specs, sweeps, per-seed tables
- draw      figures;  claims: the 33 claims, checked on our committed numbers

Artifacts: table2 + fig2a + table6 (`main`), fig2b + fig2c (`scaling`), fig3 (`estimation`), table7 +
table8 + table9 (`ablations`). Not regenerated: fig2d (ImageNet-initialised MobileNet-V2/ResNet-18/
ResNet-50: weights absent offline, far beyond this CPU), table3 (Fitzpatrick 17k absent).

Choices where the paper is vague (targets/fedmt.md section 4; the defaults unless said): vague-1 (5
local epochs for FedMT/SemiFL, 1 for FedAvg-style baselines), vague-2 (client batch 10; one batch size
for clients and server), vague-3 (lambda2 = 1/16), vague-4 (xi = 0.95), vague-5 (plain average of the
client models), vague-6 (the global model after the last round), vague-7 (static BN for FedMT too),
vague-8 (weak: flip + 4-pixel reflect crop; strong: + RandAugment(2, 10); pseudo-labels on
un-augmented images), vague-9 (R_p over S_fix), vague-10 (empty columns keep the last estimate,
uniform at first), vague-11 (unrestricted arg max), vague-12 (non-IID over superclasses), vague-13 (n =
25), vague-14 (C in {10, 20, 40, 80}), vague-15 (fig3 N_c values), vague-17 (FedTrans), vague-18
(FedRep: the server trains after the average, not inside it: a deviation), vague-19 (Single), vague-22
(FedMT (E) 20-class accuracy with the mean of the clients' last estimates), vague-24 (3 seeds in the
paper profile). Quick/long shrinkage: profiles.notes (on every figure and provenance).
"""
from __future__ import annotations

import pandas as pd

from fedpaper.outputs.pipeline import ArtifactJob, artifact_function, declared_jobs
from fedpaper.papers.fedmt import draw as D
from fedpaper.papers.fedmt import profiles as P
from fedpaper.papers.fedmt import runs as R
from fedpaper.papers.fedmt.claims import CLAIMS, FIG2D_REASON, TABLE3_REASON  # noqa: F401  (CLAIMS: a table papers.load_papers reads)
from fedpaper.papers.fedmt import data as _data
from fedpaper.runs.experiment import get_pools, pools_key_of, PoolsBuilder

#: Modules of this package that only read results (edits to them keep the cached runs).
RESULTS_READ_ONLY = ("claims", "draw", "ladder")

PAPER = "fedmt"


def _settings(profile: str) -> dict:
    """The profile's settings (the pipeline settles them: the overrides; its seeds, a count here,
    made a list)."""
    p = P.settings(profile)
    p["profile"] = profile
    return p


def _info(p, data_root) -> dict:
    pools = get_pools(pools_key_of(R.data_spec(p), data_root))
    desc = dict(getattr(pools, "description", {}))
    desc["name"] = "cifar100"
    return {"datasets": [desc], "seeds": p["seeds"], "notes": p["notes"], "device": pools.x_train.device.type,
            "backbone": p["backbone_label"]}


def _job(name, p, draw_fn, specs, summarise, desc):
    """An artifact of FedMT's runs: `specs(q)` declared, `summarise(specs, results, q)` their table."""
    return ArtifactJob(f"{PAPER}/{name}", p, None, draw_fn, ("cifar100",), specs=specs, summarise=summarise,
                       execution=R.EXECUTION, max_batch=16, desc=desc, split_by=R.clients_label,
                       where=f"the {PAPER} {p['profile']} profile")


def _table(specs, res, keys, **setting):
    return R.summarise(R.per_seed(specs, res, setting), keys)


# ------------------------------------------------------------------ Table 2, Fig 2a, Table 6
KEYS2 = ["dataset", "split", "C", "N_c", "n", "backbone", "init"]


def _main_specs(p):
    return [R.spec(p, m, s, n=n) for n in p["n_values"] for m in R.TABLE2_METHODS for s in p["seeds"]]


@artifact_function
def main(*, profile="smoke", data_root=None):
    """Table 2 (100-class accuracy vs n), Fig. 2a (20-class accuracy vs n) and Table 6 (the
    baselines from random initialisation), from one set of runs (Sec. 4.2, App. D.1-D.2)."""
    p = _settings(profile)

    def table(specs, res, q):
        t = _table(specs, res, KEYS2, backbone=q["backbone_label"], init="random")
        return t, _info(q, data_root)

    keep2 = ("test_acc_100class",) + R.SFIX_METRICS  # + the clients' last-round S_fix: explains FedMT vs Single
    t2 = _job("table2", p, lambda t, q: D.lines(t, "n", "test_acc_100class",
                                               "Table 2: 100-class accuracy vs server images per class n",
                                               P.subtitle(q), "n (server images per fine class)"),
              _main_specs, lambda specs, res, q: (lambda t, i: (t[t["metric"].isin(keep2)].reset_index(drop=True), i))(
                  *table(specs, res, q)), "fedmt table2")
    f2a = _job("fig2a", p, lambda t, q: D.lines(t, "n", "test_acc_20class", "Fig. 2a: 20-class accuracy vs n",
                                               P.subtitle(q),
                                               "n (server images per fine class)"),
               _main_specs, lambda specs, res, q: (lambda t, i: (t[t["metric"] == "test_acc_20class"].reset_index(
                   drop=True), i))(*table(specs, res, q)), "fedmt table2")

    def t6(specs, res, q):
        t, i = table(specs, res, q)
        t = t[(t["metric"] == "test_acc_100class") & t["method"].isin(["Single", "FedRep", "FedTrans"])]
        i["notes"] = list(i["notes"]) + ["only the random-initialisation column is run: ImageNet weights are absent "
                                         "offline (the paper's ImageNet column is Table 2's baselines)"]
        return t.reset_index(drop=True), i
    t6r = _job("table6", p, lambda t, q: D.lines(t, "n", "test_acc_100class",
                                                 "Table 6: baselines from random initialisation", P.subtitle(q),
                                                 "n (server images per fine class)"), _main_specs, t6, "fedmt table2")
    return [t2, f2a, t6r]


# ------------------------------------------------------------------ Fig 2b, 2c
@artifact_function
def scaling(*, profile="smoke", data_root=None):
    """Fig. 2b (accuracy vs label skew gamma, App. C.1.1 split) and Fig. 2c (accuracy vs number of
    clients C with N_c x C fixed), SemiFL and FedMT (E), n = n_default."""
    p = _settings(profile)
    methods = ["SemiFL", "FedMT (E)"]

    def specs_b(q):
        return [R.spec(q, m, s, gamma=g) for g in [None] + q["gammas"] for m in methods for s in q["seeds"]]

    def f2b(specs, res, q):
        t = _table(specs, res, ["dataset", "split", "gamma", "C", "N_c", "n"])
        return t[t["metric"] == "test_acc_100class"].reset_index(drop=True), _info(q, data_root)

    def specs_c(q):
        return [R.spec(q, m, s, C=c, N_c=q["client_total"] // c) for c in q["client_counts"] for m in methods
                for s in q["seeds"]]

    def f2c(specs, res, q):
        t = _table(specs, res, ["dataset", "split", "C", "N_c", "n"])
        return t[t["metric"] == "test_acc_100class"].reset_index(drop=True), _info(q, data_root)

    def draw_b(t, q):
        t = t.assign(skew=t["gamma"].fillna(0.0))
        return D.lines(t, "skew", "test_acc_100class", "Fig. 2b: accuracy vs label skew gamma (0 = IID)",
                       P.subtitle(q), "gamma")

    b = _job("fig2b", p, draw_b, specs_b, f2b, "fedmt fig2b")
    c = _job("fig2c", p, lambda t, q: D.lines(t, "C", "test_acc_100class",
                                              "Fig. 2c: accuracy vs clients C (N_c x C fixed)", P.subtitle(q), "C",
                                              logx=True),
             specs_c, f2c, "fedmt fig2c")
    return [b, c]


# ------------------------------------------------------------------ Fig 3
@artifact_function
def estimation(*, profile="smoke", data_root=None):
    """Fig. 3: Frobenius error of each client's eq. (4) estimate per round, mean and sd over the
    clients, for several client sizes N_c, and of the learnable M at the largest N_c (App. D.4)."""
    p = _settings(profile)

    def specs(q):
        return ([R.spec(q, "FedMT (E)", s, N_c=nc) for nc in q["fig3_sizes"] for s in q["seeds"]]
                + [R.spec(q, "Learnable", s, N_c=max(q["fig3_sizes"])) for s in q["seeds"]])

    def summarise(specs, res, q):
        info = _info(q, data_root)
        info["notes"] = list(info["notes"]) + ["error bar: sd over the clients (vague-15); the learnable M (App. D.4) "
                                               "at the largest N_c"]
        return R.round_errors(specs, res), info

    return [_job("fig3", p, lambda t, q: D.error_curves(t, "Fig. 3: estimation error of M per round", P.subtitle(q)),
                 specs, summarise, "fedmt fig3")]


# ------------------------------------------------------------------ Tables 7-9
@artifact_function
def ablations(*, profile="smoke", data_root=None):
    """Table 7 (threshold xi, with lambda2 = 1: targets vague-4), Table 8 (lambda2) and Table 9
    (estimators: FedMT (E) and FedMT (E) + Average, IID and non-IID gamma), n = n_default."""
    p = _settings(profile)

    def specs7(q):
        return [R.spec(q, m, s, threshold=x, lambda2=1) for x in q["thresholds"] for m in ["SemiFL", "FedMT (E)"]
                for s in q["seeds"]]

    def t7(specs, res, q):
        t = _table(specs, res, ["dataset", "split", "C", "N_c", "n", "threshold"])
        return t[t["metric"].isin(("test_acc_100class",) + R.SFIX_METRICS)].reset_index(drop=True), _info(q, data_root)

    def specs8(q):
        return [R.spec(q, m, s, lambda2=x) for x in q["lambda2s"] for m in R.FEDMT for s in q["seeds"]]

    def t8(specs, res, q):
        t = _table(specs, res, ["dataset", "split", "C", "N_c", "n", "lambda2"])
        t = t[t["metric"] == "test_acc_100class"].reset_index(drop=True)
        t.insert(t.columns.get_loc("lambda2") + 1, "lambda2_label",
                 ["1" if v == 1 else f"1/{round(1 / v)}" for v in t["lambda2"]])
        return t, _info(q, data_root)

    def specs9(q):
        return [R.spec(q, m, s, gamma=g) for g in [None] + q["gammas"] for m in R.TABLE9_METHODS for s in q["seeds"]]

    def t9(specs, res, q):
        t = _table(specs, res, ["dataset", "split", "gamma", "C", "N_c", "n"])
        info = _info(q, data_root)
        info["notes"] = list(info["notes"]) + ["Learnable: per-client softmax-parameterised M, logits N(0, 0.01^2), "
                                               "trained with the network by the same SGD (vague-16)"]
        return t[t["metric"] == "test_acc_100class"].reset_index(drop=True), info

    a = _job("table7", p, lambda t, q: D.lines(t, "threshold", "test_acc_100class",
                                               "Table 7: accuracy vs pseudo-label threshold", P.subtitle(q),
                                               "threshold"),
             specs7, t7, "fedmt table7")
    b = _job("table8", p, lambda t, q: D.lines(t, "lambda2", "test_acc_100class",
                                               "Table 8: accuracy vs lambda2", P.subtitle(q), "lambda2", logx=True),
             specs8, t8, "fedmt table8")
    c = _job("table9", p, lambda t, q: D.bars(t.assign(gamma=t["gamma"].fillna("IID")), "gamma",
                                              "test_acc_100class", "Table 9: estimators of M", P.subtitle(q)),
             specs9, t9, "fedmt table9")
    return [a, b, c]


# ------------------------------------------------------------------ registration (outputs.registry.load_papers)
_GROUPS = {"main": ["table2", "fig2a", "table6"], "scaling": ["fig2b", "fig2c"], "estimation": ["fig3"],
           "ablations": ["table7", "table8", "table9"]}
NOTEBOOKS = {**{f"{PAPER}/{a}": f"notebooks/{PAPER}/{nb}.ipynb" for nb, ids in _GROUPS.items() for a in ids},
             f"{PAPER}/scaling": f"notebooks/{PAPER}/ladder.ipynb"}  # the compute ladder (ladder.py)
NOT_IMPLEMENTED = {f"{PAPER}/fig2d": FIG2D_REASON, f"{PAPER}/table3": TABLE3_REASON}
LAYOUTS = {"fedmt": _data.fedmt_layout}
POOLS_BUILDERS = {"fedmt-cifar100": PoolsBuilder(_data.build_pools, reads="cifar100")}


# ------------------------------------------------------------------ sizing (benchmarks/fedmt_backbones.py)
def all_specs(profile: str) -> list:
    """Every distinct run the implemented artifacts of a profile train (shared runs counted once)."""
    p = declared_jobs(main, profile=profile)[0].params
    fe = ["SemiFL", "FedMT (E)"]
    s = p["seeds"]
    specs = _main_specs(p)
    specs += [R.spec(p, m, x, gamma=g) for g in [None] + p["gammas"] for m in fe for x in s]
    specs += [R.spec(p, m, x, C=c, N_c=p["client_total"] // c) for c in p["client_counts"] for m in fe for x in s]
    specs += [R.spec(p, "FedMT (E)", x, N_c=nc) for nc in p["fig3_sizes"] for x in s]
    specs += [R.spec(p, "Learnable", x, N_c=max(p["fig3_sizes"])) for x in s]
    specs += [R.spec(p, m, x, threshold=t, lambda2=1) for t in p["thresholds"] for m in fe for x in s]
    specs += [R.spec(p, m, x, lambda2=v) for v in p["lambda2s"] for m in R.FEDMT for x in s]
    specs += [R.spec(p, m, x, gamma=g) for g in [None] + p["gammas"] for m in R.TABLE9_METHODS for x in s]
    return list({sp.to_json(): sp for sp in specs}.values())


def workload(profile: str, randaugment_cost: float = 1.5, two_head_cost: float = 2.0) -> dict:
    """Training image-steps of a profile's runs: a lower bound (no client row ever confident: FedMT
    and SemiFL clients skip) and an upper bound (every client row confident: 3 images per row, weak,
    strong and mix, RandAugment counted `randaugment_cost` times); pseudo-labelling and evaluation
    forwards count a third of a training step; two-head (loop backend) baselines `two_head_cost`."""
    p = _settings(profile)
    lo = hi = 0.0
    runs = all_specs(profile)
    for s in runs:
        m, pt, t = s.tags["display"], s.partition, s.training
        server, client, rounds = pt["n"] * 100, pt["num_clients"] * pt["samples_per_client"], t["rounds"]
        test = (p["test_cap"] or 10000) / 3
        if m == "Single":
            a = b = rounds * (server + test)
        elif m in R.TWO_HEAD or m.startswith("Learnable"):  # loop backend
            a = b = two_head_cost * rounds * (client + (server if m == "FedRep" else 0) + test) + \
                (p["finetune_epochs"] * server if m == "FedTrans" else 0)
        else:
            a = rounds * (p["server_epochs"] * server + client / 3 + test)
            b = a + rounds * t["local_epochs"] * 3 * client * randaugment_cost
        lo, hi = lo + a, hi + b
    return {"runs": len(runs), "image_steps_low": lo, "image_steps_high": hi}
