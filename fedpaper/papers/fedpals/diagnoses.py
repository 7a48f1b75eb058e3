"""Why a FedPALS claim FAILs on our committed results: one line per claim, "<cause>: <evidence>"
(catalog.FAIL_CAUSES), printed by the report next to a FAIL verdict only. Written from the long
profile's numbers (10 % of every partition, 20 of the paper's 150 rounds, 3 of its 8 seeds); a
diagnosis is a reading of those numbers, not a result: rerun at the paper profile to settle it."""

WHY_FAILS = {
    4: "scale: FedPALS beats FedAvg in every testable row, but by 8.4 points at Fashion-MNIST C=3 (paper "
       "25.3): FedPALS reaches 83.7 % (paper 92.4 %) at 10 % of the data and 20 of 150 rounds, while FedAvg "
       "(75.3 %) lies inside the paper's wide seed spread (67.1 +- 22.0); the 10-point threshold is ours",
    6: "scale: at 10 % of the data and 20 of 150 rounds CIFAR-10 FedAvg reaches only 37.3 % at C=10 (no "
       "shift), about what it scores at C=3 (37.5 %, chance 33 %), and the other baselines sit at chance "
       "for C <= 3, so no baseline trend over C can show",
    8: "scale: Fashion-MNIST claim 5 misses by 0.1 point (C=10 means 75.6-76.1 %, spread 0.5 vs a largest "
       "seed-std of 0.4 from 3 of the paper's 8 seeds); claims 6 and 7 hold or are partial",
    23: "scale: every delta scores 98.5-99.1 %; accuracy falls with d(T,S) (corr -0.88) but the fall to the "
        "largest d (0.6 points) is within one seed-std (0.68, 3 of the paper's 8 seeds)",
}
