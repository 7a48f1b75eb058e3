"""Retrain one stored run with the code on PYTHONPATH and compare it with the stored result, bit for bit
(fedpaper.runs.rekey.retrain / first_difference): the same-machine check that a change is result-neutral
when the stored run was made on another CPU. Run it with the old and the new code and compare the two pickles:

    PYTHONPATH=<old tree> python scripts/retrain_one.py KEY_PREFIX CACHE /tmp/old.pkl
    PYTHONPATH=<new tree> python scripts/retrain_one.py KEY_PREFIX CACHE /tmp/new.pkl
    python scripts/retrain_one.py --compare /tmp/old.pkl /tmp/new.pkl

Prints the first difference from the stored result (None: identical); --compare prints the first
difference between the two retrained results.
"""
import glob
import pickle
import sys


def main(argv):
    from fedpaper.runs import rekey as R

    if argv[0] == "--compare":
        a, b = (pickle.load(open(p, "rb"))["new"] for p in argv[1:3])
        print(R.first_difference(a, b))
        return 0
    from fedpaper.runs.archive import _entry

    key_prefix, cache, out = argv[:3]
    path, = [p for p in glob.glob(f"{cache}/results/*/*.pkl") if p.split("/")[-1].startswith(key_prefix)]
    entry = _entry(open(path, "rb").read(), path)
    res = R.retrain(path.split("/")[-1][:-4], entry, None)
    with open(out, "wb") as f:
        pickle.dump({"stored": R._compared(entry["result"]), "new": R._compared(res)}, f)
    print(R.first_difference(R._compared(entry["result"]), R._compared(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
