"""The counts behind issue 33's import-graph claims, read by tests/test_architecture.py's own reader:
modules, import edges, function-local import entries (one per imported module) and edges, import circles;
with --local, every function-local import with its line.

    python scripts/import_graph_counts.py [--local] [TREE]      (TREE: a checkout, default this one)
"""
import importlib.util
import sys
from pathlib import Path


def main(argv):
    local_list = "--local" in argv
    rest = [a for a in argv if a != "--local"]
    tree = Path(rest[0] if rest else Path(__file__).resolve().parents[1]).resolve()
    sys.path.insert(0, str(tree))
    spec = importlib.util.spec_from_file_location("test_architecture", tree / "tests" / "test_architecture.py")
    ta = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ta)
    imps = ta.imports()
    edges = {(a, b) for a, b, *_ in imps}
    local = [x for x in imps if x[3]]
    print(f"modules {len(ta._modules())}, edges {len(edges)}, function-local imports {len(local)} "
          f"({len({(a, b) for a, b, *_ in local})} edges), circles {len(ta.cycles(edges))}")
    if local_list:
        for a, b, ln, _, src in local:
            print(f"{a}:{ln}: {src.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
