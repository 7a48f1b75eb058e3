"""Check `fedpaper plan`'s CPU-time estimate against a measured run (issue 30, item 3).

Takes the first `--runs` runs `fedpaper plan` collects for `--artifact` at the paper profile, cuts
them to `--rounds` rounds (nothing else changes: data, partitions, model, batch size, optimiser,
evaluation every round), estimates their CPU time as `fedpaper plan` does (fedpaper.plan: counted
samples x the model's measured CPU seconds per sample), then trains them through
`executors.run_specs` into an empty temporary store and measures the CPU time of this process
(time.process_time: the machine is shared, wall time is not the measure). Prints both and their
ratio; `--md PATH` writes the result as markdown.

    OMP_NUM_THREADS=1 FEDPAPER_DATA=../shared/data python benchmarks/plan_check.py \\
        --artifact fedpals/table1 --runs 7 --rounds 2 --md benchmarks/results/plan_check.md
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from fedpaper.runs import model_costs as C
from fedpaper import plan as P
from fedpaper.runs.executors import run_specs
from fedpaper.runs.experiment import Execution, RunSpec, get_pools
from fedpaper.ground.files import atomic_write_text
from fedpaper.runs.store import ResultStore


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--artifact", default="fedpals/table1")
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-batch", type=int, default=16,
                    help="runs per engine call, as the artifact's sweep sets it (FedPALS on CPU: 1)")
    ap.add_argument("--md", default=None)
    a = ap.parse_args(argv)
    root = os.environ.get("FEDPAPER_DATA")
    t0 = time.perf_counter()
    [plan] = P.collect([a.artifact], a.profile, root)
    keys = [json.loads(r.ident) for r in plan.runs[:a.runs]]
    specs = [RunSpec(**k["run"]).with_(training={"rounds": a.rounds}) for k in keys]
    counts = []
    for s in specs:  # counted as `fedpaper plan` counts (here without _small_pools: these pools are not resized)
        st = s.build(root)
        counts.append(P.count_run(s.to_json(), s.paper, st.config, get_pools(st.pools_key), st.federation, st.pools_key))
    costs = {k: C.model_costs(k) for k in {c.model for c in counts}}
    est = P.costs_of(counts, costs, {})
    with tempfile.TemporaryDirectory() as d:
        c0, w0 = time.process_time(), time.perf_counter()
        run_specs(specs, root, store=ResultStore(d), progress=False,
                  execution=Execution(eval_batch=2048), max_batch=a.max_batch)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    ratio = est["cpu_s"] / cpu
    lines = [
        f"# `fedpaper plan`'s CPU-time estimate checked against a measured run",
        "",
        f"    OMP_NUM_THREADS=1 FEDPAPER_DATA=../shared/data python benchmarks/plan_check.py "
        f"--artifact {a.artifact} --runs {a.runs} --rounds {a.rounds} --max-batch {a.max_batch}"
        + (f" --md {a.md}" if a.md else ""),
        "",
        f"- machine: {C.machine_key()}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
        f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset')}",
        f"- runs: the first {len(specs)} of {len(plan.runs)} runs `fedpaper plan --profile {a.profile}` collects for "
        f"{a.artifact}, cut to {a.rounds} rounds (paper settings otherwise), {a.max_batch} run(s) per engine call",
        f"- models: {', '.join(sorted(k.label() for k in costs))}",
        f"- counted: {est['train_samples']:,.0f} training samples, {est['eval_samples']:,.0f} evaluation samples",
        f"- model timing: " + "; ".join(f"{k.label()}: {1e6 * v['cpu_s_per_train_sample']:.0f} us per training "
                                          f"sample, {1e6 * v['cpu_s_per_eval_sample']:.0f} us per evaluation sample"
                                          for k, v in costs.items()),
        f"- estimated: {est['cpu_s']:.1f} CPU s; measured (executors.run_specs into an empty store, process "
        f"CPU time): {cpu:.1f} CPU s ({wall:.1f} s wall); estimate / measured = {ratio:.2f} "
        f"({'within' if abs(ratio - 1) <= 0.30 else 'OUTSIDE'} 30 %)",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        atomic_write_text(a.md, text)
    return 0 if abs(ratio - 1) <= 0.30 else 1


if __name__ == "__main__":
    sys.exit(main())
