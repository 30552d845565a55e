"""Typed cell config and result (nlgbench.core.cell), the measurement trackers and protocol
(nlgbench.measurement.protocol).

tests/data/run_v0/ is a run folder written before CellResult existed (result.json of measured,
failed and imported cells, and its results.csv): the typed path must reproduce the result.json
files byte for byte (with the format number that files carry since, first) and every column of the
results.csv (under its old name) text for text.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from nlgbench.core.cell import RUN_FORMAT, CellConfig, DatasetRef
from nlgbench.core.result import CellResult, json_safe
from nlgbench.core.scores import write_scores
from nlgbench.encoders.registry import EncoderRef
from nlgbench.measurement import allocator
from nlgbench.measurement.devices import Device
from nlgbench.measurement.protocol import AGREEMENT_TOLERANCE, WARMUP_MIN_ITEMS, measure_scoring, warmup_items
from nlgbench.measurement.trackers import LatencyTracker, MemoryTracker
from nlgbench.metrics.base import PhaseTimer, Scores
from nlgbench.runs.csvfiles import LEGACY_COLUMNS, RESULTS_COLUMNS, csv_row
from nlgbench.runs.store import Store

pytestmark = pytest.mark.unit

RUN_V0 = Path(__file__).parent / "data" / "run_v0"


def v0_results() -> list[Path]:
    return sorted(RUN_V0.glob("*.json"), key=lambda p: int(p.name.split("-")[0]))


def with_format(text: str) -> str:
    """A result.json's text (indent 2) as this nlgbench writes it: the run-folder format first, the rest as is."""
    assert text.startswith("{\n") and '"format"' not in text
    return text.replace("{\n", f'{{\n  "format": {RUN_FORMAT},\n', 1)


def test_result_json_round_trips_byte_for_byte() -> None:
    paths = v0_results()
    statuses = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        result = CellResult.from_json(text)
        assert result.to_json() == with_format(text), path.name
        statuses.append((result.status, result.imported))
    assert statuses == [("ok", False), ("ok", False), ("failed", False), ("ok", False), ("ok", True), ("ok", True)]


def test_results_csv_of_old_results_keeps_every_old_column(tmp_path: Path) -> None:
    """Every column of the old results.csv is still written, with the same text (the renamed ones
    under their old names, LEGACY_COLUMNS, and the same text under their new ones); the lines in
    the same order; columns added since are blank for old results."""
    with Store(tmp_path) as store:
        run_id = store.start_run("v0", {}, {})
        for path in v0_results():
            store.record(run_id, store.next_seq(), CellResult.from_json(path.read_text(encoding="utf-8")), None)
        written = store.write_csv()
        assert [r.cell_id for r in store.results()] == [p.stem.split("-")[1] for p in v0_results()]
    old_text, new_text = (RUN_V0 / "results.csv").read_bytes().decode("utf-8"), written.read_bytes().decode("utf-8")
    old_rows = list(csv.DictReader(io.StringIO(old_text, newline="")))
    reader = csv.DictReader(io.StringIO(new_text, newline=""))
    new_rows = list(reader)
    assert reader.fieldnames == RESULTS_COLUMNS and len(new_rows) == len(old_rows) == 6
    old_columns = list(old_rows[0])
    assert {"pearson", "pearson_pooled", "peak_rss_mb", "weight_mb"} <= set(old_columns) <= set(RESULTS_COLUMNS)
    added = [c for c in RESULTS_COLUMNS if c not in old_columns and c not in LEGACY_COLUMNS.values()]
    assert "truncated_segments" in added
    # labels: a folder by its name, imported cells' device and batch size (tests/test_local_labels.py)
    same = [c for c in old_columns if c not in ("encoder", "device", "batch_size")]
    for old, new in zip(old_rows, new_rows, strict=True):
        assert {k: new[k] for k in same} == {k: old[k] for k in same}
        assert {n: new[n] for n in LEGACY_COLUMNS.values()} == {n: old.get(o, "") for o, n in LEGACY_COLUMNS.items()}
        assert all(new[c] == "" for c in added), {c: new[c] for c in added if new[c]}
    assert any(r["pearson_global"] != "" and r["peak_rss_mib"] != "" for r in new_rows)  # not blank by accident


