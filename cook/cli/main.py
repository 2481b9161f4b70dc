"""``cook`` command line: ``main(argv) -> exit code``. The only place that prints results or picks exit codes.

Exit codes: 0 done; 1 a bug (with its traceback) or a failed job (or an invalid dataset for
``validate``); 2 bad config or usage, with one line saying what is wrong; 130 interrupted (Ctrl-C):
one line, no traceback, after the run has closed its executor (``cook run`` resumes on a rerun).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from cook import __version__
from cook.errors import ConfigError, interrupts_held

INTERRUPTED = "interrupted: rerun the same command to resume"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"usage: {message}")


def build_parser() -> argparse.ArgumentParser:
    from cook.cli import blend_cmd, inspect_cmd, repack_cmd, run_cmd, stats_cmd, validate_cmd

    parser = _Parser(prog="cook", description="Cook raw multimodal conversations into packed Energon shards.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for module in (run_cmd, validate_cmd, inspect_cmd, stats_cmd, repack_cmd, blend_cmd):
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    command = None
    try:
        # the commands' modules import numpy and other native extensions: an interrupt inside a C
        # extension's start-up can surface as an ImportError (exit 1); held, it arrives after, as
        # KeyboardInterrupt (exit 130)
        with interrupts_held():
            parser = build_parser()
        args = parser.parse_args(argv)
        command = args.command
        if args.version:
            print(f"cook {__version__}")
            return 0
        if command is None:
            raise ConfigError("usage: give a command: run, validate, inspect, stats, repack or blend (cook --help)")
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except ConfigError as err:
        print(f"cook: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the handlers' ``finally`` blocks have run: executor, Ray and lock closed
        print(INTERRUPTED if command in ("run", "repack") else "interrupted", file=sys.stderr)
        return 130


# One BLAS/OpenMP thread per process, set before numpy loads: cook's parallelism is its workers
# (Ray sets the same for actors); a BLAS pool per process only contends with them.
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def entrypoint() -> None:
    for name in THREAD_ENV:
        os.environ.setdefault(name, "1")
    sys.exit(main())


if __name__ == "__main__":
    entrypoint()
