"""Data set downloads (fedpaper.blocks.data.download, `fedpaper reproduce`), with fake sources: no network."""
import dataclasses
import gzip
import pickle
import urllib.error

import numpy as np
import pytest

from fedpaper import cli
from fedpaper.outputs import registry as papers
from fedpaper.blocks.data import dataset_available, download, fetch, load_dataset
from fedpaper.ground.errors import DataMissingError
from fedpaper.runs.provenance import dataset_copies, summary


# --------------------------------------------------------------------------- small valid copies
def _idx_bytes(arr: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    return header + arr.astype(np.uint8).tobytes()


def write_fashion_mnist(folder, n_train=20, n_test=10):
    """torchvision's FashionMNIST/raw layout with a few random images (what its download leaves)."""
    rng = np.random.default_rng(0)
    raw = folder / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for stem, arr in [("train-images-idx3-ubyte", rng.integers(0, 256, (n_train, 28, 28))),
                      ("train-labels-idx1-ubyte", np.arange(n_train) % 10),
                      ("t10k-images-idx3-ubyte", rng.integers(0, 256, (n_test, 28, 28))),
                      ("t10k-labels-idx1-ubyte", np.arange(n_test) % 10)]:
        (raw / f"{stem}.gz").write_bytes(gzip.compress(_idx_bytes(arr)))
    return ["FashionMNIST"]


def write_cifar10(folder, n=10):
    """torchvision's cifar-10-batches-py layout (pickled batches of original pixels)."""
    rng = np.random.default_rng(1)
    out = folder / "cifar-10-batches-py"
    out.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), "labels": list(np.arange(n) % 10)}
        (out / name).write_bytes(pickle.dumps(batch))
    (out / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(10)]}))
    return ["cifar-10-batches-py"]


@pytest.fixture
def fake_source(monkeypatch):
    """Replace a data set's fetcher by one that writes a small valid copy; counts the calls."""
    calls = []
    monkeypatch.setattr(download, "announced_size", lambda urls, timeout=None: 123_456)

    def install(name, writer, fail_after_writing=None, **changes):
        def stage(folder):
            calls.append(name)
            entries = writer(folder)
            if fail_after_writing is not None:
                raise fail_after_writing
            return entries

        src = dataclasses.replace(download.SOURCES[name], stage=stage,
                                  urls=lambda: [f"https://example.invalid/{name}.tar.gz"], **changes)
        monkeypatch.setitem(download.SOURCES, name, src)
        return calls

    return install


