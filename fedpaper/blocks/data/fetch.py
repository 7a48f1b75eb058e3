"""What to fetch: download each data set a run needs that is missing here (small public sets by
default, large ones on opt-in), every problem one printed line. Above the catalog
(`fedpaper.blocks.data.registry`: is it present?) and the downloaders (`fedpaper.blocks.data.download`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from fedpaper.blocks.data import download as D
from fedpaper.blocks.data.registry import dataset_available


def failure_line(name: str, root: Path, reason: str) -> str:
    return (f"could not download {name}: {reason}; put a copy in {Path(root) / name} "
            "or set FEDPAPER_DATA")


def ensure_datasets(needs: Iterable[str], root, opt_in: Iterable[str] = (),
                    log: Callable[[str], None] = print) -> dict[str, str]:
    """Download each missing data set of `needs` (catalog names, "<name>:labels" allowed).

    Small public sets are fetched by default; large ones (``Source.large``) only when named in
    `opt_in` or when `opt_in` holds "all". A name in `opt_in` is fetched even if no need lists it.
    Every problem is one printed line and never stops the caller. Returns {name: status}.
    """
    root = Path(root)
    opt_in = D.check_names(opt_in)
    wanted: dict[str, str] = {}
    for need in [*needs, *(n for n in opt_in if n != "all")]:
        if need != "none":
            wanted.setdefault(need.partition(":")[0], need)
    status: dict[str, str] = {}
    for name, need in wanted.items():
        if dataset_available(need, root):
            status[name] = "present"
            continue
        named = name in opt_in or "all" in opt_in
        if name in D.NOT_FETCHABLE:
            if named:
                log(f"cannot download {name}: {D.NOT_FETCHABLE[name]}")
            status[name] = "not fetched"
            continue
        if name not in D.SOURCES:
            status[name] = "not fetched"
            continue
        src = D.SOURCES[name]
        if src.large and not named:
            note = f" ({src.note})" if src.note else ""
            log(f"not downloading {name} (about {D.human_size(src.size_mb)}){note}: "
                f"add --download {name} or --download all to fetch it")
            status[name] = "not fetched"
            continue
        try:
            D.download(name, root, log=log)
        except (D.DownloadError, OSError) as exc:
            log(failure_line(name, root, str(exc) if isinstance(exc, D.DownloadError) else D.reason(exc)))
            status[name] = "failed"
        else:
            status[name] = "downloaded"
    return status
