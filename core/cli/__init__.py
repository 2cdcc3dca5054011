"""Stage 7, the command line (``ropekit``): argument parsing, exit codes and printing. Every
command imports the stage it needs on first use, so ``ropekit --help`` stays cheap."""

from .main import main, run

__all__ = ["main", "run"]
