"""The encoder label of a run that a name given on the command line means (`compare --candidate`,
`--baseline`, `report --baseline`): the label itself, the same model under another spelling, or the
name report and compare show for it (`all-MiniLM-L6-v2 L3`, a `labels:` map's or `--label`'s name)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nlgbench.core.labels import DEFAULT_NAMES, Names, seen_as
from nlgbench.encoders.registry import is_path_name, model_label, registered_name


def find_encoder_label(name: str, labels: Sequence[str], names: Names = DEFAULT_NAMES) -> str | None:
    """The encoder label among `labels` that `name` names: itself, or the same model under its other
    spelling (a registered Hub id for its registry name and back, `sentence-transformers/all-MiniLM-L6-v2`
    = `all-MiniLM-L6-v2`; a local folder's path for its label, the folder's name), a variant suffix
    (`[num_layers=3]`) kept, or the one label shown under `name` (`names`: what compare prints, so a
    name copied from its output finds its cells); None when none matches."""
    if name in labels:
        return name
    base, bracket, rest = name.partition("[")
    wanted = registered_name(base)
    folder = model_label(base, local=True) if is_path_name(base) or Path(base).expanduser().is_dir() else None
    for label in labels:
        other, other_bracket, other_rest = label.partition("[")
        if other_bracket + other_rest == bracket + rest and (registered_name(other) == wanted or other == folder):
            return label
    shown = [label for label in labels if seen_as(names(label)) == seen_as(name)]
    return shown[0] if len(shown) == 1 else None
