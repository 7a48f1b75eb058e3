"""A Table 1 read back from its csv (empty "diverged" cells become NaN) marks only the cells whose
seed diverged: the re-rendered figure and its notes equal the computed ones."""
import io

import pandas as pd

from fedpaper.papers.fedpals.train import diverged_notes, has_diverged


def test_a_table_read_back_from_csv_marks_only_the_diverged_cells():
    tab = pd.DataFrame({"dataset": ["Fashion-MNIST", "Fashion-MNIST"], "label_split": ["C=3", "C=3"],
                        "method": ["FedPALS", "FedAvg"], "diverged": ["seed 1 at round 126", ""]})
    back = pd.read_csv(io.StringIO(tab.to_csv(index=False)))
    assert back["diverged"].isna().iloc[1]  # what made every cell read as diverged
    assert diverged_notes(back) == diverged_notes(tab)
    assert len(diverged_notes(back)) == 1 and "FedPALS" in diverged_notes(back)[0]
    assert [has_diverged(v) for v in back["diverged"]] == [True, False]
