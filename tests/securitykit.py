"""Helpers of the security tests (tests/test_security*.py): a one-cell spec on a tiny model, the text
an outside file keeps, a folder's bytes to compare before and after.
"""

from __future__ import annotations

from pathlib import Path

from helpers import write_jsonl
from tiny import TEXTS

KEEP = "outside the run folder: must stay as it is\n"


# ----------------------------------------------------------------------------- helpers


def write_spec(folder: Path, model: Path, *, extra: str = "", metric: str = "") -> Path:
    """A one-cell sweep (BERTScore with the tiny model, or `metric` that needs none; 1 repeat, no warm-up)
    over 2 x 4 own segments."""
    data = folder / "data.jsonl"
    rows = [
        {
            "lp": lp,
            "seg_id": k + 1,
            "reference": TEXTS[(i := 4 * j + k) % 8],
            "hypothesis": TEXTS[(i + 1) % 8],
            "human": float((i * 7) % 5),
        }
        for j, lp in enumerate(("de-en", "fr-en"))
        for k in range(4)
    ]
    write_jsonl(data, rows)
    spec = folder / "sec.yaml"
    entry = f"metric: {metric}\n" if metric else f"metric: bertscore\n    encoders: [{model}]\n"
    spec.write_text(
        f"name: sec\ndatasets: [{{path: {data}}}]\nrepeats: 1\nwarmup: 0\nbatch_size: 4\nthreads: 1\n"
        f"{extra}metrics:\n  - {entry}",
        encoding="utf-8",
    )
    return spec


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under `path` (or `path` itself), relative name -> bytes."""
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
