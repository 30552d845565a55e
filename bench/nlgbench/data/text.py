"""Text parsing shared by the data loaders, the importers and the result readers: JSONL objects (no
repeated keys), verbatim TSV tables and quoted CSV tables (every row with the header's field count:
`checked_table`), seg_ids as written (`seg_id_values`), scores as plain decimal numbers within bounds
(`parse_score`). JSONL and TSV lines are split by `nlgbench.foundations.files.split_lines` ('\\n' only)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from nlgbench.data.items import SegId
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import split_lines


def plain_int(text: str) -> int | None:
    """The integer `text` writes in plain form (ASCII digits, a '-' at most, no leading zeros), else None:
    int() would also read "007", "+5", "1_0", " 7" and "٧" (an Arabic-Indic digit), which are other ids."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if str(value) == text else None


#: The integers a seg_id may be: SQLite's (the run store's) 64-bit signed range.
SEG_ID_INT_RANGE = (-(2**63), 2**63 - 1)


def seg_id_values(texts: Sequence[str]) -> list[SegId]:
    """seg_ids of one file (data, scores.csv) as written: integers if every one is a plain integer
    (`plain_int`) within 64 bits (`SEG_ID_INT_RANGE`: the store keeps no larger integer), else every
    one the text it is, so no two ids become one and none is lost."""
    low, high = SEG_ID_INT_RANGE
    ints = [plain_int(text) for text in texts]
    if all(value is not None and low <= value <= high for value in ints):
        return [value for value in ints if value is not None]
    return list(texts)


def json_object(line: str, where: str) -> dict[str, Any]:
    """The JSON object on one JSONL line; a key repeated at any depth is refused (json.loads would
    silently keep the last one), as are invalid JSON and anything but an object."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                raise UserError(f"{where}: duplicate key {key!r}")
            obj[key] = value
        return obj

    try:
        value = json.loads(line, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def jsonl_records(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, object) per non-blank JSONL line."""
    for number, line in enumerate(split_lines(text), start=1):
        if line.strip():
            where = f"{path} line {number}"
            yield where, json_object(line, where)


def tsv_table(path: Path, text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header (names stripped) and the (line number, fields) rows of a tab-separated text.

    The one TSV rule of the loader and the table importer: no quoting, so every field is verbatim
    (a `"` is a character like any other); lines end at '\n' or '\r\n' only (`split_lines`; a
    U+2028 or form feed is text); blank lines are skipped. The header and row checks are
    `checked_table`'s."""
    numbered = [(n, line.split("\t")) for n, line in enumerate(split_lines(text), start=1) if line.strip()]
    return checked_table(path, numbered, "tab-separated")


def csv_table(path: Path, text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header (names stripped) and the (line number, fields) rows of a comma-separated text.

    The one CSV rule of import-scores and the table importer: CSV quoting, strictly (a quote left
    open or text after a closing quote is refused, not read as some other row); a quoted field may
    hold a comma or a line break, and its row is numbered by the line it starts on; records end at
    a line break outside quotes ('\n', '\r\n' or '\r', not U+2028); blank lines are skipped. The
    header and row checks are `checked_table`'s."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    numbered: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for fields in reader:
            if len(fields) > 1 or (fields and fields[0].strip()):
                numbered.append((start, fields))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise UserError(f"{path} line {start}: not readable as CSV ({exc})") from None
    return checked_table(path, numbered, "comma-separated")


def checked_table(
    path: Path, numbered: Sequence[tuple[int, list[str]]], kind: str
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header (the first row, names stripped) and the other rows of a delimited table, every
    row with exactly the header's field count: a row with a field more (a decimal comma, `1,5`) or
    one fewer would be read half, its fields under the wrong columns or one of them dropped. An
    empty table, a repeated column name or such a row is refused, naming the line."""
    if not numbered:
        raise UserError(f"{path} is empty (expected a header row)")
    header = [name.strip() for name in numbered[0][1]]
    duplicated = sorted({name for name in header if header.count(name) > 1})
    if duplicated:
        raise UserError(f"{path}: duplicate column(s) {', '.join(duplicated)} in the header row")
    for number, fields in numbered[1:]:
        if len(fields) != len(header):
            raise UserError(f"{path} line {number}: {len(fields)} {kind} fields, header has {len(header)}")
    return header, list(numbered[1:])


# A number as data files write one: ASCII digits, a point, an exponent. float() also reads "1_5" (as 15),
# other scripts' digits ("٣"), "nan" and "inf", which no score file means.
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
NOT_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
# No metric or human score comes near this; past it the correlations' sums of squares overflow float64.
MAX_SCORE = 1e100


def parse_score(value: str, where: str, what: str = "human score") -> float:
    """A plain decimal number (`PLAIN_NUMBER`) within ±MAX_SCORE, or a UserError naming the location."""
    text = value.strip()
    if NOT_FINITE.fullmatch(text):
        raise UserError(f"{where}: {what} {value!r} is not a finite number")
    if not PLAIN_NUMBER.fullmatch(text):
        raise UserError(f"{where}: {what} {value!r} is not a number (plain decimal digits, e.g. 0.75 or -1.5e-3)")
    return bounded_score(float(text), value, where, what)


def bounded_score(number: float, value: object, where: str, what: str = "human score") -> float:
    """`number` (read from `value`) if finite and within ±MAX_SCORE, else a UserError naming the location."""
    if not math.isfinite(number):
        raise UserError(f"{where}: {what} {value!r} is not a finite number")
    if abs(number) > MAX_SCORE:
        raise UserError(f"{where}: {what} {value!r} is beyond ±{MAX_SCORE:g}, no score's scale")
    return number


def parse_seg_id(value: str, where: str) -> int:
    """An integer seg_id, or a UserError naming the location."""
    try:
        return int(value.strip())
    except ValueError:
        raise UserError(f"{where}: seg_id {value!r} is not an integer") from None
