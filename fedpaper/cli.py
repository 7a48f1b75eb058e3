"""`fedpaper`: regenerate the papers' artifacts from their notebooks, list them, write the report.

    fedpaper reproduce --profile {smoke,quick,long,paper} [--only ID_OR_PAPER ...] [--data-root PATH]
                       [--out-dir PATH] [--force] [--timeout S] [--executor local|ray[:ADDRESS]] [--debug]
                       [--no-download | --download NAME ... | --download all] [--rerender] [--max-hours H]
                       [--workers N|auto]
    fedpaper reproduce --profile paper --dry-run [--only ID_OR_PAPER ...] [--out-dir SCRATCH]
    fedpaper report    [--data-root PATH]
    fedpaper list      [--data-root PATH] [--paper PAPER]
    fedpaper cache export ARCHIVE [--only ID_OR_PAPER ...] [--profile P]
    fedpaper cache import ARCHIVE
    fedpaper cache rekey [--only ID_OR_PAPER ...] [--profile P] [--verify K] [--rtol R] [--atol A]
    fedpaper cache rekey --scheme [--archive ARCHIVE ...]
    fedpaper plan      --profile P [--only ID_OR_PAPER ...] [--data-root PATH] [--csv PATH] [--gpus N]

Bad input (unknown artifact, profile or paper, a data root that does not exist, an artifact that
cannot be regenerated here, a missing, foreign or corrupt archive) gives one line naming the
problem and the fix, and exit code 2. A notebook that fails does not stop the run; failures are
listed at the end (exit code 1). `--max-hours H` stops between runs once no further run can end
within H hours (runs done so far are cached; the same command resumes): exit code 75 (EX_TEMPFAIL,
"try again"), after a line per artifact with its runs done and left. `--workers N` runs N notebooks at once
(`auto`: one per free core), each kernel with one torch thread, on the one results cache; before it
starts the command prints, per paper, what it runs and the measured time of the whole paper at that
profile, and at the end how long it took.

`--dry-run` (paper profile only) runs every selected artifact at the paper's settings and code
paths, cut in rounds, seeds and images (fedpaper.outputs.dryrun), into a scratch folder (default: the
cache's dry-run/figures, never figures/) with a results cache of its own; an artifact whose data
or weights are absent is skipped with one line; it ends with a summary line (passed / skipped /
failed, wall time, peak RSS).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from fedpaper.runs.archive import ArchiveError, export_archive, import_archive, imported_notes, migrate_archive
from fedpaper.blocks.data.download import check_names
from fedpaper.blocks.data.fetch import ensure_datasets
from fedpaper.ground.errors import BAD_INPUT_ERRORS, FedpaperError, UnknownNameError
from fedpaper.ground.files import clean_stale_temps
from fedpaper.kernel import kernel_manager_class
from fedpaper.outputs.registry import PAPERS, artifact, artifact_ids, dataset_available, get_artifact, missing_message, not_implemented_reason
from fedpaper.claims.catalog import DRAWS_DATA, OPTIONAL_DATASETS
from fedpaper.outputs.parameters import PROFILES, check_profile, data_root_problem
from fedpaper.ground import paths
from fedpaper.runs import sweep
from fedpaper.ground.paths import cache_dir, data_root, dry_run_scratch
from fedpaper.runs.rekey import ATOL as REKEY_ATOL, RTOL as REKEY_RTOL, RekeyError, migrate_scheme, rekey
from fedpaper.runs.store import ResultStore
from fedpaper.runs.sweep import DEADLINE_ENV, deadline
from fedpaper.runs.versions import CODE_VERSION_ENV, pin_code_versions

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STOPPED = 75  # --max-hours reached: finished runs are cached, run the same command again (sysexits EX_TEMPFAIL)


class UsageError(FedpaperError):
    """Bad command-line input (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage block) and exit code 2."""

    def error(self, message):
        raise UsageError(f"{message}; see `{self.prog} --help`")


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fedpaper", description="Reproduce the four papers' tables and figures.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    r = sub.add_parser("reproduce", help="execute the artifacts' notebooks, then write the report")
    r.add_argument("--profile", default="quick", metavar="{" + ",".join(PROFILES) + "}",
                   help="smoke: tiny synthetic runs (seconds, cache only); quick: real data, fewer "
                        "seeds/rounds; long: real data, the most faithful run a CPU affords (figures/long/); paper: the "
                        "papers' settings (default: quick)")
    r.add_argument("--only", nargs="+", metavar="ID", default=None,
                   help="artifact ids (fedpals/table1) or paper names (fedpals); default: all")
    r.add_argument("--data-root", default=None, help="folder with the data sets (default: $FEDPAPER_DATA, "
                                                      "../shared/data, ~/.fedpaper/data)")
    r.add_argument("--out-dir", default=None, help="write artifacts here instead of figures/ (smoke: the cache)")
    r.add_argument("--force", action="store_true", help="recompute every run instead of reusing the results cache")
    r.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds for notebooks")
    r.add_argument("--no-report", action="store_true", help="do not regenerate figures/REPORT.md afterwards")
    r.add_argument("--rerender", action="store_true",
                   help="redraw the committed figures of the profile from their committed csv and json: nothing "
                        "is trained, no data is read or downloaded (after a change to drawing code or claims)")
    r.add_argument("--executor", default=None, metavar="local|ray[:ADDRESS]",
                   help="where runs train: local (default, this process; local:N at most N runs per engine call, "
                        "the default of --dry-run: local:1) or a Ray cluster: ray (a local "
                        "one per notebook), ray:auto (the one `ray start` runs here), ray:HOST:PORT; "
                        "needs pip install 'fedpaper[cluster]' (default: $FEDPAPER_EXECUTOR or local)")
    r.add_argument("--no-download", action="store_true",
                   help="never download: by default each missing public data set the selected artifacts "
                        "need (Fashion-MNIST, CIFAR-10/100, DermaMNIST) is fetched into the data root first")
    r.add_argument("--download", nargs="+", metavar="NAME", default=[],
                   help="also fetch these large data sets (voc2007, iwildcam), or 'all' for every one "
                        "the selected artifacts need")
    r.add_argument("--max-hours", type=float, default=None, metavar="H",
                   help="stop cleanly between runs so as to end within H hours: no run starts that would end "
                        "later at the pace measured so far (a batch already running finishes); runs done so far are "
                        "cached, the same command resumes; exit code 75 (see `fedpaper cache export`)")
    r.add_argument("--dry-run", action="store_true",
                   help="paper profile only: run every selected artifact with the paper's settings and code paths, "
                        "cut to 1 round, 1 seed and a few batches of images, into a scratch folder (--out-dir; "
                        "default: the cache), never figures/; skips what needs absent data or weights")
    r.add_argument("--workers", default="1", metavar="N|auto",
                   help="run N notebooks at once, each in its own kernel with one torch thread, on the one results "
                        "cache (leases keep two kernels from training the same run); auto: one per free core "
                        "(default: 1, the kernels' threads as the environment sets them)")
    r.add_argument("--debug", action="store_true", help="show full tracebacks (of the CLI; a notebook's own "
                                                         "traceback is in its executed copy)")

    rep = sub.add_parser("report", help="regenerate figures/REPORT.md and the README status table")
    rep.add_argument("--data-root", default=None)
    rep.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)

    ls = sub.add_parser("list", help="list artifacts with their status")
    ls.add_argument("--data-root", default=None)
    ls.add_argument("--paper", default=None, help="only this paper")
    ls.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)

    c = sub.add_parser("cache", help="export finished runs to a portable archive, import one, or rekey runs "
                                       "across a code change that does not change results")
    c.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    csub = c.add_subparsers(dest="cache_command", parser_class=_Parser)
    ex = csub.add_parser("export", help="write finished runs of the results cache to a checksummed .tar.gz")
    ex.add_argument("archive", help="the archive to write (e.g. archives/fedpals-table1-paper.tar.gz)")
    ex.add_argument("--only", nargs="+", metavar="ID", default=None,
                    help="artifact ids or paper names whose recorded runs to export (default: every entry)")
    ex.add_argument("--profile", default=None, help="only the runs recorded for this profile")
    ex.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    im = csub.add_parser("import", help="check an archive and add its runs to the results cache")
    im.add_argument("archive")
    im.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    rk = csub.add_parser("rekey", help="keep finished runs across a code change, after retraining some of them "
                                       "shows the current code reproduces them (within --rtol/--atol); runs "
                                       "keyed by the older text-hash code versions are first moved to the "
                                       "syntax-tree versions of the same source, nothing retrained",
                         description="Keep finished runs across a code change. First, runs keyed by the text-hash "
                                     "code versions used before (any docstring moved them) are moved to the "
                                     "syntax-tree version of the same source, nothing retrained (--scheme does only "
                                     "this). Then, per paper and old code version, the K cheapest runs are retrained "
                                     "and compared with the stored ones within --rtol/--atol; only if all agree are "
                                     "that version's runs stored again under the current code version.")
    rk.add_argument("--only", nargs="+", metavar="ID", default=None,
                    help="artifact ids or paper names whose recorded runs to rekey (default: every entry)")
    rk.add_argument("--profile", default=None, help="only the runs recorded for this profile")
    rk.add_argument("--verify", type=int, default=1, metavar="K",
                    help="runs retrained per paper and old code version, the cheapest first (default 1)")
    rk.add_argument("--rtol", type=float, default=REKEY_RTOL, metavar="R",
                    help="relative tolerance on the retrained runs' floats (metrics, losses): they agree when "
                         f"|retrained - stored| <= ATOL + RTOL * |stored| (default {REKEY_RTOL:g}; 0 with "
                         "--atol 0: bit for bit)")
    rk.add_argument("--atol", type=float, default=REKEY_ATOL, metavar="A",
                    help=f"absolute tolerance, as above (default {REKEY_ATOL:g})")
    rk.add_argument("--scheme", action="store_true",
                    help="only move runs keyed by the text-hash code versions (before docstrings and comments "
                         "stopped counting) to the syntax-tree version of the same source, from the committed map "
                         "fedpaper/runs/version_map.json: nothing retrained; runs whose source is the same syntax "
                         "tree as this checkout's become current")
    rk.add_argument("--archive", nargs="+", metavar="ARCHIVE", default=None,
                    help="with --scheme: rewrite these archives (.tar.gz from `cache export`) so instead of the cache")
    rk.add_argument("--data-root", default=None)
    rk.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)

    pl = sub.add_parser("plan", help="what a profile's artifacts cost (runs, samples, MACs, memory, time), "
                                     "counted without training")
    pl.add_argument("--profile", default="paper", metavar="{" + ",".join(PROFILES) + "}",
                    help="the profile to plan (default: paper)")
    pl.add_argument("--only", nargs="+", metavar="ID", default=None,
                    help="artifact ids (fedpals/table1) or paper names (fedpals); default: all")
    pl.add_argument("--data-root", default=None, help="folder with the data sets (as for reproduce)")
    pl.add_argument("--csv", default=None, metavar="PATH", help="also write the table (and totals) here as CSV")
    pl.add_argument("--gpus", type=int, default=None, metavar="N",
                    help="also the wall time on N GPUs (the groups of runs packed longest first onto the least loaded)")
    pl.add_argument("--time-cpu", action=argparse.BooleanOptionalAction, default=None,
                    help="time each model class on this CPU once (cached) for the 'CPU here' column; default: yes, "
                         "except at the paper profile (its 224-px and 10-client models take minutes and GBs to "
                         "time), where only timings already cached are used")
    pl.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    return p


def _resolve_data_root(arg):
    """The data root; an explicit --data-root or FEDPAPER_DATA that does not exist is an error."""

    if arg is not None:
        root = data_root(arg)
        problem = data_root_problem(root)  # the line a notebook gives for the same data_root
        if problem:
            raise UsageError(problem)
        return root
    env = os.environ.get("FEDPAPER_DATA")
    root = data_root()
    if env and not root.is_dir():
        raise UsageError(f"FEDPAPER_DATA={env} does not exist; point it at the data folder "
                         "(e.g. export FEDPAPER_DATA=../shared/data) or unset it")
    return root


def _select(only) -> tuple[list[str], set[str]]:
    """(selected artifact ids, the ids named one by one); a paper name selects all its artifacts."""

    if not only:
        return artifact_ids(), set()
    out: list[str] = []
    named: set[str] = set()
    for item in only:
        if item in PAPERS:
            ids = artifact_ids(item)
        else:
            ids = [get_artifact(item).id]
            named.add(ids[0])
        out.extend(i for i in ids if i not in out)
    return out, named


@dataclass
class Plan:
    notebooks: dict = field(default_factory=dict)  # notebook path -> [artifact ids]
    skipped: dict = field(default_factory=dict)  # artifact id -> reason


def plan_run(selected: list[str], profile: str, root: Path, explicit=(), dry_run: bool = False) -> Plan:
    """Which notebooks to execute, and which artifacts cannot be regenerated here (and why).

    `explicit`: ids the user named one by one; if any of them cannot be regenerated, UsageError.
    (True means all of `selected`.) `dry_run`: an artifact whose data or ImageNet weights are absent
    is skipped (committed results are not re-rendered in a dry run)."""
    from fedpaper.outputs.artifacts import committed_paths, rerender_refusal, rerender_requested  # start-up time: imports pandas
    from fedpaper.outputs.dryrun import missing_weights  # start-up time: imports pandas

    plan = Plan()
    for aid in selected:
        art = artifact(aid)
        optional = OPTIONAL_DATASETS.get(aid, ())
        missing = [d for d in art.needed if not dataset_available(d, root) and d not in optional]
        has_committed = profile != "smoke" and committed_paths(aid, profile)["csv"].is_file()
        if art.notebook is None:
            reason = f"not regenerated: {not_implemented_reason(aid)}"
            if missing:
                reason += "; " + missing_message(missing[0], root)
            plan.skipped[aid] = reason
            continue
        if art.kind == "ladder" and profile == "paper":  # rungs climb to the long profile (outputs/ladder.py)
            plan.skipped[aid] = "not regenerated: a compute ladder has no rungs at the paper profile"
            continue
        if rerender_requested() and not has_committed:  # --rerender: nothing to redraw
            plan.skipped[aid] = f"not re-rendered: no committed {profile} results"
            continue
        if aid in DRAWS_DATA and has_committed and (rerender_requested() or missing):  # no images without data
            plan.skipped[aid] = f"not re-rendered: {rerender_refusal(missing, root)}"
            continue
        if profile != "smoke" and missing and (dry_run or not has_committed):
            plan.skipped[aid] = f"not regenerated: {missing_message(missing[0], root)}"
            continue
        no_weights = missing_weights(aid, art.needed) if dry_run else None
        if no_weights:
            plan.skipped[aid] = f"not regenerated: {no_weights}"
            continue
        plan.notebooks.setdefault(art.notebook, []).append(aid)
    named = set(selected) if explicit is True else set(explicit or ())
    blocked = {a: r for a, r in plan.skipped.items() if a in named}
    if blocked:
        aid, reason = next(iter(blocked.items()))
        fix = ("; implement it (see notebooks/_template and scripts/new_notebook.py) or drop it from --only"
               if "not implemented" in reason else "")
        more = f" (and {len(blocked) - 1} more)" if len(blocked) > 1 else ""
        raise UsageError(f"{aid} cannot be regenerated here: {reason.removeprefix('not regenerated: ')}{fix}{more}")
    return plan


def download_missing(selected: list[str], root: Path, args) -> dict:
    """Fetch the missing data sets the selected implemented artifacts need, before any notebook runs.

    Smoke runs use stand-ins, so only data sets named with --download are fetched there. A failed
    download is one printed line; the run goes on with what is there (fedpaper.blocks.data.download).
    """

    opt_in = check_names(args.download)
    if args.no_download:
        if opt_in:
            raise UsageError("--download and --no-download contradict each other; pass one of them")
        return {}
    needs = [] if args.profile == "smoke" else [
        d for aid in selected if artifact(aid).notebook is not None for d in artifact(aid).needed]
    return ensure_datasets(needs, root, opt_in=opt_in)


def _execute(nb: str, out_nb: Path, parameters: dict, timeout) -> None:
    import papermill as pm


    src = paths.REPO_ROOT / nb
    out_nb.parent.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(str(src), str(out_nb), parameters=parameters, kernel_name="python3",
                        cwd=str(src.parent), progress_bar=False, log_output=False,
                        execution_timeout=timeout, kernel_manager_class=kernel_manager_class())


def _one_line_error(e: BaseException) -> str:
    ename = getattr(e, "ename", None)
    evalue = getattr(e, "evalue", None)
    if ename:
        return f"{ename}: {str(evalue).splitlines()[0] if evalue else ''}"
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"


def _use_executor(name) -> None:
    """Check the executor (one line if unknown or its library is missing) and hand it to the
    notebooks' kernels through FEDPAPER_EXECUTOR."""

    from fedpaper.runs.executors import EXECUTOR_ENV, check_available, get_executor  # start-up time: imports torch

    if name is None:
        name = os.environ.get(EXECUTOR_ENV)
    check_available(get_executor(name))
    if name is not None:
        os.environ[EXECUTOR_ENV] = name


