"""Check the one-time migration of run keys (issue 33, item 3: a method has one form, its parts):
every run that every artifact needs at each profile, as the old code keys it and migrated by
fedpaper.algorithms.legacy, must equal the key the new code computes. Nothing is trained (the runs
are collected as `fedpaper plan` collects them).

    # 1. with each code version (a worktree each), dump the keys:
    FEDPAPER_DATA=<data root> PYTHONPATH=OLD python scripts/method_keys_check.py dump /tmp/keys_old.json smoke quick long paper
    FEDPAPER_DATA=<data root> PYTHONPATH=NEW python scripts/method_keys_check.py dump /tmp/keys_new.json smoke quick long paper
    # 2. with the new code, compare:
    PYTHONPATH=NEW python scripts/method_keys_check.py compare /tmp/keys_old.json /tmp/keys_new.json

Session 21 (old cb01329, new 9fe969e): 17,913 run listings of 78 artifacts x 4 profiles, none differing.
"""
import json
import sys
import time


def dump(out: str, profiles: list) -> int:
    from fedpaper import plan
    from fedpaper.claims.catalog import ARTIFACTS

    res = {}
    for prof in profiles:
        t0 = time.time()
        plans = plan.collect(sorted(ARTIFACTS), prof, None)
        res[prof] = {p.artifact_id: [r.ident for r in p.runs if not r.ident.startswith("direct:")] for p in plans}
        print(prof, sum(len(v) for v in res[prof].values()), "runs", f"{time.time() - t0:.0f} s", flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh)
    return 0


def compare(old_path: str, new_path: str) -> int:
    from fedpaper.algorithms.legacy import run_spec
    from fedpaper.runs.store import spec_json

    old, new = (json.load(open(p)) for p in (old_path, new_path))
    total = bad = 0
    for prof in new:
        for aid, ids in new[prof].items():
            migrated = sorted(spec_json(run_spec(json.loads(i))) for i in old[prof].get(aid, []))
            total += len(ids)
            if migrated != sorted(ids):
                bad += 1
                print(f"{prof} {aid}: old {len(migrated)} runs, new {len(ids)}, "
                      f"{len(set(migrated) - set(ids))} old keys not found among the new")
        print(prof, "artifacts", len(new[prof]), "runs", sum(len(v) for v in new[prof].values()))
    print(f"run listings compared: {total}; artifacts differing: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    sys.exit(dump(args[0], args[1:]) if cmd == "dump" else compare(*args))
