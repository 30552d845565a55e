"""A WMT DA segment-level folder like ``DAseg-wmt16``: per language pair four parallel line files,
line i of each one item."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from nlgbench.data.importers.output import ImportSummary, Record, write_items
from nlgbench.data.text import parse_score
from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.foundations.files import read_lines

#: The fields of a DA file name ``DAseg.<testset>.<field>.<lp>`` and the item field each fills.
DA_FIELDS = {"source": "source", "reference": "references", "mt-system": "hypothesis", "human": "human"}
_DA_NAME = re.compile(r"^DAseg\.(?P<testset>.+)\.(?P<field>source|reference|mt-system|human)\.(?P<lp>[^.]+)$")


def wmt_da_records(src: str | os.PathLike[str], *, lps: Sequence[str] | None = None) -> list[Record]:
    """Items of a WMT DA segment-level folder: per language pair the four parallel line files
    ``DAseg.<testset>.{source,reference,mt-system,human}.<lp>``; line i of each is one item.

    seg_id = the 1-based line number, system = "" (DA files name no systems), human = the number
    on the line (WMT15/16: z-scored DA averaged per segment). `lps` keeps only those pairs.
    Items come sorted by language pair, then line.
    """
    folder = Path(src)
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder (expected a WMT DA folder of DAseg.<testset>.<field>.<lp> files)")
    found: dict[str, dict[str, Path]] = {}  # lp -> field -> file
    testsets: set[str] = set()
    for path in sorted(folder.iterdir()):
        match = _DA_NAME.match(path.name)
        if match and path.is_file():
            testsets.add(match["testset"])
            found.setdefault(match["lp"], {})[match["field"]] = path
    if not found:
        raise UserError(f"{folder}: no DAseg.<testset>.{{source,reference,mt-system,human}}.<lp> files")
    if len(testsets) > 1:
        raise UserError(f"{folder}: files of several test sets ({', '.join(sorted(testsets))}); keep one per folder")
    wanted = sorted(found) if not lps else sorted(set(lps))
    for lp in wanted:
        if lp not in found:
            raise unknown_name("language pair", lp, found)
    testset = next(iter(testsets))
    records: list[Record] = []
    for lp in wanted:
        files = found[lp]
        absent = [f"DAseg.{testset}.{fld}.{lp}" for fld in DA_FIELDS if fld not in files]
        if absent:
            raise UserError(f"{folder}: language pair {lp} lacks {', '.join(absent)}")
        columns = {fld: read_lines(files[fld]) for fld in DA_FIELDS}
        counts = {fld: len(lines) for fld, lines in columns.items()}
        fewest = min(counts, key=lambda fld: counts[fld])
        most = max(counts, key=lambda fld: counts[fld])
        if counts[fewest] != counts[most]:
            raise UserError(
                f"{files[most]} line {counts[fewest] + 1}: no matching line in {files[fewest].name} "
                f"({counts[most]} lines vs {counts[fewest]})"
            )
        for i in range(counts["human"]):
            where = f"{files['human']} line {i + 1}"
            records.append(
                {
                    "lp": lp,
                    "seg_id": i + 1,
                    "system": "",
                    "source": columns["source"][i],
                    "references": [columns["reference"][i]],
                    "hypothesis": columns["mt-system"][i],
                    "human": parse_score(columns["human"][i], where),
                }
            )
    return records


def import_wmt_da(
    src: str | os.PathLike[str], out: str | os.PathLike[str], *, lps: Sequence[str] | None = None
) -> ImportSummary:
    """Import the WMT DA folder `src` into the JSONL file `out` (see :func:`wmt_da_records`)."""
    return write_items(wmt_da_records(src, lps=lps), out, src=src)
