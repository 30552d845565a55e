"""A run folder as the report and compare commands read it: one row per finished cell, with the
measured quantities, and each cell's segment scores (signed so higher is better) against the human
scores of one human dimension (`--human DIM`; default each cell's primary one).

Three places hold a run, read in this order (the first one present wins):

  results.sqlite            the store, written by `nlgbench run` and `import-scores`
  cells/*/result.json       each cell's result, with its `scores.csv` (metric and human scores);
                            in the order of results.csv where there is one
  report/cells.jsonl        what `nlgbench report` publishes: every finished cell's result.json on one
  + report/metric_scores.csv  line, and its metric scores per segment (`cell_id, lp, seg_id, system,
                            score`), without human scores or texts, which are read again from the
                            cell's dataset (its files' sha256 checked against the result's)

The store and cells/ hold the dataset's human scores beside the metric's, so they stay out of git;
report/ holds none, so a committed report folder is enough for report and compare on a fresh clone
(with the datasets at hand: the catalogue's public source or NLGBENCH_DATA_MIRROR).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from nlgbench.core.cell import RESULT_FILE, SCORES_FILE, DatasetRef
from nlgbench.core.labels import distinct_dataset_labels
from nlgbench.core.result import OK, CellResult, json_safe
from nlgbench.core.scores import HUMAN_COLUMN_PREFIX, UncheckedScores, human_columns, read_scores
from nlgbench.data.catalogue import catalogue_entry
from nlgbench.data.items import HUMAN, Dataset
from nlgbench.data.text import csv_table
from nlgbench.encoders.registry import model_label
from nlgbench.foundations.devicenames import CPU, CUDA, is_cuda
from nlgbench.foundations.errors import UserError, unknown_name
from nlgbench.foundations.files import read_bytes, utf8_text, write_atomic
from nlgbench.foundations.jsonwalk import map_strings
from nlgbench.runs.folder import CSV_FILE, STORE_FILE, cell_dir, report_dir
from nlgbench.runs.migrate import upgrade_results_csv
from nlgbench.runs.resultfile import result_from_json
from nlgbench.runs.store import Store, has_store, scan_cells
from nlgbench.statistics.levels import Segments
from nlgbench.statistics.resampling import resample_distribution

if TYPE_CHECKING:
    import pandas as pd

SegmentRow = tuple[str, Any, str, float, float]  # (lp, seg_id, system, raw metric score, primary human score)
SegmentMeta = list[tuple[str, dict[str, float]]] | None  # per segment (doc_id, {human dimension: score}); None: neither
PUBLISHED_CELLS = "cells.jsonl"  # in DIR/report/: one finished cell's result.json per line
PUBLISHED_SCORES = "metric_scores.csv"  # in DIR/report/: cell_id, lp, seg_id, system, score (no human scores)
PUBLISHED_COLUMNS = ["cell_id", "lp", "seg_id", "system", "score"]


class SegmentSource(Protocol):
    """Where a run's per-segment scores are read from."""

    name: str  # for messages: 'results.sqlite', 'cells/', 'report/'

    def rows(self, result: CellResult) -> tuple[list[SegmentRow], SegmentMeta]: ...


@dataclass
class StoreSource:
    folder: Path
    name: str = STORE_FILE

    def rows(self, result: CellResult) -> tuple[list[SegmentRow], SegmentMeta]:
        with Store(self.folder) as store:
            return store.segment_scores(result.cell_id), store.segment_meta(result.cell_id)


@dataclass
class CellFolderSource:
    folder: Path
    name: str = "cells/"
    unchecked: UncheckedScores = field(default_factory=UncheckedScores)  # older scores.csv files, warned once each

    def rows(self, result: CellResult) -> tuple[list[SegmentRow], SegmentMeta]:
        """scores.csv read (and checked against the result) as the store reads it when it records the
        cell (nlgbench.runs.store.Store.record)."""
        columns, parsed = read_scores(
            cell_dir(self.folder, result.cell_id) / SCORES_FILE, result, unchecked=self.unchecked
        )
        rows: list[SegmentRow] = [(r["lp"], r["seg_id"], r["system"], r["score"], r["human"]) for r in parsed]
        if not ("doc_id" in columns or any(c.startswith(HUMAN_COLUMN_PREFIX) for c in columns)):
            return rows, None
        return rows, [
            (
                r.get("doc_id", ""),
                {
                    k[len(HUMAN_COLUMN_PREFIX) :]: v
                    for k, v in r.items()
                    if k.startswith(HUMAN_COLUMN_PREFIX) and not np.isnan(v)
                },
            )
            for r in parsed
        ]


