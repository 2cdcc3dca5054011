"""``python -m ropekit``."""

from .cli.main import run

run()
