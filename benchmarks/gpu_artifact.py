"""Run one artifact function at a profile with overrides on whatever device the engine picks (a GPU
session's worker: benchmarks/gpu_session.sh), into --out-dir. With FEDPAPER_DEADLINE set, the sweep
stops cleanly before a run that would not end in time (fedpaper.runs.store.SweepStopped, exit 75); every
finished run stays in the cache for `fedpaper cache export`.

    FEDPAPER_DATA=<root> python3 benchmarks/gpu_artifact.py fedpals/table1 --profile paper \\
        --overrides '{"table1_rows": [["fashion-mnist", "C=3"], ["fashion-mnist", "C=2"]]}' --out-dir OUT
"""
import argparse
import importlib
import json
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact", help="PAPER/FUNCTION, the paper module's artifact function, e.g. fedpals/table1")
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--overrides", default="{}", help="JSON object of parameter overrides")
    ap.add_argument("--out-dir", required=True)
    a = ap.parse_args(argv)
    from fedpaper.notebook import run
    from fedpaper.runs.sweep import SweepStopped

    paper, name = a.artifact.split("/")
    fn = getattr(importlib.import_module(f"fedpaper.papers.{paper}"), name)
    t0 = time.perf_counter()
    try:
        run(fn, profile=a.profile, overrides=json.loads(a.overrides), out_dir=a.out_dir)
    except SweepStopped as e:
        print(f"{a.artifact}: {e} ({time.perf_counter() - t0:.0f} s)", flush=True)
        return 75
    print(f"{a.artifact}: written to {a.out_dir} in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