@dataclass
class PublishedSource:
    """report/metric_scores.csv joined with the human scores of each cell's dataset, loaded again."""

    folder: Path
    name: str = "report/"
    _scores: dict[str, list[tuple[str, str, str, float]]] | None = None
    _datasets: dict[str, Any] = field(default_factory=dict)

    def _all_scores(self) -> dict[str, list[tuple[str, str, str, float]]]:
        if self._scores is None:
            path = report_dir(self.folder) / PUBLISHED_SCORES
            # every row whole (the header's field count), as import-scores reads a CSV
            header, rows = csv_table(path, utf8_text(path, read_bytes(path)))
            missing = [c for c in ("cell_id", "lp", "seg_id", "system", "score") if c not in header]
            if missing:
                raise UserError(f"{path}: missing column(s) {', '.join(missing)}")
            self._scores = {}
            for number, fields in rows:
                r = dict(zip(header, fields, strict=True))
                try:
                    score = float(r["score"])
                except ValueError:
                    raise UserError(f"{path} line {number}: score {r['score']!r} is not a number") from None
                self._scores.setdefault(r["cell_id"], []).append((r["lp"], r["seg_id"], r["system"], score))
        return self._scores

    def rows(self, result: CellResult) -> tuple[list[SegmentRow], SegmentMeta]:
        ref = result.config.dataset
        key = json.dumps(ref.to_dict(), sort_keys=True)
        if key not in self._datasets:
            try:
                self._datasets[key] = load_from(self.folder, ref)
            except (UserError, OSError) as exc:
                raise UserError(
                    f"{self.folder}: the human scores of {ref.label} come from the dataset itself, which "
                    f"cannot be read here ({exc})"
                ) from None
        dataset = self._datasets[key]
        recorded = result.dataset.files if result.dataset is not None else {}
        changed = sorted(f for f, sha in recorded.items() if dataset.files.get(f, sha) != sha)
        if changed:
            raise UserError(
                f"{self.folder}: dataset {ref.label} differs from the one cell {result.cell_id} scored "
                f"(sha256 of {', '.join(changed)}); its human scores cannot be joined"
            )
        scores = self._all_scores().get(result.cell_id, [])
        items = dataset.items
        keys = [(it.lp, str(it.seg_id), it.system) for it in items]
        if [(lp, seg, system) for lp, seg, system, _ in scores] != keys:
            raise UserError(
                f"{self.folder}: report/{PUBLISHED_SCORES} has {len(scores)} segment(s) of cell "
                f"{result.cell_id}, not the {len(items)} items of {ref.label} in order"
            )
        rows = [(it.lp, it.seg_id, it.system, s[3], it.human) for it, s in zip(items, scores, strict=True)]
        dims = human_columns(items)
        if not (dataset.has_docs or dims):
            return rows, None
        return rows, [(it.doc_id, {d: it.humans[d] for d in dims if d in it.humans}) for it in items]


def load_from(folder: Path, ref: DatasetRef) -> Dataset:
    """The dataset a cell of the run folder names: a relative data file path is relative to the folder
    (`import-scores` records it so, so a committed run reads on any clone, from any directory); one
    that is not there is read as given (cells imported before, relative to where that ran)."""
    if ref.path is None or Path(ref.path).is_absolute() or not (folder / ref.path).is_file():
        return ref.load()
    dataset = replace(ref, path=str(folder / ref.path)).load()
    return replace(
        dataset, files={ref.path if f == str(folder / ref.path) else f: sha for f, sha in dataset.files.items()}
    )


