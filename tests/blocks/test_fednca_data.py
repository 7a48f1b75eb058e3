"""FedNCA-ML data: composites carry exactly the union of their parts' labels and the documented
geometry; the class-presence partition; the DermaMNIST loader; the VOC / ChestX-ray14 label tables."""
import numpy as np
import pandas as pd
import pytest

from fedpaper.blocks.data.multilabel import CORNERS, composite_counts, composite_split, place, union_labels
from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.partition import class_presence_partition


def _images(n_per_class=6, k=4, side=8, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n_per_class)
    x = rng.integers(1, 256, size=(len(y), 3, side, side)).astype(np.uint8)  # no zero pixel: placement visible
    return x, y


def test_composites_carry_exactly_the_union_of_their_parts_labels():
    x, y = _images()
    s = composite_split(x, y, 4, singles_per_class=3, pairs_per_class_pair=2, seed=1)
    np.testing.assert_array_equal(s.y, union_labels(s.parts, y, 4))
    comp = s.parts[:, 1] >= 0
    assert (s.y[comp].sum(1) == 2).all() and (s.y[~comp].sum(1) == 1).all()
    assert (y[s.parts[comp, 0]] != y[s.parts[comp, 1]]).all()  # two different classes
    # every unordered class pair has exactly pairs_per_class_pair composites
    pairs = {tuple(np.flatnonzero(r)) for r in s.y[comp]}
    assert len(pairs) == 6 and all((s.y[comp][:, list(p)].sum(1) == 2).sum() == 2 for p in pairs)
    assert composite_counts(y, 3, 2, 4) == {"singles": 12, "composites": 12, "pairs": 6, "total": 24,
                                            "singles_per_class": [3, 3, 3, 3]}
    assert (s.n_single, s.n_composite) == (12, 12)


def test_composite_geometry_opposite_corners_pixelwise_max():
    x, y = _images()
    s = composite_split(x, y, 4, singles_per_class=1, pairs_per_class_pair=1, seed=3, max_offset=2)
    assert s.x.shape[2:] == (16, 16)
    for i in range(len(s.x)):
        a, b = s.parts[i]
        ka, kb = s.corners[i]
        if b < 0:  # a single image sits inside the canvas unchanged, the rest is zero
            assert (s.x[i] > 0).sum() == x[a].size
            continue
        assert {CORNERS[ka], CORNERS[kb]} in ({"tl", "br"}, {"tr", "bl"})
        # the composite is the pixel-wise max of its two placed parts, whatever offsets they got
        found = False
        for oa in [(i1, i2) for i1 in range(3) for i2 in range(3)]:
            pa = place(x[a], CORNERS[ka], oa, 16)
            if ((s.x[i] >= pa) | (pa == 0)).all() and (s.x[i][pa > 0] >= pa[pa > 0]).all():
                found = True
        assert found


def test_composite_rejects_bad_input():
    x, y = _images()
    with pytest.raises(BadParameterError, match="canvas"):
        composite_split(x, y, 4, singles_per_class=1, pairs_per_class_pair=1, seed=0, canvas=9, max_offset=3)
    with pytest.raises(BadParameterError, match="no image"):
        composite_split(x, y, 5, singles_per_class=1, pairs_per_class_pair=1, seed=0)


def test_class_presence_partition_properties():
    x, y = _images(n_per_class=30, k=6)
    s = composite_split(x, y, 6, singles_per_class=None, pairs_per_class_pair=4, seed=0)
    neg = np.zeros((20, 6), np.float32)  # all-negative rows ("No Finding")
    ymat = np.concatenate([s.y, neg]).astype(int)
    part = class_presence_partition(ymat, num_clients=5, beta=0.3, gamma=0.5, seed=2)
    allowed = part.meta["allowed_sets"]
    assert all(len(a) == 3 for a in allowed)
    seen = np.concatenate(part.client_indices)
    assert len(seen) == len(np.unique(seen))  # disjoint
    for i, idx in enumerate(part.client_indices):
        labels = np.flatnonzero(ymat[idx].any(0))
        assert set(labels) <= set(allowed[i])  # a client holds only its allowed classes
    assert sorted(part.meta["negatives_per_client"]) == [4, 4, 4, 4, 4]  # spread evenly
    assert len(seen) + part.meta["n_dropped"] == len(ymat)


def test_dermamnist_loader_reads_the_npz_layout(tmp_path):
    from fedpaper.blocks.data.dermamnist import load_splits

    rng = np.random.default_rng(0)
    arrays = {}
    for s, n in (("train", 7), ("val", 3), ("test", 4)):
        arrays[f"{s}_images"] = rng.integers(0, 256, size=(n, 28, 28, 3)).astype(np.uint8)
        arrays[f"{s}_labels"] = rng.integers(0, 7, size=(n, 1)).astype(np.uint8)
    (tmp_path / "dermamnist").mkdir()
    np.savez(tmp_path / "dermamnist" / "dermamnist.npz", **arrays)
    out, desc = load_splits(tmp_path)
    assert out["train"][0].shape == (7, 3, 28, 28) and desc["n_val"] == 3 and not desc["lossy"]
    np.testing.assert_array_equal(out["test"][0][1], arrays["test_images"][1].transpose(2, 0, 1))
    np.testing.assert_array_equal(out["val"][1], arrays["val_labels"].ravel())


