"""Code versions hash docstring-free syntax trees: a docstring or comment edit of a core module
moves no key, a one-token code change moves it; the map from the text-hash versions used before."""
import ast
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from fedpaper.runs import version_map as M
from fedpaper.runs import versions as V


def _copy_package(tmp_path) -> Path:
    pkg = tmp_path / "fedpaper"
    shutil.copytree(V.PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.csv"))
    return pkg


def _all_versions(pkg) -> dict:
    V._code_version.cache_clear()
    V._paper_version.cache_clear()
    return {p: V.code_version(p, pkg) for p in V.known_papers(pkg)} | {"core": V.code_version(None, pkg)}


def _docstrings(tree):
    return [n.body[0].value for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
            and isinstance(n.body[0].value.value, str)]


def _replace(text: str, node, new: str) -> str:
    """The source with `node`'s span (one line) replaced by `new`."""
    lines = text.splitlines(keepends=True)
    i = node.lineno - 1
    assert node.end_lineno == node.lineno
    lines[i] = lines[i][:node.col_offset] + new + lines[i][node.end_col_offset:]
    return "".join(lines)


def _first_int(tree):
    docs = {id(d) for d in _docstrings(tree)}
    return next(n for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int
                and id(n) not in docs and n.lineno == n.end_lineno)


@pytest.mark.parametrize("module", ["algorithms/weights.py", "driver/trainer.py", "runs/experiment.py"])
def test_a_docstring_or_comment_edit_of_a_core_module_moves_no_key_and_one_token_moves_it(tmp_path, module):
    pkg = _copy_package(tmp_path)
    before = _all_versions(pkg)
    path = pkg / module
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    docs = _docstrings(tree)
    assert len(docs) >= 2, "the module should have a module and a function docstring to edit"
    # docstrings only: the module's and every other one reworded (the last first, so offsets hold)
    edited = text
    for d in sorted(docs, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        edited = edited[:_offset(edited, d.lineno, d.col_offset)] + '"""Reworded."""' + \
            edited[_offset(edited, d.end_lineno, d.end_col_offset):]
    assert edited != text
    path.write_text(edited, encoding="utf-8")
    assert _all_versions(pkg) == before
    # comments only: a first and a last line, and one inside the first function's body
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)).body[0]
    lines = text.splitlines(keepends=True)
    lines.insert(body.lineno - 1, "# inside a function\n")
    path.write_text("# a comment\n" + "".join(lines) + "\n# a closing comment\n", encoding="utf-8")
    assert _all_versions(pkg) == before
    # one token of code: the first integer literal outside docstrings, plus one
    node = _first_int(tree)
    path.write_text(_replace(text, node, str(node.value + 1)), encoding="utf-8")
    after = _all_versions(pkg)
    assert after["core"] != before["core"]
    assert all(after[p] != before[p] and after[p].split("+")[1] == before[p].split("+")[1]
               for p in V.known_papers(pkg)), "a core edit moves every paper's key, its own part unchanged"


def _offset(text: str, lineno: int, col: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[:lineno - 1]) + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8"))


def test_a_papers_docstring_edit_keeps_its_key_and_its_code_edit_moves_only_it(tmp_path):
    pkg = _copy_package(tmp_path)
    before = _all_versions(pkg)
    path = pkg / "papers" / "fedpals" / "runs.py"
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    first = _docstrings(tree)[0]
    path.write_text(text[:_offset(text, first.lineno, first.col_offset)] + '"""Other words."""'
                    + text[_offset(text, first.end_lineno, first.end_col_offset):], encoding="utf-8")
    assert _all_versions(pkg) == before
    node = _first_int(tree)
    path.write_text(_replace(text, node, str(node.value + 1)), encoding="utf-8")
    after = _all_versions(pkg)
    assert after["fedpals"] != before["fedpals"]
    assert {k: v for k, v in after.items() if k != "fedpals"} == {k: v for k, v in before.items() if k != "fedpals"}


def test_normalized_module_drops_docstrings_comments_and_layout_only():
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # c\n'
    b = "def f(x):\n\n    return (x +\n            1)\n"
    assert V.normalized_module(a) == V.normalized_module(b)
    assert V.normalized_module("def f(x):\n    return x + 2\n") != V.normalized_module(a)
    assert V.normalized_module('def f():\n    "only a docstring"\n') == V.normalized_module("def f():\n    pass\n")
    assert V.normalized_module('x = "not a docstring"\n') != V.normalized_module('x = "other"\n')
    assert b"lineno" not in V.normalized_module(a) and b"type_params" not in V.normalized_module(a)
    assert V.normalized_module("def (:\n") == b"text\0def (:\n"  # does not parse: its text


def _old_hash_files(files, pkg: Path) -> str:
    """The text scheme's hash, as fedpaper computed it before syntax trees (pathlib's order)."""
    h = hashlib.sha256()
    for p in sorted(files):
        h.update(str(p.relative_to(pkg)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def test_text_hash_is_the_old_schemes_hash(tmp_path):
    for rel in ("a.py", "a/b.py", "a_b.py", "a/c/d.py", "ab.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"x = {rel!r}\n")
    files = list(tmp_path.rglob("*.py"))
    assert M.text_hash({p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in files}) == \
        _old_hash_files(files, tmp_path)


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_the_version_map_maps_each_commits_text_version_to_its_tree_version(tmp_path):
    """A tiny history: a docstring edit (new text version, same tree version), then a code edit (both
    move); each commit's tree version is what code_version computes on that tree."""
    pkg = tmp_path / "fedpaper"
    files = {"runs/versions.py": 'CORE_MODULES = ("engine",)\n', "engine.py": '"""Engine."""\nx = 1\n',
             "report.py": "r = 1\n", "papers/a/__init__.py": 'RESULTS_READ_ONLY = ("claims",)\n',
             "papers/a/runs.py": "y = 1\n", "papers/a/claims.py": "c = 1\n"}
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    _git(tmp_path, "init", "-q")
    commits, live = [], []
    for text in ('"""Engine."""\nx = 1\n', '"""The engine, reworded."""\nx = 1  # why\n', '"""Engine."""\nx = 2\n'):
        (pkg / "engine.py").write_text(text)
        _git(tmp_path, "add", "-A")
        _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
        commits.append(_git(tmp_path, "rev-parse", "HEAD"))
        live.append(_all_versions(pkg)["a"])
    vmap = M.build_map(tmp_path)
    assert [M.commit_version(c, "a", vmap) for c in commits] == live
    assert live[0] == live[1] != live[2]
    olds = []
    for c in commits:
        _git(tmp_path, "checkout", "-q", c)
        olds.append(M.text_hash({"engine.py": (pkg / "engine.py").read_bytes()}) + "+"
                    + M.text_hash({r: (pkg / r).read_bytes() for r in ("papers/a/__init__.py", "papers/a/runs.py")}))
    assert len(set(olds)) == 3  # the text scheme moved at the docstring edit
    assert [M.to_new_scheme(o, "a", vmap) for o in olds] == live
    assert M.to_new_scheme("0000000000000000+0000000000000000", "a", vmap) is None
    assert vmap["conflicts"] == []


def test_the_committed_map_was_built_with_todays_normalisation():
    data = M._load(str(M.MAP_PATH))
    assert data.get("probe") == V.module_digest(M.PROBE), "rebuild it: python scripts/version_map.py"
    assert M.load_map()["commits"] and M.load_map()["scheme"] == V.SCHEME
    assert M.load_map(M.MAP_PATH.with_name("absent.json")) == {}
