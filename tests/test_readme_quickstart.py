"""The README's quick start, verbatim, on a fresh clone: every shell command of the fenced ```bash blocks
under a "Quick start" heading is either run here (the cheap ones: smoke runs, plans at smoke or quick,
the report, the list, --help) or is one of the long commands named in LONG; each command run must exit 0
without a traceback. The clone is a `git clone` of this checkout's HEAD, run with this project's
virtual environment on PATH, the clone's own package first on PYTHONPATH, and the cache in tmp_path."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedpaper.ground.paths import REPO_ROOT

#: commands of the quick start that take minutes to hours (the two make targets): not run here; `make test`
#: is this test suite, and `make figures` is measured, not tested
LONG = ("make test", "make figures")
CHEAP = [re.compile(p) for p in (r"^fedpaper reproduce .*--profile smoke\b", r"^fedpaper plan .*--profile (smoke|quick)\b",
                                 r"^fedpaper (report|list)\b", r"--help$")]


def quick_start_commands(text: str) -> list[str]:
    """The commands (comments and blank lines dropped) of the ```bash blocks under headings that begin
    with "Quick start", up to the next heading of the same or a higher level."""
    commands, level = [], None
    in_block = False
    for line in text.splitlines():
        heading = re.match(r"^(#+)\s+(.*)", line) if not in_block else None
        if heading:
            depth = len(heading.group(1))
            if heading.group(2).lower().startswith("quick start"):
                level = depth
            elif level is not None and depth <= level:
                level = None
            continue
        if line.startswith("```"):
            in_block = not in_block and level is not None and line.strip() == "```bash"
            continue
        if in_block:
            command = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            if command:
                commands.append(command)
    return commands


COMMANDS = quick_start_commands((REPO_ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_quick_start_has_commands_and_each_is_cheap_or_named_long():
    assert any(c in COMMANDS for c in LONG) and len(COMMANDS) >= 4, COMMANDS
    unknown = [c for c in COMMANDS if c not in LONG and not any(p.search(c) for p in CHEAP)]
    assert not unknown, f"quick-start commands neither run by this test nor named in LONG: {unknown}"


def test_the_parser_reads_only_quick_start_bash_blocks():
    text = ("# t\n## Quick start\n```bash\nmake test   # note\n\n```\n### More\n```bash\nfedpaper list\n```\n"
            "```text\nnot this\n```\n## Other\n```bash\nrm -rf /\n```\n")
    assert quick_start_commands(text) == ["make test", "fedpaper list"]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A fresh clone of HEAD and the environment a user of it has after `make` (this .venv on PATH)."""
    root = tmp_path_factory.mktemp("quickstart")
    repo = root / "fedpaper"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(repo)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDPAPER_") or k == "FEDPAPER_DATA"}
    env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               PYTHONPATH=str(repo),  # the clone's package, not the editable install's checkout
               FEDPAPER_CACHE=str(root / "cache"), FEDPAPER_README=str(repo / "README.md"),
               FEDPAPER_FIGURES=str(repo / "figures"), MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    where = subprocess.run(["python", "-c", "import fedpaper; print(fedpaper.__file__)"], cwd=repo, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(repo.resolve()), where  # the clone's code runs, not this checkout's
    return repo, env


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in LONG])
def test_quick_start_command_runs_on_a_fresh_clone(clone, command):
    repo, env = clone
    proc = subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"`{command}` exited {proc.returncode}:\n{out[-3000:]}"
    assert "Traceback" not in out, out[-3000:]
