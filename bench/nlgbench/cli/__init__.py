"""The `nlgbench` command line, the top layer: it may import every layer. `parser` builds the argparse
of every command; each command runs in a module of its own, named in COMMANDS and imported only after
parsing, so `nlgbench --help` loads no command's dependencies. Bad input: one line on stderr (a line
per error where a spec has several) and exit code 2.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from nlgbench.cli.parser import build_parser
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import write_fault

#: The one lazy door of the command line: command (its words; `list WHAT` one per listing) -> "module:function".
COMMANDS = {
    "example": "nlgbench.cli.example:cmd_example",
    "run": "nlgbench.cli.run:cmd_run",
    "status": "nlgbench.cli.run:cmd_status",
    "collect": "nlgbench.cli.run:cmd_collect",
    "score": "nlgbench.cli.score:cmd_score",
    "baseline": "nlgbench.cli.baseline:cmd_baseline",
    "list encoders": "nlgbench.cli.listing:cmd_list_encoders",
    "list metrics": "nlgbench.cli.listing:cmd_list_metrics",
    "list datasets": "nlgbench.cli.listing:cmd_list_datasets",
    "list aligners": "nlgbench.cli.aligners:cmd_list_aligners",
    "models import": "nlgbench.cli.assets:cmd_models_import",
    "datasets fetch": "nlgbench.cli.assets:cmd_datasets_fetch",
    "datasets import": "nlgbench.cli.assets:cmd_import",
    "distill": "nlgbench.cli.distill:cmd_distill",
    "report": "nlgbench.cli.report:cmd_report",
    "compare": "nlgbench.cli.report:cmd_compare",
    "import-scores": "nlgbench.cli.runs:cmd_import_scores",
    "repair": "nlgbench.cli.runs:cmd_repair",
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)  # a value that is `--` or blank: a UserError (argparse's own: exit 2)
        module, _, function = COMMANDS[args.handler].partition(":")
        return int(getattr(importlib.import_module(module), function)(args))
    except UserError as exc:  # several errors (a spec's, found in one pass): a line each
        for line in str(exc).splitlines() or [""]:
            print(f"nlgbench: error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `nlgbench list encoders | head`: the reader left; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # the file system refused a write (disk full, read-only): one line too
        fault = write_fault(exc)
        if fault is None:
            raise
        print(f"nlgbench: error: {fault}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nlgbench: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
