"""Data loaders: synthetic data, error messages, small generated stand-ins, and the real offline copies."""
import csv
import gzip
import io
import pickle
import sys
import types
import zipfile

import numpy as np
import pytest
import torch

from fedpaper.blocks.data import (
    DATASETS,
    dataset_available,
    gaussian_task,
    load_dataset,
    load_pacs,
    sample_gaussian,
    synthetic_images,
    target_marginal,
)
from fedpaper.blocks.data import cache as data_cache
from fedpaper.blocks.data import fashion_mnist, iwildcam
from fedpaper.blocks.data.synthetic import GAUSSIAN_MEANS, N1, N2, S1, S2
from fedpaper.ground.errors import BadParameterError, DataMissingError, UnknownNameError
from fedpaper.ground.paths import REPO_ROOT, data_root


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """Keep the parsed arrays of generated stand-ins out of the project cache."""
    monkeypatch.setenv("FEDPAPER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# --------------------------------------------------------------------------- registry and errors
def test_registry_entries():
    assert {"fashion-mnist", "cifar10", "cifar100", "synthetic-images", "pacs", "iwildcam"} <= set(DATASETS)
    for name, info in DATASETS.items():
        assert info.description and info.how_to_get and info.name == name
    assert DATASETS["cifar10"].lossy_offline and not DATASETS["fashion-mnist"].lossy_offline
    assert {n for n, d in DATASETS.items() if d.loadable} == {"fashion-mnist", "cifar10", "cifar100",
                                                              "synthetic-images", "pacs", "iwildcam",
                                                              "dermamnist"}


def test_unknown_name():
    with pytest.raises(UnknownNameError) as err:
        load_dataset("mnist-typo")
    msg = str(err.value)
    assert "\n" not in msg and "mnist-typo" in msg and "cifar10" in msg and "fashion-mnist" in msg


@pytest.mark.parametrize("name, hint", [
    ("fashion-mnist", "download=True"), ("cifar10", "download=True"), ("cifar100", "download=True"),
    ("pacs", "Bai et al"), ("iwildcam", "pip install wilds"),
])
def test_missing_data_message(tmp_path, name, hint):
    assert not dataset_available(name, root=tmp_path)
    with pytest.raises(DataMissingError) as err:
        load_dataset(name, root=tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and name in msg and str(tmp_path) in msg and hint in msg
    if name in ("fashion-mnist", "cifar10", "cifar100"):
        assert "FEDPAPER_DATA" in msg


def test_root_that_does_not_exist(tmp_path):
    with pytest.raises(BadParameterError, match="root="):
        load_dataset("cifar10", root=tmp_path / "nope")
    assert not dataset_available("cifar10", root=tmp_path / "nope")


# --------------------------------------------------------------------------- synthetic images
def test_synthetic_images():
    ds = load_dataset("synthetic-images", n_train=300, n_test=100, seed=1)
    assert ds.synthetic and not ds.lossy and ds.source == "SYNTHETIC (smoke/test only)"
    assert ds.x_train.shape == (300, 1, 28, 28) and ds.x_train.dtype == torch.uint8
    assert ds.y_train.dtype == torch.int64 and torch.bincount(ds.y_train).tolist() == [30] * 10
    again = synthetic_images(n_train=300, n_test=100, seed=1)
    assert torch.equal(ds.x_train, again.x_train) and torch.equal(ds.y_test, again.y_test)
    assert not torch.equal(ds.x_train, synthetic_images(n_train=300, n_test=100, seed=2).x_train)
    rgb = synthetic_images(num_classes=4, n_train=40, n_test=8, shape=(3, 32, 32))
    assert rgb.x_test.shape == (8, 3, 32, 32) and rgb.num_classes == 4
    # class structure: nearest class mean of the training images classifies the test images
    x, xt = ds.x_train.float().flatten(1), ds.x_test.float().flatten(1)
    means = torch.stack([x[ds.y_train == k].mean(0) for k in range(10)])
    acc = (torch.cdist(xt, means).argmin(1) == ds.y_test).float().mean()
    assert acc > 0.95
    with pytest.raises(BadParameterError, match="shape"):
        synthetic_images(shape=(2, 8, 8))


# --------------------------------------------------------------------------- FedPALS Gaussian task
def test_gaussian_task():
    assert GAUSSIAN_MEANS.tolist() == [[6.0, 4.6], [1.2, -1.6], [4.6, -5.4]]
    np.testing.assert_allclose(target_marginal(0.0), [0.5, 0.25, 0.25])
    np.testing.assert_allclose(target_marginal(1.0), [0.0, 0.5, 0.5])
    task = gaussian_task(0.3, seed=0)
    (x1, y1), (x2, y2) = task.clients
    assert x1.shape == (N1, 2) and x1.dtype == np.float32 and y1.dtype == np.int64
    assert np.bincount(y1, minlength=3).tolist() == [20, 20, 0]
    assert np.bincount(y2, minlength=3).tolist() == [9, 0, 9]
    assert len(task.y_test) == 2000 and len(task.y_val) == 500
    np.testing.assert_allclose(np.bincount(task.y_test) / 2000, target_marginal(0.3), atol=1e-3)
    np.testing.assert_array_equal(task.client_marginals, np.stack([S1, S2]))
    assert np.array_equal(gaussian_task(0.3, seed=0).x_test, task.x_test)
    assert not np.array_equal(gaussian_task(0.3, seed=1).x_test, task.x_test)
    x, y = sample_gaussian([1 / 3] * 3, 3000, seed=0)
    for k in range(3):
        np.testing.assert_allclose(x[y == k].mean(0), GAUSSIAN_MEANS[k], atol=0.1)
    _, ym = sample_gaussian([0.2, 0.3, 0.5], 100, seed=0, exact=False)
    assert len(ym) == 100 and N2 == 18
    with pytest.raises(BadParameterError, match="delta"):
        target_marginal(1.5)


# --------------------------------------------------------------------------- generated stand-ins
def write_idx(path, array, gz):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if gz:
        with gzip.open(str(path) + ".gz", "wb") as fh:
            fh.write(data)
    else:
        path.write_bytes(data)


@pytest.mark.parametrize("gz, layout", [(False, "FashionMNIST/raw"), (True, "fashion-mnist/FashionMNIST/raw")])
def test_fashion_mnist_idx_and_cache(tmp_path, tmp_cache, monkeypatch, gz, layout):
    raw = tmp_path / "data" / layout
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (12, 28, 28)), rng.integers(0, 10, 12)
    for stem, arr in [("train-images-idx3-ubyte", x), ("train-labels-idx1-ubyte", y),
                      ("t10k-images-idx3-ubyte", x[:4]), ("t10k-labels-idx1-ubyte", y[:4])]:
        write_idx(raw / stem, arr, gz)
    ds = load_dataset("fashion-mnist", root=tmp_path / "data")
    assert ds.x_train.shape == (12, 1, 28, 28) and ds.x_test.shape == (4, 1, 28, 28)
    assert np.array_equal(ds.x_train[:, 0].numpy(), x) and ds.y_train.tolist() == y.tolist()
    assert ds.classes[0] == "T-shirt/top" and not ds.lossy and str(raw) in ds.source
    assert len(list(tmp_cache.glob("data/fashion-mnist-*.npz"))) == 1
    monkeypatch.setattr(fashion_mnist, "_parse", lambda files: pytest.fail("parsed again"))
    assert torch.equal(load_dataset("fashion-mnist", root=tmp_path / "data").x_train, ds.x_train)


def test_cache_roundtrip_matches_np_load(tmp_cache):
    arrays = {"x": np.arange(24, dtype=np.uint8).reshape(2, 3, 4), "y": np.array([3, -1], dtype=np.int64),
              "f": np.asfortranarray(np.ones((3, 2))), "empty": np.zeros((0, 5), np.uint8), "s": np.array(["a", "bc"])}
    path = data_cache.save_cached("t", "k", arrays, {"classes": ["a"]})
    got, meta = data_cache.load_cached("t", "k")
    assert meta == {"classes": ["a"]} and got.keys() == arrays.keys()
    with np.load(path) as npz:
        for key, value in arrays.items():
            assert np.array_equal(got[key], value) and got[key].dtype == value.dtype
            assert np.array_equal(npz[key], got[key])
    assert data_cache.load_cached("t", "other") is None


def test_cache_key_follows_source(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(b"abc")
    k1 = data_cache.source_key("x", [src])
    src.write_bytes(b"abcd")
    assert data_cache.source_key("x", [src]) != k1


def jpeg_bytes(color):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), color).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def test_cifar10_zip_layout(tmp_path, tmp_cache):
    from fedpaper.blocks.data.cifar import CIFAR10_CLASSES

    (tmp_path / "cifar10").mkdir()
    with zipfile.ZipFile(tmp_path / "cifar10" / "cifar10-jpeg.zip", "w") as zf:
        for split, n in (("train", 2), ("test", 1)):
            for k, cls in enumerate(CIFAR10_CLASSES):
                for i in range(n):
                    zf.writestr(f"{split}/{cls}/{i:04d}.jpg", jpeg_bytes((25 * k, 0, 0)))
    ds = load_dataset("cifar10", root=tmp_path)
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (10, 3, 32, 32)
    assert ds.lossy and "lossy" in ds.source and sorted(ds.y_train.tolist()) == sorted(list(range(10)) * 2)
    red = ds.x_train[:, 0].float().mean(dim=(1, 2))
    assert torch.all((red - 25 * ds.y_train.float()).abs() < 4)  # labels match the folder colours


