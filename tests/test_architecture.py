"""The import structure of fedpaper (ARCHITECTURE.md): no import circles, every import goes down the
layers (or stays in its own), and a function-local import of fedpaper says why on its line.

The graph is read from the source (ast), function-local imports included; imports under
`if TYPE_CHECKING:` are left out (they never run)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "fedpaper"

# Bottom to top. A module belongs to the layer of its longest matching prefix. ARCHITECTURE.md
# explains each layer; keep the two in step.
LAYERS = [
    ("ground", ["fedpaper.ground"]),
    ("blocks", ["fedpaper.blocks"]),
    ("engine", ["fedpaper.engine"]),
    ("algorithms", ["fedpaper.algorithms"]),
    ("driver", ["fedpaper.driver"]),
    ("runs", ["fedpaper.runs"]),
    ("claims", ["fedpaper.claims"]),
    ("outputs", ["fedpaper.outputs"]),
    ("papers", ["fedpaper.papers"]),
    ("top", ["fedpaper", "fedpaper.report", "fedpaper.plan", "fedpaper.notebook", "fedpaper.cli", "fedpaper.kernel",
             "fedpaper.papermill_engine", "fedpaper.jupyter_save"]),
]


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


MODULES = _modules()


def _resolve(name: str):
    """The fedpaper module an imported name lives in (a submodule, else its package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_lines(tree) -> set:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for n in node.body:
                lines.update(range(n.lineno, n.end_lineno + 1))
    return lines


def imports() -> list[tuple]:
    """(importer, imported module, line, function-local?, the source line) of every fedpaper import."""
    out = []
    for mod, path in MODULES.items():
        src = path.read_text(encoding="utf-8")
        tree, lines = ast.parse(src), src.splitlines()
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        skip = _type_checking_lines(tree)
        funcs = [(f.lineno, f.end_lineno) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
            local = any(a < node.lineno <= b for a, b in funcs)
            for t in {_resolve(n) for n in names if n.startswith("fedpaper")} - {None, mod}:
                out.append((mod, t, node.lineno, local, lines[node.lineno - 1]))
    return out


def layer(module: str) -> int:
    best = max(((len(p), i) for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes
                if module == p or module.startswith(p + ".")), default=None)
    assert best is not None, f"{module} is in no layer: add it to LAYERS and ARCHITECTURE.md"
    return best[1]


def cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set] = {}
    for a, b, *_ in edges:
        graph.setdefault(a, set()).add(b)
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    for m in MODULES:
        layer(m)


def test_the_top_level_shows_the_layers():
    """fedpaper/ holds one package per layer below the top, and only the top layer's own modules."""
    top = dict(LAYERS)["top"]
    loose = [p.name for p in PKG.glob("*.py") if f"fedpaper.{p.stem}" not in top and p.stem != "__init__"]
    assert not loose, f"modules at the top level that belong to a layer below it: {loose}"
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == {name for name, _ in LAYERS if name != "top"}, folders


def test_no_import_circles():
    found = cycles(imports())
    assert not found, "import circles (function-local imports included): " + "; ".join(" <-> ".join(c) for c in found)


def test_imports_go_down_the_layers():
    up = [f"{a} ({LAYERS[layer(a)][0]}) imports {b} ({LAYERS[layer(b)][0]}) at line {ln}"
          for a, b, ln, *_ in imports() if layer(b) > layer(a)]
    assert not up, "imports up the layers:\n" + "\n".join(up)


def test_function_local_imports_say_why():
    """A function-local import of fedpaper is the exception (start-up time: torch or pandas for the
    CLI; an optional dependency): it says so in a comment on its line."""
    bare = [f"{a}:{ln}: {src.strip()}" for a, b, ln, local, src in imports() if local and "#" not in src]
    assert not bare, "function-local imports without a reason:\n" + "\n".join(bare)


def test_the_checks_can_fail():
    """The graph reader sees a circle, an upward import and a bare local import when there is one."""
    assert cycles([("a", "b"), ("b", "a"), ("b", "c")]) == [["a", "b"]]
    assert layer("fedpaper.cli") > layer("fedpaper.runs.store") > layer("fedpaper.ground.files")
    found = [e for e in imports() if e[0] == "fedpaper.cli" and not e[3]]
    assert found, "the CLI's module-level imports are found"


#: The most context variables (contextvars.ContextVar) the package may hold: a value read far from where it
#: is set is a channel no signature shows, kept only where an argument cannot go.
MAX_CONTEXT_VARS = 3


def context_vars(sources: dict) -> list[tuple]:
    """(module, line, whether a comment sits on its line or is the line above) of every
    ContextVar(...) call in `sources` ({module: source text})."""
    import io
    import tokenize

    out = []
    for mod, src in sources.items():
        calls = [n.lineno for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call)
                 and (getattr(n.func, "attr", None) == "ContextVar" or getattr(n.func, "id", None) == "ContextVar")]
        if not calls:
            continue
        lines = src.splitlines()
        commented = {t.start[0] for t in tokenize.generate_tokens(io.StringIO(src).readline)
                     if t.type == tokenize.COMMENT}
        out += [(mod, ln, ln in commented or (ln > 1 and lines[ln - 2].lstrip().startswith("#"))) for ln in calls]
    return out


def test_context_variables_are_few_and_each_says_why():
    """Each ContextVar says why it must be one (a comment on its line or the line above: e.g. it
    crosses code that cannot pass an argument), and there are at most MAX_CONTEXT_VARS."""
    found = context_vars({m: p.read_text(encoding="utf-8") for m, p in MODULES.items()})
    bare = [f"{m}:{ln}" for m, ln, why in found if not why]
    assert not bare, "context variables without a reason on their line or the line above: " + ", ".join(bare)
    assert len(found) <= MAX_CONTEXT_VARS, (f"{len(found)} context variables (at most {MAX_CONTEXT_VARS}): "
                                            + ", ".join(f"{m}:{ln}" for m, ln, _ in found))


def test_the_context_variable_check_can_fail():
    src = ("import contextvars\nfrom contextvars import ContextVar\n\n# why\nA = contextvars.ContextVar('a')\n"
           "B = ContextVar('b')  # why\nC = ContextVar('c')\ns = 'ContextVar(d)'\n")
    assert context_vars({"m": src}) == [("m", 5, True), ("m", 6, True), ("m", 7, False)]


@pytest.mark.parametrize("doc", ["ARCHITECTURE.md"])
def test_architecture_doc_names_every_layer(doc):
    text = (PKG.parent / doc).read_text(encoding="utf-8")
    for name, prefixes in LAYERS:
        assert f"**{name}**" in text, f"{doc} does not describe the layer {name}"
