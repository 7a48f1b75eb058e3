"""Every artifact (table or figure) of the four papers, as data.

One `Artifact` per id of the project's TARGETS list (78 in all). `datasets` names what the artifact
needs, with the data set names of `fedpaper.blocks.data`; "none" marks artifacts that need no data set
(label-free geometry, the paper's own synthetic task, configuration tables). A name with the
suffix ":labels" needs only that data set's label file (PASCAL VOC and ChestX-ray14 label files are
in the offline copies, their images are not).

The data sets themselves (what they are, how to get them, `dataset_available`) are in the one
registry `fedpaper.blocks.data.registry`, re-exported here for the artifact code.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from fedpaper.blocks.data.registry import (  # noqa: F401  (re-exported)
    DATASETS,
    DatasetInfo,
    dataset_available,
    dataset_info,
    dataset_location,
    how_to_get,
    missing_message,
    unknown_message,
)
from fedpaper.ground.errors import UnknownNameError

PAPERS = ("fedpals", "privlabels", "fedmt", "fednca")

PAPER_TITLES = {
    "fedpals": "FedPALS: target-aware FL under label shift",
    "privlabels": "FL with heterogeneous and private label sets",
    "fedmt": "FedMT: FL with mixed-type labels",
    "fednca": "FedNCA-ML: multi-label FL under label-distribution skew",
}


@dataclass(frozen=True)
class Artifact:
    """One table or figure of a paper. `notebook` stays None until a paper module implements it."""

    id: str
    kind: str
    title: str
    datasets: tuple[str, ...]
    reported: Optional[str] = None  # file name in fedpaper/claims/reported/, or None
    notebook: Optional[str] = None

    @property
    def paper(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.id.split("/", 1)[1]

    @property
    def needed(self) -> tuple[str, ...]:
        """The real data sets needed (without "none")."""
        return tuple(d for d in self.datasets if d != "none")


@dataclass
class Claim:
    """A checkable statement of a paper.

    `check(tables)` receives {artifact_id: DataFrame} with OUR committed csv of every artifact in
    `artifacts` that exists, and returns a `fedpaper.claims.Verdict` (pass / within noise /
    fail / partial / not testable / not checkable, a one-line detail with the numbers behind it, and
    the causes it found); paper modules register checks with `claims.ClaimSet` (see its package
    docstring). `check=None` means the check is not implemented yet. Causes of a verdict other
    than pass are computed (`claims.causes.diagnose`), never typed.
    """

    id: str
    text: str
    artifacts: tuple[str, ...] | list[str] = ()
    check: Optional[Callable] = None

    @property
    def paper(self) -> str:
        return self.id.split("/", 1)[0]


# ---------------------------------------------------------------------------------------------
# The 78 artifacts. (id, kind, short title, data sets, reported csv)
_N = ("none",)
_C10, _C100, _FM, _DM = ("cifar10",), ("cifar100",), ("fashion-mnist",), ("dermamnist",)
_ROWS = [
    # fedpals (21)
    ("fedpals/fig1", "figure", "Ternary simplex: T, client marginals, FedPALS vs FedAvg marginals", _N, None),
    ("fedpals/fig2a", "figure", "Projection distance d(T,S) vs labels per client C", _C10, None),
    ("fedpals/fig2b", "figure", "Client label marginals, sparsity sampling C=6", _C10, None),
    ("fedpals/fig2c", "figure", "Target accuracy vs labels per client C", _C10, None),
    ("fedpals/fig3a", "figure", "PACS target accuracy over rounds", ("pacs",), "fedpals_fig3a_text.csv"),
    ("fedpals/fig3b", "figure", "iWildCam target macro F1 over rounds", ("iwildcam",), "fedpals_fig3b_text.csv"),
    ("fedpals/fig4", "figure", "iWildCam FedPALS aggregation weights at three ESS levels", ("iwildcam",), None),
    ("fedpals/fig5a", "figure", "Projection distance vs Dirichlet beta", _C10, None),
    ("fedpals/fig5b", "figure", "Client label marginals, Dirichlet beta=0.1", _C10, None),
    ("fedpals/fig5c", "figure", "Target accuracy vs Dirichlet beta", _C10, None),
    ("fedpals/fig6a", "figure", "Fashion-MNIST projection distance vs C", _FM, None),
    ("fedpals/fig6b", "figure", "Fashion-MNIST target accuracy vs C", _FM, None),
    ("fedpals/fig7", "figure", "Target accuracy over rounds (FMNIST C=6; CIFAR-10 beta=0.2)", ("fashion-mnist", "cifar10"), None),
    ("fedpals/fig8a", "figure", "Target accuracy with 100 clients, C=2,3,10", _C10, None),
    ("fedpals/fig8b", "figure", "Target accuracy vs local epochs E", _C10, None),
    ("fedpals/fig8c", "figure", "Target accuracy vs number of clients", _C10, None),
    ("fedpals/fig9", "figure", "Synthetic 2-D Gaussians: accuracy vs projection distance", _N, None),
    ("fedpals/table1", "table", "Main comparison of target accuracy", ("fashion-mnist", "cifar10", "pacs"), "fedpals_table1.csv"),
    ("fedpals/table2", "table", "PACS accuracy under perturbed target marginal", ("pacs",), "fedpals_table2.csv"),
    ("fedpals/table3", "table", "iWildCam macro F1, validation-selected models", ("iwildcam",), "fedpals_table3.csv"),
    ("fedpals/table4", "table", "PACS accuracy, all FedPALS variants and baselines", ("pacs",), "fedpals_table4.csv"),
    # privlabels (16)
    ("privlabels/fig1b", "figure", "CIFAR-10 accuracy per method at L=5 (private, public)", _C10, None),
    ("privlabels/fig2", "figure", "CIFAR-10 accuracy vs labels per client L", _C10, None),
    ("privlabels/fig3", "figure", "Fashion-MNIST accuracy vs labels per client L", _FM, None),
    ("privlabels/fig4", "figure", "Fashion-MNIST accuracy per method at L=3", _FM, None),
    ("privlabels/fig5", "figure", "Fashion-MNIST accuracy over rounds, private", _FM, None),
    ("privlabels/fig6", "figure", "Fashion-MNIST accuracy over rounds, public", _FM, None),
    ("privlabels/fig7", "figure", "CIFAR-10 accuracy over rounds, private", _C10, None),
    ("privlabels/fig8", "figure", "CIFAR-10 accuracy over rounds, public", _C10, None),
    ("privlabels/fig9", "figure", "Fashion-MNIST accuracy per method at L=5", _FM, None),
    ("privlabels/fig10", "figure", "CIFAR-10 accuracy per method at L=3", _C10, None),
    ("privlabels/fig11", "figure", "CIFAR-10 accuracy vs local epochs per round", _C10, None),
    ("privlabels/fig12", "figure", "CIFAR-10 accuracy vs L with E=5", _C10, None),
    ("privlabels/fig13", "figure", "CIFAR-10 accuracy vs L with E=3", _C10, None),
    ("privlabels/appB", "figure", "Pairwise vs MSE tuning loss when a label is held by no client", _N, None),
    ("privlabels/table1", "table", "CNN configuration", _N, None),
    ("privlabels/table2", "table", "Hyperparameters", _N, None),
    # fedmt (11)
    ("fedmt/table2", "table", "CIFAR-100 fine-class accuracy vs server samples n", _C100, "fedmt_table2.csv"),
    ("fedmt/fig2a", "figure", "Super-class accuracy vs n", _C100, None),
    ("fedmt/fig2b", "figure", "Fine-class accuracy under label skew vs gamma", _C100, None),
    ("fedmt/fig2c", "figure", "Fine-class accuracy vs number of clients C", _C100, "fedmt_fig2c_text.csv"),
    ("fedmt/fig2d", "figure", "Fine-class accuracy per backbone", _C100, None),
    ("fedmt/fig3", "figure", "Estimation error of the correspondence matrix over rounds", _C100, None),
    ("fedmt/table3", "table", "Fitzpatrick 17k 9-class and 3-class accuracy vs server share r", ("fitzpatrick17k",), "fedmt_table3.csv"),
    ("fedmt/table6", "table", "Baselines with random vs ImageNet initialisation", _C100, "fedmt_table6.csv"),
    ("fedmt/table7", "table", "Accuracy vs pseudo-label threshold", _C100, "fedmt_table7.csv"),
    ("fedmt/table8", "table", "Accuracy vs augmentation-loss weight lambda2", _C100, "fedmt_table8.csv"),
    ("fedmt/table9", "table", "Estimators of the correspondence matrix, IID and non-IID", _C100, "fedmt_table9.csv"),
    # fednca (30)
    ("fednca/table1", "table", "Main comparison, multi-label CIFAR-10", _C10, "fednca_table1.csv"),
    ("fednca/table2", "table", "Main comparison, multi-label DermaMNIST", _DM, "fednca_table2.csv"),
    ("fednca/table3", "table", "Main comparison, PASCAL VOC", ("voc2007",), "fednca_table3.csv"),
    ("fednca/table4", "table", "Main comparison, ChestX-ray14", ("chestxray14",), "fednca_table4.csv"),
    ("fednca/table5", "table", "Component ablation, DermaMNIST", _DM, "fednca_table5.csv"),
    ("fednca/table6", "table", "LADM query ablation, DermaMNIST", _DM, "fednca_table6.csv"),
    ("fednca/table7", "table", "Component ablation, CIFAR-10", _C10, "fednca_table7.csv"),
    ("fednca/table8", "table", "LADM query ablation, CIFAR-10", _C10, "fednca_table8.csv"),
    ("fednca/fig3a", "figure", "t-SNE of test features, FC classifier (DermaMNIST)", _DM, None),
    ("fednca/fig3b", "figure", "t-SNE of class-wise features, LADM + ETF (DermaMNIST)", _DM, None),
    ("fednca/fig3c", "figure", "t-SNE of class-wise features, full FedNCA-ML (DermaMNIST)", _DM, None),
    ("fednca/fig4a", "figure", "Class-feature cosine similarity, FC classifier (DermaMNIST)", _DM, None),
    ("fednca/fig4b", "figure", "Class-feature cosine similarity, LADM + ETF (DermaMNIST)", _DM, None),
    ("fednca/fig4c", "figure", "Class-feature cosine similarity, full FedNCA-ML (DermaMNIST)", _DM, None),
    ("fednca/fig5", "figure", "LADM attention maps (DermaMNIST)", _DM, None),
    ("fednca/fig6a", "figure", "t-SNE of test features, FC classifier (CIFAR-10)", _C10, None),
    ("fednca/fig6b", "figure", "t-SNE, LADM + ETF classifier (CIFAR-10)", _C10, None),
    ("fednca/fig6c", "figure", "t-SNE, full FedNCA-ML (CIFAR-10)", _C10, None),
    ("fednca/fig7a", "figure", "Class-feature cosine similarity, FC classifier (CIFAR-10)", _C10, None),
    ("fednca/fig7b", "figure", "Class-feature cosine similarity, LADM + ETF (CIFAR-10)", _C10, None),
    ("fednca/fig7c", "figure", "Class-feature cosine similarity, full FedNCA-ML (CIFAR-10)", _C10, None),
    ("fednca/fig8", "figure", "Example composite multi-label images (DermaMNIST)", _DM, None),
    ("fednca/fig9a", "figure", "Per-client class counts, CIFAR-10 beta=0.5", _C10, None),
    ("fednca/fig9b", "figure", "Per-client class counts, CIFAR-10 beta=0.1", _C10, None),
    ("fednca/fig10a", "figure", "Per-client class counts, DermaMNIST beta=0.5", _DM, None),
    ("fednca/fig10b", "figure", "Per-client class counts, DermaMNIST beta=0.1", _DM, None),
    ("fednca/fig11a", "figure", "Per-client class counts, PASCAL VOC beta=0.05", ("voc2007:labels",), None),
    ("fednca/fig11b", "figure", "Per-client class counts, PASCAL VOC beta=0.01", ("voc2007:labels",), None),
    ("fednca/fig12a", "figure", "Per-client class counts, ChestX-ray14 beta=0.5", ("chestxray14:labels",), None),
    ("fednca/fig12b", "figure", "Per-client class counts, ChestX-ray14 beta=0.1", ("chestxray14:labels",), None),
]

#: Data sets an artifact can do without (it is then regenerated in part, without their rows);
#: `fedpaper reproduce` does not skip the artifact when only these are missing.
OPTIONAL_DATASETS: dict[str, tuple[str, ...]] = {"fedpals/table1": ("pacs",)}

#: Artifacts whose figure shows images of the data set (pixels that are not in their csv): a re-render
#: from committed results reads no data and would draw them without the images, so they are never
#: re-rendered: the pipeline refuses with one line and `fedpaper reproduce` leaves them out, keeping
#: their committed files (they are regenerated, with the data, like any other artifact).
DRAWS_DATA: frozenset[str] = frozenset({"fednca/fig5", "fednca/fig8"})

ARTIFACTS: dict[str, Artifact] = {
    row[0]: Artifact(id=row[0], kind=row[1], title=row[2], datasets=tuple(row[3]), reported=row[4])
    for row in _ROWS
}

#: The compute ladders: one `<paper>/scaling` artifact per paper, beside the TARGETS list
#: (not in ARTIFACTS: the report's artifact counts stay those of the papers). `fedpaper list` and
#: `reproduce` see them (artifact_ids); the report reads their trends into the claims' causes.
LADDER = "scaling"
LADDERS: dict[str, Artifact] = {
    f"{p}/{LADDER}": Artifact(id=f"{p}/{LADDER}", kind="ladder", title=f"Compute ladder: {PAPER_TITLES[p]}'s "
                              "headline claims and gaps to the paper against training compute",
                              datasets=d)
    for p, d in (("fedpals", ("fashion-mnist", "cifar10")), ("privlabels", ("fashion-mnist", "cifar10")),
                 ("fedmt", ("cifar100",)), ("fednca", ("cifar10", "dermamnist")))
}

REPORTED_DIR = Path(__file__).resolve().parent / "reported"


def get_artifact(artifact_id: str) -> Artifact:
    """The catalog entry (with the notebook of a registered implementation, if any)."""
    try:
        art = ARTIFACTS[artifact_id] if artifact_id in ARTIFACTS else LADDERS[artifact_id]
    except KeyError:
        raise UnknownNameError(unknown_message("artifact id", artifact_id, {**ARTIFACTS, **LADDERS})
                               + " (run `fedpaper list` for all ids)") from None
    return art


def artifact_ids(paper: str | None = None, ladders: bool = True) -> list[str]:
    """The ids of a paper's (or every paper's) artifacts, its compute ladder last (ladders=False:
    the TARGETS list only)."""
    if paper is not None and paper not in PAPERS:
        raise UnknownNameError(unknown_message("paper", paper, PAPERS))
    ids = list(ARTIFACTS) + (list(LADDERS) if ladders else [])
    return [a for a in ids if paper is None or a.startswith(paper + "/")]


def reported_path(artifact_id: str) -> Optional[Path]:
    art = get_artifact(artifact_id)
    return REPORTED_DIR / art.reported if art.reported else None


def load_reported(artifact_id: str):
    """The paper's reported numbers as a DataFrame, or None."""
    import pandas as pd

    p = reported_path(artifact_id)
    return pd.read_csv(p) if p is not None else None
