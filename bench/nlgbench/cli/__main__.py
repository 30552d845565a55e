"""`python -m nlgbench.cli ...`, the same as the `nlgbench` command."""

from __future__ import annotations

import sys

from nlgbench.cli import main

sys.exit(main())