def test_cifar100_torchvision_layout(tmp_path, tmp_cache):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    rng = np.random.default_rng(0)
    fine = np.array([0, 1, 2, 3, 2, 1])
    f2c = np.array([0, 0, 1, 1])
    for name, n in (("train", 6), ("test", 4)):
        d = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), "fine_labels": fine[:n].tolist(),
             "coarse_labels": f2c[fine[:n]].tolist()}
        (folder / name).write_bytes(pickle.dumps(d))
    meta = {"fine_label_names": ["a", "b", "c", "d"], "coarse_label_names": ["A", "B"]}
    (folder / "meta").write_bytes(pickle.dumps(meta))
    ds = load_dataset("cifar100", root=tmp_path)
    assert ds.x_train.shape == (6, 3, 32, 32) and not ds.lossy and ds.classes == ["a", "b", "c", "d"]
    assert ds.extra["coarse_classes"] == ["A", "B"] and ds.extra["y_train_coarse"].tolist() == f2c[fine].tolist()
    assert ds.extra["M"].tolist() == [[1, 1, 0, 0], [0, 0, 1, 1]]


# --------------------------------------------------------------------------- PACS
def make_pacs_tree(root, domains=("cartoon", "photo", "sketch"), per_class=1, metadata=False):
    from PIL import Image

    from fedpaper.blocks.data.pacs import CLASSES

    rows = []
    for d, domain in enumerate(domains):
        for k, cls in enumerate(CLASSES):
            folder = root / "pacs" / domain / cls
            folder.mkdir(parents=True)
            for i in range(per_class):
                ext = "png" if (k + i) % 2 else "jpg"
                Image.new("RGB", (40, 30), (30 * k, 80 * d, 0)).save(folder / f"{i}.{ext}")
                rows.append({"path": f"{domain}/{cls}/{i}.{ext}", "y": k, "domain_remapped": d,
                             "split": "test" if domain == "sketch" else ("val" if i == 1 else "train")})
    if metadata:
        with open(root / "pacs" / "metadata.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["path", "split", "y", "domain_remapped"])
            writer.writeheader()
            writer.writerows(rows)


def test_pacs_folder_tree(tmp_path, tmp_cache):
    make_pacs_tree(tmp_path, per_class=2)
    assert dataset_available("pacs", root=tmp_path)
    ds = load_pacs(tmp_path, target_domain="sketch", size=16)
    assert ds.x_train.shape == (2 * 7 * 2, 3, 16, 16) and ds.x_test.shape == (7 * 2, 3, 16, 16)
    assert ds.classes[:3] == ["dog", "elephant", "giraffe"] and ds.num_classes == 7
    assert ds.extra["domains"] == ["cartoon", "photo", "sketch"] and ds.extra["target_domain"] == "sketch"
    assert set(ds.extra["domain_train"].tolist()) == {0, 1} and set(ds.extra["domain_test"].tolist()) == {2}
    red = ds.x_test[:, 0].float().mean(dim=(1, 2))
    assert torch.all((red - 30 * ds.y_test.float()).abs() < 3)
    same = load_dataset("pacs", root=tmp_path, target_domain="sketch", size=16)
    assert torch.equal(same.x_train, ds.x_train)
    with pytest.raises(BadParameterError, match="target_domain"):
        load_pacs(tmp_path, target_domain="art_painting", size=16)


def test_pacs_bai_metadata(tmp_path, tmp_cache):
    make_pacs_tree(tmp_path, per_class=2, metadata=True)
    ds = load_pacs(tmp_path, size=8)
    assert ds.x_test.shape[0] == 14 and ds.x_train.shape[0] == 28
    assert "metadata" in ds.source and set(ds.extra["domain_test"].tolist()) == {2}


# --------------------------------------------------------------------------- iWildCam
def test_iwildcam_with_fake_wilds(tmp_path, monkeypatch):
    from PIL import Image

    folder = tmp_path / "iwildcam" / "iwildcam_v2.0"
    folder.mkdir(parents=True)
    splits = ["train"] * 6 + ["test"] * 3 + ["val"]
    ys = [0, 1, 2, 0, 1, 2, 5, 5, 1, 0]
    with open(folder / "metadata.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["split", "location_remapped", "y", "filename"])
        w.writerows([s, i % 3, y, f"{i}.jpg"] for i, (s, y) in enumerate(zip(splits, ys)))
    meta = iwildcam.iwildcam_metadata(tmp_path)
    assert np.bincount(meta["y"][meta["split"] == "test"]).tolist() == [0, 1, 0, 0, 0, 2]

    class FakeDataset:  # the attributes of a WILDSDataset that the loader uses
        n_classes = 182
        split_dict = {"train": 0, "val": 1, "test": 2}
        split_array = np.array([{"train": 0, "val": 1, "test": 2}[s] for s in splits])
        y_array = torch.tensor(ys)
        metadata_fields = ["location", "y"]
        metadata_array = torch.tensor([[i % 3, y] for i, y in enumerate(ys)])

        def get_input(self, idx):
            return Image.new("RGB", (50, 40), (idx * 20, 0, 0))

    fake = types.ModuleType("wilds")
    fake.get_dataset = lambda dataset, root_dir, download: FakeDataset()
    monkeypatch.setitem(sys.modules, "wilds", fake)
    ds = load_dataset("iwildcam", root=tmp_path, size=8, max_per_split=4, seed=0)
    assert ds.x_train.shape == (4, 3, 8, 8) and ds.x_test.shape == (3, 3, 8, 8)
    assert ds.num_classes == 182 and ds.y_test.tolist() == [5, 5, 1]
    assert ds.extra["location_test"].tolist() == [0, 1, 2]
    assert torch.equal(ds.x_train[:, 0, 0, 0], ds.extra["index_train"].to(torch.uint8) * 20)


def test_iwildcam_without_wilds_package(tmp_path, monkeypatch):
    (tmp_path / "iwildcam_v2.0").mkdir()
    (tmp_path / "iwildcam_v2.0" / "metadata.csv").write_text("split,y\ntrain,0\n")
    monkeypatch.setitem(sys.modules, "wilds", None)  # import fails
    with pytest.raises(DataMissingError, match="pip install wilds"):
        load_dataset("iwildcam", root=tmp_path)


# --------------------------------------------------------------------------- the real offline copies
@pytest.fixture
def need(monkeypatch):
    """Skip unless the data set is on disk; parse into the project's own data cache.

    tests/conftest.py points FEDPAPER_CACHE at a fresh folder per session. The parsed-array cache
    depends only on the source files (keyed by their path, size and mtime), so these tests share the
    project's default cache on purpose: CIFAR is parsed once (about 10 s), not in every test session.
    """
    monkeypatch.setenv("FEDPAPER_CACHE", str(REPO_ROOT / ".cache"))

    def check(name):
        if not dataset_available(name):
            pytest.skip(f"{name} is not under {data_root()} (set FEDPAPER_DATA to the offline copies)")

    return check


def test_real_fashion_mnist(need):
    need("fashion-mnist")
    ds = load_dataset("fashion-mnist")
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert ds.x_train.dtype == torch.uint8 and ds.y_train.dtype == torch.int64
    assert ds.classes[9] == "Ankle boot" and torch.bincount(ds.y_train).tolist() == [6000] * 10
    mean, std = ds.channel_stats()
    assert abs(mean.item() - 0.2860) < 1e-3 and abs(std.item() - 0.3530) < 1e-3


def test_real_cifar10(need):
    need("cifar10")
    ds = load_dataset("cifar10")
    assert ds.x_train.shape == (50000, 3, 32, 32) and ds.x_test.shape == (10000, 3, 32, 32)
    assert ds.x_train.dtype == torch.uint8 and ds.y_test.dtype == torch.int64
    assert ds.classes == ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    assert torch.bincount(ds.y_test).tolist() == [1000] * 10
    assert ds.lossy == ("jpeg" in ds.source.lower())


def test_real_cifar100(need):
    need("cifar100")
    ds = load_dataset("cifar100")
    assert ds.x_train.shape == (50000, 3, 32, 32) and ds.num_classes == 100
    assert ds.extra["M"].shape == (20, 100) and (ds.extra["M"].sum(0) == 1).all()
    assert len(ds.extra["coarse_classes"]) == 20 and ds.extra["y_test_coarse"].shape == (10000,)
    f2c = ds.extra["fine_to_coarse"]
    assert torch.equal(f2c[ds.y_train], ds.extra["y_train_coarse"])


# --------------------------------------------------------------------------- corrupt files and cache
def _fashion_files(raw, gz=True):
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (12, 28, 28)), rng.integers(0, 10, 12)
    for stem, arr in [("train-images-idx3-ubyte", x), ("train-labels-idx1-ubyte", y),
                      ("t10k-images-idx3-ubyte", x[:4]), ("t10k-labels-idx1-ubyte", y[:4])]:
        write_idx(raw / stem, arr, gz)


@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_corrupt_gz_names_the_file_and_the_fix(tmp_path, tmp_cache, damage):
    from fedpaper.ground.errors import DataCorruptError

    raw = tmp_path / "data" / "fashion-mnist" / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    _fashion_files(raw)
    bad = raw / "train-images-idx3-ubyte.gz"
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2] if damage == "truncate" else data[:10] + b"\x00garbage" * 50)
    with pytest.raises(DataCorruptError) as e:
        load_dataset("fashion-mnist", root=tmp_path / "data")
    msg = str(e.value)
    assert "\n" not in msg and str(bad) in msg and "re-download" in msg and "download=True" in msg
    assert str(tmp_cache / "data") in msg  # the parsed-array cache to delete


