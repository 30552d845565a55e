"""`nlgbench import-scores FILE --dataset D --metric M --encoder E --out DIR`: segment scores computed
by any other tool join a run folder as a cell without timing, correlated, reported and compared
like a measured one. The file is a CSV with the columns `lp, seg_id, system, score` (system empty
for DA data; seg_id an integer or a text id); its keys must be exactly the dataset's (lp, seg_id,
system) keys. An nlgbench cell's own `scores.csv` is accepted as it is: `score` is taken, its
further columns (human, doc_id, the metric's other outputs) are ignored."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from nlgbench.core.cell import IMPORTED_DEVICE, RESULT_FILE, SCORES_FILE, CellConfig, DatasetRef, short_hash
from nlgbench.core.datawarnings import data_warnings
from nlgbench.core.labels import imported_label
from nlgbench.core.result import OK, CellResult, DatasetRecord, MetricRecord
from nlgbench.core.scores import UncheckedScores, write_scores
from nlgbench.core.scores import read_scores as read_cell_scores
from nlgbench.data.catalogue import names_a_file
from nlgbench.data.items import Dataset, Item
from nlgbench.data.loaders import load_dataset
from nlgbench.data.text import csv_table, parse_score
from nlgbench.encoders.registry import EncoderRef
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.files import BOM, read_bytes, utf8_text
from nlgbench.foundations.names import refuse_control, refuse_name
from nlgbench.metrics import get_metric, metric_names
from nlgbench.runs.folder import cell_dir, locked
from nlgbench.runs.resultfile import read_result
from nlgbench.runs.store import open_store
from nlgbench.statistics.summary import correlate_scores

COLUMNS = ("lp", "seg_id", "system", "score")
OWN_SCORES_HEAD = ("lp", "seg_id", "system", "score", "human")  # how nlgbench's own cells/<id>/scores.csv starts


Key = tuple[str, str, str]  # (lp, seg_id, system): how a scores file names an item


def _examples(keys: list[tuple[str, str, str]], n: int = 3) -> str:
    shown = ", ".join(f"({lp}, {seg}, {sys or '-'})" for lp, seg, sys in keys[:n])
    return shown + (f" and {len(keys) - n} more" if len(keys) > n else "")


def read_scores(path: Path) -> dict[tuple[str, str, str], float]:
    """The file's scores by (lp, seg_id, system); every problem is one UserError line."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    text = utf8_text(path, read_bytes(path)).removeprefix(BOM)
    fields, rows = csv_table(path, text)  # every row with the header's field count, or refused naming its line
    missing = [c for c in COLUMNS if c not in fields]
    # a cell's scores.csv: its further columns are outputs
    own = fields[: len(OWN_SCORES_HEAD)] == list(OWN_SCORES_HEAD)
    if own and (path.parent / RESULT_FILE).is_file():  # in its cell folder: whole and unchanged, or refused
        read_cell_scores(path, read_result(path.parent), unchecked=UncheckedScores())
    unknown = [] if own else [f for f in fields if f not in COLUMNS]
    if missing or unknown:
        raise UserError(
            f"{path}: "
            + "; ".join(
                ([f"missing column(s) {', '.join(missing)}"] if missing else [])
                + ([f"unknown column(s) {', '.join(u or '(an empty name)' for u in unknown)}"] if unknown else [])
            )
            + f" (expected: {', '.join(COLUMNS)})"
        )
    out: dict[tuple[str, str, str], float] = {}
    for line, values in rows:
        row = {name: value.strip() for name, value in zip(fields, values, strict=True)}  # spaces around aside
        for column in ("lp", "seg_id", "system"):  # names, as the data's are (messages show them as written)
            refuse_control(row[column], column, f"{path}:{line}")
        seg_id = row["seg_id"]  # text as written: matched to the dataset's ids as text ("007" is not 7)
        if not seg_id:
            raise UserError(f"{path}:{line}: empty seg_id")
        score = parse_score(row["score"], f"{path}:{line}", "score")
        key = (row["lp"], seg_id, row["system"])
        if key in out:
            raise UserError(f"{path}:{line}: duplicate key {_examples([key])}")
        out[key] = score
    if not out:
        raise UserError(f"{path}: no score rows")
    return out


