"""benchmarks/gpu_ceiling.py on the CPU with --tiny (every cell's code path at tiny sizes, seconds):
the json and markdown it writes, its ratios, and --update-gpu-json (CUDA only; what it writes into a
gpu.json is what `fedpaper plan` reads)."""
import json

import pytest
import torch

from repo_scripts import load_script


def _module():
    return load_script("benchmarks/gpu_ceiling.py")


def test_tiny_run_measures_every_cell_and_writes_the_table(tmp_path):
    gc = _module()
    md, js = tmp_path / "c.md", tmp_path / "c.json"
    # LeNet (no BatchNorm) and FedMT's ResNet-18 (BatchNorm: the vmap cells replace its running statistics)
    assert gc.main(["--tiny", "--models", "lenet,resnet18_fedmt", "--out-md", str(md), "--out-json", str(js)]) == 0
    out = json.loads(js.read_text())
    assert out["tiny"] and out["torch"] == torch.__version__
    if not torch.cuda.is_available():
        assert out["device"] == "cpu" and out["card"].startswith("CPU: ")
    assert [r["name"] for r in out["models"]] == ["LeNet (FedPALS)", "ResNet-18 (FedMT)"]
    for r in out["models"]:
        assert r["errors"] == {} and r["not_run"] == []
        assert set(r["cells"]) | set(r["skipped"]) == set(gc.CELLS) and not set(r["cells"]) & set(r["skipped"])
        assert all(c["samples_per_s"] > 0 for c in r["cells"].values())
        if torch.cuda.is_available():
            assert r["cells"]["engine_captured"]["backend"] == "captured"
        else:  # the captured backend replays CUDA graphs: skipped on the CPU, with its note
            assert r["skipped"] == gc.CUDA_ONLY and set(gc.CUDA_ONLY) == {"engine_captured", "engine_captured_bf16"}
        assert r["engine_over_plain_loop"] == r["cells"]["engine"]["samples_per_s"] / r["cells"]["plain_loop"]["samples_per_s"]
        assert r["runs_per_call"] == gc.TINY["runs"] and r["cells"]["engine"]["runs"] == gc.TINY["runs"]
    text = md.read_text()
    assert out["card"] in text and f"torch {torch.__version__}" in text and "not a result" in text
    assert "| LeNet (FedPALS) | lenet 3x32x32 b4 | 1 x 2 |" in text and "Targets (engine >= 0.5x" in text
    if not torch.cuda.is_available():
        assert "Skipped on this device: engine_captured: CUDA only" in text


def test_the_paper_group_sizes_are_the_profiles_seeds():
    gc = _module()
    from fedpaper.papers.fedpals.profiles import RUNS
    from fedpaper.papers.privlabels.profiles import settings

    seeds = {m["model"]: m["seeds"]() for m in gc.MODELS}
    assert seeds["lenet"] == RUNS["paper"]["seeds"] and seeds["privlabels_cnn"] == settings("paper")["seeds"]
    k = gc.paper_key("resnet18_fedmt", [3, 32, 32])
    assert (k.batch_size, k.clients, k.optimizer) == (10, 10, "sgd")
    assert gc.paper_key("fednca_net", [3, 224, 224]).batch_size == 32


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the refusal on the CPU")
def test_update_gpu_json_is_refused_on_the_cpu(tmp_path, capsys):
    gc = _module()
    g = tmp_path / "gpu.json"
    g.write_text('{"card": "NVIDIA H200", "models": {}}')
    with pytest.raises(SystemExit) as e:
        gc.main(["--tiny", "--update-gpu-json", str(g), "--out-md", str(tmp_path / "m"), "--out-json", str(tmp_path / "j")])
    assert e.value.code == 2 and "--update-gpu-json" in capsys.readouterr().err
    assert g.read_text() == '{"card": "NVIDIA H200", "models": {}}' and not (tmp_path / "j").exists()


def test_update_gpu_json_replaces_the_measured_training_rates_only(tmp_path):
    gc = _module()
    g = tmp_path / "gpu.json"
    g.write_text(json.dumps({"card": "NVIDIA H200", "models": {
        "A": {"train_samples_per_s": 1.0, "eval_samples_per_s": 5.0, "label": "a"},
        "B": {"train_samples_per_s": 2.0, "eval_samples_per_s": 6.0, "label": "b"}}}))
    out = {"card": "NVIDIA H200", "date": "d", "torch": "t", "models": [
        {"signature": "A", "label": "a", "cells": {"engine": {"samples_per_s": 100.0, "timed_with": "engine (x)"}}},
        {"signature": "C", "label": "c", "cells": {"engine": {"samples_per_s": 7.0, "timed_with": "engine (y)"}}},
        {"signature": "B", "label": "b", "cells": {}}]}
    assert gc.update_gpu_json(g, out) == ["a"]
    d = json.loads(g.read_text())
    assert d["models"]["A"]["train_samples_per_s"] == 100.0 and d["models"]["A"]["eval_samples_per_s"] == 5.0
    assert d["models"]["A"]["timed_with"] == "gpu_ceiling.py: engine (x)"
    assert d["models"]["B"] == {"train_samples_per_s": 2.0, "eval_samples_per_s": 6.0, "label": "b"}
    assert "C" not in d["models"] and d["updated"][-1]["keys"] == ["a"]
    with pytest.raises(SystemExit):  # another card's file
        gc.update_gpu_json(g, dict(out, card="NVIDIA H100"))


def test_unknown_model_is_one_line(tmp_path, capsys):
    gc = _module()
    with pytest.raises(SystemExit) as e:
        gc.main(["--tiny", "--models", "vgg", "--out-md", str(tmp_path / "m"), "--out-json", str(tmp_path / "j")])
    assert e.value.code == 2 and "unknown cell or model vgg" in capsys.readouterr().err
