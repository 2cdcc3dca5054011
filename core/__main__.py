"""``python -m ropekit``."""

import sys

from .cli.main import main

sys.exit(main())
