"""A notebook stopped by bad input is one line under papermill too, and the same line in JupyterLab and the CLI.

- `papermill --engine fedpaper ...` (fedpaper.papermill_engine, registered under papermill's
  `papermill.engine` entry point in pyproject.toml): the notebook's `ERROR: ...` line on stderr,
  no traceback, exit 2 for bad input (1 for another fedpaper error); a bug keeps papermill's
  traceback; through the Python API the engine is nbclient's.
- `fedpaper reproduce`: one FAILED line per failed notebook naming the notebook and the error, exit 2.

Two tests start a real kernel (a few seconds each); the rest are in-process.
"""
import os
import subprocess
import sys
import tomllib

import click
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from papermill.cli import papermill as papermill_command
from papermill.engines import NBClientEngine

from fedpaper.papermill_engine import FedpaperEngine, notebook_error, one_line
from fedpaper.ground.paths import REPO_ROOT
from repo_scripts import load_script

BAD_PROFILE = "ERROR: unknown profile 'nonsense'; choose one of smoke, quick, long, paper"


def _notebook(path, body):
    """parameters cell (`profile`, tagged for papermill), then `body`."""
    params = new_code_cell('profile = "smoke"')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)],
                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, str(path))
    return path


RUN_CELL = ("from fedpaper.notebook import run\n"
            "result = run(lambda profile, data_root, out_dir, seeds: profile, profile=profile)")


def _entry_point_dir(tmp_path):
    """A folder with a dist-info that declares pyproject.toml's papermill engines, for PYTHONPATH: the
    declaration is tested as written, whether or not this checkout's install metadata is current."""
    eps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["papermill.engine"]
    info = tmp_path / "ep" / "fedpaper_engines-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fedpaper-engines\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[papermill.engine]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    return info.parent


