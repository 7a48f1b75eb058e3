"""Train the runs of FedPALS Fig. 8c at the paper profile that the cache lacks, for the given numbers of
training clients (cached runs are read, not retrained), and stop cleanly at FEDPAPER_DEADLINE; then
`fedpaper cache export archives/fedpals-fig8c-paper.tar.gz --only fedpals/fig8c --profile paper` (README,
"Other FedPALS artifacts at the paper profile"). The runs train through the pipeline: the fedpals.fig8c
artifact function with its `fig8c_clients` overridden (default: the paper profile's), an exploration (its
figure goes to the cache's exploration folder, never to the committed figures) whose runs are fig8c's:

    FEDPAPER_CACHE=<cache with the archive imported> FEDPAPER_DATA=<data root> OMP_NUM_THREADS=1 \\
        FEDPAPER_DEADLINE=$(date -d "+2 hours 20 minutes" +%s) taskset -c 0 python scripts/fig8c_runs.py 20 10

Exit code 75 when stopped at the deadline (finished runs are cached: run it again to resume).
"""
import sys

from fedpaper.papers import fedpals
from fedpaper.papers.fedpals import profiles as P
from fedpaper.runs.sweep import SweepStopped


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    clients = sorted({int(a) for a in args} or P.grid("paper")["fig8c_clients"])
    try:
        fedpals.fig8c(profile="paper", overrides={"fig8c_clients": clients})
    except SweepStopped as e:
        print("stopped:", e)
        return 75
    print("fig8c: every run of", clients, "training clients is in the cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