def test_label_tables_parse_voc_difficult_as_present_and_cxr_findings():
    from fedpaper.blocks.data.label_tables import (CXR_CLASSES, VOC_CLASSES, no_finding_share, parse_cxr_findings,
                                            parse_voc_table, patient_split)

    df = pd.DataFrame([["1", "train", *([-1] * 20)], ["2", "val", *([-1] * 20)]], columns=["image_id", "split",
                                                                                           *VOC_CLASSES])
    df.loc[0, "dog"], df.loc[1, "cat"], df.loc[1, "person"] = 1, 0, 1
    y, split = parse_voc_table(df)
    assert y[0].tolist() == [int(c == "dog") for c in VOC_CLASSES]
    assert y[1].sum() == 2 and y[1][VOC_CLASSES.index("cat")] == 1  # difficult counts as present
    y = parse_cxr_findings(["No Finding", "Effusion|Mass", "Hernia"])
    assert y.sum(1).tolist() == [0, 2, 1] and y[2, CXR_CLASSES.index("Hernia")] == 1
    assert no_finding_share(y) == pytest.approx(1 / 3)
    pats = np.repeat(np.arange(50), 3)
    test = patient_split(pats, test_images=30, seed=0)
    assert all(len(set(test[pats == p])) == 1 for p in range(50))  # whole patients
    assert 30 <= test.sum() <= 33


@pytest.mark.skipif(not __import__("fedpaper.blocks.data", fromlist=["x"]).dataset_available("chestxray14:labels"),
                    reason="ChestX-ray14 label table not present")
def test_real_chestxray14_table_has_112120_images():
    from fedpaper.blocks.data.label_tables import chestxray14_labels

    d = chestxray14_labels()
    assert len(d["train"]) + len(d["test"]) == 112120


def _png(path, value, size=(12, 10), mode="RGB"):
    from PIL import Image

    Image.new(mode, size, value).save(path)


def test_voc_loader_on_a_generated_devkit(tmp_path):
    from fedpaper.blocks.data.multilabel_images import load_voc

    base = tmp_path / "voc2007" / "VOCdevkit" / "VOC2012"
    for d in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (base / d).mkdir(parents=True)
    objs = {"a1": ["dog", "person"], "a2": ["cat"], "a3": ["cat", "cat"]}
    for i, (k, names) in enumerate(objs.items()):
        _png(base / "JPEGImages" / f"{k}.jpg", (40 * i, 0, 0))
        body = "".join(f"<object><name>{n}</name><difficult>{int(j == 1)}</difficult></object>" for j, n in enumerate(names))
        (base / "Annotations" / f"{k}.xml").write_text(f"<annotation>{body}</annotation>")
    (base / "ImageSets" / "Main" / "train.txt").write_text("a1\na2\na3\n")
    x, y, ids = load_voc(tmp_path, "2012", "train", size=8)
    assert x.shape == (3, 3, 8, 8) and ids == ["a1", "a2", "a3"]
    from fedpaper.blocks.data.label_tables import VOC_CLASSES

    assert [sorted(VOC_CLASSES[c] for c in np.flatnonzero(r)) for r in y] == [["dog", "person"], ["cat"], ["cat"]]
    assert x[1, 0].mean() == pytest.approx(40, abs=2) and x[0].max() == 0


def test_chestxray14_loader_on_generated_images(tmp_path):
    from fedpaper.blocks.data.multilabel_images import load_chestxray14

    folder = tmp_path / "chestxray14" / "images"
    folder.mkdir(parents=True)
    rows = []
    for i in range(8):
        name = f"{i:08d}_000.png"
        _png(folder / name, 10 * i, mode="L")
        rows.append([name, "No Finding" if i % 2 else "Effusion|Mass", i // 2])
    pd.DataFrame(rows, columns=["Image Index", "Finding Labels", "Patient ID"]).to_csv(
        tmp_path / "chestxray14" / "Data_Entry_2017.csv", index=False)
    out = load_chestxray14(tmp_path, size=6)
    (xtr, ytr), (xte, yte) = out["train"], out["test"]
    assert len(ytr) + len(yte) == 8 and xtr.shape[1:] == (3, 6, 6)
    assert (xtr[:, 0] == xtr[:, 1]).all()  # grey repeated over channels
    assert sorted(np.concatenate([ytr, yte]).sum(1).tolist()) == [0, 0, 0, 0, 2, 2, 2, 2]


def test_missing_voc_images_say_how_to_get_them(tmp_path):
    from fedpaper.blocks.data.multilabel_images import load_voc
    from fedpaper.ground.errors import DataMissingError

    with pytest.raises(DataMissingError, match="VOCDetection"):
        load_voc(tmp_path)


def test_voc_pools_builder_on_the_generated_devkit(tmp_path):
    from fedpaper.papers.fednca import data as D

    base = tmp_path / "voc2007" / "VOCdevkit" / "VOC2012"
    for d in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (base / d).mkdir(parents=True)
    for i in range(6):
        _png(base / "JPEGImages" / f"i{i}.jpg", (30 * i, 10, 0))
        (base / "Annotations" / f"i{i}.xml").write_text(f"<annotation><object><name>{['dog', 'cat'][i % 2]}</name>"
                                                        f"</object></annotation>")
    (base / "ImageSets" / "Main" / "train.txt").write_text("i0\ni1\ni2\ni3\n")
    (base / "ImageSets" / "Main" / "val.txt").write_text("i4\ni5\n")
    pools = D._voc({"size": 8, "val_fraction": 0.25}, tmp_path, "cpu")
    assert pools.fednca_split == {"train": 3, "val": 1, "test": 2} and pools.y_train.shape == (4, 20)
    assert pools.x_test.shape == (2, 3, 8, 8)
