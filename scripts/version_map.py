"""Rebuild fedpaper/runs/version_map.json from this checkout's git history: for every commit, the
text-scheme code versions (as that commit computed them) and the syntax-tree versions of the same
source (fedpaper.runs.version_map). Run it after changing how code versions are computed:

    python scripts/version_map.py [--rev HEAD] [--out fedpaper/runs/version_map.json]
"""
import argparse
import sys
from pathlib import Path

from fedpaper.runs.version_map import MAP_PATH, build_map, write_map

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD", help="the history to walk (default HEAD)")
    ap.add_argument("--out", default=str(MAP_PATH))
    args = ap.parse_args(argv)
    data = build_map(ROOT, args.rev, say=lambda s: print(s, file=sys.stderr))
    write_map(data, args.out)
    print(f"{args.out}: {len(data['commits'])} commits, {len(data['versions'])} distinct versions, "
          f"{len(data['core'])} core and {sum(map(len, data['papers'].values()))} paper text versions mapped"
          + (f"; {len(data['conflicts'])} text versions with two sources: {data['conflicts'][:3]}"
             if data["conflicts"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
