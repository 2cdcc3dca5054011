"""The ``ropekit`` command line (also ``python -m ropekit``).

Exit status: 0 success; 1 ``check-plugin`` found failing checks or ``audit`` a mismatch; 2 invalid input (bad config,
unknown rope_type, bad arguments), with one line on stderr naming the key or type; 3 an installed
plugin is at fault (the line names its distribution). No traceback is printed for either.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from ..errors import (
    ArgumentError,
    ConfigSourceError,
    MissingDependencyError,
    PluginError,
    RopeConfigError,
    RopekitError,
)
from .output import EXIT_INPUT, EXIT_PLUGIN, OUT, encodable, one_line, report_error
from .parser import build_parser

__all__ = ["main", "run"]

_FLAGS = {"served": "--served", "sin": "--sin", "layer_type": "--layer-type", "layout": "--layout",
          "positions": "--positions", "seq_len": "--seq-len", "dtype": "--dtype", "directory": "--out",
          "rtol": "--rtol", "n_ctx": "--n-ctx", "paths": "PATH", "supports": "--supports",
          "path": "--output", "config": "CONFIG", "name": "NAME", "out": "--out"}
"""Library argument names, as the command line spells them."""


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    print(encodable(f"ropekit: warning: {one_line(str(message))}", sys.stderr), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (argparse's usage errors, ``--help`` and ``--version`` exit
    through :class:`SystemExit`, status 2 for an error)."""
    words = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in words  # anywhere: an error exit also prints its JSON object on stdout
    args = build_parser(words).parse_args(words)
    OUT.append(sys.stdout)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("default")  # the CLI reports warnings; it never turns them into errors
            warnings.showwarning = _show_warning  # one line per warning, no source excerpt
            status = args.handler(args)
    except RopeConfigError as error:
        key = error.path or (_file(args) if isinstance(error, ConfigSourceError) else None)
        return report_error(str(error), key, EXIT_INPUT, as_json=as_json)
    except ArgumentError as error:
        flag = _FLAGS.get(error.argument, error.argument)
        return report_error(f"{flag}: {error.problem}", flag, EXIT_INPUT, as_json=as_json)
    except PluginError as error:
        return report_error(str(error), None, EXIT_PLUGIN, as_json=as_json, label="plugin error")
    except MissingDependencyError as error:
        return report_error(str(error), None, EXIT_INPUT, as_json=as_json)
    except RopekitError as error:  # pragma: no cover - every subclass is handled above
        return report_error(str(error), None, EXIT_INPUT, as_json=as_json)
    except BrokenPipeError:
        return 0
    finally:
        OUT.pop()
    return int(status or 0)


def _file(args: argparse.Namespace) -> str | None:
    """The config file a command was given (or found), which a :class:`ConfigSourceError` is about."""
    config = getattr(args, "config", None)
    return config if isinstance(config, str) else None


def run() -> NoReturn:
    """The ``ropekit`` command and ``python -m ropekit``: run :func:`main`, then exit with its status.

    The process ends right after, so the objects it made are moved out of the collector's reach first
    (:func:`gc.freeze`). The interpreter's shutdown collection then skips them: that collection walks every
    object the imports made (numpy's included) and is about a tenth of a short command's wall time. Nothing
    is lost: buffered streams are flushed and ``atexit`` handlers run as before. :func:`main` itself leaves
    the collector alone, for callers that go on running.
    """
    status = main()
    gc.freeze()
    sys.exit(status)
