"""Train the runs of FedPALS Fig. 8c at the paper profile that the cache lacks, for the given numbers of
training clients (cached runs are read, not retrained), and stop cleanly at FEDPAPER_DEADLINE; then
`fedpaper cache export archives/fedpals-fig8c-paper.tar.gz --only fedpals/fig8c --profile paper` (README,
"Other FedPALS artifacts at the paper profile"). fig8c has no artifact function of its own (`fedpals.fig8`
makes 8a, 8b and 8c, and 8b's paper grid is far larger), hence this driver. Session 20:

    FEDPAPER_CACHE=<cache with the archive imported> FEDPAPER_DATA=<data root> OMP_NUM_THREADS=1 \\
        FEDPAPER_DEADLINE=$(date -d "+2 hours 20 minutes" +%s) taskset -c 0 python scripts/fig8c_runs.py 20 10
"""
import sys

from fedpaper.papers.fedpals import _params
from fedpaper.papers.fedpals import train as TR
from fedpaper.runs.sweep import SweepStopped


def main(argv=None) -> int:
    clients = {int(a) for a in (sys.argv[1:] if argv is None else argv)} or {10, 20, 50, 100}
    p = _params("paper", "fig8")
    p["seeds"] = list(range(p["seeds"]))
    settings = [s for s in TR.fig8_settings(p)["fig8c"] if s["kw"]["num_clients"] - 1 in clients]
    try:
        TR.train_settings(p, settings, None, desc="fedpals fig8c")
    except SweepStopped as e:
        print("stopped:", e)
        return 75
    print("fig8c: every run of", sorted(clients), "training clients is in the cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
