"""Code and docstrings describe the code, not its history (the developer guide): no "issue N" or
"session N" anywhere in fedpaper/, and no path to a benchmark result file (benchmarks/results/...)
in a docstring or comment; measurements live in benchmarks/results/ and the README.

Comments are read with `tokenize`, docstrings with `ast` (module, class and function docstrings);
the issue/session rule also covers every other line (a runtime message names no issue either). A
string the code uses (a path the code reads, a note it prints) may name a benchmark file: that is
what the code does, not its history; so may the prose about a result file the code reads
(READ_BY_CODE)."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fedpaper"

HISTORY = re.compile(r"\b(issue|session)s?\s*#?\s*\d+", re.IGNORECASE)
BENCHMARK_PATH = re.compile(r"benchmarks/results/[\w./-]*")
#: Result files the code itself reads (an input, not a history note): path -> (module, constant).
READ_BY_CODE = {"benchmarks/results/gpu.json": ("fedpaper.runs.model_costs", "GPU_RESULTS")}

_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, _DOCSTRING_OWNERS) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def _comment_lines(text: str) -> set[int]:
    return {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT}


def history_lines(path: Path) -> list[str]:
    """'file:line: text' for every line of `path` that carries the project's history."""
    text = path.read_text(encoding="utf-8")
    prose = _docstring_lines(ast.parse(text)) | _comment_lines(text)
    rel = path.relative_to(PKG.parent).as_posix()
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        paths = set(BENCHMARK_PATH.findall(line)) - set(READ_BY_CODE) if number in prose else ()
        if HISTORY.search(line) or paths:
            out.append(f"{rel}:{number}: {line.strip()}")
    return out


def test_the_rules_see_what_they_should():
    # the patterns themselves, so that the sweep test below cannot pass by matching nothing
    assert HISTORY.search("a dry run (issue 30, item 1)") and HISTORY.search("Issue #27")
    assert HISTORY.search("sized in Session 5") and HISTORY.search("session #16")
    assert not HISTORY.search("the issues it solves") and not HISTORY.search("a session of 3 runs")
    sample = ('"""Doc (benchmarks/results/a.md)."""\n'
              'X = "benchmarks/results/gpu.json"\n'
              '# comment: benchmarks/results/b.md\n'
              'Y = 1  # issue 3\n')
    lines = _docstring_lines(ast.parse(sample)) | _comment_lines(sample)
    assert lines == {1, 3, 4}
    assert BENCHMARK_PATH.findall("(benchmarks/results/a_b.md; benchmarks/results/gpu.json)") == \
        ["benchmarks/results/a_b.md", "benchmarks/results/gpu.json"]


def test_allowed_result_files_are_read_by_the_code():
    import importlib

    for path, (module, name) in READ_BY_CODE.items():
        assert Path(getattr(importlib.import_module(module), name)).as_posix().endswith(path), (path, module, name)


def test_no_history_in_the_package():
    found = [hit for path in sorted(PKG.rglob("*.py")) if "__pycache__" not in path.parts
             for hit in history_lines(path)]
    assert not found, ("the project's history in fedpaper/ (say what the code does and why; "
                       "measurements belong in benchmarks/results/ and the README):\n" + "\n".join(found))
