"""fedpaper's papermill engine: a notebook that stops on a fedpaper error prints one line, no traceback.

    papermill --engine fedpaper -k python3 notebooks/fedpals/fig9.ipynb out.ipynb -p profile nonsense
    -> ERROR: unknown profile 'nonsense'; choose one of smoke, quick, long, paper (notebooks/fedpals/fig9.ipynb, In [3]; executed copy: out.ipynb)
       exit code 2

A notebook shows a `fedpaper.ground.errors.FedpaperError` (bad parameters, missing data) as one line
`ERROR: ...` (fedpaper.notebook.one_line_errors), but the `papermill` command prints its own
traceback of PapermillExecutionError first. Registered under papermill's `papermill.engine` entry
point (pyproject.toml), this engine runs notebooks as papermill's default engine (nbclient) does,
with fedpaper's kernel (fedpaper.kernel: it dies with the command), and then, under the `papermill`
command only, when the error that stopped the notebook is such a one-line error:

- prints that line to stderr, naming the notebook, the cell and the executed copy;
- writes the executed copy as papermill does (with its error markers; papermill's own
  `raise_for_execution_errors`);
- exits with code 2 for bad input (fedpaper.ground.errors.BAD_INPUT_ERRORS) and 1 for any other
  FedpaperError, through click's `Exit` (papermill's command is a click command).

Any other error (a bug) is left to papermill: its traceback is what a developer needs. So is an
executed copy written to stdout (`papermill in.ipynb -`): the line is printed first, then papermill
goes on as usual. Called through papermill's Python API (`execute_notebook(...,
engine_name="fedpaper")`) the engine behaves as nbclient: the caller gets PapermillExecutionError
(`fedpaper reproduce` turns it into its own line per failed notebook).
"""
from __future__ import annotations

import sys
from functools import lru_cache


def __getattr__(name):
    """`FedpaperEngine`, built on first use (PEP 562). papermill imports every registered engine when
    papermill.engines is imported, and this module imports papermill: a module-level class would make
    `import fedpaper.papermill_engine` (before papermill) fail on a partially initialised module."""
    if name == "FedpaperEngine":
        return _engine_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



def one_line(error: PapermillExecutionError) -> str | None:
    """`ERROR: <message>` when the notebook stopped on a one-line fedpaper error (the only line of
    its traceback, as fedpaper.notebook shows it), else None."""
    tb = [strip_color(line) for line in error.traceback or []]
    return tb[0] if len(tb) == 1 and tb[0].startswith("ERROR: ") else None


def notebook_error(nb) -> PapermillExecutionError | None:
    """The error papermill raises for this executed notebook (its own check, on a copy), or None."""
    import copy

    from papermill.execute import raise_for_execution_errors

    try:
        raise_for_execution_errors(copy.deepcopy(nb), None)  # None: papermill writes nothing
    except PapermillExecutionError as e:
        return e
    return None


def _under_papermill_command() -> bool:
    """True inside the `papermill` command (its click context), False through the Python API."""
    cli = sys.modules.get("papermill.cli")
    if cli is None:
        return False
    import click

    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.command is cli.papermill


@lru_cache(maxsize=None)
def _engine_class():
    """The engine class (one per process; see __getattr__)."""
    from papermill.engines import NBClientEngine

    class FedpaperEngine(NBClientEngine):
        """nbclient with fedpaper's kernel, and one-line errors under the `papermill` command (module docstring)."""

        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
            from fedpaper.kernel import kernel_manager_class  # at use, not load time: papermill imports this module as an engine entry point

            kwargs.setdefault("kernel_manager_class", kernel_manager_class())
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

        @classmethod
        def execute_notebook(cls, nb, kernel_name, **kwargs):
            nb = super().execute_notebook(nb, kernel_name, **kwargs)
            error = notebook_error(nb) if _under_papermill_command() else None
            line = None if error is None else one_line(error)
            if line is None:
                return nb  # papermill goes on as usual
            from papermill.execute import raise_for_execution_errors

            output_path = kwargs.get("output_path")
            where = f"{kwargs.get('input_path') or 'notebook'}, In [{error.exec_count}]"
            print(f"{line} ({where}" + (f"; executed copy: {output_path})" if output_path else ")"),
                  file=sys.stderr, flush=True)
            if output_path is None:  # saved only at the end (e.g. to stdout): papermill writes it, then raises
                return nb
            try:
                raise_for_execution_errors(nb, output_path)  # writes the executed copy with papermill's markers
            except PapermillExecutionError:
                pass
            import click

            from fedpaper.ground.errors import BAD_INPUT_ERRORS  # at use, not load time (see the imports above)

            raise click.exceptions.Exit(2 if error.ename in BAD_INPUT_ERRORS else 1)

    return FedpaperEngine


# Last, after every definition: importing papermill imports this module back through its engine entry
# point (see __getattr__). Nothing of fedpaper is imported at load time: papermill loads this module in
# every process of the environment that imports it, another fedpaper checkout on PYTHONPATH (a frozen
# worktree resuming a sweep) included; see the function-local import above.
from papermill.exceptions import PapermillExecutionError, strip_color  # noqa: E402