def import_scores(
    path: Path,
    dataset: str,
    metric: str,
    encoder: str,
    out: Path,
    *,
    max_segments: int | None = None,
    lower_is_better: bool | None = None,
) -> CellResult:
    """Join the file to the dataset's items, correlate, and record the cell; returns its result.
    `lower_is_better` None takes the registered metric's direction (higher is better for a name
    not registered); True or False overrides it, e.g. for distances already stored negated. The
    direction is not part of the cell id: importing the same file again with another direction
    replaces the cell. The cell's data warnings are a measured cell's (`data_warnings`): with
    `max_segments`, a head ordered by human score among them."""
    refuse_name(metric, "--metric", "import-scores")  # results.csv, reports and compare name the cell by them
    refuse_name(encoder, "--encoder", "import-scores")
    refuse_control(dataset, "--dataset", "import-scores")  # a catalogue name or a file, whose name labels the cell
    if lower_is_better is None:
        lower_is_better = (not get_metric(metric).higher_is_better) if metric in metric_names() else False
    ds, ref = _imported_dataset(dataset, out, max_segments)
    scores = read_scores(path)
    wanted = [(it.lp, str(it.seg_id), it.system) for it in ds.items]  # str(): integer ids as plainly written
    _check_keys(path, scores, wanted, ref.label, max_segments)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    config = CellConfig(
        metric=metric,
        options={},
        encoder=EncoderRef(name=encoder),
        aligner=None,
        dataset=ref,
        device=IMPORTED_DEVICE,
        batch_size=0,
        repeats=0,
        warmup=0,
        threads=None,
    )
    # the config's device `none` and batch size 0 are hashed as ever (views show `imported`, no batch size)
    cell_id = short_hash({"imported": sha, **config.to_dict()})
    values = [scores[key] for key in wanted]
    # a data file keyed as the config names it
    files = {ref.path: next(reversed(ds.files.values()))} if ref.path and ds.files else ds.files
    correlation = correlate_scores(values, ds.items, ds.human_dims, higher_is_better=not lower_is_better)
    result = CellResult(
        cell_id=cell_id,
        label=imported_label(metric, config.encoder.label, ref.label),
        status=OK,
        error=None,
        config=config,
        imported=True,
        metric=MetricRecord(name=metric, higher_is_better=not lower_is_better, primary="score"),
        scorer={},
        n_segments=len(ds.items),
        dataset=DatasetRecord(name=ds.name, files=files, has_systems=ds.has_systems),
        correlation=correlation,
        environment={
            "imported_from": Path(os.path.relpath(path.resolve(), out.resolve())).as_posix(),
            "sha256": sha,
            "imported_at": time.time(),
        },
        warnings=data_warnings(ds, correlation),
    )
    return _record(out, path, result, ds.items, values)


def _imported_dataset(dataset: str, out: Path, max_segments: int | None) -> tuple[Dataset, DatasetRef]:
    """The dataset the scores belong to, and its reference as the cell records it: a data file by its
    path from the run folder, so the run (and its committed report) reads on any clone and from any
    directory, with no path of this machine in it."""
    is_file = names_a_file(dataset)
    ds = load_dataset(None if is_file else dataset, path=dataset if is_file else None, max_segments=max_segments)
    if is_file:
        relative = Path(os.path.relpath(Path(dataset).resolve(), out.resolve())).as_posix()
        return ds, DatasetRef(path=relative, max_segments=max_segments)
    return ds, DatasetRef(name=dataset, max_segments=max_segments)


def _check_keys(
    path: Path, scores: Mapping[Key, float], wanted: Sequence[Key], label: str, max_segments: int | None
) -> None:
    """One line when the file's keys (lp, seg_id, system) are not exactly the dataset's items."""
    wanted_set = set(wanted)
    unknown = [k for k in scores if k not in wanted_set]
    absent = [k for k in wanted if k not in scores]
    if not unknown and not absent:
        return
    parts = []
    if unknown:
        parts.append(f"{len(unknown)} key(s) not in {label}: {_examples(unknown)}")
    if absent:
        parts.append(
            f"{len(absent)} item(s) of {label} missing from the file: {_examples(absent)}"
            + ("" if max_segments else " (a subset? give --max-segments N)")
        )
    raise UserError(f"{path}: keys (lp, seg_id, system) do not match the dataset: " + "; ".join(parts))


def _record(out: Path, path: Path, result: CellResult, items: Sequence[Item], values: list[float]) -> CellResult:
    """The imported cell written into the run folder (its folder, scores.csv, result.json, the store
    and results.csv), under the run folder's lock; returns the result with its scores.csv record."""
    config = result.config
    folder = cell_dir(out, result.cell_id)
    with locked(out), open_store(out) as store:  # one writer per run folder (nlgbench.runs.folder)
        folder.mkdir(parents=True, exist_ok=True)
        result = replace(result, scores_csv=write_scores(folder / SCORES_FILE, items, values))
        result.write(folder)
        run_id = store.start_run(
            f"import-scores {path.name}", {"import": str(path), **config.to_dict()}, result.environment or {}
        )
        store.record(run_id, store.next_seq(), result, folder / SCORES_FILE)
        store.write_csv()
        store.finish_run(run_id)
    return result
