"""Runs per rung of the FedMT and FedNCA-ML compute ladders, counted from the specs their artifact
functions build (no training), with each run's work on the ladder's own measure (rounds x data x
width^2, fedpaper/papers/<paper>/ladder.py `work`), and CPU s scaled from a measured base:

    python benchmarks/ladder_runs.py

FedNCA-ML: Tables 1, 5, 7 (runs.main_specs, runs.component_specs); CPU s = the quick profile's measured
394 s wall for the three (commit 4bb137a's provenance: 240 + 73 + 81 s, empty cache) x the rung's
(runs x work) / quick's. FedMT: Table 2/Fig. 2a/Table 6 (`_main_specs`) and Figs. 2b/2c; CPU s = the
quick profile's <= 1,200 s for these (benchmarks/results/fedmt_sizing.md: quick <= 20 min) scaled alike.
"""


def fednca(profile):
    from fedpaper.papers.fednca import methods, runs
    from fedpaper.papers.fednca.ladder import LADDER

    def count(p):
        p = dict(p, seeds=list(range(p["seeds"])) if isinstance(p["seeds"], int) else p["seeds"])
        specs = [s for _, s in runs.main_specs(p, "table1", [m for m in methods.TABLE_METHODS
                                                             if m not in methods.NOT_REGENERATED])]
        specs += [s for t in ("table5", "table7") for _, s in runs.component_specs(p, t)]
        return len(set(specs)), len(set(specs)) * LADDER.work(p)
    return LADDER, count, 394.0


def fedmt(profile):
    from fedpaper.papers import fedmt as FM
    from fedpaper.papers.fedmt import runs as R
    from fedpaper.papers.fedmt.ladder import LADDER

    def count(p):
        p = dict(p, seeds=list(range(p["seeds"])) if isinstance(p["seeds"], int) else p["seeds"])
        specs = list(FM._main_specs(p))
        m = ["SemiFL", "FedMT (E)"]
        specs += [R.spec(p, x, s, gamma=g) for g in [None] + p["gammas"] for x in m for s in p["seeds"]]
        specs += [R.spec(p, x, s, C=c, N_c=p["client_total"] // c) for c in p["client_counts"] for x in m
                  for s in p["seeds"]]
        uniq = {getattr(s, "to_json", lambda: repr(s))() for s in specs}
        return len(uniq), len(uniq) * LADDER.work(p)
    return LADDER, count, 1200.0


if __name__ == "__main__":
    for name, fn in (("fedmt", fedmt), ("fednca", fednca)):
        lad, count, base_s = fn("quick")
        q_runs, q_work = count(lad.settings("quick"))
        for profile in ("quick", "long"):
            base, rungs = lad.rungs[profile]
            for r in rungs:
                p = lad.rung_settings(profile, r)
                n, w = count(p)
                print(f"{name} {profile} {r.name} {r.overrides or 'profile itself'}: {n} runs, work {w / q_work:.3g}x "
                      f"quick's, ~{base_s * w / q_work:.0f} CPU s")
