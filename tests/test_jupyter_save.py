"""JupyterLab never dirties git: a project notebook saved through the Jupyter server (what JupyterLab's
save and autosave do: a PUT to the contents API) is written without outputs, execution counts and
kernel metadata (fedpaper.jupyter_save, a server extension enabled by the config file the install
ships), so a fresh clone, where `make` never installed the nbstripout filter, stays clean after a Run
All and a save. A real `jupyter server` on a free port, in a subprocess; skipped without jupyter_server."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request

import pytest

from fedpaper import jupyter_save
from fedpaper.ground.paths import REPO_ROOT

pytest.importorskip("jupyter_server")
pytest.importorskip("nbstripout")

NOTEBOOK = "notebooks/fedpals/table1.ipynb"
TOKEN = "fedpaper-test-token"


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def fresh_clone(tmp_path):
    """A clone of this checkout's HEAD with only the notebook and .gitattributes checked out (sparse): no
    nbstripout filter configured, as before any `make`."""
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("needs git and this checkout's repository")
    clone = tmp_path / "clone"
    _git("clone", "-q", "--no-checkout", str(REPO_ROOT), str(clone), cwd=tmp_path)
    _git("sparse-checkout", "set", "--no-cone", f"/{NOTEBOOK}", "/.gitattributes", cwd=clone)
    _git("checkout", "-q", cwd=clone)
    assert subprocess.run(["git", "config", "filter.nbstripout.clean"], cwd=clone).returncode != 0
    assert _git("status", "--porcelain", cwd=clone) == ""
    return clone


def _shipped_config_dir(tmp_path):
    """The Jupyter config folder an install makes from pyproject.toml's data-files: the files it ships into
    etc/jupyter, placed as pip places them."""
    files = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    out = tmp_path / "prefix"
    for target, sources in files.items():
        assert target.startswith("etc/jupyter/"), target
        dest = out / target
        dest.mkdir(parents=True, exist_ok=True)
        for s in sources:
            shutil.copy(REPO_ROOT / s, dest)
    return out / "etc" / "jupyter"


@pytest.fixture
def jupyter_server(tmp_path, fresh_clone):
    """`jupyter server` over the fresh clone, configured only by the shipped config (no user config)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "user-config"),
               JUPYTER_CONFIG_PATH=str(_shipped_config_dir(tmp_path)), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTER_NO_CONFIG="")
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyter_server", f"--port={port}", "--ip=127.0.0.1",
                             f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={fresh_clone}",
                             "--ServerApp.open_browser=False", "--ServerApp.allow_root=True"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=fresh_clone)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                _request(base, "GET", "/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("jupyter server did not start: " + (tmp_path / "server.log").read_text()[-2000:])
                time.sleep(0.5)
        yield base, fresh_clone, tmp_path / "server.log"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _request(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


def _run_all(nb: dict) -> dict:
    """What a Run All leaves in a notebook: outputs, execution counts, the kernel's language_info."""
    for i, c in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        c["execution_count"] = i + 1
        c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "fedpals/table1: regenerated\n"},
                        {"output_type": "execute_result", "execution_count": i + 1, "metadata": {},
                         "data": {"text/plain": "42"}}]
        c["metadata"]["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.2"}
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    return nb


def test_a_save_after_run_all_leaves_a_fresh_clone_clean(jupyter_server):
    base, clone, log = jupyter_server
    committed = (clone / NOTEBOOK).read_bytes()
    model = _request(base, "GET", f"/api/contents/{NOTEBOOK}?content=1")
    _request(base, "PUT", f"/api/contents/{NOTEBOOK}",
             {"type": "notebook", "format": "json", "content": _run_all(model["content"])})
    assert _git("status", "--porcelain", cwd=clone) == "", (clone / NOTEBOOK).read_text()[:3000]
    assert (clone / NOTEBOOK).read_bytes() == committed
    assert "fedpaper.jupyter_save" in log.read_text()


def test_a_notebook_of_ones_own_keeps_its_outputs(jupyter_server):
    base, clone, _ = jupyter_server
    model = _request(base, "GET", f"/api/contents/{NOTEBOOK}?content=1")
    nb = _run_all(model["content"])
    del nb["metadata"]["fedpaper"]
    _request(base, "PUT", "/api/contents/mine.ipynb", {"type": "notebook", "format": "json", "content": nb})
    saved = json.loads((clone / "mine.ipynb").read_text())
    assert any(c.get("outputs") for c in saved["cells"]) and saved["metadata"]["language_info"]


def test_the_save_strips_what_the_git_filter_strips():
    """The hook's keys are nbstripout's defaults and the Makefile's NBSTRIPOUT_EXTRA_KEYS (the filter's)."""
    make = (REPO_ROOT / "Makefile").read_text()
    [keys] = re.findall(r"^NBSTRIPOUT_EXTRA_KEYS := (.*)$", make, re.M)
    assert tuple(keys.split()) == jupyter_save.EXTRA_KEYS
    import inspect

    from nbstripout import _nbstripout

    defaults = re.search(r"extra_keys = \[(.*?)\]", inspect.getsource(_nbstripout.main), re.S).group(1)
    assert tuple(re.findall(r"'([^']+)'", defaults)) == jupyter_save.NBSTRIPOUT_DEFAULT_KEYS


def test_make_installs_the_shipped_config_into_its_environment():
    """An editable install (make's, the conda environment's) installs no data files: the Makefile's venv step
    copies the one pyproject.toml ships to where pip puts it."""
    make = (REPO_ROOT / "Makefile").read_text()
    [[target, [source]]] = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "data-files"].items()
    assert re.search(rf"^JUPYTER_SAVE_CONFIG := {re.escape(source)}$", make, re.M)
    assert re.search(rf"^JUPYTER_SAVE_CONFIG_DIR := {re.escape(target)}$", make, re.M)
    stamp = make.split("$(STAMP): pyproject.toml", 1)[1].split("\n\n", 1)[0]
    assert "install -D -m 644 $(JUPYTER_SAVE_CONFIG) $(VENV)/$(JUPYTER_SAVE_CONFIG_DIR)/fedpaper.json" in stamp
