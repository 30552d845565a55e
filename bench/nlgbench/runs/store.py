"""The results store: `results.sqlite` (runs, cells, measurements, segment scores, data warnings); its
CSV views are `nlgbench.runs.csvfiles`.

A cell is written in one transaction (old rows of the same cell id replaced), so an
interrupted sweep never leaves a half-recorded or duplicated cell. SQLite's faults become one
line naming the file (`StoreFault`): disk full, read-only, and a corrupt file (`StoreCorrupt`,
checked when the store opens), which `nlgbench repair DIR` rebuilds from the cell folders. A
writer opens it with `open_store`, which refuses a missing store beside finished cells.

Its format (`nlgbench.runs.migrate.FORMATS`) is its `PRAGMA user_version`; a store made before format
numbers has none and `store_format` tells 1 from 2. Readers see every stored result upgraded
(`nlgbench.runs.migrate`) and change nothing in an older store; a writer upgrades it when it opens it
(`open_store`, `Store.upgrade`), and `Store.record` in the transaction of the cell it records; a newer
store is refused in one line.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from nlgbench.core.cell import RESULT_FILE, RUN_FORMAT, SCORES_FILE
from nlgbench.core.result import CellResult
from nlgbench.core.scores import HUMAN_COLUMN_PREFIX, ITEM_COLUMN_PREFIX, UncheckedScores, read_scores
from nlgbench.foundations.errors import UserError
from nlgbench.runs.csvfiles import write_views
from nlgbench.runs.folder import STORE_FILE, cells_dir, refuse_link
from nlgbench.runs.migrate import check_known
from nlgbench.runs.resultfile import read_result, result_from_json

STORE_SIDE_FILES = ("-journal", "-wal", "-shm")  # SQLite's files beside the store (results.sqlite-journal, ...)
SCORES_KEY_COLUMNS = {"lp", "seg_id", "system", "score", "human", "doc_id"}  # scores.csv columns that are not outputs

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, name TEXT, started_at REAL, finished_at REAL, spec_json TEXT, environment_json TEXT
);
CREATE TABLE IF NOT EXISTS cells (
    cell_id TEXT PRIMARY KEY, run_id TEXT, seq INTEGER, label TEXT, metric TEXT, encoder TEXT, aligner TEXT,
    dataset TEXT, device TEXT, batch_size INTEGER, status TEXT, error TEXT, config_json TEXT,
    result_json TEXT, updated_at REAL
);
CREATE TABLE IF NOT EXISTS measurements (
    cell_id TEXT, name TEXT, repeat INTEGER, value REAL
);
CREATE TABLE IF NOT EXISTS segment_scores (
    cell_id TEXT, idx INTEGER, lp TEXT, seg_id, system TEXT, score REAL, human REAL, extra_json TEXT,
    PRIMARY KEY (cell_id, idx)
);
CREATE TABLE IF NOT EXISTS segment_meta (
    cell_id TEXT, idx INTEGER, doc_id TEXT, human_json TEXT, PRIMARY KEY (cell_id, idx)
);
CREATE INDEX IF NOT EXISTS measurements_cell ON measurements (cell_id);
"""
# A cell's data warnings (`CellResult.warnings`), one row each in order (since format 2: made with a new
# store, or by the upgrade of an older one).
WARNINGS_TABLE = (
    "CREATE TABLE IF NOT EXISTS warnings (cell_id TEXT, idx INTEGER, text TEXT, PRIMARY KEY (cell_id, idx))"
)


class StoreFault(UserError):
    """results.sqlite cannot be written (disk full, read-only, locked): one line naming it."""


class StoreCorrupt(StoreFault):
    """results.sqlite is not a readable database; `nlgbench repair DIR` rebuilds it from cells/."""


def has_store(out_dir: Path) -> bool:
    """Whether the run folder has a results.sqlite with something in it (SQLite creates it empty)."""
    path = out_dir / STORE_FILE
    return path.is_file() and path.stat().st_size > 0


