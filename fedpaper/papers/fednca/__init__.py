"""FedNCA-ML: neural-collapse-inspired multi-label FL under label-distribution skew (Peng et al.).

Not implemented yet (open issue): no notebook regenerates this paper's artifacts. This module
declares them as such, and registers the paper's claims (from the project's targets file,
section 3) without checks, so the report lists every artifact as "not regenerated: not
implemented yet (open issue)" and every claim as not checkable.

To implement an artifact: write its compute/draw functions here, call
`fedpaper.artifacts.run_artifact`, create its notebook with `scripts/new_notebook.py`, register
it with `implement(...)`, and give its claims a `check`.
"""
from __future__ import annotations

from fedpaper.papers._common.claims import register_unchecked

PAPER = "fednca"

# (claim id, artifacts it is checked on, statement; the location in the paper in parentheses)
_CLAIMS = [
    ('fednca/claim-1', ['fednca/table1', 'fednca/table2', 'fednca/table3', 'fednca/table4'],
     '(Tables 1-4) FedNCA-ML has the best class-wise (macro) score in most data set / beta / metric cells.'),
    ('fednca/claim-2', ['fednca/table1'],
     '(Table 1, beta = 0.5) macro-AUC exceeds the second best by 3.92 points (87.55 vs SphereFed 83.63) and macro-F1 by 4.57 (48.17 vs FedLGT 43.60).'),
    ('fednca/claim-3', ['fednca/table1'],
     '(Table 1, beta = 0.1) macro-AUC margin 3.18 (83.80 vs SphereFed 80.62), macro-F1 margin 1.26 (38.09 vs SphereFed 36.83).'),
    ('fednca/claim-4', ['fednca/table2'],
     "(Table 2) on DermaMNIST FedNCA-ML's macro margins are AUC +0.40 (beta = 0.5) and +0.77 (beta = 0.1), F1 +0.46 (beta = 0.5) and +4.93 (beta = 0.1)."),
    ('fednca/claim-5', ['fednca/table3'],
     '(Table 3) on VOC the macro-F1 margin is 2.17 at beta = 0.05 (64.28 vs FedLGT 62.11) and 4.55 at beta = 0.01 (61.08 vs FedLGT 56.53).'),
    ('fednca/claim-6', ['fednca/table4'],
     '(Table 4) on ChestX-ray14 FedNCA-ML improves macro-AUC over the second best by 0.69 at beta = 0.5 and by 1.21 at beta = 0.1.'),
    ('fednca/claim-7', ['fednca/table4'],
     '(Table 4) FedNCA-ML does not have the best micro-AUC on ChestX-ray14.'),
    ('fednca/claim-8', ['fednca/table4'],
     '(Table 4) FedNCA-ML has the smallest gap between micro-AUC and macro-AUC of all methods (0.73 at beta = 0.5, 6.58 at beta = 0.1).'),
    ('fednca/claim-9', ['fednca/table1', 'fednca/table2', 'fednca/table3', 'fednca/table4'],
     '(abstract, conclusion) the largest margins over the second best are 3.92 points in class-wise AUC and 4.93 in class-wise F1.'),
    ('fednca/claim-10', ['fednca/table1', 'fednca/table2', 'fednca/table3', 'fednca/table4'],
     '(Tables 1-4) the Centralized model is an upper bound: every federated method scores below it in every cell.'),
    ('fednca/claim-11', ['fednca/table5'],
     '(Table 5) the fixed ETF classifier alone (no LADM) degrades performance.'),
    ('fednca/claim-12', ['fednca/table5'],
     '(Table 5) LADM with the ETF classifier improves on the plain model by 0.43 macro-AUC and 7.34 macro-F1.'),
    ('fednca/claim-13', ['fednca/table5'],
     '(Table 5) the two regularisers add 3.31 macro-AUC and 3.43 macro-F1 (84.38 -> 87.69, 47.95 -> 51.38).'),
    ('fednca/claim-14', ['fednca/table5', 'fednca/table7'],
     '(Tables 5 and 7) the full model is the best variant on every metric.'),
    ('fednca/claim-15', ['fednca/table6'],
     '(Table 6) fixed ETF queries beat learnable queries on most metrics.'),
    ('fednca/claim-16', ['fednca/table7'],
     '(Table 7) LADM with the ETF classifier improves on the plain model by 3.38 macro-AUC and 3.99 macro-F1 (82.46 -> 85.84, 40.65 -> 44.64).'),
    ('fednca/claim-17', ['fednca/table7'],
     '(Table 7) the regularisers add 1.88 macro-AUC and 4.58 macro-F1 (85.84 -> 87.72, 44.64 -> 49.22).'),
    ('fednca/claim-18', ['fednca/table8'],
     '(Table 8) fixed ETF queries are generally more effective than learnable ones.'),
    ('fednca/claim-19', ['fednca/fig3a', 'fednca/fig6a'],
     '(Fig. 3a, 6a) with a learnable FC classifier and no LADM, test features group by the number of labels per image rather than by class.'),
    ('fednca/claim-20', ['fednca/fig3b', 'fednca/fig6b'],
     '(Fig. 3b, 6b) with LADM and the ETF classifier, features cluster by class.'),
    ('fednca/claim-21', ['fednca/fig3c', 'fednca/fig6c'],
     '(Fig. 3c, 6c) adding the regularisers gives more compact clusters.'),
    ('fednca/claim-22', ['fednca/fig4a', 'fednca/fig4b', 'fednca/fig4c', 'fednca/fig7a', 'fednca/fig7b', 'fednca/fig7c'],
     '(Fig. 4, 7) the mean off-diagonal cosine similarity between class-wise average features decreases from panel (a) to (b) to (c).'),
    ('fednca/claim-23', ['fednca/fig5'],
     '(Fig. 5) LADM attention concentrates on the image region of the queried class (for composites, the half that contains that class).'),
    ('fednca/claim-24', ['fednca/fig12a', 'fednca/fig12b'],
     '(data, Sec. 5.3) 57% of ChestX-ray14 training images and 38% of test images are "No Finding".'),
]

register_unchecked(PAPER, _CLAIMS)
