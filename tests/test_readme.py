"""Every number in README.md comes from a committed measurement or from the code, and says what that
source says: each number of its prose (code spans, code blocks and the generated status table left out)
must match an entry of SOURCES below (its value, and words that stand near it in the README), and each
entry's source, read here, must give that value. A number with no source fails, naming it."""
import json
import re
from pathlib import Path

import pytest

from fedpaper.ground.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
TIMES = REPO_ROOT / "benchmarks" / "results" / "profile_times.json"
STATUS = re.compile(r"<!-- artifact-status:start -->.*?<!-- artifact-status:end -->", re.S)
NEAR = 160  # characters either side of a number where its entry's words must stand


def _times() -> dict:
    return json.loads(TIMES.read_text(encoding="utf-8"))


def _quick(paper):
    return lambda: f"{_times()['profiles']['quick'][paper]['wall_min']:.1f}"


def _quick_total():
    return f"{sum(r['wall_min'] for r in _times()['profiles']['quick'].values()):.1f}"


def _long_core_hours():
    return f"{sum(r['wall_s'] * r['cores'] for r in _times()['profiles']['long'].values()) / 3600:.1f}"


def _date(*where):
    def get():
        rec = _times()
        for k in where:
            rec = rec[k]
        return rec["date"]
    return get


def _download_mb():
    from fedpaper.blocks.data.download import SOURCES

    return f"{sum(s.size_mb for s in SOURCES.values() if not s.large):.0f}"


def _artifacts():
    from fedpaper.outputs.registry import artifact_ids

    return str(len(artifact_ids(ladders=False)))


def _provenance_wall(path):
    return lambda: f"{json.loads((REPO_ROOT / path).read_text())['wall_time_s']:.0f}"


def _exit(name):
    def get():
        from fedpaper import cli

        return str(getattr(cli, name))
    return get


def _ctrl_c_exit():
    from fedpaper import cli
    import inspect

    src = inspect.getsource(cli.main)
    m = re.search(r"except KeyboardInterrupt:.*?return (\d+)", src, re.S)
    return m.group(1)


def _papermill_bad_input_exit():
    from fedpaper import papermill_engine
    import inspect

    return re.search(r"Exit\((\d+) if error.ename in BAD_INPUT_ERRORS", inspect.getsource(papermill_engine)).group(1)


# (the number as README.md writes it, words that stand near it there, where it comes from)
SOURCES = [
    ("78", "artifacts", _artifacts),
    ("1283", "make test", lambda: str(_times()["make"]["test"]["wall_s"])),
    ("2026-11-29", "make test", _date("make", "test")),
    ("29.2", "FedPALS", _quick("fedpals")),
    ("16.2", "privlabels", _quick("privlabels")),
    ("30.8", "FedMT", _quick("fedmt")),
    ("17.3", "FedNCA-ML", _quick("fednca")),
    ("2026-11-26", "measured one paper at a time", _date("profiles", "quick", "fedpals")),
    ("2026-11-27", "measured one paper at a time", _date("profiles", "quick", "fedmt")),
    ("93.5", "min", _quick_total),
    ("39.3", "make figures", lambda: f"{_times()['make']['figures']['wall_s'] / 60:.1f}"),
    ("39.3", "two cores", lambda: f"{_times()['make']['figures']['wall_s'] / 60:.1f}"),
    ("118", "install", lambda: str(_times()["make"]["figures"]["install_wall_s"])),
    ("2026-11-29", "two-core AMD EPYC", _date("make", "figures")),
    ("72", "artifacts", lambda: str(_times()["make"]["figures"]["artifacts_regenerated"])),
    ("204", "every notebook", lambda: str(_times()["profiles"]["smoke"]["all"]["wall_s"])),
    ("5.8", "core-hours", _long_core_hours),
    ("195", "fig8a", _provenance_wall("figures/paper/fedpals/fig8a.json")),
    ("390", "MB", _download_mb),
    ("2", "exit code", _exit("EXIT_USAGE")),
    ("1", "exit code", _exit("EXIT_FAILED")),
    ("75", "Exit code", _exit("EXIT_STOPPED")),
    ("130", "exit code", _ctrl_c_exit),
    ("2", "stops on bad input then prints one line", _papermill_bad_input_exit),
]

NUMBER = re.compile(r"(?<![\w.\-/])(\d{4}-\d{2}-\d{2}|\d[\d,]*(?:\.\d+)?)(?![\w/])")


def prose(text: str) -> str:
    """README.md without what is not prose: the generated status table, fenced and indented code blocks,
    code spans, link targets and html comments (each replaced by spaces, so positions stay)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    text = STATUS.sub(blank, text)
    text = re.sub(r"^```.*?^```", blank, text, flags=re.S | re.M)
    text = re.sub(r"^(?: {4}|\t).*$", blank, text, flags=re.M)
    text = re.sub(r"`[^`\n]*`", blank, text)
    text = re.sub(r"\]\([^)]*\)", blank, text)
    return re.sub(r"<!--.*?-->", blank, text, flags=re.S)


def readme_numbers(text: str) -> list[tuple[str, str]]:
    """(number, the text around it) for every number in the README's prose."""
    body = prose(text)
    return [(m.group(1).rstrip(","), text[max(0, m.start() - NEAR):m.end() + NEAR]) for m in NUMBER.finditer(body)
            if m.group(1).rstrip(",")]


def sources_of(number: str, around: str) -> list:
    return [src for value, words, src in SOURCES if value == number and words.lower() in around.lower()]


def test_every_readme_number_has_a_source():
    numbers = readme_numbers(README.read_text(encoding="utf-8"))
    assert len(numbers) >= 10, numbers  # the extraction finds the README's numbers
    orphans = [(n, " ".join(around.split())[NEAR // 2:-NEAR // 2]) for n, around in numbers if not sources_of(n, around)]
    assert not orphans, ("numbers in README.md without a source in tests/test_readme.py (add the measurement to "
                         f"benchmarks/results/ and an entry here, or drop the number): {orphans}")


@pytest.mark.parametrize("value, words, source", SOURCES, ids=[f"{v}-{w}" for v, w, _ in SOURCES])
def test_each_source_gives_the_readme_number(value, words, source):
    assert source() == value, f"README.md says {value} near '{words}', its source now gives {source()}"


def test_each_source_is_used():
    """An entry whose number left the README is removed here too (else it checks nothing)."""
    numbers = readme_numbers(README.read_text(encoding="utf-8"))
    unused = [(v, w) for v, w, _ in SOURCES
              if not any(n == v and w.lower() in around.lower() for n, around in numbers)]
    assert not unused, unused


def test_the_extraction_finds_an_orphan():
    text = "The quick profile took 12.5 min `on 3 cores`.\n\n    $ run 7\n"
    assert [n for n, _ in readme_numbers(text)] == ["12.5"]
    assert not sources_of("12.5", text)


def test_readme_is_short_and_names_no_session_or_issue():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert not re.search(r"\b(session|issue)s? #?\d", text, re.I), re.findall(r".{30}\b(?:session|issue)s? #?\d.{10}",
                                                                           text, re.I)
    for link in re.findall(r"\]\(((?:docs|benchmarks|figures)/[^)#]*)", prose_links(text)):
        assert (REPO_ROOT / link).exists(), link


def prose_links(text: str) -> str:
    return STATUS.sub("", text)
