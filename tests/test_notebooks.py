"""Executed notebooks (smoke defaults): an inline image in each, clean progress text, one-line
errors, an override under nbval, and no outputs in git.

These start Jupyter kernels, so they run only with FEDPAPER_NOTEBOOK_TESTS=1 (`make test` sets
it, after nbval, and points FEDPAPER_NOTEBOOK_CACHE at nbval's cache so that the runs nbval
just made are read back instead of trained again). Every notebook is executed once per session;
all assertions share those executed copies (a notebook runs when a test first needs it).
"""
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from fedpaper.ground.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(os.environ.get("FEDPAPER_NOTEBOOK_TESTS") != "1",
                                reason="executes notebooks; set FEDPAPER_NOTEBOOK_TESTS=1 (make test does)")

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*/*.ipynb"))
IDS = [str(p.relative_to(REPO_ROOT / "notebooks")) for p in NOTEBOOKS]


@pytest.fixture(scope="session")
def kernel_env(tmp_path_factory):
    """Environment of the kernels: text progress bars, a results cache, a scratch figures folder."""
    cache = os.environ.get("FEDPAPER_NOTEBOOK_CACHE") or str(tmp_path_factory.mktemp("nbcache"))
    env = {"FEDPAPER_PROGRESS": "text", "FEDPAPER_CACHE": cache,
           "FEDPAPER_FIGURES": str(tmp_path_factory.mktemp("nbfigures")), "MPLBACKEND": "Agg"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # kernels inherit the environment of this process
    yield env
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _execute(src: Path, out: Path, parameters=None):
    import papermill as pm

    return pm.execute_notebook(str(src), str(out), parameters=parameters or {}, kernel_name="python3",
                               cwd=str(src.parent), progress_bar=False, log_output=False)


class _Executed(dict):
    """{notebook id: (executed notebook dict, error or None)}; a notebook is executed the first
    time it is asked for, then shared by every test (so `-k` runs only the notebooks it needs)."""

    def __init__(self, out_dir: Path):
        super().__init__()
        self.out_dir = out_dir

    def __missing__(self, nb_id):
        out = self.out_dir / nb_id.replace("/", "__")
        err = None
        try:
            _execute(REPO_ROOT / "notebooks" / nb_id, out)
        except Exception as e:  # recorded; each test reports it for its notebook
            err = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
        self[nb_id] = (json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {"cells": []}, err)
        return self[nb_id]


@pytest.fixture(scope="session")
def executed(kernel_env, tmp_path_factory):
    return _Executed(tmp_path_factory.mktemp("executed"))


def _outputs(nb: dict):
    for c in nb["cells"]:
        yield from c.get("outputs", [])


def _stderr(nb: dict) -> str:
    return "".join("".join(o.get("text", "")) for o in _outputs(nb)
                   if o.get("output_type") == "stream" and o.get("name") == "stderr")


@pytest.mark.parametrize("nb_id", IDS)
def test_executed_notebook_shows_an_image(executed, nb_id):
    nb, err = executed[nb_id]
    assert err is None, err
    images = [o for o in _outputs(nb) if "image/png" in o.get("data", {})]
    assert images, f"{nb_id}: no image/png output"
    texts = "".join("".join(o.get("data", {}).get("text/plain", "")) for o in _outputs(nb))
    assert "<Figure size" not in texts  # a figure printed as text instead of drawn
    assert "files: " in "".join("".join(o.get("text", "")) for o in _outputs(nb))  # where it was written


BAR = re.compile(r"^(?P<label>.*?):\s+\d+%\|")


@pytest.mark.parametrize("nb_id", IDS)
def test_progress_is_one_clean_bar_per_sweep(executed, nb_id):
    nb, err = executed[nb_id]
    assert err is None, err
    text = _stderr(nb)
    assert "IProgress not found" not in text and "TqdmWarning" not in text
    labels, others = [], []
    for line in text.split("\n"):
        parts = [p for p in line.split("\r") if p.strip()]
        if not parts:
            continue
        last = parts[-1]
        assert not re.search(r"\d+(\.\d)?/\d+ (runs )?\[[^\]]*\]\S", last), f"text glued to a bar: {last!r}"
        m = BAR.match(last)
        if m:
            labels.append(m.group("label").strip())
        else:
            others.append(last.strip())
    assert not [lb for lb in labels if re.search(r" x\d+$", lb)], f"per-method engine bars: {labels}"
    twice = [lb for lb, n in Counter(labels).items() if n > 1]
    assert not twice, f"bar labels used twice: {twice}"
    # every bar starts with the id of the artifact it computes (this notebook's own, when the
    # notebook is one artifact), then at most the sweep's short name: the paper named once
    # (the catalog says which artifacts a notebook computes, not its file name: notebooks/fedmt/
    # scaling.ipynb draws fig2b/fig2c while fedmt/scaling is the ladder; a ladder's bars are those
    # of the artifacts it reruns)
    from fedpaper.outputs import registry as papers
    from fedpaper.claims.catalog import LADDERS, artifact_ids

    paper = nb_id.split("/")[0]
    ids = set(artifact_ids(paper))
    own = {a for a in ids if (impl := papers.implementation(a)) and impl.notebook
           and impl.notebook.endswith(f"notebooks/{nb_id}")}
    allowed = ids if own & set(LADDERS) else own
    assert own, f"{nb_id} computes no artifact of the catalog"
    wrong = [lb for lb in labels if lb.split(" ")[0] not in allowed or lb.count(paper) != 1]
    assert not wrong, f"bar labels that are not an artifact id (+ a short name): {wrong}"
    # each warning once per artifact (counted), never once per run
    repeated = [ln for ln, n in Counter(others).items() if n > 1]
    assert not repeated, f"lines printed more than once: {repeated}"


EXPLAINING = ["show_specs", "show_seeds", "show_vs_paper", "show_claims"]


def _text(outputs) -> str:
    """Everything a reader sees in these outputs (markdown, plain text, printed lines)."""
    out = []
    for o in outputs:
        d = o.get("data", {})
        out.append("".join(d.get("text/markdown", "")) + "".join(d.get("text/plain", "")) + "".join(o.get("text", "")))
    return "\n".join(out)


@pytest.mark.parametrize("nb_id", IDS)
def test_executed_notebook_explains_its_run_in_read_only_cells(executed, nb_id):
    """Issue 32, item 6: after the run, read-only cells show the run specs, the per-seed table,
    ours next to the paper's and this artifact's claim verdicts with their causes."""
    nb, err = executed[nb_id]
    assert err is None, err
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and c["metadata"].get("editable") is False]
    assert ["".join(c["source"]).split("(")[0] for c in cells] == EXPLAINING
    assert all(c["metadata"].get("deletable") is False for c in cells)
    for c in cells:
        assert c.get("outputs"), f"{nb_id}: {''.join(c['source'])} shows nothing"
        assert not [o for o in c["outputs"] if o.get("output_type") == "error"], f"{nb_id}: {''.join(c['source'])}"
    specs, seeds, vs_paper, claims = (_text(c["outputs"]) for c in cells)
    assert "run specs** (smoke profile)" in specs and "methods: " in specs and "seeds: " in specs
    assert "per seed**" in seeds or "holds no per-seed values" in seeds
    assert "next to the paper's**" in vs_paper or "reports no table of numbers" in vs_paper
    assert ("the paper's claims on it" in claims and "Synthetic stand-in data" in claims) \
        or "no claim of the paper is registered" in claims


TABLE_NOTEBOOKS = ["fedpals/table1.ipynb"]


@pytest.mark.parametrize("nb_id", TABLE_NOTEBOOKS)
def test_table_notebook_shows_ours_next_to_the_papers(executed, nb_id):
    nb, err = executed[nb_id]
    assert err is None, err
    md = "".join("".join(o.get("data", {}).get("text/markdown", "")) for o in _outputs(nb))
    assert "next to the paper's" in md
    html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in _outputs(nb))
    assert "<th>paper</th>" in html and "<th>ours</th>" in html


@pytest.mark.parametrize("nb_id, parameters, words", [
    ("fedpals/fig9", {"seeds": "abc"}, ["seeds='abc'"]),
    ("fedpals/table1", {"overrides": {"table1_rows": [["fashion-mnist", "C=4"]]}},
     ["table1_rows", "[fashion-mnist, C=4]", "[cifar10, beta=0.1]"]),
    ("fedpals/table1", {"overrides": {"shift_methods": ["FedAVG"]}}, ["FedAVG", "FedAvg"]),
])
def test_a_bad_parameter_is_one_line_in_the_notebook(kernel_env, tmp_path, nb_id, parameters, words):
    import papermill as pm

    out = tmp_path / "bad.ipynb"
    with pytest.raises(pm.PapermillExecutionError) as e:
        _execute(REPO_ROOT / "notebooks" / f"{nb_id}.ipynb", out, parameters)
    assert e.value.ename == "BadParameterError"
    errors = [o for o in _outputs(json.loads(out.read_text())) if o.get("output_type") == "error"]
    assert len(errors) == 1 and len(errors[0]["traceback"]) == 1
    assert "ERROR" in errors[0]["traceback"][0] and all(w in errors[0]["traceback"][0] for w in words)


def test_nbval_runs_a_notebook_with_an_override(kernel_env, tmp_path):
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = load_notebook_node(str(REPO_ROOT / "notebooks/fedpals/fig9.ipynb"))
    nb = parameterize_notebook(nb, {"overrides": {"rounds": 3, "deltas": [0.0, 1.0]}})  # papermill's -y
    path = tmp_path / "fig9_override.ipynb"
    nbformat.write(nb, str(path))
    # -p no:randomly: the repo's pytest settings (which turn pytest-randomly off) are not read from
    # tmp_path, and a shuffled notebook runs its cells out of order
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", str(path), "-p", "no:cacheprovider",
                          "-p", "no:randomly", "-q", "--rootdir", str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "passed" in run.stdout
    pngs = list(Path(kernel_env["FEDPAPER_CACHE"], "explore", "smoke").glob("*/fedpals/fig9.png"))
    recs = [json.loads(p.with_suffix(".json").read_text()) for p in pngs]
    assert any(r["exploration"]["changes"] == {"rounds": 3, "deltas": [0.0, 1.0]} for r in recs)


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _extra_keys() -> str:
    m = re.search(r"^NBSTRIPOUT_EXTRA_KEYS := (.+)$", (REPO_ROOT / "Makefile").read_text(), re.M)
    assert m, "Makefile: NBSTRIPOUT_EXTRA_KEYS line missing"
    return m.group(1).strip()


