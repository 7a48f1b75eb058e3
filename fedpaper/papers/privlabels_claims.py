"""The 20 claims of targets/privlabels.md section 3, checked on our committed numbers."""
from __future__ import annotations

from fedpaper.papers import Claim

_TEXT = [
    ("claim-1", ["fig2", "fig3"], "On CIFAR-10 and Fashion-MNIST, in both settings and for every method, mean test "
     "accuracy falls as L decreases; accuracy at L=2 is outside (below) the CI of accuracy at L=10."),
    ("claim-2", ["fig2"], "CIFAR-10, public: FedRS has the highest mean accuracy of the public methods."),
    ("claim-3", ["fig2"], "CIFAR-10, public: Tuning-Pairwise has higher mean accuracy than FedAvg and FedProx."),
    ("claim-4", ["fig2"], "CIFAR-10, public: Tuning-MSE is below Tuning-Pairwise and does not beat FedAvg."),
    ("claim-5", ["fig2"], "CIFAR-10, private: both tuning methods beat adapted FedAvg and FedProx, and Tuning-MSE "
     "has the highest mean accuracy of the private methods."),
    ("claim-6", ["fig2"], "CIFAR-10, private: Tuning-MSE is slightly above Tuning-Pairwise."),
    ("claim-7", ["fig2"], "CIFAR-10, private: the tuning methods' across-seed spread is larger than that of "
     "adapted FedAvg/FedProx."),
    ("claim-8", ["fig1b"], "CIFAR-10, L=5, private: Tuning-MSE and Tuning-Pairwise are the two best methods."),
    ("claim-9", ["fig2", "fig3"], "FedAvg and FedProx: private (adapted) accuracy is close to public accuracy "
     "(difference within the 95% CIs) on both data sets at every L."),
    ("claim-10", ["fig3"], "Fashion-MNIST, private: neither tuning method has a higher mean accuracy than adapted "
     "FedAvg/FedProx, and the tuning methods have large across-seed variance."),
    ("claim-11", ["fig4"], "Fashion-MNIST, L=3, private: all four private methods perform similarly (overlapping CIs)."),
    ("claim-12", ["fig3"], "Fashion-MNIST: Tuning-Pairwise > Tuning-MSE in the public setting and Tuning-MSE > "
     "Tuning-Pairwise in the private setting."),
    ("claim-13", ["fig3"], "Fashion-MNIST, public: both tuning methods are below FedAvg, FedProx and FedRS, and "
     "these three are about equal (overlapping CIs)."),
    ("claim-14", ["fig2", "fig3"], "The gain of central tuning over adapted FedAvg in the private setting is larger "
     "at small L than at large L."),
    ("claim-15", ["fig5", "fig6", "fig7", "fig8"], "Over rounds, FedAvg and the tuning methods converge at similar "
     "rounds, and the tuning methods' curves have larger across-seed variance."),
    ("claim-16", ["fig11"], "CIFAR-10: changing the local epochs per round (E=1, 3, 5) does not meaningfully change "
     "the test accuracy of FedAvg or the tuning methods."),
    ("claim-17", ["fig12", "fig13"], "With E=3 and E=5 (SGD central tuning), Tuning-MSE beats Tuning-Pairwise in "
     "the private setting."),
    ("claim-18", ["appB"], "With label 9 held by no client, the label-9 terms of the all-pairs pairwise loss equal "
     "sum (h_k(y_j) p_9)^2 and their gradient pushes p_9 to 0; the MSE loss (eq. 6) has no term for label 9."),
    ("claim-19", ["fig2", "fig3"], "A label missing from every client is far more likely with fewer labels per "
     "client (expected missing labels 10 (1 - L/10)^10: 1.07 at L=2, 0.28 at L=3, 0.06 at L=4, 0.01 at L=5)."),
    ("claim-20", ["fig3"], "Adapted FedAvg is a strong baseline: in the private setting it is within the CI of the "
     "best method on Fashion-MNIST at every L."),
]

CHECKS: dict = {}

CLAIMS = [Claim(f"privlabels/{cid}", text, artifacts=[f"privlabels/{a}" for a in arts], check=CHECKS.get(cid))
          for cid, arts, text in _TEXT]
