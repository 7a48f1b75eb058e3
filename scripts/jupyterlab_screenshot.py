#!/usr/bin/env python3
"""Open one notebook in a real JupyterLab (headless Chromium), Run All, and take a screenshot.

    PYTHONPATH=$PWD .venv/bin/python scripts/jupyterlab_screenshot.py notebooks/fedpals/table1.ipynb \
        --overrides '{"table1_rows": [["fashion-mnist", "C=3"]]}' --out /tmp/jupyterlab.png

What it checks, as a user would see it: the figure is drawn inline (an <img> in the output area,
not "<Figure size ...>" text), progress shows as widget bars (no leftover per-method bars, no
"IProgress not found" warning), and no error output. It prints the wall time of Run All.

Needs Chromium (Debian: `apt-get install -y chromium`) and the `playwright` Python package (the
browser it drives is /usr/bin/chromium; `playwright install` is not needed). JupyterLab runs on
127.0.0.1 with a random token, in a temporary folder holding a copy of the notebook (with the
given parameters written into its parameters cell), so the tracked notebook is never autosaved.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_with_parameters(src: Path, dst: Path, overrides: dict | None, profile: str) -> None:
    import nbformat

    nb = nbformat.read(str(src), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = cell.source.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("profile = "):
            lines[i] = f'profile = "{profile}"' + line[line.index("  #"):] if "  #" in line else f'profile = "{profile}"'
        if line.startswith("overrides = ") and overrides:
            lines[i] = f"overrides = {overrides!r}"
    cell.source = "\n".join(lines)
    nbformat.write(nb, str(dst))


def _wait_for_server(url: str, server, log: Path, timeout: float = 120) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if server.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.is_file() else []
            raise SystemExit(f"jupyterlab_screenshot: JupyterLab exited: {tail[0] if tail else 'no log'}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"jupyterlab_screenshot: JupyterLab did not answer at {url} within {timeout:.0f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", help="e.g. notebooks/fedpals/table1.ipynb")
    ap.add_argument("--overrides", default=None, help="JSON dict written into the parameters cell")
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "fedpaper-jupyterlab.png"))
    ap.add_argument("--timeout", type=float, default=900, help="seconds to wait for the run")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--height", type=int, default=2600, help="viewport height (the outputs must fit)")
    a = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    src = (REPO_ROOT / a.notebook).resolve() if not Path(a.notebook).is_absolute() else Path(a.notebook)
    work = Path(tempfile.mkdtemp(prefix="fedpaper-lab-"))
    nb = work / src.name
    _copy_with_parameters(src, nb, json.loads(a.overrides) if a.overrides else None, a.profile)
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, FEDPAPER_PROGRESS="1")  # widgets: the default in JupyterLab
    env.setdefault("PYTHONPATH", str(REPO_ROOT))
    env.pop("MPLBACKEND", None)  # JupyterLab's own default (inline), as a user has it
    jupyter = Path(sys.executable).with_name("jupyter")
    server = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={work}", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        env=env, stdout=subprocess.DEVNULL, stderr=open(work / "server.log", "w"), start_new_session=True)
    try:
        _wait_for_server(f"http://127.0.0.1:{port}/api/status?token={token}", server, work / "server.log")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=a.chromium, args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": a.height})
            page.goto(f"http://127.0.0.1:{port}/lab/tree/{nb.name}?token={token}&reset")
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
            page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=120_000)  # kernel ready
            page.click("div.lm-MenuBar-itemLabel:text-is('Run')")
            t0 = time.perf_counter()
            page.click("li.lm-Menu-item:has-text('Run All Cells')")
            page.wait_for_selector(".jp-OutputArea-output img, .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'] :text('Error')",
                                   timeout=a.timeout * 1000)
            page.wait_for_function("() => [...document.querySelectorAll('.jp-InputArea-prompt')]"
                                   ".every(e => !e.textContent.includes('[*]'))", timeout=a.timeout * 1000)
            wall = time.perf_counter() - t0
            page.wait_for_timeout(1500)
            page.screenshot(path=a.out)
            info = page.evaluate("""() => ({
                images: document.querySelectorAll('.jp-OutputArea-output img').length,
                figure_text: document.body.innerText.includes('<Figure size'),
                widget_bars: document.querySelectorAll('.jp-OutputArea-output .widget-hprogress, .jp-OutputArea-output .jupyter-widget-hprogress').length,
                iprogress_warning: document.body.innerText.includes('IProgress not found'),
                errors: document.querySelectorAll('.jp-OutputArea-output[data-mime-type=\"application/vnd.jupyter.stderr\"]').length,
                bar_labels: [...document.querySelectorAll('.jp-OutputArea-output .widget-hprogress')]
                    .map(e => (e.parentElement.innerText || '').split('\\n')[0]),
            })""")
            browser.close()
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
    info["run_all_seconds"] = round(wall, 1)
    info["screenshot"] = a.out
    print(json.dumps(info, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    ok = info["images"] >= 1 and not info["figure_text"] and not info["iprogress_warning"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
