"""Code versions: the hash of the source a result depends on, part of every cached result's key.

`code_version(paper)` = the core (CORE_MODULES) + that paper's own modules (minus the ones it
declares as only reading results); `fedpaper reproduce` pins the versions of a whole run
(`pin_code_versions`) so an edit while it runs cannot invalidate the notebooks still to come.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

from fedpaper.ground.errors import UnknownNameError

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # fedpaper/

# The core of fedpaper whose source changes every paper's results (names relative to fedpaper/,
# globs allowed; a name matches <name>.py and every .py file under the folder <name>/).
CORE_MODULES = ("blocks", "engine*", "driver", "algorithms", "runs.experiment")
# Each paper's own code: every .py file of its package fedpaper/papers/<paper>/ (so a new module
# cannot be left out), minus the modules the package declares, in a literal tuple
# `RESULTS_READ_ONLY = ("claims", ...)` in its __init__.py, as only reading results (claim checks,
# drawing, tables). An edit to one paper's code leaves the other papers' cached results valid.
PAPERS_DIR = "papers"
READ_ONLY_DECLARATION = "RESULTS_READ_ONLY"
# `fedpaper reproduce` pins the code versions of its whole run here (JSON {"core": ..., "<paper>":
# ...}, see pin_code_versions), so that a source edit while a long run goes on cannot invalidate
# the cache of the notebooks still to come (they run in kernels that inherit the environment).
CODE_VERSION_ENV = "FEDPAPER_CODE_VERSION"


def _hash_files(files, pkg: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(files):
        if "__pycache__" in p.parts:
            continue
        h.update(str(p.relative_to(pkg)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@lru_cache(maxsize=None)
def _code_version(modules: tuple[str, ...], package_dir: str) -> str:
    pkg = Path(package_dir)
    files: set[Path] = set()
    for name in modules:
        name = name.removeprefix("fedpaper.").replace(".", "/")
        for p in pkg.glob(name + ".py"):
            files.add(p)
        for d in pkg.glob(name):
            if d.is_dir():
                files.update(d.rglob("*.py"))
    return _hash_files(files, pkg)


def read_only_modules(paper_dir: Path) -> tuple[str, ...]:
    """The module names a paper package declares as only reading results (parsed, not imported)."""
    init = paper_dir / "__init__.py"
    if not init.is_file():
        return ()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == READ_ONLY_DECLARATION
                                                 for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def paper_files(paper: str, package_dir=PACKAGE_DIR) -> list[Path]:
    """The source files of `paper` its results depend on (see READ_ONLY_DECLARATION)."""
    pkg = Path(package_dir)
    folder = pkg / PAPERS_DIR / paper
    if not folder.is_dir():
        raise UnknownNameError(f"no paper package {folder}; the store keys results by paper "
                               f"(known: {', '.join(known_papers(package_dir))})")
    skip = {folder / f"{m.replace('.', '/')}.py" for m in read_only_modules(folder)}
    skip_dirs = [folder / m.replace(".", "/") for m in read_only_modules(folder)]
    return [p for p in folder.rglob("*.py")
            if p not in skip and not any(d in p.parents for d in skip_dirs)]


def known_papers(package_dir=PACKAGE_DIR) -> list[str]:
    """Paper packages under fedpaper/papers/ (folders with an __init__.py, not starting with _)."""
    return sorted(d.name for d in (Path(package_dir) / PAPERS_DIR).iterdir()
                  if d.is_dir() and not d.name.startswith("_") and (d / "__init__.py").is_file())


@lru_cache(maxsize=None)
def _paper_version(paper: str, package_dir: str) -> str:
    return _hash_files(paper_files(paper, package_dir), Path(package_dir))


def _pins() -> dict:
    raw = os.environ.get(CODE_VERSION_ENV)
    if not raw:
        return {}
    try:
        pins = json.loads(raw)
    except ValueError:
        pins = None
    return pins if isinstance(pins, dict) else {"*": raw}  # a plain string pins every part


def code_version(paper: Optional[str] = None, package_dir=PACKAGE_DIR) -> str:
    """Version of the code behind a paper's results: hash of the core modules, plus (given a
    paper) hash of that paper's result modules. Computed once per process; pinned for a whole run
    by FEDPAPER_CODE_VERSION (see pin_code_versions)."""
    pins = _pins() if Path(package_dir) == PACKAGE_DIR else {}
    core = pins.get("core") or pins.get("*") or _code_version(CORE_MODULES, str(package_dir))
    if paper is None:
        return core
    own = pins.get(paper) or pins.get("*") or _paper_version(paper, str(package_dir))
    return f"{core}+{own}"


def pin_code_versions() -> str:
    """JSON of the current core and per-paper code versions, for FEDPAPER_CODE_VERSION."""
    versions = {"core": _code_version(CORE_MODULES, str(PACKAGE_DIR))}
    versions.update({p: _paper_version(p, str(PACKAGE_DIR)) for p in known_papers()})
    return json.dumps(versions, sort_keys=True)


def spec_paper(spec) -> Optional[str]:
    """The paper a run spec belongs to (its "paper" field), or None."""
    return spec.get("paper") if isinstance(spec, dict) else getattr(spec, "paper", None)


