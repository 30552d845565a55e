"""MkDocs hook: the CLI reference page from the `nlgbench` argparse parser itself, at build time.

The page `reference/cli.md` holds the marker `<!-- nlgbench-cli -->`; this hook replaces it with the
`--help` text of `nlgbench` and of every command and subcommand (`nlgbench.cli.parser.build_parser`),
so the page never drifts from the parser. The width is fixed (WIDTH columns, no colour), so the page is
the same on every machine. The checkout's `bench/` goes first on `sys.path`: the page documents the
code beside it, not an installed copy.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PAGE = "reference/cli.md"
MARKER = "<!-- nlgbench-cli -->"
WIDTH = 76  # columns of the help text (argparse reads $COLUMNS): about what a code block of the page shows
REPO = Path(__file__).resolve().parents[2]


def commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """The parser, then each command and subcommand, depth first, in the order they were added."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from commands(child)


def help_text(parser: argparse.ArgumentParser) -> str:
    """`format_help()` at WIDTH columns without colour, whatever the terminal running the build."""
    saved = {key: os.environ.get(key) for key in ("COLUMNS", "NO_COLOR")}
    os.environ.update(COLUMNS=str(WIDTH), NO_COLOR="1")
    try:
        return parser.format_help().rstrip()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def reference() -> str:
    """The Markdown of every command's help: a heading (`## nlgbench run`) and its text."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from nlgbench.cli.parser import build_parser
    finally:
        sys.path.remove(str(REPO / "bench"))
    sections = []
    for prog, parser in commands(build_parser()):
        level = "##" if prog.count(" ") < 2 else "###"  # nlgbench and its commands h2, subcommands h3
        sections.append(f"{level} `{prog}`\n\n```text\n{help_text(parser)}\n```\n")
    return "\n".join(sections)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace the marker of the CLI page with the generated reference (other pages unchanged)."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its marker {MARKER}")
    return markdown.replace(MARKER, reference())