def check_store_files(path: Path) -> None:
    """Refuse (one line) a store whose file or journal files (`-journal`, `-wal`, `-shm`) are
    symbolic links, or hard links to another file: SQLite writes them in place, so it would change
    a file outside the run folder."""
    for side in (path, *(path.with_name(path.name + s) for s in STORE_SIDE_FILES)):
        refuse_link(side)
        if side.is_file() and side.stat().st_nlink > 1:
            raise StoreFault(
                f"{side} is a hard link ({side.stat().st_nlink} names for one file); SQLite would change "
                "the other names too: copy it to a file of its own (cp, then mv over it)"
            )


@contextmanager
def sqlite_faults(path: Path) -> Iterator[None]:
    """Turn SQLite's errors about the file itself into one line naming it; others propagate."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        message = " ".join(str(exc).split())
        if "not a database" in message or "malformed" in message:
            raise StoreCorrupt(
                f"{path} is corrupt ({message}); rebuild it from the cell folders with `nlgbench repair {path.parent}`"
            ) from None
        if "disk is full" in message or "disk I/O error" in message:
            raise StoreFault(
                f"cannot write {path} ({message}); free some space and run the same command again "
                "(finished cells are kept)"
            ) from None
        if "readonly" in message or "unable to open" in message or "locked" in message:
            raise StoreFault(f"cannot write {path}: {message}") from None
        raise


def scan_cells(folder: Path, unchecked: UncheckedScores) -> tuple[list[CellResult], list[str]]:
    """The results in `cells/*/result.json` that can be recorded (readable, written for the cell of
    their folder, when ok with a whole scores.csv: `read_scores`), in the order they were written;
    and a line per cell folder left out, naming it and why (half a file cannot be the cause: both
    are written atomically, so the file was cut or changed since). A scores.csv read unchecked is named
    through the caller's `unchecked`."""
    found: list[tuple[float, str, CellResult]] = []
    skipped: list[str] = []
    for path in sorted(cells_dir(folder).glob(f"*/{RESULT_FILE}")):
        try:
            result = read_result(path.parent)
            if result.cell_id != path.parent.name:
                raise UserError(f"{path} is the result of cell {result.cell_id}, not of its folder's")
            if result.ok:
                read_scores(path.parent / SCORES_FILE, result, unchecked=unchecked)
            found.append((path.stat().st_mtime, result.cell_id, result))
        except (UserError, OSError) as exc:
            skipped.append(str(exc))
    return [result for _, _, result in sorted(found, key=lambda t: (t[0], t[1]))], skipped


def finished_cells(folder: Path) -> list[CellResult]:
    """The results of `scan_cells` that can be recorded (the others left out)."""
    return scan_cells(folder, UncheckedScores())[0]


def check_store(folder: Path) -> None:
    """Refuse to write a run folder whose store is missing or empty while its cells are finished:
    a new empty store would hide them (`repair` brings them back)."""
    if not has_store(folder) and finished_cells(folder):
        raise UserError(
            f"{folder} has finished cells but no {STORE_FILE} (deleted or emptied); rebuild it from the "
            f"cell folders with `nlgbench repair {folder}`"
        )


def open_store(folder: Path) -> Store:
    """The folder's store, for a writer holding its lock: checked (`check_store`), opened and brought to
    this nlgbench's format (`Store.upgrade`), so the rows it adds never sit in an older store."""
    check_store(folder)
    store = Store(folder)
    try:
        store.upgrade()
    except BaseException:
        store.close()
        raise
    return store


F = TypeVar("F", bound=Callable[..., Any])


