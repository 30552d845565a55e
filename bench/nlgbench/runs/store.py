"""The results store: `results.sqlite` (runs, cells, measurements, segment scores) and its CSV view.

A cell is written in one transaction (old rows of the same cell id replaced), so an
interrupted sweep never leaves a half-recorded or duplicated cell. SQLite's faults become one
line naming the file (`StoreFault`): disk full, read-only, and a corrupt file (`StoreCorrupt`,
checked when the store opens), which `nlgbench repair DIR` rebuilds from the cell folders.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterator, TypeVar

from nlgbench.core.cell import HUMAN_COLUMN_PREFIX, ITEM_COLUMN_PREFIX, CellResult, read_scores
from nlgbench.foundations.files import write_atomic
from nlgbench.core.labels import distinct_dataset_labels
from nlgbench.foundations.errors import UserError
from nlgbench.runs.folder import refuse_link

STORE_FILE = "results.sqlite"
STORE_SIDE_FILES = ("-journal", "-wal", "-shm")  # SQLite's files beside the store (results.sqlite-journal, ...)
SCORES_KEY_COLUMNS = {"lp", "seg_id", "system", "score", "human", "doc_id"}  # scores.csv columns that are not outputs
CSV_FILE = "results.csv"

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

# The output contract of DESIGN.md, in order; extra columns follow.
CSV_COLUMNS = [
    "cell_id", "metric", "encoder", "aligner", "dataset", "device", "batch_size", "status", "n_segments",
    "load_s", "ms_per_segment_mean", "ms_per_segment_median", "ms_per_segment_std", "n_repeats",
    "peak_rss_mb", "rss_growth_mb", "cuda_peak_allocated_mb", "params", "disk_mb", "pearson", "kendall",
    "pearson_pooled", "kendall_pooled", "error",
]
EXTRA_COLUMNS = [
    "layer", "prepare_s", "warmup_s", "cuda_peak_reserved_mb", "n_lps", "system_pearson", "system_kendall",
    "pearson_pooled_ci_low", "pearson_pooled_ci_high", "scores_agree", "threads", "cpu_model", "gpu", "phase_ms",
    "mean_exit_layer", "weight_mb", "metric_options", "truncated_segments",
    "human_dim", "n_missing_human", "spearman", "spearman_pooled", "system_spearman", "item_pearson", "item_kendall",
    "item_spearman", "n_docs", "dataset_path", "dataset_sha256", "ms_per_segment_cv", "warmup_passes", "batch_tokens",
    "correlation_note",  # the note stays last: it says why any figure left of it is blank
]
CORRELATIONS_FILE = "correlations.csv"
# correlations.csv: every figure of every cell, long format, naming its level and grouping (nlgbench.statistics.stats).
CORRELATION_COLUMNS = ["cell_id", "metric", "encoder", "aligner", "dataset", "device", "human_dim", "level", "grouping",
                       "method", "value", "n", "n_groups", "n_groups_too_small"]


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
            raise StoreFault(f"{side} is a hard link ({side.stat().st_nlink} names for one file); SQLite would change "
                             "the other names too: copy it to a file of its own (cp, then mv over it)")


@contextmanager
def sqlite_faults(path: Path) -> Iterator[None]:
    """Turn SQLite's errors about the file itself into one line naming it; others propagate."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        message = " ".join(str(exc).split())
        if "not a database" in message or "malformed" in message:
            raise StoreCorrupt(f"{path} is corrupt ({message}); rebuild it from the cell folders with "
                               f"`nlgbench repair {path.parent}`") from None
        if "disk is full" in message or "disk I/O error" in message:
            raise StoreFault(f"cannot write {path} ({message}); free some space and run the same command again "
                             "(finished cells are kept)") from None
        if "readonly" in message or "unable to open" in message or "locked" in message:
            raise StoreFault(f"cannot write {path}: {message}") from None
        raise


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
        out_dir.mkdir(parents=True, exist_ok=True)
        check_store_files(self.path)
        with sqlite_faults(self.path):
            self.db = sqlite3.connect(self.path)
            try:
                (verdict,) = self.db.execute("PRAGMA quick_check(1)").fetchone()
                if verdict != "ok":
                    raise sqlite3.DatabaseError(f"database disk image is malformed: {verdict}")
                self.db.executescript(SCHEMA)
                self.db.commit()
            except BaseException:
                self.db.close()
                raise

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
        """Replace the run's environment record (the runner's: one per device its cells ran on)."""
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
            columns, parsed = read_scores(scores_csv, result)
            has_meta = "doc_id" in columns or any(k.startswith(HUMAN_COLUMN_PREFIX) for k in columns)
            for idx, r in enumerate(parsed):
                dims = {k[len(HUMAN_COLUMN_PREFIX):]: v for k, v in r.items()
                        if k.startswith(HUMAN_COLUMN_PREFIX) and not math.isnan(v)}
                extra = {k: v for k, v in r.items()  # the metric's outputs; carried data columns stay in the csv
                         if k not in SCORES_KEY_COLUMNS and not k.startswith((HUMAN_COLUMN_PREFIX, ITEM_COLUMN_PREFIX))}
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
            for table in ("cells", "measurements", "segment_scores", "segment_meta"):
                self.db.execute(f"DELETE FROM {table} WHERE cell_id = ?", (cid,))
            self._untype_seg_ids()  # in this transaction: an old store changes with the cell or not at all
            self.db.execute(
                "INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, run_id, seq, result.label, cfg.metric, cfg.encoder.label, cfg.aligner_label, cfg.dataset.label,
                 cfg.device, cfg.batch_size, result.status, result.error, json.dumps(cfg.to_dict()),
                 result.to_json(indent=None), time.time()),
            )
            self.db.executemany("INSERT INTO measurements VALUES (?, ?, ?, ?)", measurements)
            self.db.executemany("INSERT INTO segment_scores VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            self.db.executemany("INSERT INTO segment_meta VALUES (?, ?, ?, ?)", meta)

    def _untype_seg_ids(self) -> None:
        """A store written before issue 25 declares `seg_id INTEGER`, whose affinity turns the text
        "007" into 7: rebuild that table with the untyped column (rows kept as stored) before a cell
        is recorded. Only writers do this; reading an old store changes nothing in it."""
        declared = {name: kind for _, name, kind, *_ in self.db.execute("PRAGMA table_info(segment_scores)")}
        if declared.get("seg_id", "").upper() != "INTEGER":
            return
        create = SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS segment_scores"):]
        create = create[: create.index(";")].replace("segment_scores", "segment_scores_new")
        self.db.execute(create)
        self.db.execute("INSERT INTO segment_scores_new SELECT * FROM segment_scores")
        self.db.execute("DROP TABLE segment_scores")
        self.db.execute("ALTER TABLE segment_scores_new RENAME TO segment_scores")

    @translated
    def result(self, cell_id: str) -> CellResult | None:
        """The stored result of one cell, if any."""
        row = self.db.execute("SELECT result_json FROM cells WHERE cell_id = ?", (cell_id,)).fetchone()
        return CellResult.from_json(row[0]) if row else None

    @translated
    def results(self) -> list[CellResult]:
        """Stored cell results in sweep order."""
        rows = self.db.execute("SELECT result_json FROM cells ORDER BY seq, cell_id").fetchall()
        return [CellResult.from_json(text) for (text,) in rows]

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
        rows = self.db.execute("SELECT doc_id, human_json FROM segment_meta WHERE cell_id = ? ORDER BY idx",
                               (cell_id,)).fetchall()
        return [(doc or "", json.loads(humans)) for doc, humans in rows] if rows else None

    @translated
    def write_csv(self) -> Path:
        """Rewrite results.csv from the store (atomically)."""
        path = self.out_dir / CSV_FILE
        text = io.StringIO(newline="")
        long = io.StringIO(newline="")
        w = csv.DictWriter(text, fieldnames=CSV_COLUMNS + EXTRA_COLUMNS)
        w.writeheader()
        figures = csv.DictWriter(long, fieldnames=CORRELATION_COLUMNS)
        figures.writeheader()
        results = self.results()
        labels = distinct_dataset_labels([r.config.dataset.label for r in results], [r.dataset_file[1] for r in results])
        for result, label in zip(results, labels):
            w.writerows([{**row, "dataset": label} for row in csv_rows(result)])
            figures.writerows([{**row, "dataset": label} for row in figure_rows(result)])
        write_atomic(path, text.getvalue())
        write_atomic(self.out_dir / CORRELATIONS_FILE, long.getvalue())
        return path


def _num(value: Any, digits: int | None = None) -> Any:
    """A CSV cell: blank for missing/NaN, rounded where `digits` is given (correlations are kept exact)."""
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return round(value, digits) if digits is not None else value
    return value


def dimension_sections(result: CellResult) -> list[dict[str, Any]]:
    """A finished cell's correlation section per human dimension (one for data with one human score)."""
    c = result.correlation or {}
    return list(c["dimensions"].values()) if c.get("dimensions") else [c]


def csv_rows(result: CellResult) -> list[dict[str, Any]]:
    """results.csv's rows of one cell: one per human dimension (`human_dim`); one for a failed cell."""
    if not result.ok:
        return [csv_row(result)]
    return [csv_row(result, section) for section in dimension_sections(result)]


def figure_rows(result: CellResult) -> list[dict[str, Any]]:
    """correlations.csv's rows of one finished cell: every figure (level x grouping x method) per dimension."""
    if not result.ok:
        return []
    cfg = result.config
    key = {"cell_id": result.cell_id, "metric": cfg.metric, "encoder": cfg.encoder.label, "aligner": cfg.aligner_label,
           "dataset": cfg.dataset.label, "device": cfg.device}
    return [{**key, "human_dim": section.get("human_dim", ""), **{k: _num(figure.get(k)) for k in CORRELATION_COLUMNS[7:]}}
            for section in dimension_sections(result) for figure in section.get("figures") or []]


def csv_row(result: CellResult, section: dict[str, Any] | None = None) -> dict[str, Any]:
    """One results.csv row from a cell result (ok, imported or failed); `section` is the correlation
    section of the human dimension the row is for (default: the primary one)."""
    cfg = result.config
    row: dict[str, Any] = {
        "cell_id": result.cell_id, "metric": cfg.metric, "encoder": cfg.encoder.label, "aligner": cfg.aligner_label,
        "dataset": cfg.dataset.label, "device": cfg.device, "batch_size": cfg.batch_size, "status": result.status,
        "n_repeats": cfg.repeats, "error": result.error or "", "threads": cfg.threads or "",
        "metric_options": cfg.options_label,
        "dataset_path": result.dataset_file[0], "dataset_sha256": result.dataset_file[1],
        "batch_tokens": cfg.batch_tokens if cfg.batch_tokens is not None else "",
    }
    if not result.ok:
        return row
    c = section if section is not None else (result.correlation or {})
    system = c.get("system") or {}
    item = c.get("item") or {}
    ci = (c.get("bootstrap") or {}).get("pearson_pooled_ci") or [None, None]
    row.update({
        "n_segments": result.n_segments,
        "pearson": _num(c["pearson"]), "kendall": _num(c["kendall"]),
        "pearson_pooled": _num(c["pearson_pooled"]), "kendall_pooled": _num(c["kendall_pooled"]),
        "n_lps": c.get("n_lps", ""),
        "system_pearson": _num(system.get("pearson")), "system_kendall": _num(system.get("kendall")),
        "pearson_pooled_ci_low": _num(ci[0]), "pearson_pooled_ci_high": _num(ci[1]),
        "correlation_note": c.get("note") or "",
        "human_dim": c.get("human_dim", ""), "n_missing_human": c.get("n_missing_human", ""),
        "spearman": _num(c.get("spearman")), "spearman_pooled": _num(c.get("spearman_pooled")),
        "system_spearman": _num(system.get("spearman")), "item_pearson": _num(item.get("pearson")),
        "item_kendall": _num(item.get("kendall")), "item_spearman": _num(item.get("spearman")),
        "n_docs": item.get("n_docs", ""),
    })
    if result.imported:  # precomputed scores (import-scores): correlations only, nothing measured
        row.update({"n_repeats": 0, "threads": ""})
        return row
    t, m, scorer = result.timing, result.memory, result.scorer
    assert t is not None and m is not None and scorer is not None and result.repeat_agreement is not None
    env = result.environment or {}
    row.update({
        "load_s": _num(t.load_s, 3),
        "ms_per_segment_mean": _num(t.ms_per_segment_mean, 4),
        "ms_per_segment_median": _num(t.ms_per_segment_median, 4),
        "ms_per_segment_std": _num(t.ms_per_segment_std, 4),
        "peak_rss_mb": _num(m.peak_rss_mb, 1),
        "rss_growth_mb": _num(m.rss_growth_mb, 1),
        # 0 on CPU cells: no CUDA memory was allocated there.
        "cuda_peak_allocated_mb": _num(m.cuda_peak_allocated_mb, 1) if m.cuda_peak_allocated_mb is not None else 0.0,
        "cuda_peak_reserved_mb": _num(m.cuda_peak_reserved_mb, 1) if m.cuda_peak_reserved_mb is not None else 0.0,
        "params": result.params,
        "disk_mb": _num(result.disk_bytes / 2**20, 2) if result.disk_bytes is not None else "",
        "layer": scorer.get("layer", ""),
        "prepare_s": _num(t.prepare_s, 3), "warmup_s": _num(t.warmup_s, 3),
        "scores_agree": result.repeat_agreement.agree,
        "threads": env.get("torch_threads", ""), "cpu_model": env.get("cpu_model", ""), "gpu": env.get("gpu") or "",
        "mean_exit_layer": _num(scorer.get("mean_exit_layer"), 3),
        "truncated_segments": scorer.get("truncated_segments", ""),  # blank in results written before it was counted
        "weight_mb": _num(scorer["weight_bytes"] / 2**20, 2) if "weight_bytes" in scorer else "",
        "phase_ms": ";".join(f"{k}={v:.3f}" for k, v in t.phase_ms_per_segment_mean.items()),
        # blank in results written before the GPU-grade protocol, and the CV with one repeat
        "ms_per_segment_cv": _num(t.ms_per_segment_cv, 4),
        "warmup_passes": len(t.warmup_passes_s) if t.warmup_passes_s is not None else "",
    })
    return row
