"""A figure's "claim not reproduced" stamp is drawn with the figure; a later artifact of the same
`fedpaper reproduce` can change a claim it names (FedMT's quick Fig. 2b named claim 33 after Table 9
had changed it, and CI's figure check failed). reproduce then redraws it and rewrites its claim notes."""
import json
import shutil
from types import SimpleNamespace

from fedpaper.outputs import artifacts as A
from fedpaper import cli
from fedpaper.outputs.registry import implementation
from fedpaper.ground.paths import REPO_ROOT

AID = "fedmt/fig2b"


def _notebook_of(aid):
    """(the notebook that makes `aid`, every artifact it makes)."""
    nb = REPO_ROOT / implementation(aid).notebook
    return nb, json.loads(nb.read_text(encoding="utf-8"))["metadata"]["fedpaper"]["artifacts"]


def test_a_stale_claim_stamp_is_redrawn_and_its_notes_rewritten(tmp_path, monkeypatch):
    nb, aids = _notebook_of(AID)
    figs = tmp_path / "figures"
    for aid in aids:  # the notebook's committed quick results, copied
        for p in A.output_paths(aid, REPO_ROOT / "figures").values():
            if p.is_file():
                dest = figs / p.relative_to(REPO_ROOT / "figures")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dest)
    monkeypatch.setenv("FEDPAPER_FIGURES", str(figs))
    monkeypatch.setenv("FEDPAPER_DATA", str(tmp_path / "no-data"))
    monkeypatch.setenv("FEDPAPER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    paths = A.output_paths(AID, figs)
    before = {s: paths[s].read_bytes() for s in ("png", "csv")}

    real = A.failed_claims
    monkeypatch.setattr(A, "failed_claims", lambda aid, table, profile=None:
                        ["(Fig. 2b) a claim another artifact just changed"] + real(aid, table, profile)
                        if aid == AID else real(aid, table, profile))
    stale = A.stale_claim_stamps([AID], "quick")
    assert list(stale) == [AID] and stale[AID][0].startswith("(Fig. 2b) a claim another")

    cli._restamp_claims(SimpleNamespace(notebooks={str(nb): aids}), "quick", [AID])
    notes = json.loads(paths["json"].read_text(encoding="utf-8"))["notes"]
    assert A.CLAIM_NOTE_PREFIX + "(Fig. 2b) a claim another artifact just changed" in notes
    assert paths["png"].read_bytes() != before["png"]  # the red line names one claim more
    assert paths["csv"].read_bytes() == before["csv"]  # the numbers are the run's
    assert A.stale_claim_stamps([AID], "quick") == {}


def test_a_redraw_that_fails_warns_with_the_command_and_keeps_the_results(tmp_path, monkeypatch, capsys):
    """A stale stamp whose redraw raises: one warning line naming the artifact, the cause and the
    command that redraws it; nothing else is touched and reproduce goes on (no exception)."""
    from fedpaper import notebook

    nb, aids = _notebook_of(AID)
    monkeypatch.setattr(A, "stale_claim_stamps", lambda regenerated, profile: {AID: ["(Fig. 2b) some claim"]})

    def broken(profile):
        raise OSError("disk full")

    monkeypatch.setattr(notebook, "artifact_function_of", lambda path: broken)
    cli._restamp_claims(SimpleNamespace(notebooks={str(nb): aids}), "quick", [AID])
    out, err = capsys.readouterr()
    assert "restamped" not in out
    line, = [ln for ln in err.splitlines() if ln.strip()]
    assert line.startswith("fedpaper: warning: could not redraw fedmt/fig2b") and "disk full" in line
    assert line.endswith(f"run `fedpaper reproduce --rerender --profile quick --only {AID}`")
