"""`fedpaper cache rekey --scheme`: runs keyed by the text-hash code versions are moved, without
retraining, to the syntax-tree version of the same source; archives are rewritten so."""
import json
import pickle
import tarfile

import pytest

from fedpaper import cli
from fedpaper.ground import files as GF
from fedpaper.runs import archive as A
from fedpaper.runs import rekey as R
from fedpaper.runs import version_map as M
from fedpaper.runs.store import ResultStore
from fedpaper.runs.versions import SCHEME, code_version

OLD_SAME = "aaaaaaaaaaaaaaaa+bbbbbbbbbbbbbbbb"  # a text version of the source this checkout has
OLD_OTHER = "cccccccccccccccc+bbbbbbbbbbbbbbbb"  # a text version of another core


def _vmap():
    core, own = code_version("fedpals").split("+")
    return {"scheme": SCHEME, "core": {"aaaaaaaaaaaaaaaa": core, "cccccccccccccccc": "dddddddddddddddd"},
            "papers": {"fedpals": {"bbbbbbbbbbbbbbbb": own}}}


def _spec(seed):
    return {"paper": "fedpals", "run": {"seed": seed}}


def _result(seed):
    return {"history": [{"round": 1, "acc": 0.25 + seed}], "log": {"seconds": 1.0}}


def _old_stores(root):
    same, other = ResultStore(root, code=OLD_SAME), ResultStore(root, code=OLD_OTHER)
    for s in (0, 1):
        same.put(_spec(s), _result(s))
    other.put(_spec(2), _result(2))
    same.record("fedpals/table1", "quick", [_spec(0), _spec(1)])
    return same, other


def test_cache_runs_move_to_the_tree_version_of_their_source_without_retraining(tmp_path):
    _old_stores(tmp_path)
    cur = ResultStore(tmp_path)
    assert cur.get(_spec(0)) is None
    out = R.migrate_scheme(cur, _vmap())
    assert (out["moved"], out["current"], out["unmapped"]) == (3, 2, 0)
    assert cur.get(_spec(0)) == _result(0) and cur.get(_spec(1)) == _result(1)  # the same code: current
    assert cur.get(_spec(2)) is None  # another core: moved, not current
    assert ResultStore(tmp_path, code="dddddddddddddddd+" + code_version("fedpals").split("+")[1]).get(_spec(2)) \
        == _result(2)
    e = pickle.loads(GF.verified_payload(cur.path(_spec(0)).read_bytes()))
    assert e["scheme"] == {"from": OLD_SAME, "to": code_version("fedpals"), "name": SCHEME}
    assert ResultStore(tmp_path, code=OLD_SAME).get(_spec(0)) == _result(0)  # the old entry is kept
    assert cur.progress("fedpals/table1", "quick") == (2, 2)  # the index knows the new keys
    assert R.migrate_scheme(cur, _vmap())["moved"] == 0  # once


def test_plain_rekey_migrates_first_and_retrains_nothing_for_same_source(tmp_path, monkeypatch):
    same = ResultStore(tmp_path, code=OLD_SAME)
    same.put(_spec(0), _result(0))
    monkeypatch.setattr(M, "load_map", lambda path=None: _vmap())
    said = []
    with pytest.raises(R.RekeyError, match="nothing to rekey"):  # nothing left to check: no training
        R.rekey(ResultStore(tmp_path), verify=1, say=said.append)
    assert "moved 1 runs of the text-hash scheme" in said[0] and ResultStore(tmp_path).get(_spec(0)) == _result(0)


def test_an_archive_is_rewritten_with_the_new_keys_and_imports_as_current(tmp_path):
    same, _ = _old_stores(tmp_path / "old")
    path = tmp_path / "a.tar.gz"
    A.export_archive(path, same, only=["fedpals/table1"], profile="quick")
    before, _ = A.read_archive(path)
    out = A.migrate_archive(path, _vmap())
    assert (out["moved"], out["entries"]) == (2, 2)
    assert out["before"] == {"fedpals": [OLD_SAME]} and out["after"] == {"fedpals": [code_version("fedpals")]}
    manifest, members = A.read_archive(path)  # every check passes on the rewritten archive
    assert manifest["git"] == before["git"] and manifest["migrated"][0]["from_code_versions"] == before["code_versions"]
    assert set(manifest["indexes"][0]["runs"]) == set(members)
    assert A.migrate_archive(path, _vmap())["moved"] == 0  # nothing left: the file is not rewritten
    cur = ResultStore(tmp_path / "new")
    A.import_archive(path, cur)
    assert cur.get(_spec(0)) == _result(0) and cur.progress("fedpals/table1", "quick") == (2, 2)


def test_cli_rekey_scheme_moves_the_cache_or_rewrites_archives(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDPAPER_CACHE", str(tmp_path))
    monkeypatch.setattr(M, "load_map", lambda path=None: _vmap())
    same, _ = _old_stores(tmp_path / "results")
    assert cli.main(["cache", "rekey", "--scheme"]) == 0
    assert "moved 3 runs to the syntax-tree code versions of the same source, nothing retrained: 2 of them" \
        in capsys.readouterr().out
    A.export_archive(tmp_path / "a.tar.gz", same, only=["fedpals/table1"], profile="quick")
    assert cli.main(["cache", "rekey", "--scheme", "--archive", str(tmp_path / "a.tar.gz")]) == 0
    assert "2 of 2 runs moved" in capsys.readouterr().out
    assert cli.main(["cache", "rekey", "--archive", str(tmp_path / "a.tar.gz")]) == 2
    assert "--archive goes with --scheme" in capsys.readouterr().err


def test_the_committed_archives_hold_no_text_scheme_version_the_map_knows():
    from fedpaper.ground.paths import REPO_ROOT

    archives = sorted((REPO_ROOT / "archives").glob("*.tar.gz"))
    for path in archives:
        with tarfile.open(path, "r:gz") as tar:
            manifest = json.load(tar.extractfile(A.MANIFEST))
        for paper, versions in (manifest.get("code_versions") or {}).items():
            assert not [v for v in versions if M.to_new_scheme(v, paper) is not None], \
                f"{path.name}: run `fedpaper cache rekey --scheme --archive {path}`"


def test_import_moves_text_scheme_runs_as_it_reads_them(tmp_path, monkeypatch):
    same, _ = _old_stores(tmp_path / "old")
    path = tmp_path / "a.tar.gz"
    A.export_archive(path, same, only=["fedpals/table1"], profile="quick")
    monkeypatch.setattr(M, "load_map", lambda path=None: _vmap())
    cur = ResultStore(tmp_path / "new")
    out = A.import_archive(path, cur)
    assert out["entries"] == 2 and out["notes"] == []  # of this checkout's code once moved: no note
    assert cur.get(_spec(1)) == _result(1) and cur.progress("fedpals/table1", "quick") == (2, 2)