@pytest.fixture
def fresh_machine(tmp_path, monkeypatch):
    """No FEDPAPER_DATA, no ../shared/data beside the checkout, an empty home: the default root."""
    import fedpaper.ground.paths

    monkeypatch.delenv("FEDPAPER_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(fedpaper.ground.paths, "REPO_ROOT", tmp_path / "checkout" / "fedpaper")
    return tmp_path / "home" / ".fedpaper" / "data"


@pytest.fixture
def executed(monkeypatch):
    """Record the notebooks reproduce would execute (and their parameters) without running them."""
    runs = []
    monkeypatch.setattr(cli, "_execute", lambda nb, out_nb, params, timeout: runs.append((nb, params)))
    monkeypatch.setitem(papers._IMPLEMENTATIONS, "privlabels/fig3",
                        papers.Implementation("privlabels/fig3", "notebooks/privlabels/accuracy_vs_labels.ipynb"))
    return runs


def _download_lines(lines):
    return [ln for ln in lines if ln.startswith(("downloading ", "could not download", "not downloading",
                                                 "cannot download"))]


REPRODUCE_FIG3 = ["reproduce", "--profile", "quick", "--only", "privlabels/fig3", "--no-report"]


# --------------------------------------------------------------------------- tests
def test_missing_dataset_is_fetched_once_into_the_default_root_and_used(
        fresh_machine, fake_source, executed, figures_tmp, capsys):
    calls = fake_source("fashion-mnist", write_fashion_mnist)
    assert cli.main(REPRODUCE_FIG3) == 0
    assert cli.main(REPRODUCE_FIG3) == 0  # the second run finds it
    assert calls == ["fashion-mnist"]
    out = capsys.readouterr().out
    assert f"downloading fashion-mnist: Fashion-MNIST, 0.1 MB from https://example.invalid/" in out
    assert str(fresh_machine / "fashion-mnist") in out
    # the notebook ran on the default root, and the loader reads what was placed there
    assert [p["data_root"] for _, p in executed] == [str(fresh_machine)] * 2
    ds = load_dataset("fashion-mnist")
    assert tuple(ds.x_train.shape) == (20, 1, 28, 28) and ds.y_test.tolist() == list(np.arange(10) % 10)
    assert not list(fresh_machine.glob(".fedpaper-download-*"))
    # provenance says which copy the result used
    rec = dataset_copies([{"name": "fashion-mnist", "data_root": str(fresh_machine), "available": True}],
                         "quick")[0]
    assert rec["copy"] == "original download" and "replaces_lossy_offline_copy" not in rec
    assert download.download_record("fashion-mnist", fresh_machine)["bytes"] == 123_456


def test_downloaded_cifar_original_loads_and_is_marked_as_replacing_the_lossy_copy(tmp_path, fake_source):
    fake_source("cifar10", write_cifar10)
    ds = load_dataset("cifar10", root=tmp_path, download=True)  # the loader's own download goes through download()
    assert tuple(ds.x_train.shape) == (50, 3, 32, 32) and ds.lossy is False
    assert "original pixels" in ds.source
    assert (tmp_path / "cifar10" / download.MARKER).is_file()
    rec = dataset_copies([dict(ds.describe(), data_root=str(tmp_path), available=True)], "quick")[0]
    assert rec["copy"] == "original download" and rec["replaces_lossy_offline_copy"] is True
    line = summary({"profile": "quick", "datasets": [rec]})
    assert "cifar10 original download (replaces the lossy offline copy)" in line
    # smoke records are left alone; an offline copy is named as such
    smoke = {"name": "cifar10", "data_root": str(tmp_path), "available": True}
    assert dataset_copies([smoke], "smoke") == [smoke]
    offline = tmp_path / "offline"
    (offline / "cifar10").mkdir(parents=True)
    (offline / "cifar10" / "cifar10-jpeg.zip").write_bytes(b"")
    assert download.copy_kind("cifar10", offline) == "offline copy"


def test_failed_download_is_one_line_and_the_run_goes_on(fresh_machine, executed, monkeypatch, capsys):
    def no_network(*args, **kwargs):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(download.urllib.request, "urlopen", no_network)
    assert cli.main(["reproduce", "--profile", "quick", "--only", "privlabels", "--no-report"]) == 0
    out = capsys.readouterr().out.splitlines()
    failed = _download_lines(out)
    assert failed == [f"could not download {name}: network unreachable ([Errno -2] Name or service not "
                      f"known); put a copy in {fresh_machine / name} or set FEDPAPER_DATA"
                      for name in ("cifar10", "fashion-mnist")]
    # the run went on: artifacts that need no data set ran, the others are listed as skipped
    assert "notebooks/privlabels/tables.ipynb" in [nb for nb, _ in executed]
    assert any(ln.startswith("not regenerated") and "privlabels/fig3: " in ln for ln in out)
    assert not list(fresh_machine.glob(".fedpaper-download-*"))


@pytest.mark.parametrize("error", [RuntimeError("connection reset"), KeyboardInterrupt()])
def test_interrupted_download_leaves_nothing_that_loads(tmp_path, fake_source, error):
    fake_source("cifar10", write_cifar10, fail_after_writing=error)
    expected = KeyboardInterrupt if isinstance(error, KeyboardInterrupt) else download.DownloadError
    with pytest.raises(expected):
        download.download("cifar10", tmp_path, log=lambda line: None)
    assert not dataset_available("cifar10", tmp_path)
    assert list(tmp_path.iterdir()) == []  # the staging folder went too
    with pytest.raises(DataMissingError):
        load_dataset("cifar10", root=tmp_path)


def test_a_killed_download_leaves_only_a_staging_folder_no_loader_reads(tmp_path, fake_source):
    stale = tmp_path / f"{download.STAGING_PREFIX}cifar10-999999999-x" / "cifar10"
    write_cifar10(stale)  # a complete copy, but never renamed into place
    assert not dataset_available("cifar10", tmp_path)
    calls = fake_source("cifar10", write_cifar10)
    download.download("cifar10", tmp_path, log=lambda line: None)  # removes the dead process's folder
    assert calls == ["cifar10"] and dataset_available("cifar10", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cifar10"]


def test_no_download_attempts_nothing(fresh_machine, executed, monkeypatch, capsys):
    def forbidden(*args, **kwargs):
        raise AssertionError("a download was attempted")

    monkeypatch.setattr(download, "download", forbidden)
    monkeypatch.setattr(download, "announced_size", forbidden)
    monkeypatch.setattr(download.urllib.request, "urlopen", forbidden)
    assert cli.main(["reproduce", "--profile", "quick", "--only", "privlabels", "--no-report", "--no-download"]) == 0
    out = capsys.readouterr().out
    assert not _download_lines(out.splitlines()) and "privlabels/fig3: " in out and "not regenerated" in out
    assert not fresh_machine.exists()


def test_smoke_profile_downloads_nothing(fresh_machine, monkeypatch):
    monkeypatch.setattr(download, "download", lambda *a, **k: pytest.fail("a download was attempted"))
    args = cli._build_parser().parse_args(["reproduce", "--profile", "smoke"])
    assert cli.download_missing(["privlabels/fig3", "fedpals/fig2a"], fresh_machine, args) == {}


def test_large_sets_only_on_opt_in(tmp_path, fake_source):
    def write_iwildcam(folder):
        (folder / "iwildcam_v2.0").mkdir(parents=True)
        (folder / "iwildcam_v2.0" / "metadata.csv").write_text("split,y,location_remapped\ntrain,0,0\n")
        return ["iwildcam_v2.0"]

    calls = fake_source("iwildcam", write_iwildcam, library="json")
    lines = []
    assert fetch.ensure_datasets(["iwildcam", "pacs"], tmp_path, log=lines.append) == {
        "iwildcam": "not fetched", "pacs": "not fetched"}
    assert calls == [] and lines == [
        "not downloading iwildcam (about 11 GB): add --download iwildcam or --download all to fetch it"]
    lines.clear()
    status = fetch.ensure_datasets(["iwildcam", "pacs"], tmp_path, opt_in=["all"], log=lines.append)
    assert status == {"iwildcam": "downloaded", "pacs": "not fetched"} and calls == ["iwildcam"]
    assert dataset_available("iwildcam", tmp_path)
    assert lines[-1].startswith("cannot download pacs: no library downloads")


def test_bad_download_options_are_one_line(capsys):
    assert cli.main(["reproduce", "--profile", "quick", "--download", "imagenet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown data set 'imagenet' for --download" in err[0] and "cifar10" in err[0]
    assert cli.main(["reproduce", "--profile", "quick", "--download", "all", "--no-download"]) == 2
    assert "contradict" in capsys.readouterr().err


def test_existing_partial_copy_is_not_overwritten(tmp_path, fake_source):
    (tmp_path / "cifar10" / "cifar-10-batches-py").mkdir(parents=True)  # e.g. an interrupted manual download
    fake_source("cifar10", write_cifar10)
    with pytest.raises(download.DownloadError, match="exists but does not hold a complete copy; remove it"):
        download.download("cifar10", tmp_path, log=lambda line: None)
    assert list((tmp_path / "cifar10" / "cifar-10-batches-py").iterdir()) == []
    assert not list(tmp_path.glob(".fedpaper-download-*"))


def test_voc_label_table_matches_the_offline_layout(tmp_path):
    main = tmp_path / "ImageSets" / "Main"
    main.mkdir(parents=True)
    flags = {"train": {"000012": 1, "000005": -1}, "val": {"000009": 0}, "test": {"000001": -1}}
    for split, ids in flags.items():
        for cls in download.VOC_CLASSES:
            lines = [f"{i} {v if cls == 'dog' else -1}" for i, v in ids.items()]
            (main / f"{cls}_{split}.txt").write_text("\n".join(lines) + "\n")
    rows = download.voc_label_table(tmp_path).splitlines()
    assert rows[0] == "image_id,split," + ",".join(download.VOC_CLASSES)
    assert [r.split(",")[:2] for r in rows[1:]] == [["000001", "test"], ["000005", "train"],
                                                    ["000009", "val"], ["000012", "train"]]
    dog = download.VOC_CLASSES.index("dog") + 2
    assert [r.split(",")[dog] for r in rows[1:]] == ["-1", "-1", "0", "1"]


def test_read_only_root_is_not_written_even_as_root(tmp_path, fake_source):
    calls = fake_source("cifar10", write_cifar10)
    ro = tmp_path / "offline"
    ro.mkdir()
    ro.chmod(0o555)  # how the offline copies are kept
    try:
        lines = []
        for root in (ro, ro / "sub"):
            assert fetch.ensure_datasets(["cifar10"], root, log=lines.append) == {"cifar10": "failed"}
        assert calls == [] and list(ro.iterdir()) == []
        assert lines[0] == (f"could not download cifar10: the data root {ro} is read-only (pass --data-root "
                            f"<a writable folder>); put a copy in {ro / 'cifar10'} or set FEDPAPER_DATA")
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("name", ["fashion-mnist", "cifar10", "dermamnist"])
def test_real_fetchers_keep_the_checksum_check(tmp_path, monkeypatch, name):
    """The libraries' own download code, fed a corrupted file instead of the network: the md5
    check rejects it, the error is one line and nothing is placed."""
    import torchvision.datasets.utils as tvu

    fetched = []

    def corrupted(url, fpath, *args, **kwargs):
        fetched.append(url)
        with open(fpath, "wb") as fh:
            fh.write(b"not the data set")

    monkeypatch.setattr(tvu, "_get_redirect_url", lambda url, max_hops=3: url)
    monkeypatch.setattr(tvu, "_urlretrieve", corrupted)
    monkeypatch.setattr(download, "announced_size", lambda urls, timeout=None: None)
    lines = []
    assert fetch.ensure_datasets([name], tmp_path, log=lines.append) == {name: "failed"}
    assert fetched and fetched[0] == download.SOURCES[name].urls()[0]
    assert lines[0].startswith(f"downloading {name}: ") and "(documented size)" in lines[0]
    assert lines[1].startswith(f"could not download {name}: RuntimeError: ") and len(lines) == 2
    assert "File not found or corrupted." in lines[1]
    assert list(tmp_path.iterdir()) == []


def test_announced_size_sums_content_lengths_and_fails_fast_without_network(monkeypatch):
    class Answer:
        def __init__(self, length):
            self.headers = {"Content-Length": length} if length is not None else {}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    seen = []

    def head(req, timeout):
        seen.append((req.get_method(), req.full_url, timeout))
        return Answer({"https://a/1": "1000", "https://a/2": "234"}[req.full_url])

    monkeypatch.setattr(download.urllib.request, "urlopen", head)
    assert download.announced_size(["https://a/1", "https://a/2"]) == 1234
    assert seen == [("HEAD", "https://a/1", download.PROBE_TIMEOUT_S), ("HEAD", "https://a/2", download.PROBE_TIMEOUT_S)]

    def refuses_head(req, timeout):
        raise urllib.error.HTTPError(req.full_url, 405, "Method Not Allowed", {}, None)

    monkeypatch.setattr(download.urllib.request, "urlopen", refuses_head)
    assert download.announced_size(["https://a/1"]) is None  # reachable: the download goes on

    def silent(req, timeout):
        raise TimeoutError("timed out")

    monkeypatch.setattr(download.urllib.request, "urlopen", silent)
    with pytest.raises(download.DownloadError, match="the source did not answer in time"):
        download.announced_size(["https://a/1"])