@dataclass
class RunData:
    """Finished cells of a run folder (`cells`, a DataFrame) and access to their segment scores;
    `RunData.open` reads one (the one reader of a run folder: report, compare and `nlgbench.load_run`)."""

    folder: Path
    cells: pd.DataFrame
    results: dict[str, CellResult]
    human: str | None = None  # the human dimension asked for; None: each cell's primary one
    source: SegmentSource | None = None  # None: the folder's store
    _segments: dict[str, Segments] = field(default_factory=dict, repr=False)
    _replicates: dict[tuple[Any, ...], np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, folder: Path, human: str | None = None) -> RunData:
        """Read a run folder: its finished cells (see `find_results`) against the human dimension
        `human` (cells without it are left out; None: each cell's primary one). One clear error when
        it holds no finished cells, or none with `human`."""
        import pandas as pd

        results, source = find_results(folder)
        results = finished_results(results, folder, human)
        df = pd.DataFrame([cell_record(r, human if human is not None else human_dims(r)[0]) for r in results])
        df["dataset"] = distinct_dataset_labels(list(df["dataset"]), [r.dataset_file[1] for r in results])
        return cls(folder, df, {r.cell_id: r for r in results}, human, source)

    @staticmethod
    def results_csv(folder: Path) -> str:
        """The text of the folder's results.csv: one row per cell (failed ones too) as the run wrote
        it, in this nlgbench's columns (an older format's upgraded: `upgrade_results_csv`), what
        `nlgbench.load_run` and scripts/results_table.py show; one clear error when there is none, or
        when it is not UTF-8."""
        path = folder / CSV_FILE
        if not path.is_file():
            raise UserError(f"{folder}: no results.csv (not a run folder, or no cell has finished yet)")
        return upgrade_results_csv(folder, utf8_text(path, read_bytes(path)))

    def replicates(
        self,
        cell_id: str,
        key: Hashable,
        statistic: Callable[[Segments], float],
        n_resamples: int,
        seed: int,
        unit: str = "segments",
    ) -> np.ndarray:
        """`statistic` (named by `key`, e.g. the quality options) on `n_resamples` bootstrap resamples of
        the cell's segments by `unit` (nlgbench.statistics.resampling with `seed`), computed once per cell:
        report's intervals and compare's paired tests share them (same seed, same segments: same draws)."""
        memo = (cell_id, key, n_resamples, seed, unit)
        if memo not in self._replicates:
            self._replicates[memo] = resample_distribution(self.segments(cell_id), unit, statistic, n_resamples, seed)
        return self._replicates[memo]

    def raw_rows(self, cell_id: str) -> tuple[list[SegmentRow], SegmentMeta]:
        """The cell's segments as recorded: raw metric score and primary human score, in dataset order."""
        return (self.source or StoreSource(self.folder)).rows(self.results[cell_id])

    def segments(self, cell_id: str) -> Segments:
        """The cell's segment scores in dataset order, negated for lower-is-better metrics, against the
        chosen human dimension; segments without a score on it are left out. Read once per cell."""
        if cell_id in self._segments:
            return self._segments[cell_id]
        rows, meta = self.raw_rows(cell_id)
        metric = self.results[cell_id].metric
        assert metric is not None  # finished cells only
        sign = 1.0 if metric.higher_is_better else -1.0
        if self.human is not None and meta is not None and any(m[1] for m in meta):  # named dimensions
            human = np.array([m[1].get(self.human, np.nan) for m in meta], dtype=float)
        else:
            human = np.array([np.nan if r[4] is None else r[4] for r in rows], dtype=float)
        keep = np.isfinite(human)
        seg = Segments(
            score=sign * np.array([r[3] for r in rows], dtype=float),
            human=human,
            lp=np.array([r[0] for r in rows]),
            system=np.array([r[2] for r in rows]),
            seg_id=np.array([r[1] for r in rows], dtype=object),
            doc=np.array([m[0] for m in meta] if meta is not None else [""] * len(rows), dtype=object),
        )
        self._segments[cell_id] = seg if keep.all() else seg.take(np.flatnonzero(keep))
        return self._segments[cell_id]