@contextlib.contextmanager
def _env(name: str, value: str):
    """Set an environment variable (inherited by the kernels) for the duration of a block."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextlib.contextmanager
def _ctrl_c_noticed():
    """Note every SIGINT (then raise KeyboardInterrupt as usual), so that a Ctrl-C that a library
    swallowed still stops the run; the previous handler is restored afterwards."""
    import signal
    import threading

    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        flag.set()
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, old)


def _run_notebooks(plan: "Plan", executed: Path, params: dict, args, done: list, failures: dict,
                   bad_input: set, per_notebook=None, workers: int = 1) -> list:
    """Execute each planned notebook; a failure is recorded in `failures` (and in `bad_input` when
    the notebook stopped on bad input) and the next one runs. At the deadline (--max-hours) the
    notebook whose sweep stopped and the ones not started are returned (stopped first); [] else.
    `per_notebook(nb)`: parameters of that notebook added to `params` (a dry run's cut, per paper).
    `workers` > 1: that many notebooks at once (`_run_parallel`)."""
    from tqdm import tqdm


    notebooks = list(plan.notebooks)
    if workers > 1 and len(notebooks) > 1:
        return _run_parallel(notebooks, executed, params, args, done, failures, bad_input, per_notebook, workers)
    with _ctrl_c_noticed() as interrupted:
        for i, nb in enumerate(tqdm(notebooks, desc="notebooks", unit="nb", disable=not notebooks)):
            end = deadline()
            if end is not None and sweep._clock() >= end:
                return notebooks[i:]
            nb_params = {**params, **per_notebook(nb)} if per_notebook else params
            _run_one(nb, executed, nb_params, args, done, failures, bad_input, interrupted)
            if failures.get(nb, "").startswith(SWEEP_STOPPED + ":"):
                del failures[nb]
                return notebooks[i:]
    return []


SWEEP_STOPPED = "SweepStopped"  # the error a notebook's sweep raises at the deadline (fedpaper.runs.sweep)


def _run_parallel(notebooks: list, executed: Path, params: dict, args, done: list, failures: dict,
                  bad_input: set, per_notebook, workers: int) -> list:
    """`_run_notebooks` with `workers` threads, each taking the next notebook not started and running it
    in its own kernel (one process per notebook, as in the serial loop). The kernels share the results
    cache: a run two of them need is claimed with a lease by the first (fedpaper.runs.leases) and read
    from the store by the other, so no run trains twice and each artifact is written by its own notebook
    only. Returns what `_run_notebooks` returns: at the deadline, the stopped notebooks, then the ones
    not started. The threads are daemons: a Ctrl-C ends the command, and each kernel ends with it."""
    import threading

    from tqdm import tqdm

    queue, stopped, lock = list(notebooks), [], threading.Lock()
    bar = tqdm(total=len(notebooks), desc=f"notebooks ({workers} at once)", unit="nb")

    def work(interrupted):
        while True:
            with lock:
                if not queue or stopped:
                    return
                nb = queue.pop(0)
            end = deadline()
            if end is not None and sweep._clock() >= end:
                with lock:
                    stopped.append(nb)
                return
            nb_params = {**params, **per_notebook(nb)} if per_notebook else params
            try:
                _run_one(nb, executed, nb_params, args, done, failures, bad_input, interrupted)
            except KeyboardInterrupt:
                return
            if failures.get(nb, "").startswith(SWEEP_STOPPED + ":"):
                with lock:
                    del failures[nb]
                    stopped.append(nb)
                return
            bar.update(1)

    with _ctrl_c_noticed() as interrupted:
        threads = [threading.Thread(target=work, args=(interrupted,), name=f"fedpaper-worker-{i}", daemon=True)
                   for i in range(min(workers, len(notebooks)))]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.2)  # short waits: a Ctrl-C reaches this (main) thread between them
            if interrupted.is_set():
                raise KeyboardInterrupt
    bar.close()
    return stopped + queue if stopped else []


def _cpu_times() -> "tuple[int, int] | None":
    """(free, total) CPU ticks of the machine since boot from /proc/stat: free = idle + iowait + nice (work
    run at a lower priority yields its core to the workers); None where /proc/stat cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    nice, idle, iowait = [(fields + [0] * 5)[i] for i in (1, 3, 4)]  # /proc/stat: user nice system idle iowait ...
    return idle + iowait + nice, sum(fields[:8])


def free_cores(cores: int, sample_s: float = 1.0) -> int:
    """How many of `cores` are free now: the machine's free share of CPU time over `sample_s` seconds
    (/proc/stat, so the load of a command that just ended, e.g. an install, does not count as the
    one-minute load average would), times the cores, rounded; without /proc/stat, the cores minus the
    one-minute load average. At least one."""
    first = _cpu_times()
    if first is None:
        return max(1, cores - round(os.getloadavg()[0]))
    time.sleep(sample_s)
    second = _cpu_times()
    free, total = second[0] - first[0], second[1] - first[1]
    machine = os.cpu_count() or cores
    busy = 0.0 if total <= 0 else machine * (1 - free / total)  # busy cores of the whole machine
    return max(1, min(cores, round(cores - busy)))


def resolve_workers(value: str) -> int:
    """--workers: a positive count, or `auto`: one per core this process may use that is free now (free_cores;
    at least one)."""
    if value == "auto":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return free_cores(cores)
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"--workers {value} must be a positive number of notebooks at once or 'auto' "
                         "(e.g. --workers 2)")
    return n


