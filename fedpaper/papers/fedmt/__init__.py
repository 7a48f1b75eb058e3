"""FedMT: federated learning with mixed-type labels (Zhang et al., 2024).

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

PAPER = "fedmt"

# (claim id, artifacts it is checked on, statement; the location in the paper in parentheses)
_CLAIMS = [
    ('fedmt/claim-1', ['fedmt/table2'],
     '(Table 2) the accuracy of every method increases with n.'),
    ('fedmt/claim-2', ['fedmt/table2'],
     '(Table 2) every FL method (FedTrans, FedRep, SemiFL, FedMT) beats Single at every n.'),
    ('fedmt/claim-3', ['fedmt/table2'],
     '(Table 2) both FedMT (T) and FedMT (E) beat every baseline at every n.'),
    ('fedmt/claim-4', ['fedmt/table2'],
     '(Table 2) FedMT (T) has the highest mean accuracy at every n.'),
    ('fedmt/claim-5', ['fedmt/table2'],
     '(Table 2) FedMT (E) stays close to FedMT (T), and the gap shrinks as n grows (10.71 points at n = 5, 0.69 at n = 25).'),
    ('fedmt/claim-6', ['fedmt/table2'],
     '(Table 2) SemiFL is only competitive at large n: it is below the better of FedRep and FedTrans for n <= 15 and above both for n >= 20.'),
    ('fedmt/claim-7', ['fedmt/fig2a'],
     '(Fig. 2a) super-class accuracy of FedRep and FedMT increases with n.'),
    ('fedmt/claim-8', ['fedmt/fig2a'],
     '(Fig. 2a) FedTrans super-class accuracy does not depend on n.'),
    ('fedmt/claim-9', ['fedmt/fig2a'],
     '(Fig. 2a) FedMT has the best super-class accuracy.'),
    ('fedmt/claim-10', ['fedmt/fig2b'],
     '(Fig. 2b) accuracy of both SemiFL and FedMT falls as gamma increases.'),
    ('fedmt/claim-11', ['fedmt/fig2b'],
     '(Fig. 2b) FedMT beats SemiFL at every gamma, including 0.99.'),
    ('fedmt/claim-12', ['fedmt/fig2c'],
     '(Fig. 2c) accuracy of both methods falls as C grows with N_c x C fixed at 40,000.'),
    ('fedmt/claim-13', ['fedmt/fig2c'],
     '(Fig. 2c) SemiFL drops from 55.98 (C = 10) to 26.10 (C = 80), a 53.38% relative drop, while FedMT (E) drops by only 35.59%.'),
    ('fedmt/claim-14', ['fedmt/fig2c'],
     '(Fig. 2c) FedMT beats SemiFL at every C.'),
    ('fedmt/claim-15', ['fedmt/fig2d'],
     '(Fig. 2d) FedMT is best for MobileNet-V2, ResNet-18 and ResNet-50.'),
    ('fedmt/claim-16', ['fedmt/fig3'],
     '(Fig. 3) the estimation error of M falls as N_c grows.'),
    ('fedmt/claim-17', ['fedmt/fig3'],
     '(Fig. 3, Sec. 5) for N_c = 4,000 the error approaches zero as rounds increase (the estimate converges).'),
    ('fedmt/claim-18', ['fedmt/fig3'],
     '(Fig. 3) the learnable M has a larger error than the eq. (4) estimate.'),
    ('fedmt/claim-19', ['fedmt/table3'],
     '(Table 3) FedMT (E) has the highest 9-class accuracy at every r.'),
    ('fedmt/claim-20', ['fedmt/table3'],
     '(Table 3) at r = 5% the best competitor reaches 46.00 (FedRep) and FedMT (E) 52.00.'),
    ('fedmt/claim-21', ['fedmt/table3'],
     '(Table 3) 9-class accuracy of every method increases with r.'),
    ('fedmt/claim-22', ['fedmt/table3'],
     '(Table 3) FedTrans 3-class accuracy decreases as r increases (70.22, 69.33, 68.22).'),
    ('fedmt/claim-23', ['fedmt/table3'],
     '(Table 3) the 9-class margin of FedMT (E) over the best competitor is largest at the smallest r (6.00, 3.78, 1.11 points).'),
    ('fedmt/claim-24', ['fedmt/table3'],
     '(Table 3) at r = 20% FedMT (E) has the best 3-class accuracy, 73.06 vs FedRep 72.29.'),
    ('fedmt/claim-25', ['fedmt/table3'],
     '(Table 3) at r = 20% FedMT (E) leads the 9-class task with 58.22 vs 57.11 for its closest competitor.'),
    ('fedmt/claim-26', ['fedmt/table6'],
     '(Table 6) ImageNet initialisation beats random initialisation for Single, FedRep and FedTrans at every n.'),
    ('fedmt/claim-27', ['fedmt/table2'],
     '(Sec. 4.2, no reported numbers) SemiFL and FedMT do better from random weights than from ImageNet weights on CIFAR-100.'),
    ('fedmt/claim-28', ['fedmt/table7'],
     '(Table 7) with a fixed number of rounds, a lower threshold gives higher accuracy.'),
    ('fedmt/claim-29', ['fedmt/table7'],
     '(Table 7) FedMT (E) beats SemiFL at every threshold.'),
    ('fedmt/claim-30', ['fedmt/table8'],
     '(Table 8) accuracy of FedMT (T) and FedMT (E) rises as lambda2 decreases from 1 to 1/16 and falls below 1/16; 1/16 is best for both.'),
    ('fedmt/claim-31', ['fedmt/table9'],
     '(Table 9) client-specific FedMT (E) is the best estimator in the IID setting and at every non-IID gamma.'),
    ('fedmt/claim-32', ['fedmt/table9'],
     '(Table 9) averaging the estimates across clients lowers accuracy.'),
    ('fedmt/claim-33', ['fedmt/table9', 'fedmt/fig2b'],
     '(Table 9, Fig. 2b) for every estimator accuracy falls monotonically from IID to gamma = 0.99.'),
]

register_unchecked(PAPER, _CLAIMS)