def human_dims(result: CellResult) -> list[str]:
    """The human dimensions a finished cell was correlated with, the primary one first."""
    c = result.correlation or {}
    return list(c["dimensions"]) if c.get("dimensions") else [c.get("human_dim", HUMAN)]


def score_type(result: CellResult, human_dim: str) -> str:
    """What kind of human score a cell's quality is measured against, so that correlations are only
    averaged within one kind: a catalogue dataset's `format` in capitals (`DA`, `MQM`; with the
    dimension for a named one, `MQM fluency`); a user file's named dimension (`coherence`: files
    sharing a dimension name share a kind); a user file's unnamed `human` score is a kind of its
    own (`human of my.jsonl`), since nothing says its scale is another file's."""
    ref = result.config.dataset
    if ref.name:
        try:
            kind = str(catalogue_entry(ref.name)["format"]).upper()
        except (UserError, KeyError):
            kind = ref.name
        return kind if human_dim == HUMAN else f"{kind} {human_dim}"
    return human_dim if human_dim != HUMAN else f"{HUMAN} of {Path(ref.path or '').name}"


def _results_in_csv_order(folder: Path, results: list[CellResult]) -> list[CellResult]:
    """`results` in the order of results.csv's cell_id column (cells not in it last, as given)."""
    if not (folder / CSV_FILE).is_file():
        return results
    reader = csv.DictReader(io.StringIO(RunData.results_csv(folder), newline=""))
    if "cell_id" not in (reader.fieldnames or []):
        raise UserError(f"{folder / CSV_FILE}: no cell_id column (not nlgbench's results.csv)")
    order = {cid: i for i, cid in enumerate(dict.fromkeys(r["cell_id"] for r in reader))}
    return sorted(results, key=lambda r: order.get(r.cell_id, len(order)))


def _published_results(folder: Path) -> list[CellResult]:
    path = report_dir(folder) / PUBLISHED_CELLS
    results = []
    for number, line in enumerate(utf8_text(path, read_bytes(path)).split("\n"), start=1):
        if line.strip():
            results.append(result_from_json(line, f"{path} line {number}"))
    return results


def find_results(folder: Path) -> tuple[list[CellResult], SegmentSource]:
    """Every recorded cell result of a run folder and where its segment scores are (see the module
    docstring): the store, else the cell folders, else the published report data."""
    if has_store(folder):
        with Store(folder) as store:
            return store.results(), StoreSource(folder)
    unchecked = UncheckedScores()  # shared with the source, which reads the same files again
    cells, skipped = scan_cells(folder, unchecked)
    if skipped:  # a cell left out would change every figure it is part of, silently
        raise UserError(
            f"{skipped[0]}"
            + (f" (and {len(skipped) - 1} more cell folder(s))" if len(skipped) > 1 else "")
            + f"; `nlgbench repair {folder}` lists them"
        )
    if cells:
        return _results_in_csv_order(folder, cells), CellFolderSource(folder, unchecked=unchecked)
    if (report_dir(folder) / PUBLISHED_CELLS).is_file() and (report_dir(folder) / PUBLISHED_SCORES).is_file():
        return _published_results(folder), PublishedSource(folder)
    raise UserError(
        f"{folder}: no results.sqlite, no cells/*/{RESULT_FILE} and no report/{PUBLISHED_CELLS} with "
        f"report/{PUBLISHED_SCORES} (run `nlgbench run SPEC --out {folder}` or `nlgbench import-scores` first)"
    )


def finished_results(results: list[CellResult], folder: Path, human: str | None) -> list[CellResult]:
    """The finished cells among `results`, with the human dimension `human` where one is named; one
    clear error when none is left."""
    results = [r for r in results if r.status == OK]
    if not results:
        raise UserError(f"{folder}: no finished (ok) cells to report")
    if human is not None:
        known = list(dict.fromkeys(d for r in results for d in human_dims(r)))
        results = [r for r in results if human in human_dims(r)]
        if not results:
            raise unknown_name("human dimension", human, known)
    return results