def test_papermill_command_with_the_fedpaper_engine_prints_the_one_line(tmp_path):
    src = _notebook(tmp_path / "in.ipynb", RUN_CELL)
    out = tmp_path / "out.ipynb"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(_entry_point_dir(tmp_path))]),
               FEDPAPER_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "papermill", "--engine", "fedpaper", "-k", "python3", str(src),
                           str(out), "-p", "profile", "nonsense"], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "PapermillExecutionError" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()]
    assert errors == [f"{BAD_PROFILE} ({src}, In [3]; executed copy: {out})"], proc.stderr
    executed = nbformat.read(str(out), as_version=4)  # written as papermill writes it: its error marker on top
    assert "papermill-error-cell-tag" in executed.cells[0].metadata.get("tags", [])
    assert [o.ename for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"] == \
        ["UnknownNameError"]


def _executed(ename, traceback):
    """An executed notebook whose second cell stopped on (ename, traceback)."""
    nb = new_notebook(cells=[new_code_cell("x = 1"), new_code_cell("f()")])
    nb.cells[1].execution_count = 2
    nb.cells[1].outputs = [new_output("error", ename=ename, evalue=traceback[-1], traceback=traceback)]
    return nb


@pytest.fixture
def engine_returns(monkeypatch):
    """FedpaperEngine with nbclient's execution replaced: it returns the notebook it is given."""
    monkeypatch.setattr(NBClientEngine, "execute_notebook", classmethod(lambda cls, nb, kernel_name, **kw: nb))


@pytest.mark.parametrize("ename, code", [("BadParameterError", 2), ("UnknownNameError", 2),
                                         ("DataMissingError", 2), ("DataCorruptError", 1)])
def test_exit_code_bad_input_2_other_fedpaper_errors_1(engine_returns, tmp_path, capsys, ename, code):
    nb = _executed(ename, ["\x1b[0;31mERROR\x1b[0m: the problem; the fix"])
    with click.Context(papermill_command), pytest.raises(click.exceptions.Exit) as e:
        FedpaperEngine.execute_notebook(nb, "python3", input_path="in.ipynb", output_path=str(tmp_path / "o.ipynb"))
    assert e.value.exit_code == code
    assert capsys.readouterr().err == f"ERROR: the problem; the fix (in.ipynb, In [2]; executed copy: {tmp_path / 'o.ipynb'})\n"
    assert (tmp_path / "o.ipynb").is_file()


def test_python_api_and_unsaved_output_leave_papermill_to_raise(engine_returns, capsys):
    nb = _executed("BadParameterError", ["\x1b[0;31mERROR\x1b[0m: the problem; the fix"])
    assert FedpaperEngine.execute_notebook(nb, "python3", output_path="o.ipynb") is nb  # no click context
    assert capsys.readouterr().err == ""
    with click.Context(papermill_command):  # output to stdout: the line, then papermill writes and raises
        assert FedpaperEngine.execute_notebook(nb, "python3", input_path="in.ipynb", output_path=None) is nb
    assert capsys.readouterr().err == "ERROR: the problem; the fix (in.ipynb, In [2])\n"
    assert len(nb.cells) == 2  # papermill's error markers are added once, by papermill
    bug = _executed("RuntimeError", ["Traceback ...", "RuntimeError: a bug"])
    with click.Context(papermill_command):  # a bug: papermill raises it with its traceback
        assert FedpaperEngine.execute_notebook(bug, "python3", input_path="in.ipynb", output_path="o.ipynb") is bug
    assert capsys.readouterr().err == ""


def test_only_the_notebooks_one_line_form_counts():
    assert one_line(notebook_error(_executed("BadParameterError", ["\x1b[0;31mERROR\x1b[0m: x"]))) == "ERROR: x"
    assert one_line(notebook_error(_executed("RuntimeError", ["Traceback ...", "RuntimeError: x"]))) is None
    assert one_line(notebook_error(_executed("ValueError", ["ValueError: ERROR: x"]))) is None
    assert notebook_error(new_notebook(cells=[new_code_cell("x = 1")])) is None


DEMO = "from fedpaper.ground.errors import BadParameterError\n\n" \
       "def bad(**kwargs):\n    raise BadParameterError(\"seeds='abc' is a string; give a number of seeds >= 1\")\n"


def test_reproduce_one_line_per_failed_notebook_and_exit_2(tmp_path, monkeypatch, capfd, figures_tmp, cache_tmp,
                                                           readme_tmp):
    """A real notebook run by the CLI (papermill, a kernel) stops on bad input."""

    from fedpaper import cli
    from fedpaper.outputs import registry as papers

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "fp_bad.py").write_text(DEMO)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(pkg), os.environ.get("PYTHONPATH")) if p))
    nn = load_script("scripts/new_notebook.py")
    papers.load_papers()
    nb = tmp_path / "fig9.ipynb"
    nbformat.write(nn.make_notebook("fedpals", "fig9", "fedpals/fig9", "fp_bad.bad", section="x"), str(nb))
    monkeypatch.setitem(papers._IMPLEMENTATIONS, "fedpals/fig9", papers.Implementation("fedpals/fig9", str(nb)))

    rc = cli.main(["reproduce", "--profile", "smoke", "--only", "fedpals/fig9", "--no-report"])
    out, err = capfd.readouterr()
    assert rc == 2, out + err
    assert "Traceback" not in out + err
    failed = [ln for ln in out.splitlines() if ln.startswith("FAILED")]
    assert failed == [f"FAILED  {nb}: BadParameterError: seeds='abc' is a string; give a number of seeds >= 1 "
                      f"(executed copy: {cache_tmp / 'executed' / 'smoke' / 'fig9.ipynb'})",
                      f"FAILED          fedpals/fig9: {nb} failed (the error: its FAILED line above)"], out


def test_the_engine_module_loads_without_importing_fedpaper(tmp_path):
    """papermill imports every registered engine on import: the engine module must load even where
    `fedpaper` is another checkout (a frozen worktree on PYTHONPATH), so it imports nothing of
    fedpaper at load time. Checked in a fresh process with a stand-in `fedpaper` package first on the
    path whose `errors` module has none of today's names."""
    import subprocess
    import sys
    from pathlib import Path

    import fedpaper

    stand_in = tmp_path / "fedpaper"
    stand_in.mkdir()
    (stand_in / "__init__.py").write_text("")
    (stand_in / "errors.py").write_text("")
    (stand_in / "papermill_engine.py").write_text(
        (Path(fedpaper.__file__).parent / "papermill_engine.py").read_text())
    code = "import fedpaper.papermill_engine as m; print(m.FedpaperEngine.__name__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "FedpaperEngine"


# ------------------------------------------------------------------------------------------------------------
# The same one line for the same bad input, wherever a user gives it: JupyterLab (a python3 kernel running the
# notebook's cells with its parameters cell edited), papermill run as the notebook's own title cell says, and the
# CLI (which has --profile and --data-root; seeds and overrides are notebook parameters only).

