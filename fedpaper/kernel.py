"""The notebook kernel `fedpaper reproduce` starts: ipykernel that dies with the command.

jupyter_client starts a kernel in its own session, so `kill -9` of the command's process group
leaves it running; ipykernel polls its parent only once a second. Here the kernel

- asks Linux to SIGKILL it the moment the thread that started it ends (prctl PR_SET_PDEATHSIG),
  when the command says that thread is its main thread (FEDPAPER_KERNEL_PDEATHSIG=1), and
- runs a watchdog thread that ends the process within 0.1 s once its parent process is gone
  (any POSIX system; a reparented process sees a new parent pid),

and it does not log ipykernel's "running over TCP without encryption" warning (the kernel only
listens on 127.0.0.1 and is driven by the command that started it), nor the "KeyboardInterrupt
caught in kernel" line of every shutdown.

    python <path>/fedpaper/kernel.py -f <connection file>   (what the kernel manager below runs; by
                                                             path, so any PYTHONPATH works)
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

PARENT_ENV = "JPY_PARENT_PID"  # set by jupyter_client to the pid that launched the kernel
PDEATHSIG_ENV = "FEDPAPER_KERNEL_PDEATHSIG"
_PR_SET_PDEATHSIG = 1


def _set_pdeathsig() -> bool:
    """prctl(PR_SET_PDEATHSIG, SIGKILL); False where unavailable (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int, period: float = 0.1) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(period)


def die_with_parent() -> None:
    """End this process when the process that launched it ends (see the module docstring)."""
    parent = int(os.environ.get(PARENT_ENV) or 0) or os.getppid()
    if os.environ.get(PDEATHSIG_ENV) == "1":
        _set_pdeathsig()
    if os.getppid() != parent:  # it died before we got here
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="fedpaper-parent-watchdog",
                     daemon=True).start()


class _QuietKernelLog(logging.Filter):
    """Drop the TCP warning, the error line ipykernel logs when jupyter_client interrupts it as
    the first step of every shutdown (Ctrl-C of the command never reaches the kernel's session), and
    the traceback of a reply sent after the command closed its sockets."""

    NOISE = ("without encryption", "KeyboardInterrupt caught in kernel")

    def filter(self, record):
        msg = record.getMessage()
        if any(n in msg for n in self.NOISE):
            return False
        # a zmq error sending a reply on a socket the command already closed (it was interrupted or killed): the
        # command has gone, nobody can read the reply, and the traceback would be noise on its console
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__module__.startswith("zmq"))


def main() -> None:
    die_with_parent()
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and sys.path[0] in ("", os.getcwd(), here):  # run as a script: not fedpaper/ itself
        del sys.path[0]
    from ipykernel import kernelapp

    app = kernelapp.IPKernelApp.instance()
    app.log.addFilter(_QuietKernelLog())
    app.initialize()
    app.start()


# --------------------------------------------------------------------------------------------
# The command's side: a kernel manager that starts this module instead of ipykernel_launcher.

def kernel_manager_class():
    """An AsyncKernelManager whose kernel command runs this file instead of `-m ipykernel_launcher`."""
    from jupyter_client import AsyncKernelManager

    class FedpaperKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            cmd = super().format_kernel_cmd(extra_arguments)
            for i in range(len(cmd) - 1):
                if cmd[i] == "-m" and cmd[i + 1] == "ipykernel_launcher":
                    return cmd[:i] + [os.path.abspath(__file__)] + cmd[i + 2:]
            return cmd  # another kernel command: left alone

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            # PR_SET_PDEATHSIG fires when the launching *thread* ends: only ask for it when the
            # kernel is started from the main thread, which lives as long as the command.
            main = threading.current_thread() is threading.main_thread()
            env = dict(kw.get("env") or os.environ)
            env[PDEATHSIG_ENV] = "1" if main else "0"
            kw["env"] = env
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return FedpaperKernelManager


if __name__ == "__main__":
    main()
