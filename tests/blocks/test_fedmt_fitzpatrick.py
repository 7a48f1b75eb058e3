"""Fitzpatrick 17k loader and the FedMT App. C.2 split, on a generated stand-in."""
import csv

import numpy as np
import pytest

from fedpaper.blocks.data import fitzpatrick as FZ
from fedpaper.ground.errors import BadParameterError, DataMissingError

PAPER_COUNTS = {"inflammatory": 10841, "malignant epidermal": 1352, "genodermatoses": 1194, "benign dermal": 1067,
                "benign epidermal": 931, "malignant melanoma": 570, "benign melanocyte": 233,
                "malignant cutaneous lymphoma": 182, "malignant dermal": 156}


def test_grouping_reproduces_the_papers_three_class_totals():
    three = {t: sum(n for k, n in PAPER_COUNTS.items() if FZ.NINE_TO_THREE[k] == t) for t in FZ.THREE}
    assert three == {"benign": 2231, "malignant": 2260, "non-neoplastic": 12035}
    m = FZ.correspondence_matrix()
    assert m.shape == (3, 9) and (m.sum(0) == 1).all()


def test_split_sizes_follow_app_c2():
    nine = np.concatenate([np.full(n, FZ.NINE.index(k)) for k, n in PAPER_COUNTS.items()])
    s = FZ.fedmt_fitzpatrick_split(nine, 0.1, 10, seed=0)
    assert len(s["test"]) == 450 and (np.bincount(nine[s["test"]], minlength=9) == 50).all()
    three_test = np.bincount([FZ.THREE.index(FZ.NINE_TO_THREE[FZ.NINE[k]]) for k in nine[s["test"]]], minlength=3)
    assert three_test.tolist() == [150, 200, 100]  # benign, malignant, non-neoplastic
    train = np.concatenate([s["server"]] + s["clients"])
    counts = dict(zip(FZ.NINE, np.bincount(nine[train], minlength=9).tolist()))
    assert counts == {"inflammatory": 5000, "malignant epidermal": 1600, "genodermatoses": 1600, "benign dermal": 1600,
                      "benign epidermal": 1400, "malignant melanoma": 1400, "benign melanocyte": 1000,
                      "malignant cutaneous lymphoma": 1000, "malignant dermal": 1000}
    assert len(train) == 15600 and len(s["server"]) == 1560 and len(s["clients"]) == 10
    assert not np.isin(train, s["test"]).any()
    with pytest.raises(BadParameterError, match="r="):
        FZ.fedmt_fitzpatrick_split(nine, 1.5, seed=0)


def test_loader_reads_present_images_only(tmp_path):
    from PIL import Image

    folder = tmp_path / "fitzpatrick17k"
    folder.mkdir()
    with pytest.raises(DataMissingError, match="github.com/mattgroh"):
        FZ.read_metadata(tmp_path)
    rows = [("a1", "inflammatory"), ("b2", "malignant melanoma"), ("c3", "benign dermal"), ("d4", "not a class")]
    with open(folder / "fitzpatrick17k.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["md5hash", "fitzpatrick_scale", "label", "nine_partition_label", "three_partition_label", "url"])
        for md5, lab in rows:
            w.writerow([md5, 2, "x", lab, "y", "http://example.invalid"])
    for md5 in ("a1", "b2", "d4"):  # c3's image is absent (a dead URL)
        Image.fromarray(np.full((6, 5, 3), 100, np.uint8)).save(folder / f"{md5}.jpg")
    meta = FZ.read_metadata(tmp_path)
    assert meta["md5"] == ["a1", "b2"] and meta["nine"].tolist() == [0, 5] and meta["three"].tolist() == [2, 1]
    x = FZ.load_images(meta["path"], size=8)
    assert x.shape == (2, 3, 8, 8) and x.dtype == np.uint8
