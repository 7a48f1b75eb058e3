"""benchmarks/privlabels_tuning_study.py at the smoke profile (synthetic data, seconds): the md and json
exist and hold every grid cell (server size x optimiser x L) and every trend row; the SGD specs are the
epoch ablation's E = 1 specs; --rerender; the noise and trend rules on hand-made margins."""
import json
from fedpaper.algorithms.parts import argument

from repo_scripts import load_script

study = load_script("benchmarks/privlabels_tuning_study.py")


def test_smoke_run_writes_every_cell(tmp_path, cache_tmp):
    out = tmp_path / "study"
    assert study.main(["--profile", "smoke", "--out", str(out)]) == 0
    d = json.loads(out.with_suffix(".json").read_text())
    md = out.with_suffix(".md").read_text()
    sizes = [s["size"] for s in d["server_sizes"]]
    assert sizes == [8, 32, 128]  # x1/4, x1, x4 of the smoke profile's paper-ratio 32
    assert d["labels"] == [3, 5] and d["seeds"] == [0, 1]
    want = {(s, o, L) for s in sizes for o in ("adam", "sgd") for L in d["labels"]}
    got = {(c["size"], c["optimizer"], c["L"]) for c in d["cells"]}
    assert got == want and len(d["cells"]) == len(want)
    for c in d["cells"]:
        assert set(c["methods"]) == {"FedAvg", "Tuning-MSE", "Tuning-Pairwise"}
        assert all(len(c["margins"][k]["per_seed"]) == 2 for k in ("worse", "better"))
        assert f"| {c['size']} | {c['optimizer']} | {c['L']} |" in md
    assert {(t["optimizer"], t["L"], t["margin"]) for t in d["trends"]} == \
        {(o, L, k) for o in ("adam", "sgd") for L in d["labels"] for k in ("worse", "better")}
    # FedAvg is one run per (size, L, seed), shared by both optimisers; tuning: 2 methods x 2 optimisers
    assert d["unique_runs"] == len(sizes) * 2 * 2 * (1 + 2 * 2)
    assert all(r["same_label_sets"] and r["same_val_rows"] and r["same_test_rows"] for r in d["federations"])
    assert d["findings"] and all(f in md for f in d["findings"])
    # --rerender recomputes the same cells and findings from the json's accuracies, keeping the timings
    assert study.main(["--rerender", "--out", str(out)]) == 0
    r = json.loads(out.with_suffix(".json").read_text())
    assert r["findings"] == d["findings"] and r["cells"] == d["cells"] and r["timings"] == d["timings"]
    assert "re-rendered" in out.with_suffix(".md").read_text()


def test_sgd_spec_is_the_ablation_e1_spec():
    p = study.sized("smoke", None, 32)
    for name in ("FedAvg", "Tuning-MSE", "Tuning-Pairwise"):
        sgd = study.spec_of(p, name, "sgd", 3, 0)
        assert sgd.to_json() == study.R.run_spec(p, "cifar10", name, "private", 3, 0, epochs=1).to_json()
    assert argument(study.spec_of(p, "Tuning-MSE", "sgd", 3, 0).method, "optimizer") == "sgd"
    assert argument(study.spec_of(p, "Tuning-MSE", "adam", 3, 0).method, "optimizer") == "adam"
    assert study.spec_of(p, "Tuning-MSE", "adam", 3, 0).partition["server_size"] == 32


def test_noise_and_trend_rules():
    assert study.noise_verdict([1.0, 1.2, 0.9]) == "tuning above"
    assert study.noise_verdict([-1.0, -1.2, -0.9]) == "tuning below"
    assert study.noise_verdict([1.0, -0.1, 2.0]) == "within noise"
    assert study.noise_verdict([0.1, 5.0, 0.2]) == "within noise"  # same sign, |mean| < 2 SE
    x = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert study.trend(x, [0, 0.1, -0.1, 1, 1.1, 0.9, 2, 2.1, 1.9])["trend"] == "rising"
    assert study.trend(x, [0, 0.1, -0.1, -1, -1.1, -0.9, -2, -2.1, -1.9])["trend"] == "falling"
    assert study.trend(x, [0, 3, -3, 0.2, 3, -3, 0, 3, -3])["trend"] == "flat"