def test_corrupt_cifar_zip_names_the_file(tmp_path, tmp_cache):
    from fedpaper.ground.errors import DataCorruptError

    z = tmp_path / "data" / "cifar10" / "cifar10-jpeg.zip"
    z.parent.mkdir(parents=True)
    z.write_bytes(b"PK\x03\x04 this is not a zip file" * 20)
    with pytest.raises(DataCorruptError, match="cifar10-jpeg.zip is truncated or corrupt.*re-download"):
        load_dataset("cifar10", root=tmp_path / "data")


def test_flipped_bit_in_parsed_cache_is_warned_and_parsed_again(tmp_path, tmp_cache):
    raw = tmp_path / "data" / "fashion-mnist" / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    _fashion_files(raw)
    ds = load_dataset("fashion-mnist", root=tmp_path / "data")
    (path,) = tmp_cache.glob("data/fashion-mnist-*.npz")
    data = bytearray(path.read_bytes())
    with np.load(path) as npz:  # a byte inside the x_train pixels
        assert npz["x_train"].nbytes == 12 * 28 * 28
    pos = data.index(ds.x_train.numpy().tobytes()[:64]) + 100
    data[pos] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="does not match its checksum.*x_train"):
        again = load_dataset("fashion-mnist", root=tmp_path / "data")
    assert torch.equal(again.x_train, ds.x_train)  # parsed again from the source, not the flipped bit
    assert data_cache.load_cached("fashion-mnist", path.stem.split("-")[-1]) is not None  # rewritten


def test_parsed_cache_without_checksums_is_upgraded(tmp_cache):
    import warnings
    import zipfile

    arrays = {"x": np.arange(6, dtype=np.uint8)}
    path = data_cache.save_cached("t", "k", arrays, {"classes": ["a"]})
    with np.load(path) as npz:  # rewrite as the older format: no checksum member
        old = {k: npz[k] for k in npz.files if k != "__sha256__"}
    np.savez(path, **old)
    assert "__sha256__.npy" not in zipfile.ZipFile(path).namelist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, meta = data_cache.load_cached("t", "k")
    assert np.array_equal(got["x"], arrays["x"]) and meta == {"classes": ["a"]}
    assert "__sha256__.npy" in zipfile.ZipFile(path).namelist()