def test_the_peak_uss_is_written_only_where_known() -> None:
    """Older results have no peak USS: their memory section is left as it was (and results.csv's column
    blank); a newer one writes, reads back and shows it."""
    old = CellResult.from_json(v0_results()[0].read_text(encoding="utf-8"))
    assert old.memory is not None and old.memory.peak_uss_mb is None
    assert "peak_uss_mb" not in old.to_dict()["memory"] and csv_row(old)["peak_uss_mib"] == ""
    newer = replace(old, memory=replace(old.memory, peak_uss_mb=200.25))
    text = newer.to_json()
    assert json.loads(text)["memory"]["peak_uss_mb"] == 200.25
    assert CellResult.from_json(text) == newer and CellResult.from_json(text).to_json() == text
    assert csv_row(newer)["peak_uss_mib"] == round(200.25, 1)


def test_typed_sections_of_a_measured_and_a_failed_result() -> None:
    ok, _, failed, mover, *_ = [CellResult.from_json(p.read_text(encoding="utf-8")) for p in v0_results()]
    assert ok.ok and ok.timing is not None and ok.memory is not None and ok.repeat_agreement is not None
    assert ok.config.encoder == EncoderRef(name=ok.config.encoder.name)
    assert ok.config.options == {"idf": True, "layer": None} and ok.config.options_label == "idf=True"
    assert len(ok.timing.repeat_s) == ok.config.repeats == 2
    assert ok.memory.rss_growth_mb == pytest.approx(ok.memory.peak_rss_mb - ok.memory.baseline_rss_mb)
    assert mover.config.metric_label == "moverscore (wcd)" and mover.config.aligner_label == "wcd"
    assert not failed.ok and failed.timing is None and failed.metric is None
    assert list(failed.to_dict()) == ["format", "cell_id", "label", "status", "error", "config"]


def test_not_finished_results_have_the_failure_shape() -> None:
    config = CellConfig(
        metric="bertscore",
        options={},
        encoder=EncoderRef("m"),
        aligner=None,
        dataset=DatasetRef(name="wmt16", max_segments=3),
        device="cpu",
        batch_size=4,
        repeats=1,
        warmup=1,
        threads=None,
    )
    oom = CellResult.not_finished("abc", "label", config, "x" * 900, oom=True)
    assert oom.status == "oom" and len(oom.error or "") == 500
    assert CellResult.not_finished("abc", "label", config, "boom", oom=False).status == "failed"
    again = CellResult.from_json(oom.to_json())
    assert again == oom and again.config.dataset.label == "wmt16[:3]"
    assert config.label == "bertscore | m | wmt16[:3] | cpu | bs4"


def test_nan_becomes_null() -> None:
    assert json_safe({"a": [1.0, math.nan], "b": (math.inf,)}) == {"a": [1.0, None], "b": [None]}
    text = CellResult.from_json((RUN_V0 / "0-8745714900e1.json").read_text(encoding="utf-8")).to_json()
    data = json.loads(text)
    data["correlation"]["pearson"] = math.nan
    assert json.loads(CellResult.from_dict(data).to_json())["correlation"]["pearson"] is None


def test_write_scores_columns(tmp_path: Path) -> None:
    from nlgbench.data.items import Item

    items = [Item(lp="de-en", seg_id=1, system="", source="s", reference="r", hypothesis="h", human=0.5)]
    write_scores(tmp_path / "scores.csv", items, [0.1], {"f1": [0.1], "precision": [0.2]})
    lines = (tmp_path / "scores.csv").read_text(encoding="utf-8").splitlines()
    assert lines == ["lp,seg_id,system,score,human,f1,precision", "de-en,1,,0.1,0.5,0.1,0.2"]