NOTEBOOK = "notebooks/fedpals/fig9.ipynb"
NO_ROOT = "/nonexistent-fedpaper-data-root"
BAD_INPUTS = {  # name: (parameters cell line, papermill option, the line (without "ERROR: "), CLI option or None)
    "profile": ('profile = "nonsense"', ["-p", "profile", "nonsense"],
                "unknown profile 'nonsense'; choose one of smoke, quick, long, paper", ["--profile", "nonsense"]),
    "data_root": (f'data_root = "{NO_ROOT}"', ["-p", "data_root", NO_ROOT],
                  f"data root {NO_ROOT} does not exist; pass an existing folder (--data-root on the command line, "
                  "data_root in a notebook, e.g. ../shared/data) or leave it out for the default",
                  ["--data-root", NO_ROOT]),
    "seeds": ('seeds = "abc"', ["-p", "seeds", "abc"],
              "seeds='abc' is a string; give a number of seeds >= 1 (e.g. seeds=3) or a list of seed ids "
              "(e.g. seeds=[0, 1, 2])", None),
    "overrides": ('overrides = {"roundz": 4}', ["-y", "overrides: {roundz: 4}"], "unknown override 'roundz'; ", None),
}


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _same_line(got: str, want: str) -> bool:
    """`want` exactly, or (overrides: its message names every setting) `want` as the start."""
    return got == want or (want.endswith("; ") and got.startswith(want))


@pytest.fixture(scope="module")
def jupyterlab_errors():
    """{bad input: the error output's traceback lines} of the notebook's cells run in one python3 kernel (what
    JupyterLab starts for it, in the notebook's folder), its parameters cell edited as a user would."""
    from jupyter_client.manager import start_new_kernel

    nb = nbformat.read(str(REPO_ROOT / NOTEBOOK), as_version=4)
    params = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(REPO_ROOT / NOTEBOOK).rsplit("/", 1)[0])
    out = {}
    try:
        for name, (line, _, _, _) in BAD_INPUTS.items():
            source = nb.cells[params].source + "\n" + line + "\n" + nb.cells[params + 1].source
            tracebacks = []

            def hook(msg, tracebacks=tracebacks):
                if msg["msg_type"] == "error":
                    tracebacks.append([_strip_ansi(t) for t in msg["content"]["traceback"]])
            reply = kc.execute_interactive(source, timeout=120, output_hook=hook)
            assert reply["content"]["status"] == "error", name
            out[name] = tracebacks
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return out


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_jupyterlab_answers_bad_input_with_one_line(jupyterlab_errors, name):
    want = BAD_INPUTS[name][2]
    [traceback] = jupyterlab_errors[name]
    assert len(traceback) == 1 and traceback[0].startswith("ERROR: "), traceback
    assert _same_line(traceback[0].removeprefix("ERROR: "), want), traceback


def _documented_papermill_command() -> list[str]:
    """The papermill command the notebook's title cell gives, as words."""
    import re
    import shlex

    title = nbformat.read(str(REPO_ROOT / NOTEBOOK), as_version=4).cells[0].source
    [command] = re.findall(r"`(papermill [^`]*)`", title)
    return shlex.split(command)


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_documented_papermill_command_answers_bad_input_with_one_line(tmp_path, name):
    words = _documented_papermill_command()
    assert words[0] == "papermill" and "out.ipynb" in words, words
    out = tmp_path / "out.ipynb"
    args = [str(out) if w == "out.ipynb" else w for w in words[1:]]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(_entry_point_dir(tmp_path))]),
               FEDPAPER_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "papermill", *args, *BAD_INPUTS[name][1]], capture_output=True,
                          text=True, timeout=300, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: "), proc.stderr
    message = errors[0].removeprefix("ERROR: ").rsplit(f" ({NOTEBOOK}, In [", 1)[0]
    assert _same_line(message, BAD_INPUTS[name][2]), proc.stderr


@pytest.mark.parametrize("name", [n for n, v in BAD_INPUTS.items() if v[3] is not None])
def test_cli_answers_bad_input_with_the_same_line(tmp_path, name):
    env = dict(os.environ, FEDPAPER_CACHE=str(tmp_path / "cache"), FEDPAPER_FIGURES=str(tmp_path / "figures"))
    args = ["reproduce", "--only", "fedpals/fig9", "--no-report", *BAD_INPUTS[name][3]]
    if name != "profile":
        args += ["--profile", "smoke"]
    proc = subprocess.run([sys.executable, "-m", "fedpaper.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [f"fedpaper: error: {BAD_INPUTS[name][2]}"], proc.stderr
