"""Values of command-line options: the parser every command's is made of (`Parser`: each value a string, never
`--` or blank), and the values read as YAML: `KEY=VALUE` options and encoder variants (`nlgbench.cli.parser` and
`nlgbench.cli.distill_parser` use them)."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from nlgbench.foundations.errors import UserError
from nlgbench.foundations.lazyregistry import load_yaml, yaml_problem


class Parser(argparse.ArgumentParser):
    """argparse's parser, every value checked before its `type=` reads it. Python 3.11's argparse drops a `--`
    given as an option's value (`-c=--`, `--encoder=--`, `-c--`) and hands the command an empty list (a
    TypeError later, or silently the default encoder); a blank value (`--encoder=`, `--idf-sents=`)
    silently meant the default too. Both are one line (a UserError, which `nlgbench.cli.main` prints, exit 2).
    Subcommands' parsers are made of this class too (argparse's `add_subparsers` takes the parent's class).
    No abbreviations: `--idf` must not silently mean `--idf-sents`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        if action.nargs not in (argparse.PARSER, argparse.REMAINDER):  # a subcommand's words: its parser checks
            name = "/".join(action.option_strings) or action.dest
            if action.option_strings and "--" in arg_strings:  # only as an `=` value: a lone `--` ends the options
                raise UserError(f"argument {name}: got '--' as a value, which marks the end of the options")
            if any(not value.strip() for value in arg_strings if value != "--"):
                raise UserError(f"argument {name}: the value is empty; give one")
        return super()._get_values(action, arg_strings)


class Spelling(argparse.Action):
    """Another tool's option (bert-score's CLI: `--model`, `--idf`, ...) answered with nlgbench's spelling."""

    def __init__(self, option_strings: list[str], dest: str, spelling: str = "", **kwargs: Any) -> None:
        self.spelling = spelling
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        raise UserError(f"{option} is bert-score's spelling; nlgbench score takes {self.spelling}")


def key_value(raw: str, option: str) -> tuple[str, Any]:
    """One `KEY=VALUE` of a repeated option (`score --option`, `distill --teacher-options`): the key
    (spaces around it removed) and the value read as YAML (`idf=true` -> True, `layer=9` -> 9)."""
    key, sep, value = raw.partition("=")
    if not sep or not key.strip():
        raise UserError(f"{option} takes KEY=VALUE, got {raw!r}")
    try:
        return key.strip(), load_yaml(value)
    except yaml.YAMLError as exc:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise UserError(f"{option} {key}: cannot read the value {shown!r}{yaml_problem(exc)}") from None


def encoder_value(raw: str) -> str | dict[str, Any]:
    """An encoder option's value: a name, or (starting with `{`) a variant as a YAML mapping."""
    try:
        value = load_yaml(raw) if raw.lstrip().startswith("{") else raw
    except yaml.YAMLError as exc:
        shown = raw if len(raw) <= 60 else raw[:57] + "..."
        raise argparse.ArgumentTypeError(f"cannot read the encoder mapping {shown!r}{yaml_problem(exc)}") from None
    if not isinstance(value, (str, dict)):
        raise argparse.ArgumentTypeError(f"cannot read the encoder mapping {raw!r} as a YAML mapping")
    return value
