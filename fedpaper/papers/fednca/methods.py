"""FedNCA-ML's methods (Tables 1-8) as algorithm compositions, and the model each one trains.

Every method trains model "fednca_net" (nets.ladm) with the same backbone, AdamW (lr, betas (0.9,
0.98), weight decay 0.01; PUBLIC-CODE.md), the warm-up-linear schedule and BCE averaged over classes
(eq. 10); they differ in the head and the parts (targets vague-9 to -11):

| method | head | parts |
|---|---|---|
| Centralized (Upperbound) | fc | FedAvg on one client holding all training rows (layout fednca-central) |
| FedAvg | fc | FedAvg (McMahan et al. 2017) |
| FedCurv | fc | algorithms.fedcurv, lam 0.01 (Shoham et al. 2019) |
| FedProx | fc | the prox penalty, mu 0.01 (Li et al. 2020, eq. 2) |
| SCAFFOLD | fc | algorithms.scaffold control variates added to the gradients before AdamW |
| SphereFed | sphere | algorithms.spherefed: fixed orthonormal classifier, normalised features x 16 |
| FedNCA-ML | ladm | fixed ETF (frozen) + eq. 14 with lambda1 (1 CIFAR-10, 0.01 otherwise), lambda2 = 1 |
| FedLGT | - | not regenerated: needs CLIP text embeddings (not available offline) |

Ablation variants (Tables 5, 7) by components (etf_clf, ladm, l_neg, l_pos): none -> head fc;
ETF-Clf -> head etf (pooled feature x fixed ETF); + LADM -> head ladm; the regularisers switch
lambda1 / lambda2 on. Query ablation (Tables 6, 8): head ladm, no regularisers, the ETF matrix
learnable (init random or ETF) or fixed.
"""
from __future__ import annotations

from fedpaper.algorithms.families import family_algorithm
from fedpaper.blocks.nets.ladm import fixed_parameter_names

CENTRAL = "Centralized (Upperbound)"
FEDNCA = "FedNCA-ML"
FEDLGT = "FedLGT"
TABLE_METHODS = [CENTRAL, "FedAvg", "FedCurv", "FedProx", "SCAFFOLD", "SphereFed", FEDLGT, FEDNCA]
NOT_REGENERATED = {FEDLGT: "needs frozen CLIP ViT-B/32 text embeddings of the label names (Liu et al. 2024), "
                           "which are not available offline; its column is left empty"}
HEAD = {CENTRAL: "fc", "FedAvg": "fc", "FedCurv": "fc", "FedProx": "fc", "SCAFFOLD": "fc", "SphereFed": "sphere",
        FEDNCA: "ladm"}
KINDS = {CENTRAL: "fedavg", "FedAvg": "fedavg", "FedCurv": "fedcurv", "FedProx": "fedprox", "SCAFFOLD": "scaffold",
         "SphereFed": "spherefed", FEDNCA: "fednca"}

# Table 5 / 7 rows: (etf_clf, ladm, l_neg, l_pos) and the paper's label
COMPONENTS = [((0, 0, 0, 0), "none"), ((1, 0, 0, 0), "ETF-Clf"), ((1, 1, 0, 0), "ETF-Clf+LADM"),
              ((1, 1, 1, 0), "ETF-Clf+LADM+L_Neg"), ((1, 1, 0, 1), "ETF-Clf+LADM+L_Pos"),
              ((1, 1, 1, 1), "ETF-Clf+LADM+L_Neg+L_Pos")]
# Table 6 / 8 rows: (query_type, query_init)
QUERIES = [("learnable", "random"), ("learnable", "ETF"), ("fixed", "ETF")]


def method_dict(name: str, p: dict, lam_neg: float, lam_pos: float, kind: str | None = None,
                head: str | None = None, queries: str = "fixed") -> dict:
    """The RunSpec.method of a method (the cache key): the spec of its algorithm (algorithms.families,
    family "fednca": kind, loss weights, baseline coefficients, optimiser, frozen parameters)."""
    head = head or HEAD[name]
    kind = kind or KINDS[name]
    d = {"kind": kind, "bce": p["bce"], "tau": p["tau"],
         "lam_neg": float(lam_neg), "lam_pos": float(lam_pos),
         "optim": {"lr": p["lr"], "weight_decay": p["weight_decay"], "betas": list(p["betas"]),
                   "schedule": p["lr_schedule"]},
         "frozen": list(fixed_parameter_names(head, queries))}
    if kind == "fedprox":
        d["mu"] = p["mu"]
    if kind == "fedcurv":
        d["fedcurv_lam"], d["fisher_batches"] = p["fedcurv_lam"], p["fisher_batches"]
    return family_algorithm(name, "fednca", d).spec()


def model_kwargs(p: dict, head: str, queries: str = "fixed", query_init: str = "etf") -> dict:
    return {**p["model"], "head": head, "queries": queries, "query_init": query_init.lower()}