# ----------------------------------------------------------------------------- trackers and protocol


def test_latency_tracker_syncs_at_the_end_and_times_the_block() -> None:
    calls: list[float] = []
    with LatencyTracker(lambda: calls.append(time.perf_counter())) as lap:
        time.sleep(0.05)
    assert len(calls) == 1 and 0.05 <= lap.seconds < 1.0


def test_memory_tracker_sees_growth_on_cpu() -> None:
    with MemoryTracker(Device("cpu")) as memory:
        block = bytearray(64 * 2**20)
        block[::4096] = b"x" * len(block[::4096])  # touch every page
    assert memory.baseline_rss_mb > 0 and memory.peak_rss_mb >= memory.baseline_rss_mb + 32
    assert memory.cuda_peak_allocated_mb is None and memory.cuda_peak_reserved_mb is None
    with pytest.raises(RuntimeError):
        with MemoryTracker(Device("cpu")) as failed:
            raise RuntimeError("the cell failed")
    assert failed.peak_rss_mb == 0.0  # nothing read from a failed block


def test_the_memory_window_ends_at_close_under_the_measuring_policy() -> None:
    """What runs after `close()` (the warm-up and timed repeats) is not in the cell's memory figures."""
    with MemoryTracker(Device("cpu")) as memory:
        memory.close()
        peak = memory.peak_rss_mb
        block = bytearray(2 * int(peak) * 2**20)  # past any peak so far: the high-water mark moves
        block[::4096] = b"x" * len(block[::4096])
    assert memory.peak_rss_mb == peak > 0
    assert memory.allocator_policy == (allocator.MEASURING if allocator.on_glibc() else None)


class FakeScorer:
    """Scores each item by its index; `drift` is added from the second call on."""

    def __init__(self, drift: float = 0.0) -> None:
        self.calls: list[int] = []
        self.drift = drift

    def score(self, items: Sequence[Any], timer: PhaseTimer) -> Scores:
        with timer.phase("encode"):
            self.calls.append(len(items))
        shift = self.drift if len(self.calls) > 1 else 0.0
        return Scores(primary="f1", columns={"f1": [i + shift for i in range(len(items))]})


def test_protocol_warms_up_then_repeats_and_checks_agreement() -> None:
    scorer = FakeScorer()
    run = measure_scoring(scorer, list(range(100)), warmup=2, repeats=3, batch_size=4)
    assert scorer.calls == [WARMUP_MIN_ITEMS, WARMUP_MIN_ITEMS, 100, 100, 100]
    assert len(run.repeat_s) == 3 and [set(p) for p in run.phases_s] == [{"encode", "other"}] * 3
    # the phases add up to the repeat's wall time: `other` is the rest
    assert all(sum(p.values()) == pytest.approx(t, rel=1e-9) for p, t in zip(run.phases_s, run.repeat_s, strict=True))
    assert run.warmup_passes_s is not None and len(run.warmup_passes_s) == 2 and run.warmup_stable is None  # CPU policy
    assert run.repeat_cpu_s is not None and len(run.repeat_cpu_s) == 3 and run.repeat_cuda_s is None
    assert run.warmup_items == WARMUP_MIN_ITEMS and run.agree and run.max_abs_diff == 0.0
    assert run.scores.score == [float(i) for i in range(100)]

    drifting = measure_scoring(
        FakeScorer(drift=10 * AGREEMENT_TOLERANCE), list(range(5)), warmup=0, repeats=2, batch_size=4
    )
    assert not drifting.agree and drifting.max_abs_diff == pytest.approx(10 * AGREEMENT_TOLERANCE)
    with pytest.raises(ValueError, match="at least one timed repeat"):
        measure_scoring(FakeScorer(), [1], warmup=0, repeats=0, batch_size=1)


def test_warmup_items() -> None:
    assert warmup_items(1000, 64) == 128 and warmup_items(1000, 1) == WARMUP_MIN_ITEMS and warmup_items(5, 64) == 5
