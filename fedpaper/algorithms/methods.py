"""The fedpals and privlabels papers' methods in words: a client objective + a server aggregation
(+ optional server steps), composed into an Algorithm (algorithms.base) by `Method.algorithm()`.

Methods compose: FedProx + FedPALS is `Method("fedprox+fedpals", client="fedprox", server="fedpals")`,
FedProx with private label sets is `Method(..., client="fedprox", private=True)`, and central tuning
sits on top of either through `tuning=`. A Method is a way of writing an Algorithm, not a second
kind of method: a run stores `Method(...).algorithm().spec()` (the parts), and that is its cache key.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from fedpaper.ground.errors import BadParameterError, UnknownNameError
from fedpaper.algorithms.penalties import active, coefficient, PENALTIES
from fedpaper.algorithms.afl import AFLMixture
from fedpaper.algorithms.base import Algorithm, FedAvgWeights
from fedpaper.algorithms.fedpals import FedPALSWeights
from fedpaper.algorithms.fedprox import Penalty
from fedpaper.algorithms.fedrs import RestrictedSoftmax
from fedpaper.algorithms.privlabels import PrivateLabels
from fedpaper.algorithms.scaffold import ControlVariates
from fedpaper.algorithms.semisup import Mixup, PseudoLabels
from fedpaper.algorithms.server_training import ServerTraining
from fedpaper.algorithms.tuning import CentralTuning

CLIENT_OBJECTIVES = ("local", "fedprox", "scaffold", "fedrs")
SERVER_AGGREGATORS = ("fedavg", "fedpals", "afl")
TUNING_LOSSES = (None, "mse", "pairwise", "pairwise_all")


@dataclass(frozen=True)
class Method:
    """A method of the fedpals and privlabels papers by its fields; `algorithm()` gives its parts.

    client:  "local" (plain local SGD/Adam, FedAvg's client, McMahan et al. 2017),
             "fedprox" (mu/2 ||w - w_t||^2, Li et al. 2020 eq. 2),
             "scaffold" (control variates, Karimireddy et al. 2020 Alg. 1, option II),
             "fedrs" (restricted softmax: logits of a client's missing classes scaled by alpha,
             Li & Zhan 2021 eq. 6).
    server:  "fedavg" (n_i/N, fedpals eq. 4), "fedpals" (QP eq. 9 with `lam`), "afl" (agnostic
             mixture weights by projected gradient ascent, Mohri et al. 2019).
    private: private label sets (privlabels Sec 4.1, Algorithm 1): a client receives, trains and
             returns only the classifier rows of its own labels; rows are averaged per label.
    tuning:  central tuning after aggregation (privlabels Sec 4.2): "mse" (eq. 6), "pairwise"
             (eq. 5, pairs inside Y_k), "pairwise_all" (all label pairs, the form App B analyses).
    penalties: extra client loss terms by name (algorithms.penalties.PENALTIES), added after
             FedProx's; "l2" is wd/2 ||w||^2 with wd = weight_decay.
    mixup_alpha: mixup of the clients' batches with lambda ~ Beta(a, a) (Zhang et al. 2018 eq. 1;
             FedMT App C.1: a = 0.75); 0 = off. See algorithms.semisup.mixup.
    pseudo_label_threshold: FixMatch pseudo-labels on each client's unlabeled rows
             (Federation.client_unlabeled_indices; Sohn et al. 2020 eq. 4, SemiFL/FedMT xi = 0.95),
             with weight pseudo_label_weight; None = off. See algorithms.semisup.pseudo_labels.
    server_train_epochs: after aggregation, the server trains the global model for this many
             epochs on its labelled rows Federation.server_indices (FedMT Alg. 1 procedure A);
             0 = off. See server.server_train.
    """

    name: str
    client: str = "local"
    server: str = "fedavg"
    private: bool = False
    tuning: str | None = None
    mu: float = 0.01
    fedrs_alpha: float = 0.5
    lam: float = 0.0
    afl_step: float = 0.01
    tuning_epochs: int = 3
    tuning_optimizer: str = "adam"
    tuning_lr: float | None = None  # None: the clients' learning rate (privlabels App A)
    penalties: tuple = ()
    weight_decay: float = 0.0
    mixup_alpha: float = 0.0
    pseudo_label_threshold: float | None = None
    pseudo_label_weight: float = 1.0
    server_train_epochs: int = 0

    def __post_init__(self):
        object.__setattr__(self, "penalties", (self.penalties,) if isinstance(self.penalties, str)
                           else tuple(self.penalties))
        unknown = [p for p in self.penalties if p not in PENALTIES]
        if unknown:
            raise UnknownNameError(f"unknown penalty {unknown[0]!r}; known: {tuple(PENALTIES)}")
        if len(set(active(self))) != len(active(self)):
            raise BadParameterError(f"penalties {active(self)} name a term twice (client='fedprox' adds 'prox')")
        if self.weight_decay < 0:
            raise BadParameterError(f"weight_decay={self.weight_decay} must be >= 0")
        if not self.mixup_alpha >= 0:
            raise BadParameterError(f"mixup_alpha={self.mixup_alpha} must be >= 0 (0 = no mixup)")
        if self.pseudo_label_threshold is not None and not 0 < self.pseudo_label_threshold <= 1:
            raise BadParameterError(f"pseudo_label_threshold={self.pseudo_label_threshold} must lie in (0, 1] (None = off)")
        if not self.pseudo_label_weight >= 0:
            raise BadParameterError(f"pseudo_label_weight={self.pseudo_label_weight} must be >= 0")
        if not (isinstance(self.server_train_epochs, int) and self.server_train_epochs >= 0):
            raise BadParameterError(f"server_train_epochs={self.server_train_epochs!r} must be an integer >= 0")
        if self.pseudo_label_threshold is not None and self.private:
            raise BadParameterError("pseudo-labels with private label sets are not supported; use private=False")
        if self.client not in CLIENT_OBJECTIVES:
            raise UnknownNameError(f"unknown client objective {self.client!r}; known: {CLIENT_OBJECTIVES}")
        if self.server not in SERVER_AGGREGATORS:
            raise UnknownNameError(f"unknown server aggregator {self.server!r}; known: {SERVER_AGGREGATORS}")
        if self.tuning not in TUNING_LOSSES:
            raise UnknownNameError(f"unknown tuning loss {self.tuning!r}; known: {TUNING_LOSSES}")
        if self.private and self.client in ("fedrs", "scaffold"):
            raise BadParameterError(f"client={self.client!r} needs the full label set; it cannot run with private=True")
        if self.lam < 0 or self.mu < 0:
            raise BadParameterError(f"lam={self.lam} and mu={self.mu} must be >= 0")

    def with_(self, **changes) -> "Method":
        return replace(self, **changes)

    def algorithm(self):
        """The composition of parts the trainer runs (algorithms.base.Algorithm), in this order:
        private label sets; the client objective's part; its penalties (`active`); the aggregation
        weight rule (FedAvg's with private label sets, which average classifier rows per label);
        mixup, pseudo-labels; server training, then central tuning."""
        return Algorithm(self.name, tuple(method_parts(self)))


def standard_methods() -> dict[str, Method]:
    """The named methods of the fedpals and privlabels papers, with the papers' defaults."""
    m = [
        Method("FedAvg"),
        Method("FedProx", client="fedprox", mu=0.01),
        Method("SCAFFOLD", client="scaffold"),
        Method("FedRS", client="fedrs", fedrs_alpha=0.5),
        Method("AFL", server="afl"),
        Method("FedPALS", server="fedpals"),
        Method("FedProx+FedPALS", client="fedprox", server="fedpals"),
        Method("FedAvg (private)", private=True),
        Method("FedProx (private)", client="fedprox", private=True),
        Method("Tuning-MSE", tuning="mse"),
        Method("Tuning-Pairwise", tuning="pairwise"),
        Method("Tuning-MSE (private)", private=True, tuning="mse"),
        Method("Tuning-Pairwise (private)", private=True, tuning="pairwise"),
    ]
    return {x.name: x for x in m}


def get_method(name: str, **overrides) -> Method:
    known = standard_methods()
    if name not in known:
        raise UnknownNameError(f"unknown method {name!r}; known methods: {', '.join(known)}")
    return known[name].with_(**overrides) if overrides else known[name]


# ----------------------------------------------------------------------------- Method fields -> parts
def method_parts(m: Method) -> list:
    """The parts of `m`, in order (see Method.algorithm). The one place Method's fields are read
    as names of parts."""

    client = {"local": [], "fedprox": [],  # FedProx's term is the "prox" penalty of active(m)
              "scaffold": [ControlVariates], "fedrs": [lambda: RestrictedSoftmax(m.fedrs_alpha)]}
    server = {"fedavg": FedAvgWeights, "fedpals": lambda: FedPALSWeights(m.lam), "afl": lambda: AFLMixture(m.afl_step)}
    parts = [PrivateLabels()] if m.private else []
    parts += [make() for make in client[m.client]]
    parts += [Penalty(name, coefficient(m, name), skip_classifier=m.private and name == "prox") for name in active(m)]
    parts.append(FedAvgWeights() if m.private else server[m.server]())
    if m.mixup_alpha > 0:
        parts.append(Mixup(m.mixup_alpha))
    if m.pseudo_label_threshold is not None:
        parts.append(PseudoLabels(m.pseudo_label_threshold, m.pseudo_label_weight))
    if m.server_train_epochs:
        parts.append(ServerTraining(m.server_train_epochs))
    if m.tuning:
        parts.append(CentralTuning(m.tuning, m.tuning_epochs, m.tuning_optimizer, m.tuning_lr, m.private))
    return parts
