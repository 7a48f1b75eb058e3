"""benchmarks/gpu_throughput.py --measure on the CPU (--allow-cpu) with one tiny key: the json it writes
has the structure fedpaper/runs/model_costs.py's gpu_rates and plan.costs_of read, a bad key is an error
line (the others go on), and without CUDA it never writes benchmarks/results/gpu.json."""
import json
import math
from pathlib import Path

import pytest
import torch

from fedpaper.runs.model_costs import ModelKey
from fedpaper.plan import RunCount, _canon, costs_of
from repo_scripts import load_script



def _module():
    return load_script("benchmarks/gpu_throughput.py")


def _keys_file(gt, tmp_path, keys) -> Path:
    p = tmp_path / "keys.json"
    p.write_text(json.dumps({"format": gt.FORMAT, "profile": "test", "keys": [
        {"key": gt.key_to_dict(k), "signature": k.signature(), "label": k.label(), "train_macs": None,
         "eval_macs": None, "artifacts": ["x/y"], "runs": 1, "train_samples": 100.0} for k in keys]}))
    return p


TINY = ModelKey("lenet", _canon(dict(in_channels=3, image_size=16, num_classes=4)), (3, 16, 16), 8, "sgd", 0.9,
                "fp32", 2, False, 64)
BAD = ModelKey("no_such_model", _canon({}), (3, 16, 16), 8, "sgd", 0.0, "fp32", 1, False, 64)


def test_key_round_trips():
    gt = _module()
    assert gt.key_from_dict(json.loads(json.dumps(gt.key_to_dict(TINY)))) == TINY


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the CPU path (--allow-cpu)")
def test_measure_on_cpu_writes_what_plan_reads(tmp_path, monkeypatch):
    gt = _module()
    keys = _keys_file(gt, tmp_path, [BAD, TINY])
    out_json, out_md = tmp_path / "g.json", tmp_path / "g.md"
    assert gt.main(["--measure", str(keys), "--out-json", str(out_json), "--out-md", str(out_md), "--allow-cpu",
                    "--max-seconds", "20", "--per-key", "0.2", "--rounds", "2", "--batches", "1"]) == 0
    data = json.loads(out_json.read_text())
    assert data["device"] == "cpu" and "not a GPU" in data["card"]
    assert list(data["models"]) == [TINY.signature()]  # the bad key: an error line, the tiny one measured
    assert "no_such_model" in BAD.signature() and data["errors"][BAD.signature()]
    r = data["models"][TINY.signature()]
    assert r["train_samples_per_s"] > 0 and r["eval_samples_per_s"] > 0
    assert "ERROR" in out_md.read_text() and TINY.label() in out_md.read_text()

    # plan reads it as it reads benchmarks/results/gpu.json
    import fedpaper.ground.paths
    from fedpaper.runs.model_costs import GPU_RESULTS, gpu_rates

    (tmp_path / GPU_RESULTS).parent.mkdir(parents=True)
    (tmp_path / GPU_RESULTS).write_text(out_json.read_text())
    monkeypatch.setattr(fedpaper.ground.paths, "REPO_ROOT", tmp_path)
    card, gpu = gpu_rates()
    assert card == data["card"] and set(gpu) == {TINY.signature()}
    run = RunCount("r", "x", 2, TINY, train_samples=1000.0, eval_samples=500.0)
    s = costs_of([run], {}, gpu)
    want = 1000.0 / r["train_samples_per_s"] + 500.0 / r["eval_samples_per_s"]
    assert math.isclose(s["gpu_s"], want)


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the CPU path (no CUDA)")
def test_cpu_never_writes_gpu_json(tmp_path, capsys):
    gt = _module()
    keys = _keys_file(gt, tmp_path, [TINY])
    with pytest.raises(SystemExit) as e:
        gt.main(["--measure", str(keys), "--out-json", str(tmp_path / "g.json"), "--out-md", str(tmp_path / "g.md")])
    assert e.value.code == 2 and "--allow-cpu" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        gt.main(["--measure", str(keys), "--allow-cpu", "--out-md", str(tmp_path / "g.md")])
    assert e.value.code == 2 and "never writes" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists() and not (tmp_path / "g.md").exists()
