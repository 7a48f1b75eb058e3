"""Claims on result-store keys, so that two workers never compute the same run at once.

A lease is a small JSON file `<store root>/<k[:2]>/<k>.lease` beside the result `<k>.pkl`:

    {"owner": "host:pid:token", "host": ..., "pid": ..., "token": ..., "expires": <unix time>}

- Every read-check-write of a lease (claim, take-over, renewal, release) runs under a short
  per-key lock, `<k>.lease.lock`, created with O_CREAT | O_EXCL (atomic on local filesystems and
  NFSv3+); a lock older than LOCK_STALE_S seconds was left by a process that died inside the
  critical section and is removed. The lease itself is written to a temporary file and renamed
  into place, so a reader never sees a half-written lease.
- A lease expires `ttl` seconds after it was written unless its owner renews it (a heartbeat
  thread renews every ttl/3 while the work goes on, see `Claim`). An expired lease, or one whose
  owner process is gone on this same host, is taken over (under the lock: one contender wins).
- Release removes the lease only if it still names this owner.

    with claim_keys(store.root, keys, ttl=60) as claim:   # waits while a live owner holds one
        ...compute, store.put(...)...                      # claim.lost is True if it was taken over

The result writes themselves are the store's atomic writes; a lease only prevents duplicate work.
If a lease is ever lost (its owner stalled past the expiry), the worst outcome is that a run is
computed twice and written twice with the same content, never a torn file.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from fedpaper.ground.files import TMP_PREFIX
from fedpaper.ground.procs import pid_alive

SUFFIX = ".lease"
DEFAULT_TTL = float(os.environ.get("FEDPAPER_LEASE_TTL", "120"))
HOST = socket.gethostname()


class LeaseTimeout(TimeoutError):
    """A key stayed claimed by a live owner for longer than the caller would wait."""


def lease_path(root, key: str) -> Path:
    return Path(root) / key[:2] / (key + SUFFIX)


def new_owner() -> dict:
    token = uuid.uuid4().hex
    return {"owner": f"{HOST}:{os.getpid()}:{token}", "host": HOST, "pid": os.getpid(), "token": token}


def read_lease(path: Path) -> Optional[dict]:
    """The lease at `path`, or None when there is none (or it vanished while being read)."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):  # cannot happen with link-created leases; treat as stale
        return {"token": None, "expires": 0.0}


def _write_tmp(path: Path, lease: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # the writer's pid in the name, as ground.files.atomic_path's: a kill mid-write leaves a temp file that
    # ground.files.clean_stale_temps removes on the next start (it could not parse the lease token here)
    tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    with open(tmp, "w") as f:
        json.dump(lease, f)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def is_stale(lease: dict, now: Optional[float] = None) -> bool:
    """Expired, or held by a process of this host that no longer exists."""
    now = time.time() if now is None else now
    if float(lease.get("expires", 0.0)) <= now:
        return True
    return lease.get("host") == HOST and isinstance(lease.get("pid"), int) and not pid_alive(lease["pid"])


LOCK_STALE_S = 10.0  # a key's lock is held for microseconds; one this old was left by a dead process


@contextlib.contextmanager
def _key_lock(path: Path):
    """Exclusive, short critical section on one lease (`<lease>.lock`, created with O_EXCL): every
    read-check-write of the lease (acquire, take-over, renew, release) happens inside it, so two
    contenders can never both decide that a stale lease is theirs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.parent / (path.name + ".lock")
    while True:
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            break
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                if time.time() - lock.stat().st_mtime > LOCK_STALE_S:
                    os.unlink(lock)
                    continue
            time.sleep(0.001)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)


def _write(path: Path, owner: dict, ttl: float) -> None:
    os.replace(_write_tmp(path, dict(owner, expires=time.time() + ttl, ttl=ttl)), path)


def try_acquire(path: Path, owner: dict, ttl: float) -> bool:
    """Create the lease at `path` for `owner`, or take over a stale one; False if a live owner holds it."""
    path = Path(path)
    with _key_lock(path):
        held = read_lease(path)
        if held is not None and not is_stale(held):
            return False
        _write(path, owner, ttl)
        return True


def renew(path: Path, owner: dict, ttl: float) -> bool:
    """Push the expiry of our lease forward (atomic replace); False if it is no longer ours."""
    path = Path(path)
    with _key_lock(path):
        held = read_lease(path)
        if held is None or held.get("token") != owner["token"]:
            return False
        _write(path, owner, ttl)
        return True


def release(path: Path, owner: dict) -> None:
    """Remove the lease if it is still ours."""
    path = Path(path)
    with _key_lock(path):
        held = read_lease(path)
        if held is not None and held.get("token") == owner["token"]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


@dataclass
class Claim:
    """Leases on several keys, held together, renewed by a heartbeat thread until released."""

    root: Path
    keys: list
    ttl: float = DEFAULT_TTL
    owner: dict = field(default_factory=new_owner)
    lost: bool = False
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: Optional[threading.Thread] = field(default=None, repr=False)

    @property
    def paths(self) -> list[Path]:
        return [lease_path(self.root, k) for k in sorted(set(self.keys))]

    def try_acquire_all(self) -> bool:
        """All leases or none (sorted order; on a held key, the ones taken are given back)."""
        got = []
        for p in self.paths:
            if not try_acquire(p, self.owner, self.ttl):
                for q in got:
                    release(q, self.owner)
                return False
            got.append(p)
        return True

    def start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="fedpaper-lease-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            for p in self.paths:
                if not renew(p, self.owner, self.ttl):
                    self.lost = True

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for p in self.paths:
            release(p, self.owner)


@contextlib.contextmanager
def claim_keys(root, keys: Iterable[str], *, ttl: float = DEFAULT_TTL, wait: float = float("inf"),
               poll: float = 0.5):
    """Hold leases on every key for the duration of the block (waiting up to `wait` seconds while
    live owners hold some); renewed every ttl/3, released on exit (also on error)."""
    claim = Claim(Path(root), list(keys), ttl)
    deadline = time.monotonic() + wait
    while not claim.try_acquire_all():
        if time.monotonic() >= deadline:
            raise LeaseTimeout(f"keys still claimed by another worker after {wait:.0f} s under {root}")
        time.sleep(poll)
    claim.start_heartbeat()
    try:
        yield claim
    finally:
        claim.release()


def claim_free(root, keys: Iterable[str], *, ttl: float = DEFAULT_TTL, owner: Optional[dict] = None) -> Claim:
    """Claim every key of `keys` that no live owner holds, without waiting; the returned Claim
    (its `.keys`: the keys taken) is renewed by its heartbeat until `.release()`. Used by the local
    path (executors.run_specs) so that two processes on one store each train a run once."""
    claim = Claim(Path(root), [], ttl, owner or new_owner())
    for k in sorted(set(keys)):
        if try_acquire(lease_path(root, k), claim.owner, ttl):
            claim.keys.append(k)
    if claim.keys:
        claim.start_heartbeat()
    return claim


def holder(root, key: str) -> Optional[dict]:
    """The live lease on `key` (owner, host, pid, expires), or None when it is free or stale."""
    held = read_lease(lease_path(root, key))
    return None if held is None or is_stale(held) else held