def _as_jupyterlab_saves(committed: dict, executed_nb: dict) -> dict:
    """The committed notebook as JupyterLab's autosave writes it after Run All: outputs and
    execution counts of the executed copy, the kernel's language_info, widget state."""
    saved = json.loads(json.dumps(committed))
    by_source = {"".join(c["source"]): c for c in executed_nb["cells"] if c["cell_type"] == "code"}
    for c in saved["cells"]:
        run = by_source.get("".join(c["source"]))
        if c["cell_type"] == "code" and run is not None:
            c["outputs"], c["execution_count"] = run.get("outputs", []), run.get("execution_count")
    saved["metadata"]["language_info"] = executed_nb["metadata"].get("language_info", {"name": "python"})
    saved["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                                 "version_minor": 0}}
    return saved


def test_running_a_notebook_leaves_no_outputs_in_git(executed, tmp_path):
    """A fresh repository with the project's .gitattributes and the filter `make` installs."""
    nb_id = "fedpals/fig9.ipynb"
    nb, err = executed[nb_id]
    assert err is None, err
    repo = tmp_path / "clone"
    (repo / "notebooks").mkdir(parents=True)
    _git(repo, "init", "-q")
    shutil.copy(REPO_ROOT / ".gitattributes", repo / ".gitattributes")
    shutil.copy(REPO_ROOT / "notebooks" / nb_id, repo / "notebooks/fig9.ipynb")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clean notebook")
    committed = json.loads((repo / "notebooks/fig9.ipynb").read_text())
    saved = _as_jupyterlab_saves(committed, nb)
    assert any(c.get("outputs") for c in saved["cells"])
    (repo / "notebooks/fig9.ipynb").write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
    assert "outputs" in _git(repo, "diff")  # without the filter git sees the outputs ...
    subprocess.run([sys.executable, "-m", "nbstripout", "--install", "--attributes", ".gitattributes"],
                   cwd=repo, check=True)
    _git(repo, "config", "filter.nbstripout.extrakeys", _extra_keys())
    assert _git(repo, "diff") == ""  # ... with it (what `make` installs) there is nothing to commit
    _git(repo, "add", ".")  # (git status lists the file until it is staged: git's size shortcut)
    assert _git(repo, "status", "--porcelain") == "" and _git(repo, "diff", "--cached") == ""
    staged = json.loads(_git(repo, "show", ":notebooks/fig9.ipynb"))
    assert not any(c.get("outputs") for c in staged["cells"])
    assert (repo / "notebooks/fig9.ipynb").read_text() == json.dumps(saved, indent=1) + "\n"  # outputs kept on disk


def test_committed_notebooks_hold_no_outputs():
    """What git holds (the index) for every notebook: no outputs, no execution counts."""
    for nb_path in NOTEBOOKS:
        rel = nb_path.relative_to(REPO_ROOT).as_posix()
        try:
            text = _git(REPO_ROOT, "show", f":{rel}")
        except subprocess.CalledProcessError:
            text = nb_path.read_text(encoding="utf-8")  # not in git (e.g. an exported tarball)
        cells = json.loads(text)["cells"]
        assert not any(c.get("outputs") or c.get("execution_count") for c in cells), rel
