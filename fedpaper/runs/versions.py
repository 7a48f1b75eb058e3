"""Code versions: the hash of the code a result depends on, part of every cached result's key.

`code_version(paper)` = the core (CORE_MODULES) + that paper's own modules (minus the ones it
declares as only reading results); `fedpaper reproduce` pins the versions of a whole run
(`pin_code_versions`) so an edit while it runs cannot invalidate the notebooks still to come.

What is hashed is each module's syntax tree, not its text (SCHEME): the module parsed with `ast`,
its module, class and function docstrings removed (comments are not in the tree), dumped without
line numbers or column offsets (`normalized_module`), and hashed with its path relative to fedpaper/.
So an edit that cannot change a result (a docstring, a comment, blank lines, line breaks inside an
expression) keeps every key, and any edit to code moves it. A file that does not parse is hashed as
text. The versions of the text scheme used before are mapped to this one by
`fedpaper.runs.version_map` (`fedpaper cache rekey --scheme`).
"""
from __future__ import annotations

import ast
import fnmatch
import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

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
# The name of the hashing scheme: docstring-free syntax trees (see the module docstring).
SCHEME = "ast"

_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, _DOCSTRING_OWNERS) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def _dump(node) -> str:
    """A deterministic dump of a syntax tree: node types and fields, no positions; fields that are
    None or empty are left out (as Python 3.13's ast.dump does), so that a field a newer Python adds
    with an empty default (type_params) does not move a key."""
    if isinstance(node, ast.AST):
        fields = []
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or (isinstance(value, list) and not value):
                continue
            fields.append(f"{name}={_dump(value)}")
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(_dump(v) for v in node) + "]"
    return repr(node)


def normalized_module(text) -> bytes:
    """What a module's version hashes: its syntax tree without docstrings, dumped without line
    numbers (comments and layout are not in the tree); the raw bytes if it does not parse."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8")
    try:
        tree = ast.parse(raw)
    except (SyntaxError, ValueError):
        return b"text\0" + raw
    return _dump(_strip_docstrings(tree)).encode("utf-8")


def module_digest(text) -> str:
    """SHA-256 of a module's normalized form (normalized_module)."""
    return hashlib.sha256(normalized_module(text)).hexdigest()


def tree_hash(digests: dict[str, str]) -> str:
    """The version of a set of modules: {path relative to fedpaper/ (posix): module_digest} hashed
    in path order (16 hex digits)."""
    h = hashlib.sha256()
    for rel in sorted(digests):
        h.update(rel.encode() + b"\0" + digests[rel].encode() + b"\0")
    return h.hexdigest()[:16]


# ------------------------------------------------------------------ which files a version covers
def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Whether a file (path parts relative to fedpaper/) is <pattern>.py or lies under the folder
    <pattern> (each part a glob, as pathlib's glob reads it)."""
    if len(parts) == len(pattern) and parts[-1].endswith(".py"):
        if all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts[:-1], pattern[:-1])) \
                and fnmatch.fnmatchcase(parts[-1], pattern[-1] + ".py"):
            return True
    return len(parts) > len(pattern) and all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts, pattern))


def select_core(paths: Iterable[str], modules=CORE_MODULES) -> list[str]:
    """The .py files (posix paths relative to fedpaper/) that the module names `modules` cover."""
    patterns = [tuple(m.removeprefix("fedpaper.").replace(".", "/").split("/")) for m in modules]
    out = []
    for rel in paths:
        parts = tuple(rel.split("/"))
        if rel.endswith(".py") and "__pycache__" not in parts and any(_matches(parts, q) for q in patterns):
            out.append(rel)
    return sorted(set(out))


def select_paper(paths: Iterable[str], paper: str, read_only=()) -> list[str]:
    """The .py files of papers/<paper>/ its results depend on: all but the `read_only` modules."""
    folder = (PAPERS_DIR, paper)
    skip = [tuple(m.split(".")) for m in read_only]
    out = []
    for rel in paths:
        parts = tuple(rel.split("/"))
        if not rel.endswith(".py") or parts[:2] != folder or "__pycache__" in parts:
            continue
        inner = parts[2:]
        if any(inner[:-1] + (inner[-1].removesuffix(".py"),) == s or inner[:len(s)] == s and len(inner) > len(s)
               for s in skip):
            continue
        out.append(rel)
    return sorted(set(out))


def read_only_declared(init_text) -> tuple[str, ...]:
    """The module names a paper's __init__.py source declares as only reading results."""
    try:
        body = ast.parse(init_text).body
    except (SyntaxError, ValueError):
        return ()
    for node in body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == READ_ONLY_DECLARATION
                                                 for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def read_only_modules(paper_dir: Path) -> tuple[str, ...]:
    """The module names a paper package declares as only reading results (parsed, not imported)."""
    init = paper_dir / "__init__.py"
    return read_only_declared(init.read_text(encoding="utf-8")) if init.is_file() else ()


def _py_files(pkg: Path, under: str = "") -> list[str]:
    base = pkg / under if under else pkg
    return [p.relative_to(pkg).as_posix() for p in base.rglob("*.py") if "__pycache__" not in p.parts]


def _hash_files(rels, pkg: Path) -> str:
    return tree_hash({rel: module_digest((pkg / rel).read_bytes()) for rel in rels})


@lru_cache(maxsize=None)
def _code_version(modules: tuple[str, ...], package_dir: str) -> str:
    pkg = Path(package_dir)
    return _hash_files(select_core(_py_files(pkg), modules), pkg)


def paper_files(paper: str, package_dir=PACKAGE_DIR) -> list[Path]:
    """The source files of `paper` its results depend on (see READ_ONLY_DECLARATION)."""
    pkg = Path(package_dir)
    folder = pkg / PAPERS_DIR / paper
    if not folder.is_dir():
        raise UnknownNameError(f"no paper package {folder}; the store keys results by paper "
                               f"(known: {', '.join(known_papers(package_dir))})")
    rels = select_paper(_py_files(pkg, f"{PAPERS_DIR}/{paper}"), paper, read_only_modules(folder))
    return [pkg / rel for rel in rels]


def known_papers(package_dir=PACKAGE_DIR) -> list[str]:
    """Paper packages under fedpaper/papers/ (folders with an __init__.py, not starting with _)."""
    return sorted(d.name for d in (Path(package_dir) / PAPERS_DIR).iterdir()
                  if d.is_dir() and not d.name.startswith("_") and (d / "__init__.py").is_file())


@lru_cache(maxsize=None)
def _paper_version(paper: str, package_dir: str) -> str:
    pkg = Path(package_dir)
    return _hash_files([p.relative_to(pkg).as_posix() for p in paper_files(paper, pkg)], pkg)


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


def code_versions(package_dir=PACKAGE_DIR) -> dict:
    """{"core": ..., "<paper>": ...} of every known paper, unpinned."""
    versions = {"core": _code_version(CORE_MODULES, str(package_dir))}
    versions.update({p: _paper_version(p, str(package_dir)) for p in known_papers(package_dir)})
    return versions


def pin_code_versions() -> str:
    """JSON of the current core and per-paper code versions, for FEDPAPER_CODE_VERSION."""
    return json.dumps(code_versions(), sort_keys=True)


def spec_paper(spec) -> Optional[str]:
    """The paper a run spec belongs to (its "paper" field), or None."""
    return spec.get("paper") if isinstance(spec, dict) else getattr(spec, "paper", None)
