"""A Jupyter server extension: a project notebook saved from JupyterLab is written as git holds it.

A notebook of this project (its metadata names `fedpaper`: every notebook scripts/new_notebook.py
writes) is saved without its outputs, execution counts, widget state and the metadata a kernel or
papermill adds: what the nbstripout git filter (.gitattributes, installed by `make`) strips when a
notebook is staged, with the same keys (nbstripout's defaults and the Makefile's
NBSTRIPOUT_EXTRA_KEYS). A Run All followed by a save (or JupyterLab's autosave) therefore leaves the
file as committed and `git status` clean, in a fresh clone too, before `make` installed the filter;
the outputs stay on screen until the notebook is closed. Other notebooks are saved as they are.

The extension is enabled by jupyter-config/jupyter_server_config.d/fedpaper.json in the environment's
`etc/jupyter/jupyter_server_config.d/`, for every `jupyter lab` or `jupyter server` of that
environment wherever it is started (jupyter_server reads its configuration from the Jupyter config
path, never from the folder it starts in): a regular `pip install` puts it there (pyproject.toml's
data-files); an editable one installs no data files, so `make` copies it into .venv, and
environment.yml says the same copy for conda. `jupyter server extension list` shows it.
"""
from __future__ import annotations

#: What a save strips besides outputs and execution counts: nbstripout's default keys, then the Makefile's
#: NBSTRIPOUT_EXTRA_KEYS (tests/test_jupyter_save.py checks that the two lists agree).
NBSTRIPOUT_DEFAULT_KEYS = ("metadata.signature", "metadata.widgets", "cell.metadata.collapsed",
                           "cell.metadata.ExecuteTime", "cell.metadata.execution", "cell.metadata.heading_collapsed",
                           "cell.metadata.hidden", "cell.metadata.scrolled")
EXTRA_KEYS = ("metadata.language_info", "metadata.papermill", "cell.metadata.papermill")


def project_notebook(nb) -> bool:
    """True for a notebook of this project (its metadata has the `fedpaper` entry new_notebook.py writes)."""
    return isinstance(nb.get("metadata"), dict) and "fedpaper" in nb["metadata"]


def stripped(nb):
    """The notebook (an nbformat NotebookNode) as the nbstripout filter stages it."""
    from nbstripout import strip_output

    return strip_output(nb, keep_output=False, keep_count=False, keep_id=True,
                        extra_keys=list(NBSTRIPOUT_DEFAULT_KEYS + EXTRA_KEYS))


def pre_save(model, path, contents_manager=None, **kwargs):
    """jupyter_server pre-save hook: a project notebook's content is replaced by its stripped copy."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    import nbformat

    nb = nbformat.from_dict(model["content"])
    if project_notebook(nb):
        model["content"] = stripped(nb)


def _jupyter_server_extension_points():
    return [{"module": "fedpaper.jupyter_save"}]


def _load_jupyter_server_extension(serverapp):
    serverapp.contents_manager.register_pre_save_hook(pre_save)
    serverapp.log.info("fedpaper: project notebooks are saved without outputs (fedpaper.jupyter_save)")
