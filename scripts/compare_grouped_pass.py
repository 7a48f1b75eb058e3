"""Does the grouped pass of this checkout compute the same bits as an older commit's?

    python scripts/compare_grouped_pass.py REV [--per-slot none]

Loads fedpaper/engine/grouped.py as it was at git revision REV (a module of its own, beside this checkout's
package) and compares, for the FedPALS LeNet on 3- and 1-channel images and the privlabels CNN 8-8-16-16 on
3-channel images, 6 slots of 16 random images with perturbed parameters: the outputs and the gradients of a
squared-output loss of REV's GroupedForward against this checkout's (built with `--per-slot`, default "none":
the pass the rule keeps on AVX-512 CPUs and for one-channel images), bit for bit (torch.equal). One thread.
Exit status 1 if any differs.
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CASES = [("lenet", dict(in_channels=3, image_size=32), (3, 32, 32)),
         ("lenet", dict(in_channels=1, image_size=28), (1, 28, 28)),
         ("privlabels_cnn", dict(in_channels=3, image_size=32, widths=(8, 8, 16, 16), dropout=0.0), (3, 32, 32))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev")
    ap.add_argument("--per-slot", default="none", choices=["none", "first", "features"])
    a = ap.parse_args(argv)
    import torch

    from fedpaper.blocks.models import build_model
    from fedpaper.engine import grouped as new

    src = subprocess.run(["git", "-C", str(REPO), "show", f"{a.rev}:fedpaper/engine/grouped.py"], check=True,
                         capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "old_grouped.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location("old_grouped", path)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
    torch.set_num_threads(1)
    bad = 0
    for name, kw, shape in CASES:
        m = build_model(name, num_classes=10, **kw)
        before, now = old.GroupedForward.build(m, shape), new.GroupedForward.build(m, shape, a.per_slot)
        g = torch.Generator().manual_seed(1)
        p = {k: new.stacked_layout(torch.stack([v.detach() + 0.05 * torch.randn(v.shape, generator=g) for _ in range(6)]))
             .requires_grad_(True) for k, v in m.named_parameters()}
        x = torch.randn(6, 16, *shape, generator=g)
        ob, on = before(p, x), now(p, x)
        gb = torch.autograd.grad((ob ** 2).sum(), list(p.values()))
        gn = torch.autograd.grad((on ** 2).sum(), list(p.values()))
        same_out, same_grad = torch.equal(ob, on), all(torch.equal(u, v) for u, v in zip(gb, gn))
        bad += not (same_out and same_grad)
        print(f"{name} {shape}: outputs {'equal' if same_out else 'DIFFER'}, gradients {'equal' if same_grad else 'DIFFER'} "
              f"(per_slot={a.per_slot!r} vs {a.rev}; torch capability {torch.backends.cpu.get_cpu_capability()})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