#: measured wall times of whole profiles, per paper (what `fedpaper reproduce` says before it starts)
PROFILE_TIMES = paths.REPO_ROOT / "benchmarks" / "results" / "profile_times.json"


def announce(plan: "Plan", profile: str, workers: int) -> list[str]:
    """Before a run: per paper, what it will run and that paper's measured wall time at the profile
    (PROFILE_TIMES: one core, empty cache, the whole paper), and the sum divided among the workers."""
    import json

    try:
        measured = json.loads(PROFILE_TIMES.read_text(encoding="utf-8"))["profiles"].get(profile, {})
    except (OSError, ValueError, KeyError):
        measured = {}
    by_paper: dict[str, list] = {}
    for nb, aids in plan.notebooks.items():
        by_paper.setdefault(aids[0].split("/", 1)[0], []).append((nb, aids))
    lines, total, timed = [], 0.0, True
    for paper, nbs in by_paper.items():
        rec = measured.get(paper)
        n_art = sum(len(a) for _, a in nbs)
        if rec is None:
            when, timed = "no measured time of it alone at this profile", False
        else:
            minutes = rec["wall_min"] if "wall_min" in rec else rec["wall_s"] / 60
            total += minutes * rec["cores"]
            when = (f"the whole paper took {minutes:.0f} min on {rec['cores']} core(s) "
                    f"({rec['machine'].split(',')[0]}, {rec['date']})")
        lines.append(f"  {paper}: {len(nbs)} notebook(s), {n_art} artifact(s); {when}")
    together = measured.get("all")
    if together is not None:
        lines.append(f"  every notebook of the four papers took {_duration(together['wall_s'])} at this profile "
                     f"({together['machine'].split(',')[0]}, {together['date']})")
    elif by_paper and timed:
        lines.append(f"  about {total:.0f} min of one core from an empty cache; with {workers} worker(s) about "
                     f"{total / workers:.0f} min at best (cached runs are read, not trained)")
    elif by_paper:
        lines.append(f"  `fedpaper plan --profile {profile}` estimates what is not measured")
    return lines


