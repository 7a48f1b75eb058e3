"""provenance.compute_record: what a sweep's runs cost, summed over runs made in any number of pieces."""
from fedpaper.runs.provenance import compute_record


def test_compute_record_splits_each_engine_call_over_its_runs_and_counts_old_logs():
    two = {"train_seconds": 10.0, "cpu_seconds": 8.0, "runs": 2, "samples": 400, "device": "cpu", "backend": "grouped"}
    old = {"train_seconds": 3.0, "samples": 50, "device": "cpu", "backend": "loop"}  # before "cpu_seconds"/"runs"
    rec = compute_record([{"log": two}, {"log": two}, {"log": old}, {"history": []}])
    assert rec["runs"] == 4 and rec["training_samples"] == 200 + 200 + 50
    assert rec["train_wall_s"] == 13.0 and rec["train_cpu_s"] == 8.0
    assert rec["runs_without_cpu_seconds"] == 2 and rec["backends"] == ["grouped", "loop"] and rec["devices"] == ["cpu"]


def test_device_description_names_the_cuda_card(monkeypatch):
    """Provenance names the GPU a run used (issue 30: 'provenance naming the GPU'); a CPU stays 'cpu'."""
    import torch

    from fedpaper.runs.provenance import device_description

    assert device_description("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: f"Card {i}")
    assert device_description("cuda") == "cuda (Card 0)"
    assert device_description("cuda:1") == "cuda:1 (Card 1)"
    assert device_description() == "cuda (Card 0)"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device_description("cuda") == "cuda"
    assert device_description() == "cpu"