def cell_record(r: CellResult, human_dim: str) -> dict[str, Any]:
    """One row of `RunData.cells`: a finished cell's labels and measured quantities (NaN where not
    measured: an imported cell has no timing or memory)."""
    cfg = r.config
    timing, memory, env = r.timing, r.memory, r.environment or {}
    return {
        "cell_id": r.cell_id,
        "metric": cfg.metric_label,
        "metric_name": cfg.metric,
        "aligner": cfg.aligner_label,
        "encoder": cfg.encoder.label,
        "dataset": cfg.dataset.label,
        "human_dim": human_dim,
        "score_type": score_type(r, human_dim),
        "device": CUDA if is_cuda(str(cfg.device)) else cfg.device_label,  # `imported`: import-scores
        "batch_size": cfg.batch_size,
        "n_segments": r.n_segments,
        "ms_per_segment": timing.ms_per_segment_median if timing else np.nan,
        "ms_per_segment_repeats": timing.ms_per_segment if timing else [],
        "timing_unstable": timing.unstable if timing else False,  # CV over 5%: rerun before comparing speed
        "peak_rss_mb": memory.peak_rss_mb if memory else np.nan,
        "rss_growth_mb": memory.rss_growth_mb if memory else np.nan,
        "cuda_peak_allocated_mb": (memory.cuda_peak_allocated_mb if memory else None) or np.nan,
        "cuda_peak_reserved_mb": (memory.cuda_peak_reserved_mb if memory else None) or np.nan,
        "params": r.params if r.params is not None else np.nan,
        "disk_mb": r.disk_bytes / 2**20 if r.disk_bytes is not None else np.nan,
        "imported": r.imported,
        "cpu_model": env.get("cpu_model", ""),
        "gpu": env.get("gpu") or "",
        "versions": json.dumps({k: env.get(k) for k in ("torch", "transformers", "pot", "nlgbench")}),
        "threads": env.get("torch_threads"),
    }


def write_published(run: RunData, out: Path) -> list[Path]:
    """report/cells.jsonl and report/metric_scores.csv: what report and compare need besides the
    datasets (every finished cell of the run, whatever the human dimension asked for)."""
    results, source = find_results(run.folder)
    paths = [out / PUBLISHED_CELLS, out / PUBLISHED_SCORES]
    if isinstance(source, PublishedSource) and out.resolve() == report_dir(run.folder).resolve():
        return paths  # read from there: already what would be written
    results = [r for r in results if r.status == OK]
    lines = [json.dumps(json_safe(_published_cell(r))) for r in results]
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(PUBLISHED_COLUMNS)
    for r in results:
        rows, _ = source.rows(r)
        w.writerows([r.cell_id, lp, seg_id, system, repr(float(score))] for lp, seg_id, system, score, _ in rows)
    write_atomic(paths[0], "\n".join(lines) + "\n")
    write_atomic(paths[1], text.getvalue())
    return paths


def _published_cell(result: CellResult) -> dict[str, Any]:
    """A cell's result as report/cells.jsonl holds it: a local model folder given by an absolute path is
    named by its last part, as labels name it (a committed report travels; the cell id is unchanged).
    A data file's path is kept: reading the report again re-reads its human scores from it."""
    raw = result.to_dict()
    name = result.config.encoder.name
    label = model_label(name, result.config.encoder.local)
    # inside every string, mapping keys too: a message such as the leakage guard's names the folder in its text
    return raw if label == name else map_strings(raw, lambda text: text.replace(name, label))


def memory_columns(device: str) -> list[tuple[str, str]]:
    """The memory figure's x columns: model memory, then the process peak, in MiB."""
    if device == CPU:
        return [
            ("rss_growth_mb", "model memory: RSS growth over the post-import baseline (MiB, log)"),
            ("peak_rss_mb", "process peak RSS (MiB, log)"),
        ]
    return [
        ("cuda_peak_allocated_mb", "model memory: peak CUDA memory allocated (MiB, log)"),
        ("cuda_peak_reserved_mb", "peak CUDA memory reserved (MiB, log)"),
    ]
