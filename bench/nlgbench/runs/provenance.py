"""Where a run folder's cells come from beyond their results: the names of the sweep specs run into
the folder and when each cell was recorded, for the report's title and its run dates.

The store holds both (its `runs` and `cells` tables); `nlgbench report` publishes them beside
cells.jsonl as report/run.json, so a committed report folder keeps its title and dates on a fresh
clone. A folder read from cells/ alone (no store), or published before run.json existed, has neither:
`Provenance.source` is then '' and the report says so."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from nlgbench.core.result import OK
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import read_bytes, utf8_text, write_atomic
from nlgbench.runs.folder import STORE_FILE, report_dir
from nlgbench.runs.rundata import PublishedSource, RunData, StoreSource, find_results
from nlgbench.runs.store import Store

PUBLISHED_RUN = "run.json"  # in DIR/report/: {"spec_names": [...], "recorded_at": {cell_id: ISO 8601 UTC}, "labels"}
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Provenance:
    """The sweep specs' names (first run first) and each cell's recording time (UTC), and where they
    were read from: 'results.sqlite', 'report/run.json', or '' where the folder records neither."""

    spec_names: list[str] = field(default_factory=list)
    recorded_at: dict[str, datetime] = field(default_factory=dict)
    source: str = ""
    labels: dict[str, str] = field(default_factory=dict)  # the specs' `labels:` maps (nlgbench.core.labels.Names)


def read_provenance(run: RunData) -> Provenance:
    """The provenance of `run`, from where its cells were read (`RunData.source`): the store, or the
    published report/run.json; none for cells read from cells/ (their result.json records neither)."""
    if run.source is None or isinstance(run.source, StoreSource):
        with Store(run.folder) as store:
            stamps = {c: datetime.fromtimestamp(t, tz=timezone.utc) for c, t in store.recorded_at().items()}
            return Provenance(store.sweep_names(), stamps, STORE_FILE, store.spec_labels())
    path = report_dir(run.folder) / PUBLISHED_RUN
    if not (isinstance(run.source, PublishedSource) and path.is_file()):
        return Provenance()
    try:
        raw = json.loads(utf8_text(path, read_bytes(path)))
        names = [str(n) for n in raw["spec_names"]]
        labels = {str(k): str(v) for k, v in dict(raw.get("labels", {})).items()}
        stamps = {
            str(c): datetime.strptime(t, TIME_FORMAT).replace(tzinfo=timezone.utc)
            for c, t in raw["recorded_at"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{path}: not nlgbench's run record ({exc})") from None
    return Provenance(names, stamps, f"report/{PUBLISHED_RUN}", labels)


def write_provenance(run: RunData, out: Path) -> Path:
    """report/run.json: the provenance of every finished cell of the run (as cells.jsonl: whatever the
    human dimension asked for); left as it is where the run was read from that folder's own report/
    (nothing more is known there), and not written where the folder records no provenance."""
    path = out / PUBLISHED_RUN
    if isinstance(run.source, PublishedSource) and out.resolve() == report_dir(run.folder).resolve():
        return path
    found = read_provenance(run)
    if not found.source:
        return path
    finished = [r.cell_id for r in find_results(run.folder)[0] if r.status == OK]
    record = {
        "spec_names": found.spec_names,
        "recorded_at": {c: found.recorded_at[c].strftime(TIME_FORMAT) for c in finished if c in found.recorded_at},
        **({"labels": found.labels} if found.labels else {}),
    }
    write_atomic(path, json.dumps(record, indent=1) + "\n")
    return path
