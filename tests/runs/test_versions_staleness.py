"""Stale committed artifacts: provenance.staleness compares the code version an artifact was made by
(recorded, mapped from the text scheme, or its commit's) with this checkout's, and REPORT.md and the
README status table mark the stale ones."""
import json

import pandas as pd

from fedpaper import report as REP
from fedpaper.ground.paths import REPO_ROOT
from fedpaper.runs import provenance as P
from fedpaper.runs import version_map as M
from fedpaper.runs.versions import SCHEME, code_version


def test_staleness_of_recorded_mapped_and_commit_versions(monkeypatch):
    now = code_version("fedpals")
    assert P.staleness({"paper": "fedpals", "code_version": now, "code_scheme": SCHEME}) is None
    other = "0123456789abcdef+fedcba9876543210"
    assert P.staleness({"paper": "fedpals", "code_version": other, "code_scheme": SCHEME}) == \
        "stale: made by 01234567+fedcba98"
    vmap = {"core": {"aaaa": now.split("+")[0], "cccc": "0123456789abcdef"},
            "papers": {"fedpals": {"bbbb": now.split("+")[1]}},
            "versions": [{"core": now.split("+")[0], "fedpals": now.split("+")[1]}, {"core": "0" * 16, "fedpals": "1" * 16}],
            "commits": {"aaaaaaaaaaaa": 0, "bbbbbbbbbbbb": 1}}
    monkeypatch.setattr(M, "load_map", lambda path=None: vmap)
    assert P.staleness({"paper": "fedpals", "code_version": "aaaa+bbbb"}) is None  # text scheme, same source
    assert P.staleness({"paper": "fedpals", "code_version": "cccc+bbbb"}).startswith("stale: made by 01234567+")
    assert P.staleness({"artifact_id": "fedpals/table1", "git": {"commit": "a" * 40, "dirty": False}}) is None
    assert P.staleness({"artifact_id": "fedpals/table1", "git": {"commit": "b" * 40}}) == \
        "stale: made by 00000000+11111111"
    assert P.staleness({"artifact_id": "fedpals/table1", "git": {"commit": "a" * 40, "dirty": True}}) == \
        f"stale: made by {now.split('+')[0][:8]}+{now.split('+')[1][:8]} with uncommitted changes"
    assert P.staleness({"artifact_id": "fedpals/table1", "git": {"commit": "c" * 40}}).startswith(
        "code version not known (commit cccccccccc")


def test_new_provenance_records_the_code_version_it_was_made_by():
    rec = P.collect(artifact_id="fedpals/table1", profile="quick", params={}, datasets=[], seeds=[0])
    assert (rec["code_version"], rec["code_scheme"]) == (code_version("fedpals"), SCHEME)
    assert P.staleness({**rec, "paper": "fedpals"}) is None


def _commit(figures, aid, **prov):
    paper, name = aid.split("/")
    (figures / paper).mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"x": [1]}).to_csv(figures / paper / f"{name}.csv", index=False)
    rec = {"artifact_id": aid, "paper": paper, "profile": "quick", "git": {"commit": None}, "seeds": [0]}
    rec.update(prov)
    (figures / paper / f"{name}.json").write_text(json.dumps(rec))


def test_report_and_readme_mark_the_stale_artifacts_only(figures_tmp, readme_tmp, empty_data_root):
    _commit(figures_tmp, "fedpals/table1", code_version=code_version("fedpals"), code_scheme=SCHEME)
    _commit(figures_tmp, "fedmt/table2", code_version="0123456789abcdef+fedcba9876543210", code_scheme=SCHEME)
    readme_tmp.write_text(f"{REP.STATUS_START}\n{REP.STATUS_END}\n")
    text = REP.write_report().read_text()
    readme = readme_tmp.read_text()
    for doc in (text, readme):
        line = [x for x in doc.splitlines() if "fedmt/table2" in x and x.startswith("|")][0]
        assert line.endswith("regenerated (quick); stale: made by 01234567+fedcba98 |"), line
        line = [x for x in doc.splitlines() if "fedpals/table1" in x and x.startswith("|")][0]
        assert line.endswith("| regenerated (quick) |"), line


def test_the_committed_artifacts_code_versions_are_all_known():
    """Every committed artifact's code version can be told (recorded, or its commit in the map):
    none is marked 'code version not known'."""
    unknown = []
    for path in sorted((REPO_ROOT / "figures").rglob("*.json")):
        rec = P.load(path)
        if rec and rec.get("artifact_id") and P.staleness(rec, current="-") is not None \
                and P.staleness(rec, current="-").startswith("code version not known"):
            unknown.append(path.relative_to(REPO_ROOT).as_posix())
    assert not unknown, f"regenerate the version map: python scripts/version_map.py ({unknown[:3]})"

