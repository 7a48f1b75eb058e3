"""Count the FedPALS image-training work of a profile without training: unique runs and training
sample-steps (client images x local epochs x participation x rounds) per artifact, in the order
`make figures` meets them (a run shared with an earlier artifact is counted there), and the CPU
time they imply at measured training rates (samples per CPU second, training plus evaluation).

    FEDPAPER_DATA=../shared/data python benchmarks/fedpals_cost.py quick --rate-cifar10 4256 --rate-fmnist 7690
"""
import argparse

from fedpaper.papers import fedpals as F
from fedpaper.papers.fedpals import runs as R, train as TR


def artifact_settings(p: dict) -> dict:
    arts = {"table1": [{"dataset": d, "split": s, "methods": R.TABLE1_METHODS} for d, s in TR.table1_settings(p)]}
    arts.update(TR.shift_settings(p, dict(p)))
    arts["fig7"] = [{"dataset": d, "split": s, "methods": p["fig7_methods"]} for d, s in TR.FIG7_SETTINGS]
    arts.update(TR.fig8_settings(p))
    return arts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--rate-cifar10", type=float, default=4256.0)
    ap.add_argument("--rate-fmnist", type=float, default=7690.0)
    a = ap.parse_args(argv)
    rate = {"cifar10": a.rate_cifar10, "fashion-mnist": a.rate_fmnist}
    p = F._params(a.profile, "fig8")
    p["seeds"] = list(range(p["seeds"])) if isinstance(p["seeds"], int) else p["seeds"]
    seen, total_steps, total_s = set(), 0, 0.0
    for name, settings in artifact_settings(p).items():
        n_new, steps, secs = 0, 0, 0.0
        for st in settings:
            for s in R.method_specs(p, st["dataset"], st["split"], st["methods"], p["seeds"], None, **st.get("kw", {})):
                if s.to_json() in seen:
                    continue
                seen.add(s.to_json())
                n_new += 1
                q, t = s.partition, s.training
                part = R.partition(s.data, q["split"], q["num_clients"], q["data_fraction"], s.seed)
                n = part.sizes[:-1].sum() * t["rounds"] * t["local_epochs"] * t["participation"]
                steps += n
                secs += n / rate[R.dataset_of(s.data)]
        total_steps += steps
        total_s += secs
        print(f"{name:8s} new runs {n_new:4d}  train sample-steps {steps / 1e6:6.2f} M  ~{secs:6.0f} CPU s")
    print(f"TOTAL {len(seen)} runs, {total_steps / 1e6:.2f} M sample-steps, ~{total_s / 60:.1f} min of 1-thread CPU")


if __name__ == "__main__":
    main()