#: Seconds between the lines that say how a running notebook is getting on (_ticking).
PROGRESS_EVERY_S = 30.0


def progress_line(nb: str, elapsed_s: float, artifacts, profile: str, store=None) -> str:
    """'running notebooks/fedpals/fig9.ipynb: 2 min 30 s; fedpals/fig9 12 of 40 runs done' (the runs its sweeps
    recorded in the results store so far, fedpaper.runs.store.ResultStore.progress)."""
    parts = []
    for aid in artifacts:
        try:
            prog = store.progress(aid, profile) if store is not None else None
        except Exception:  # noqa: BLE001 - a progress line never stops a run
            prog = None
        if prog is not None:
            parts.append(f"{aid} {prog[0]} of {prog[1]} runs done")
    return f"running {nb}: {_duration(elapsed_s)}" + ("; " + ", ".join(parts) if parts else "")


@contextlib.contextmanager
def _ticking(nb: str, profile: str):
    """While a notebook runs (its kernel's bars go to its executed copy, not here): every PROGRESS_EVERY_S a line
    on stderr with the time it has run and its artifacts' runs done so far (progress_line)."""
    import threading

    from tqdm import tqdm

    aids = [a for a in artifact_ids() if artifact(a).notebook == nb]
    stop = threading.Event()
    t0 = time.perf_counter()

    def tick():
        store = None
        while not stop.wait(PROGRESS_EVERY_S):
            if store is None:
                with contextlib.suppress(Exception):
                    store = ResultStore()
            tqdm.write(progress_line(nb, time.perf_counter() - t0, aids, profile, store), file=sys.stderr)

    thread = threading.Thread(target=tick, name="fedpaper-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(1.0)


def _run_one(nb: str, executed: Path, params: dict, args, done: list, failures: dict, bad_input: set,
             interrupted) -> None:
    out_nb = executed / Path(nb).relative_to("notebooks") if nb.startswith("notebooks/") else executed / Path(nb).name
    t0 = time.perf_counter()
    try:
        try:
            with _ticking(nb, args.profile):
                _execute(nb, out_nb, params, args.timeout)
        finally:
            if interrupted.is_set():  # Ctrl-C, even where a library caught it (e.g. during kernel start-up)
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise
    except Exception as e:  # keep going; report at the end
        failures[nb] = _one_line_error(e) + f" (executed copy: {out_nb})"
        if getattr(e, "ename", None) in BAD_INPUT_ERRORS:
            bad_input.add(nb)
        if args.debug:
            traceback.print_exc()
    else:
        done.append(f"{nb} ({time.perf_counter() - t0:.0f} s)")


def _dry_run_scratch(args) -> Path:
    """The scratch folder of a dry run, checked before anything runs; bad input is one line."""
    from fedpaper.outputs.dryrun import PROFILE, check_scratch  # start-up time: imports pandas

    if args.profile != PROFILE:
        raise UsageError(f"--dry-run checks the {PROFILE} profile's settings and code paths; use --profile {PROFILE} "
                         f"--dry-run (the {args.profile} profile runs as it is: drop --dry-run)")
    if args.rerender:
        raise UsageError("--dry-run trains and --rerender redraws committed results; pass one of them")
    return check_scratch(Path(args.out_dir) if args.out_dir is not None else dry_run_scratch())


def _peak_rss_gib() -> float:
    """Peak resident memory of this process or of any of its finished children (the notebook
    kernels), in GiB (Linux reports ru_maxrss in KiB)."""
    import resource

    kib = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return kib / 2**20


def _restamp_claims(plan, profile: str, regenerated: list) -> None:
    """Redraw, from their committed files, the figures regenerated in this run whose "claim not
    reproduced" stamp a later artifact of the run made stale (artifacts.stale_claim_stamps); the
    re-render in place also writes the claims they now name into their provenance json."""
    from fedpaper.outputs.artifacts import RERENDER_ENV, stale_claim_stamps  # start-up time: imports pandas
    from fedpaper.notebook import artifact_function_of  # start-up time: imports pandas

    stale = stale_claim_stamps(regenerated, profile)
    for nb, aids in plan.notebooks.items():
        mine = [a for a in aids if a in stale]
        if not mine:
            continue
        try:
            with _env(RERENDER_ENV, "1"), contextlib.redirect_stdout(io.StringIO()):
                artifact_function_of(nb)(profile=profile)
        except Exception as e:  # noqa: BLE001 - the run's results are written; say how to redraw
            print(f"fedpaper: warning: could not redraw {', '.join(mine)} with the claims that fail now ({e}); "
                  f"run `fedpaper reproduce --rerender --profile {profile} --only {' '.join(mine)}`", file=sys.stderr)
            continue
        for aid in mine:
            print(f"{'restamped':<15} {aid}: its figure names the claims that fail now "
                  f"({len(stale[aid])}; a later artifact of this run changed one)")


def cmd_reproduce(args) -> int:
    from fedpaper.outputs.artifacts import (  # start-up time: imports pandas
        ONLY_ENV, STATUS_FILE_ENV, read_statuses, resolve_out_dir)

    t_start = time.perf_counter()
    check_profile(args.profile)
    if args.dry_run:
        _select(args.only)  # an unknown artifact id: one line before anything is written
        args.out_dir, args.no_report = str(_dry_run_scratch(args)), True
        args.no_download = args.no_download or not args.download  # absent data: skipped, not fetched, unless asked
    if args.max_hours is not None and not args.max_hours > 0:
        raise UsageError(f"--max-hours {args.max_hours:g} must be a positive number of hours (e.g. --max-hours 2.5)")
    workers = resolve_workers(args.workers)
    if workers > 1:  # one torch thread per kernel: the kernels inherit it
        os.environ["OMP_NUM_THREADS"] = "1"
    if args.rerender:  # the notebook kernels inherit it: every artifact the pipeline makes is redrawn from committed files
        from fedpaper.outputs.artifacts import RERENDER_ENV  # start-up time: imports pandas

        os.environ[RERENDER_ENV], args.no_download = "1", True
    root = _resolve_data_root(args.data_root)
    out = resolve_out_dir(args.profile, args.out_dir)  # bad input (e.g. smoke into figures/): exit 2 before any run

    clean_stale_temps(out, recursive=True)  # left by a killed earlier run
    selected, named = _select(args.only)
    download_missing(selected, root, args)
    plan = plan_run(selected, args.profile, root, explicit=named, dry_run=args.dry_run)
    os.environ["FEDPAPER_COMMAND"] = "fedpaper " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if args.force:
        os.environ["FEDPAPER_RECOMPUTE"] = "1"
    _use_executor(args.executor)

    os.environ.setdefault(CODE_VERSION_ENV, pin_code_versions())  # one code version per paper for the whole run
    _note_imported_code(selected)

    deadline = (_env(DEADLINE_ENV, repr(sweep._clock() + 3600.0 * args.max_hours)) if args.max_hours is not None
                else contextlib.nullcontext())  # the kernels' sweeps stop at it
    if args.max_hours is not None and os.environ.get("FEDPAPER_EXECUTOR", "local").startswith("ray"):
        print("fedpaper: note: with the ray executor --max-hours is checked between notebooks only (its tasks "
              "are submitted together)", file=sys.stderr)
    os.environ.setdefault("FEDPAPER_PROGRESS", "text")  # the kernels' bars: text in executed copies, no widgets
    # the default folder (~/.fedpaper/data) may not exist on a fresh machine before any download: the kernels then
    # get None (their own default, the same folder, where every data set reads as absent), not a path they reject
    params = {"profile": args.profile, "data_root": str(root) if root.is_dir() else None,
              "out_dir": None if args.out_dir is None else str(Path(args.out_dir).resolve())}
    failures: dict[str, str] = {}
    bad_input: set[str] = set()  # failures caused by bad input (exit 2 when they are all of them)
    done: list[str] = []
    executed = cache_dir("dry-run", "executed") if args.dry_run else cache_dir("executed", args.profile)
    per_notebook = None
    if args.dry_run:
        from fedpaper.outputs.dryrun import parameters as dry_parameters  # start-up time: imports pandas

        def per_notebook(nb):  # the notebooks of one paper live in notebooks/<paper>/
            return dry_parameters(Path(nb).parent.name, args.out_dir)
    status_file = executed / f"status-{os.getpid()}.jsonl"
    status_file.unlink(missing_ok=True)
    print(f"fedpaper reproduce: profile {args.profile}{' (dry run into ' + args.out_dir + ')' if args.dry_run else ''}, "
          f"data root {root}, "
          f"{len(plan.notebooks)} notebook(s), {len(plan.skipped)} artifact(s) not regenerated"
          + (f"; {workers} workers, one torch thread each" if workers > 1 else ""))
    for line in announce(plan, args.profile, workers):
        print(line)
    # the kernels make these only: --only's selection; with --rerender, the artifacts that have committed results
    # at this profile (a notebook's other artifacts are not redrawn from another profile's results)
    make = [a for ids in plan.notebooks.values() for a in ids] if args.rerender else selected if args.only else None
    only = _env(ONLY_ENV, ",".join(make)) if make is not None else contextlib.nullcontext()
    with _env(STATUS_FILE_ENV, str(status_file)), deadline, only:  # the kernels append what became of each artifact
        stopped = _run_notebooks(plan, executed, params, args, done, failures, bad_input, per_notebook, workers)
    statuses = read_statuses(status_file)
    status_file.unlink(missing_ok=True)
    for d in done:
        print(f"ok      {d}")
    for nb, err in failures.items():
        print(f"FAILED  {nb}: {err}")
    outcomes = artifact_outcomes(selected, plan, statuses, failures)
    for nb in stopped:
        for aid in plan.notebooks[nb]:
            if aid not in statuses:
                outcomes[aid] = ("skipped", f"stopped at {_limit(args)} before it was written; the same command resumes")
    for aid, (kind, detail) in outcomes.items():
        print(f"{OUTCOME_LABELS[kind]:<15} {aid}: {detail}")
    if not args.dry_run and not args.rerender and args.out_dir is None and args.profile != "smoke":
        # smoke results are never committed: no committed figure carries a claim stamp to redraw
        _restamp_claims(plan, args.profile, [aid for aid, (kind, _) in outcomes.items() if kind == "regenerated"])
    if not args.no_report:
        from fedpaper.report import write_report  # start-up time: imports pandas

        path = write_report(data_root=root, only=selected if args.only else None)  # what the selection lacks here
        print(f"report: {path}")
    print(outcome_summary(outcomes) + f"; notebooks: {len(done)} ok, {len(failures)} failed"
          + (f", {len(stopped)} stopped or not started" if stopped else ""))
    print(f"fedpaper reproduce: took {_duration(time.perf_counter() - t_start)}"
          + (f" with {workers} workers" if workers > 1 else ""))
    if args.dry_run:
        print(dry_run_summary(outcomes, time.perf_counter() - t_start, _peak_rss_gib()))
    if stopped:
        _print_stopped(stopped, plan, args)
        return EXIT_STOPPED
    if failures and set(failures) <= bad_input:
        return EXIT_USAGE
    return EXIT_FAILED if failures else 0


def _duration(seconds: float) -> str:
    """'47 s', '12 min 5 s', '1 h 3 min'."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _note_imported_code(selected) -> None:
    """One line per paper whose imported runs (fedpaper cache import) were made by other code."""

    for line in imported_notes(sorted({a.split("/", 1)[0] for a in selected})):
        print(f"fedpaper: note: {line}", file=sys.stderr)


def _print_stopped(stopped: list, plan: Plan, args) -> None:
    """At the deadline: the runs done and left of each artifact not finished (from the store's index:
    an artifact whose sweeps never started here has no count yet), and how to go on."""

    store = ResultStore()
    done_n = left_n = 0
    for nb in stopped:
        for aid in plan.notebooks[nb]:
            prog = store.progress(aid, args.profile)
            if prog is None:
                print(f"{'not started':<15} {aid}: no run started yet (its number of runs is known once its sweep starts)")
                continue
            d, n = prog
            done_n, left_n = done_n + d, left_n + n - d
            print(f"{'stopped':<15} {aid}: {d} of {n} runs done, {n - d} left (in the sweeps started so far)")
    runs = f"{done_n} runs done, {left_n} left in the sweeps started, " if done_n or left_n else ""
    print(f"stopped at {_limit(args)}: {runs}{len(stopped)} notebook(s) to finish; "
          "finished runs are cached: run the same command again to resume, "
          "or `fedpaper cache export ARCHIVE --only ... --profile ...` to carry them to another machine "
          f"(exit code {EXIT_STOPPED})")


def _limit(args) -> str:
    """What stopped a reproduce: --max-hours, or a deadline set in the environment."""
    return f"--max-hours {args.max_hours:g}" if args.max_hours is not None else "the deadline ($FEDPAPER_DEADLINE)"


def _needed_runs(args) -> "list | None":
    """`cache export/rekey --only IDS --profile P`: every run the selected artifacts need at P, collected
    without training and recorded in the store's index as their sweeps would (plan.record_runs), so that
    runs nothing recorded are found by what they are (pieces trained by an exploration, an archive made
    before runs were recorded). None without both options; unknown ids or profile: one line."""
    selected = _select(args.only)[0] if args.only else None
    if args.profile is not None:
        check_profile(args.profile)
    if not (args.only and args.profile is not None):
        return None
    from fedpaper.plan import record_runs  # start-up time: imports torch

    print(f"collecting the runs of {len(selected)} artifact(s) at the {args.profile} profile (nothing is trained)",
          flush=True)
    recorded = record_runs(selected, args.profile, _resolve_data_root(getattr(args, "data_root", None)))
    return [k for keys in recorded.values() for k in keys]


def _rekey_scheme(args) -> int:
    """`cache rekey --scheme [--archive A ...]`: text-hash code versions to syntax-tree ones, no training."""
    if not args.scheme:
        raise UsageError("--archive goes with --scheme (`fedpaper cache rekey --scheme --archive A ...`): only the "
                         "scheme migration rewrites archives")
    if args.only or args.profile is not None:
        raise UsageError("--scheme moves every run of the cache (or of --archive) and takes no --only or --profile")
    if args.archive:
        for path in args.archive:
            out = migrate_archive(path)
            moved = "; ".join(f"{p} {', '.join(v)} -> {', '.join(out['after'].get(p, []))}"
                              for p, v in out["before"].items())
            print(f"{path}: {out['moved']} of {out['entries']} runs moved to the syntax-tree code versions"
                  + (f" ({moved})" if out["moved"] else
                     " (none keyed by a text-hash version the map knows: unchanged)"))
        return 0
    out = migrate_scheme()
    print(f"moved {out['moved']} runs to the syntax-tree code versions of the same source, nothing retrained: "
          f"{out['current']} of them are of this checkout's code; {out['unmapped']} runs of other code versions "
          "the map does not know left alone")
    return 0


def cmd_cache(args) -> int:
    try:
        if args.cache_command == "export":
            _needed_runs(args)
            out = export_archive(args.archive, only=args.only, profile=args.profile)
            codes = "; ".join(f"{p} code {', '.join(v)}" for p, v in out["papers"].items())
            skipped = (f"; left out: {out['skipped_stale']} made by other code versions" if out["skipped_stale"] else "") + \
                      (f", {out['skipped_corrupt']} corrupt" if out["skipped_corrupt"] else "")
            print(f"exported {out['entries']} runs ({out['bytes'] / 1e6:.2f} MB) to {out['path']} ({codes}){skipped}")
            return 0
        if args.cache_command == "import":
            out = import_archive(args.archive)
            print(f"imported {out['entries']} runs from {args.archive} ({out['added']} new, "
                  f"{out['entries'] - out['added']} already here)")
            for line in out["notes"]:
                print(f"fedpaper: note: {line}", file=sys.stderr)
            return 0
        if args.cache_command == "rekey" and (args.scheme or args.archive):
            return _rekey_scheme(args)
        if args.cache_command == "rekey":
            needed = _needed_runs(args)
            out = rekey(only=args.only, profile=args.profile, verify=args.verify, data_root=args.data_root,
                        needed=needed, rtol=args.rtol, atol=args.atol)
            for (paper, old), c in out.items():
                print(f"rekeyed {c['runs']} {paper} runs from code {old} to {c['to']} "
                      f"({len(c['verified'])} retrained, the same within rtol {args.rtol:g}, atol {args.atol:g})")
            return 0
    except (ArchiveError, RekeyError) as e:
        raise UsageError(str(e)) from None
    raise UsageError("fedpaper cache needs a command: export ARCHIVE, import ARCHIVE or rekey "
                     "(see `fedpaper cache --help`)")


# What became of each artifact: regenerated, re-rendered from committed results, not regenerated
# (why), failed.
OUTCOME_LABELS = {"regenerated": "regenerated", "rerendered": "re-rendered", "skipped": "not regenerated",
                  "failed": "FAILED"}
OUTCOME_COUNTS = {"regenerated": "regenerated", "rerendered": "re-rendered from committed results",
                  "skipped": "not regenerated", "failed": "failed"}


def artifact_outcomes(selected, plan: Plan, statuses: dict, failures: dict) -> dict[str, tuple[str, str]]:
    """artifact id -> (kind, detail) for every selected artifact and every other one a notebook wrote.

    `statuses`: what the notebooks reported (artifacts.read_statuses); `failures`: notebook -> error."""
    notebook_of = {aid: nb for nb, aids in plan.notebooks.items() for aid in aids}
    out: dict[str, tuple[str, str]] = {}
    for aid in list(selected) + [a for a in statuses if a not in selected]:
        rec = statuses.get(aid)
        nb = notebook_of.get(aid)
        if rec is not None:
            kind = "rerendered" if rec.get("kind") == "rerendered" else "regenerated"
            out[aid] = (kind, f"{rec.get('status', kind)} -> {rec.get('csv')}")
        elif aid in plan.skipped:
            out[aid] = ("skipped", plan.skipped[aid].removeprefix("not regenerated: "))
        elif nb in failures:
            out[aid] = ("failed", f"{nb} failed (the error: its FAILED line above)")  # said once per notebook
        elif nb is not None:
            out[aid] = ("skipped", f"{nb} finished without writing it")
    return out


def outcome_summary(outcomes: dict) -> str:
    """'artifacts: 1 regenerated, 0 re-rendered from committed results, 2 not regenerated, 0 failed'."""
    counts = {k: 0 for k in OUTCOME_COUNTS}
    for kind, _ in outcomes.values():
        counts[kind] += 1
    return "artifacts: " + ", ".join(f"{counts[k]} {label}" for k, label in OUTCOME_COUNTS.items())


def cmd_plan(args) -> int:
    """Per artifact and per paper: runs, rounds, samples, MACs, memory and time (fedpaper.plan)."""
    from fedpaper import plan as P  # start-up time: imports torch

    check_profile(args.profile)
    if args.gpus is not None and args.gpus < 1:
        raise UsageError(f"--gpus {args.gpus} must be a number of GPUs >= 1 (e.g. --gpus 8)")
    root = _resolve_data_root(args.data_root)
    selected, _ = _select(args.only)
    print(f"fedpaper plan: profile {args.profile}, data root {root}, {len(selected)} artifact(s); "
          "collecting their runs (nothing is trained or written)", flush=True)
    plans = P.collect(selected, args.profile, root)
    time_cpu = args.time_cpu if args.time_cpu is not None else args.profile != "paper"
    rows, totals, costs = P.build_rows(plans, progress=lambda what: print(f"{what} ...", flush=True),
                                       time_cpu=time_cpu)
    card, _ = P.gpu_rates()
    print(P.format_table(rows, totals, card))
    print(P.cpu_line(costs))
    print(f"GPU: {card or P.NOT_MEASURED + ' (no ' + str(P.GPU_RESULTS) + ')'}")
    fits = P.fits_line(totals)
    if fits:
        print(fits)
    if args.gpus is not None:
        print(P.gpu_wall_line(plans, P.gpu_rates()[1], args.gpus))
    if args.csv:
        print(f"csv: {P.write_csv(args.csv, rows, totals)}")
    return 0


def dry_run_summary(outcomes: dict, wall_s: float, peak_rss_gib: float) -> str:
    """'dry run: 3 artifacts passed, 2 skipped, 0 failed; wall 61 s, peak RSS 1.20 GiB'."""
    n = {k: sum(1 for kind, _ in outcomes.values() if kind == k) for k in OUTCOME_COUNTS}
    return (f"dry run: {n['regenerated'] + n['rerendered']} artifacts passed, {n['skipped']} skipped, "
            f"{n['failed']} failed; wall {wall_s:.0f} s, peak RSS {peak_rss_gib:.2f} GiB "
            "(this process or one notebook kernel)")


def cmd_report(args) -> int:
    from fedpaper.report import write_report  # start-up time: imports pandas

    root = _resolve_data_root(args.data_root)
    print(f"report: {write_report(data_root=root)}")
    return 0


def cmd_list(args) -> int:
    from fedpaper.report import status_rows  # start-up time: imports pandas

    root = _resolve_data_root(args.data_root)
    rows = status_rows(data_root=root, paper=args.paper)
    w = max(len(r["id"]) for r in rows) if rows else 10
    for r in rows:
        print(f"{r['id']:<{w}}  {r['kind']:<6}  {r['data']:<28}  {r['status']}" + (f"; {r['here']}" if r["here"] else ""))
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        args = _build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError("no command given; use one of: reproduce, report, list, cache, plan (see `fedpaper --help`)")
        return {"reproduce": cmd_reproduce, "report": cmd_report, "list": cmd_list,
                "cache": cmd_cache, "plan": cmd_plan}[args.command](args)
    except (UsageError, UnknownNameError) as e:
        if debug:
            traceback.print_exc()
        print(f"fedpaper: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except FedpaperError as e:
        if debug:
            traceback.print_exc()
        print(f"fedpaper: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # a bug: one line unless --debug
        if debug:
            traceback.print_exc()
        else:
            print(f"fedpaper: error: {_one_line_error(e)} (rerun with --debug for the traceback)",
                  file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("fedpaper: interrupted; finished runs are cached, run the same command again to resume",
              file=sys.stderr)
        _silence_late_tracebacks()
        return 130


def _silence_late_tracebacks() -> None:
    """After Ctrl-C, threads and finalizers still closing the kernel's zmq sockets may print
    tracebacks; the one-line message above is all the user should see (`--debug` keeps them)."""
    if sys.stderr is not sys.__stderr__ or "--debug" in sys.argv:
        return  # not the real console (tests, embedding)
    import threading

    sys.stderr.flush()
    sys.stderr = open(os.devnull, "w")
    sys.unraisablehook = lambda *_: None
    threading.excepthook = lambda *_: None


if __name__ == "__main__":
    sys.exit(main())
