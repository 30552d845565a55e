"""`nlgbench example [NAME] [--out FILE]`: the example sweep specs the package carries (the repository's
examples/, one copy: bench/nlgbench/examples links to it), listed or printed, so that a user who installed
the wheel can start with `nlgbench example quickstart > q.yaml && nlgbench run q.yaml`."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.foundations.files import read_text, write_output
from nlgbench.foundations.lazyregistry import load_yaml
from nlgbench.foundations.package import package_file

FIRST = "quickstart"  # listed first: the spec to start with
SUMMARY_CHARS = 100  # of a spec's opening comment in the listing, on a terminal
MIN_SUMMARY_CHARS = 20  # a narrow terminal still shows this much of it
RELATIVE = ("./", "../")  # a string value starting so is a path relative to the spec's own folder


def example_files() -> dict[str, Path]:
    """The bundled example specs by name (the file name without `.yaml`), quickstart first, then by name."""
    files = sorted(package_file("examples").glob("*.yaml"), key=lambda p: (p.stem != FIRST, p.stem))
    if not files:
        raise UserError(f"no example specs in {package_file('examples')}: the installed package is incomplete")
    return {p.stem: p for p in files}


def summary_line(text: str, limit: int | None = SUMMARY_CHARS) -> str:
    """A spec's opening comment up to the end of its first line that ends a sentence (what it runs),
    without the `#`s, cut to `limit` characters with "..." (None: whole); empty where the spec opens
    with no comment."""
    words: list[str] = []
    for line in text.lstrip().splitlines():
        if not line.startswith("#"):
            break
        words += line.lstrip("#").split()
        if words and words[-1].endswith((".", ":")):
            break
    summary = " ".join(words).rstrip(".:")
    return summary if limit is None or len(summary) <= limit else summary[: limit - 3].rstrip() + "..."


def summary_limit(name_width: int) -> int | None:
    """How long a listed summary may be: on a terminal, what fits its width beside the names (at most
    SUMMARY_CHARS); piped or redirected, no limit, so a script or a file gets whole sentences."""
    if not sys.stdout.isatty():
        return None
    columns = shutil.get_terminal_size().columns
    return max(MIN_SUMMARY_CHARS, min(SUMMARY_CHARS, columns - name_width - 2))


def relative_paths(text: str) -> list[str]:
    """The paths a spec names relative to its own folder (own data files, student folders), in order: they
    hold beside the repository's examples/, not beside a copy written elsewhere."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str) and node.startswith(RELATIVE) and node not in found:
            found.append(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(load_yaml(text))
    return found


def cmd_example(args: argparse.Namespace) -> int:
    files = example_files()
    if args.name is None:
        if args.out:
            raise UserError("--out needs an example NAME (nlgbench example quickstart --out q.yaml)")
        width = max(len(name) for name in files)
        limit = summary_limit(width)
        for name, path in files.items():
            print(f"{name:<{width}}  {summary_line(read_text(path), limit)}".rstrip())
        return 0
    if args.name not in files:
        raise unknown_name("example", args.name, files)
    text = read_text(files[args.name])
    if args.out:
        write_output(Path(args.out), text, "--out", new_only=True)
        print(f"wrote the example {args.name} into {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    paths = relative_paths(text)
    if paths:
        print(
            f"nlgbench: note: {args.name} names {', '.join(paths)} relative to the spec's own folder, as laid out "
            "in the nlgbench repository (see the spec's comments); point them at your own files before running it",
            file=sys.stderr,
        )
    return 0
