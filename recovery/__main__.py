"""``python -m recovery``: the same tool as the ``ackstore`` console script."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
