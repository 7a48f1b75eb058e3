"""The repository's scripts (benchmarks/, scripts/) loaded as modules, for the tests that call their functions."""
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_script(relpath: str):
    """A fresh module object of the script at REPO/relpath (named after its file)."""
    path = REPO / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