def translated(method: F) -> F:
    """A Store method whose SQLite faults are one line (`sqlite_faults`)."""

    @functools.wraps(method)
    def wrapper(self: Store, *args: Any, **kwargs: Any) -> Any:
        with sqlite_faults(self.path):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class Store:
    """results.sqlite in a run folder; all SQL of the project is here. Use as a context manager
    (or call `close`). Opening checks the file (`PRAGMA quick_check`): a corrupt store is a
    `StoreCorrupt` error before anything is written to it."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.path = out_dir / STORE_FILE
        self.unchecked = UncheckedScores()  # the older scores.csv files `record` read, each warned about once
        out_dir.mkdir(parents=True, exist_ok=True)
        check_store_files(self.path)
        with sqlite_faults(self.path):
            self.db = sqlite3.connect(self.path)
            try:
                (verdict,) = self.db.execute("PRAGMA quick_check(1)").fetchone()
                if verdict != "ok":
                    raise sqlite3.DatabaseError(f"database disk image is malformed: {verdict}")
                self.format = self.store_format()
                self.db.executescript(SCHEMA)
                self.db.commit()
            except BaseException:
                self.db.close()
                raise

    def store_format(self) -> int:
        """The store's format: its user_version (a newer one refused in one line); a new store is made in
        this nlgbench's. Unmarked (made before format numbers): 2 where it has the warnings table and an
        untyped seg_id (0.2.0's), else 1."""
        (version,) = self.db.execute("PRAGMA user_version").fetchone()
        if version:
            check_known(version, self.path)
            return int(version)
        tables = {name for (name,) in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "cells" not in tables:
            self.db.executescript(f"{SCHEMA}{WARNINGS_TABLE};\nPRAGMA user_version = {RUN_FORMAT};")
            return RUN_FORMAT
        declared = {name: kind for _, name, kind, *_ in self.db.execute("PRAGMA table_info(segment_scores)")}
        return 2 if "warnings" in tables and declared.get("seg_id", "").upper() != "INTEGER" else 1

    @translated
    def upgrade(self) -> bool:
        """Bring an older store to this nlgbench's format, in one transaction; whether it was older."""
        if self.format == RUN_FORMAT:
            return False
        with self.db:
            self.db.execute("BEGIN")
            self._upgrade_steps()
        self.format = RUN_FORMAT
        return True

    def _upgrade_steps(self) -> None:
        """The upgrade from the store's format to this nlgbench's, inside the caller's transaction: from 1
        the warnings table and an untyped seg_id (`_untype_seg_ids`); from 2 every stored result in the
        current format and the user_version."""
        if self.format < 2:
            self.db.execute(WARNINGS_TABLE)
            self._untype_seg_ids()
        if self.format < RUN_FORMAT:
            rows = self.db.execute("SELECT cell_id, result_json FROM cells").fetchall()
            upgraded = [(self._stored(cid, text).to_json(indent=None), cid) for cid, text in rows]
            self.db.executemany("UPDATE cells SET result_json = ? WHERE cell_id = ?", upgraded)
            self.db.execute(f"PRAGMA user_version = {RUN_FORMAT}")

    def _stored(self, cell_id: str, text: str) -> CellResult:
        """A stored result, upgraded to the current format (`nlgbench.runs.migrate`)."""
        return result_from_json(text, f"{self.path} (cell {cell_id})")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    @translated
    def start_run(self, name: str, spec: dict[str, Any], env: dict[str, Any]) -> str:
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]
        with self.db:
            self.db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, NULL, ?, ?)",
                (run_id, name, time.time(), json.dumps(spec), json.dumps(env)),
            )
        return run_id

    @translated
    def set_run_environment(self, run_id: str, env: dict[str, Any]) -> None:
        """Replace the run's environment record (the launcher's: one per device its cells ran on)."""
        with self.db:
            self.db.execute("UPDATE runs SET environment_json = ? WHERE run_id = ?", (json.dumps(env), run_id))

    @translated
    def finish_run(self, run_id: str) -> None:
        with self.db:
            self.db.execute("UPDATE runs SET finished_at = ? WHERE run_id = ?", (time.time(), run_id))

    @translated
    def status(self, cell_id: str) -> str | None:
        row = self.db.execute("SELECT status FROM cells WHERE cell_id = ?", (cell_id,)).fetchone()
        return row[0] if row else None

    @translated
    def next_seq(self) -> int:
        """The position after the last recorded cell (cells list in this order)."""
        return int(self.db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM cells").fetchone()[0])

    @translated
    def record(self, run_id: str, seq: int, result: CellResult, scores_csv: Path | None) -> None:
        """Write one cell's result, measurements and segment scores atomically."""
        cfg = result.config
        cid = result.cell_id
        rows: list[tuple[Any, ...]] = []
        meta: list[tuple[Any, ...]] = []
        if scores_csv is not None:  # checked against the result (truncated or edited: refused), ids as written
            columns, parsed = read_scores(scores_csv, result, unchecked=self.unchecked)
            has_meta = "doc_id" in columns or any(k.startswith(HUMAN_COLUMN_PREFIX) for k in columns)
            for idx, r in enumerate(parsed):
                dims = {
                    k[len(HUMAN_COLUMN_PREFIX) :]: v
                    for k, v in r.items()
                    if k.startswith(HUMAN_COLUMN_PREFIX) and not math.isnan(v)
                }
                extra = {
                    k: v
                    for k, v in r.items()  # the metric's outputs; carried data columns stay in the csv
                    if k not in SCORES_KEY_COLUMNS and not k.startswith((HUMAN_COLUMN_PREFIX, ITEM_COLUMN_PREFIX))
                }
                rows.append((cid, idx, r["lp"], r["seg_id"], r["system"], r["score"], r["human"], json.dumps(extra)))
                if has_meta:
                    meta.append((cid, idx, r.get("doc_id", ""), json.dumps(dims)))
        measurements: list[tuple[Any, ...]] = []
        if result.timing is not None:
            for i, value in enumerate(result.timing.repeat_s):
                measurements.append((cid, "repeat_s", i, value))
            for i, phases in enumerate(result.timing.phases_s):
                measurements += [(cid, f"phase_{k}_s", i, v) for k, v in phases.items()]
        with self.db:
            self.db.execute("BEGIN")
            self._upgrade_steps()  # in this transaction: an older store changes with the cell or not at all
            for table in ("cells", "measurements", "segment_scores", "segment_meta", "warnings"):
                self.db.execute(f"DELETE FROM {table} WHERE cell_id = ?", (cid,))
            self.db.execute(
                "INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    cid,
                    run_id,
                    seq,
                    result.label,
                    cfg.metric,
                    cfg.encoder.label,
                    cfg.aligner_label,
                    cfg.dataset.label,
                    cfg.device,
                    cfg.batch_size,
                    result.status,
                    result.error,
                    json.dumps(cfg.to_dict()),
                    result.to_json(indent=None),
                    time.time(),
                ),
            )
            self.db.executemany("INSERT INTO measurements VALUES (?, ?, ?, ?)", measurements)
            self.db.executemany("INSERT INTO segment_scores VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            self.db.executemany("INSERT INTO segment_meta VALUES (?, ?, ?, ?)", meta)
            self.db.executemany(
                "INSERT INTO warnings VALUES (?, ?, ?)", [(cid, i, text) for i, text in enumerate(result.warnings)]
            )
        self.format = RUN_FORMAT

    def _untype_seg_ids(self) -> None:
        """A format-1 store declares `seg_id INTEGER`, whose affinity turns the text "007" into 7: rebuild
        that table with the untyped column (rows kept as stored). Part of the upgrade (`_upgrade_steps`)."""
        declared = {name: kind for _, name, kind, *_ in self.db.execute("PRAGMA table_info(segment_scores)")}
        if declared.get("seg_id", "").upper() != "INTEGER":
            return
        create = SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS segment_scores") :]
        create = create[: create.index(";")].replace("segment_scores", "segment_scores_new")
        self.db.execute(create)
        self.db.execute("INSERT INTO segment_scores_new SELECT * FROM segment_scores")
        self.db.execute("DROP TABLE segment_scores")
        self.db.execute("ALTER TABLE segment_scores_new RENAME TO segment_scores")

    @translated
    def result(self, cell_id: str) -> CellResult | None:
        """The stored result of one cell, if any."""
        row = self.db.execute("SELECT result_json FROM cells WHERE cell_id = ?", (cell_id,)).fetchone()
        return self._stored(cell_id, row[0]) if row else None

    @translated
    def results(self) -> list[CellResult]:
        """Stored cell results in sweep order."""
        rows = self.db.execute("SELECT cell_id, result_json FROM cells ORDER BY seq, cell_id").fetchall()
        return [self._stored(cid, text) for cid, text in rows]

    @translated
    def replace_result(self, result: CellResult) -> None:
        """Replace a recorded cell's result.json copy, its other rows as they are (`repair --upgrade`
        adding the scores.csv record an older result lacks)."""
        with self.db:
            self.db.execute(
                "UPDATE cells SET result_json = ? WHERE cell_id = ?", (result.to_json(indent=None), result.cell_id)
            )

    @translated
    def segment_scores(self, cell_id: str) -> list[tuple[str, int | str, str, float, float]]:
        """A cell's (lp, seg_id, system, score, human) in dataset order; system '' for DA data."""
        rows = self.db.execute(
            "SELECT lp, seg_id, system, score, human FROM segment_scores WHERE cell_id = ? ORDER BY idx", (cell_id,)
        ).fetchall()
        return [(lp, seg_id, system or "", score, human) for lp, seg_id, system, score, human in rows]

    @translated
    def segment_meta(self, cell_id: str) -> list[tuple[str, dict[str, float]]] | None:
        """A cell's (doc_id, {human dimension: score}) per segment in dataset order; None for a cell
        whose data has neither documents nor named human dimensions."""
        rows = self.db.execute(
            "SELECT doc_id, human_json FROM segment_meta WHERE cell_id = ? ORDER BY idx", (cell_id,)
        ).fetchall()
        return [(doc or "", json.loads(humans)) for doc, humans in rows] if rows else None

    @translated
    def warnings(self, cell_id: str) -> list[str]:
        """A cell's data warnings in their order (`CellResult.warnings`); none in a format-1 store, which
        kept none."""
        if self.format < 2:
            return []
        rows = self.db.execute("SELECT text FROM warnings WHERE cell_id = ? ORDER BY idx", (cell_id,)).fetchall()
        return [text for (text,) in rows]

    @translated
    def sweep_names(self) -> list[str]:
        """The names of the sweep specs run into this folder (runs started by `nlgbench run`, whose
        record holds the spec; not `import-scores`, `repair` or `collect`), first run first, each once."""
        rows = self.db.execute("SELECT name, spec_json FROM runs ORDER BY started_at, run_id").fetchall()
        sweeps = [name for name, spec in rows if name and "spec" in json.loads(spec or "{}")]
        return list(dict.fromkeys(sweeps))

    @translated
    def spec_labels(self) -> dict[str, str]:
        """The specs' `labels:` maps (what figures and tables call an encoder or a metric), later runs'
        names over earlier ones'."""
        rows = self.db.execute("SELECT spec_json FROM runs ORDER BY started_at, run_id").fetchall()
        labels: dict[str, str] = {}
        for (spec,) in rows:
            given = json.loads(spec or "{}").get("spec", {}).get("labels") or {}
            labels.update({str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else {})
        return labels

    @translated
    def recorded_at(self) -> dict[str, float]:
        """When each cell was recorded (its last `record`, seconds since the epoch), by cell id."""
        return {cid: float(at) for cid, at in self.db.execute("SELECT cell_id, updated_at FROM cells") if at}

    @translated
    def write_csv(self) -> Path:
        """Rewrite results.csv and correlations.csv from the store (atomically; `nlgbench.runs.csvfiles`)."""
        return write_views(self.out_dir, self.results())
