"""Energy from hardware counters: the RAPL powercap reader on a folder the test writes
(package zones only, a counter wrap, an unreadable counter), the NVML reader with a stand-in for
pynvml, the protocol's per-repeat bracket, result.json and results.csv, and the n/a path of a
machine without a counter (this one has no /sys/class/powercap). Never a timed test."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import read_csv
from nlgbench.cli import main
from nlgbench.core.result import Timing
from nlgbench.data.loaders import load_dataset
from nlgbench.execution.measured import timing_of_protocol
from nlgbench.measurement.devices import Device
from nlgbench.measurement.energy import (
    NONE,
    NVML,
    POWERCAP_ROOT,
    RAPL,
    EnergyTracker,
    NoCounter,
    RaplCounter,
    nvml_counter,
    rapl_counter,
    wrapped_delta_uj,
)
from nlgbench.measurement.protocol import measure_scoring
from nlgbench.metrics.base import PhaseTimer, Scores
from nlgbench.reporting.relative_table import energy_of
from nlgbench.runs.csvfiles import NO_COUNTER
from test_runner import write_spec

pytestmark = pytest.mark.component

REPORTS = Path(__file__).resolve().parents[1] / "reports"


def zone(root: Path, folder: str, name: str, energy_uj: int, max_range_uj: int) -> Path:
    """A powercap zone folder as the kernel shows it: name, energy_uj, max_energy_range_uj."""
    path = root / folder
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_range_uj}\n")
    return path


def set_uj(path: Path, energy_uj: int) -> None:
    (path / "energy_uj").write_text(f"{energy_uj}\n")


@pytest.fixture
def powercap(tmp_path: Path) -> dict[str, Path]:
    """Two packages, each with a sub-zone, a platform (psys) zone containing both, and an MMIO zone
    named like a package (some laptops): only the two packages may be counted."""
    root = tmp_path / "powercap"
    return {
        "pkg0": zone(root, "intel-rapl:0", "package-0", 1_000, 10_000_000),
        "core0": zone(root, "intel-rapl:0:0", "core", 500, 10_000_000),
        "pkg1": zone(root, "intel-rapl:1", "package-1", 2_000, 20_000_000),
        "dram1": zone(root, "intel-rapl:1:0", "dram", 700, 10_000_000),
        "psys": zone(root, "intel-rapl:2", "psys", 9_000, 10_000_000),
        "mmio": zone(root, "intel-rapl-mmio:0", "package-0", 3_000, 10_000_000),
        "root": root,
    }


def test_rapl_sums_the_package_zones_only(powercap: dict[str, Path]) -> None:
    counter = rapl_counter(powercap["root"])
    assert isinstance(counter, RaplCounter) and counter.name == RAPL
    assert [z.path for z in counter.zones] == [powercap["pkg0"], powercap["pkg1"]]
    assert "package-0" in counter.note and "package-1" in counter.note
    start = counter.read()
    added_uj = {"pkg0": 1_500_000, "pkg1": 2_250_000, "core0": 111, "dram1": 222, "psys": 333, "mmio": 444}
    for key, added in added_uj.items():
        set_uj(powercap[key], int((powercap[key] / "energy_uj").read_text()) + added)
    assert counter.joules(start, counter.read()) == pytest.approx((1_500_000 + 2_250_000) / 1e6)


def test_rapl_counter_wrap_between_start_and_end(powercap: dict[str, Path]) -> None:
    counter = rapl_counter(powercap["root"])
    assert isinstance(counter, RaplCounter)
    set_uj(powercap["pkg0"], 10_000_000 - 300)  # 300 uJ before package-0's counter wraps
    start = counter.read()
    set_uj(powercap["pkg0"], 200)  # wrapped: 300 + 200 uJ drawn
    set_uj(powercap["pkg1"], 2_000 + 1_000)
    assert counter.joules(start, counter.read()) == pytest.approx((300 + 200 + 1_000) / 1e6)
    assert wrapped_delta_uj(5, 5, 100) == 0 and wrapped_delta_uj(90, 10, 100) == 20


def test_rapl_unreadable_counter_is_no_counter_with_the_reason() -> None:
    """energy_uj is root-only on recent kernels: as another user it cannot be read. This test runs as
    root here, so it reads as `nobody` (effective uid) from a folder that user can enter."""
    folder = Path(tempfile.mkdtemp(prefix="powercap-"))
    try:
        folder.chmod(0o755)
        pkg = zone(folder, "intel-rapl:0", "package-0", 1_000, 10_000_000)
        (pkg / "energy_uj").chmod(0o400)
        if os.geteuid() == 0:
            os.seteuid(65534)
            try:
                counter = rapl_counter(folder)
            finally:
                os.seteuid(0)
        else:
            counter = rapl_counter(folder)
    finally:
        shutil.rmtree(folder)
    assert isinstance(counter, NoCounter) and counter.name == NONE
    assert "energy_uj" in counter.note and "permission denied" in counter.note


def test_rapl_without_powercap_or_package_zones(tmp_path: Path) -> None:
    missing = rapl_counter(tmp_path / "nothing")
    assert isinstance(missing, NoCounter) and "nothing" in missing.note
    zone(tmp_path / "pc", "intel-rapl:0", "psys", 1, 10)
    only_psys = rapl_counter(tmp_path / "pc")
    assert isinstance(only_psys, NoCounter) and "no RAPL package zone" in only_psys.note
    (tmp_path / "bad").mkdir()
    zone(tmp_path / "bad", "intel-rapl:0", "package-0", 1, 10)
    (tmp_path / "bad" / "intel-rapl:0" / "energy_uj").write_text("garbage\n")
    assert isinstance(rapl_counter(tmp_path / "bad"), NoCounter)


@pytest.mark.skipif(POWERCAP_ROOT.exists(), reason="this machine has a powercap folder")
def test_no_counter_on_this_machine() -> None:
    counter = Device("cpu").energy_counter()
    assert isinstance(counter, NoCounter) and str(POWERCAP_ROOT) in counter.note
    with EnergyTracker(counter) as tracker:
        pass
    assert tracker.joules is None


# ----------------------------------------------------------------------------- NVML with a stand-in


class FakeNvml:
    """The part of pynvml the energy reader calls; the total energy rises by `step_mj` per read."""

    class NVMLError(Exception):
        pass

    def __init__(self, start_mj: int, step_mj: int, supported: bool = True) -> None:
        self.total_mj, self.step_mj, self.supported = start_mj, step_mj, supported
        self.initialised = False
        self.handles: list[Any] = []

    def nvmlInit(self) -> None:  # noqa: N802 (pynvml's names)
        self.initialised = True

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple[str, int]:  # noqa: N802
        self.handles.append(("index", index))
        return self.handles[-1]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> tuple[str, str]:  # noqa: N802
        self.handles.append(("uuid", uuid))
        return self.handles[-1]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:  # noqa: N802
        assert self.initialised and handle in self.handles
        if not self.supported:
            raise self.NVMLError("Not Supported")
        self.total_mj += self.step_mj
        return self.total_mj


def test_nvml_reads_millijoules_of_the_cells_device() -> None:
    fake = FakeNvml(start_mj=123_456_789, step_mj=2_500)
    counter = Device("cuda").energy_counter(nvml=fake)  # CUDA cells read NVML
    assert counter.name == NVML and not isinstance(counter, NoCounter)
    with EnergyTracker(counter) as tracker:
        pass
    assert tracker.joules == pytest.approx(2_500 / 1000)
    kind, _ = fake.handles[0]
    assert kind == ("uuid" if torch.cuda.is_available() else "index")


def test_nvml_not_supported_is_no_counter_with_the_reason() -> None:
    counter = nvml_counter("cuda:0", FakeNvml(0, 1, supported=False))
    assert isinstance(counter, NoCounter) and "Not Supported" in counter.note


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="pynvml is installed here")
def test_nvml_without_pynvml_is_no_counter() -> None:
    counter = nvml_counter("cuda")
    assert isinstance(counter, NoCounter) and "nvidia-ml-py" in counter.note


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_nvml_counter_on_cuda() -> None:
    """The GPU's own counter over ~1 s of matrix products (needs pynvml and a Volta or later GPU)."""
    counter = nvml_counter("cuda")
    if isinstance(counter, NoCounter):
        pytest.skip(counter.note)
    x = torch.randn(4096, 4096, device="cuda")
    with EnergyTracker(counter, lambda: torch.cuda.synchronize()) as tracker:
        for _ in range(200):
            x = torch.tanh(x @ x)
    assert tracker.joules is not None and tracker.joules > 0


# ----------------------------------------------------------------------------- the protocol and the results


class HeatingScorer:
    """Adds a known number of microjoules to package-0's counter per item scored, wrapping at the
    zone's range, and counts its passes."""

    def __init__(self, pkg: Path, uj_per_item: int, max_range_uj: int) -> None:
        self.pkg, self.uj_per_item, self.max_range_uj = pkg, uj_per_item, max_range_uj

    def score(self, items: Sequence[Any], timer: PhaseTimer) -> Scores:
        now = int((self.pkg / "energy_uj").read_text())
        set_uj(self.pkg, (now + self.uj_per_item * len(items)) % self.max_range_uj)
        return Scores(primary="f1", columns={"f1": [0.0] * len(items)})


def test_protocol_reads_energy_around_each_timed_repeat_only(tmp_path: Path) -> None:
    """Warm-up passes draw energy too, but only the timed repeats' is recorded, one figure each."""
    pkg = zone(tmp_path, "intel-rapl:0", "package-0", 0, 10_000_000)
    uj_per_item, items = 9_000, list(range(300))  # 2.7 J a pass: the counter wraps during the repeats
    run = measure_scoring(
        HeatingScorer(pkg, uj_per_item, 10_000_000),
        items,
        warmup=2,
        repeats=5,
        batch_size=4,
        energy=rapl_counter(tmp_path),
    )
    assert run.energy_counter == RAPL and run.energy_note and "package-0" in run.energy_note
    assert run.energy_j == pytest.approx([uj_per_item * len(items) / 1e6] * 5)
    timing = timing_of_protocol(0.1, 1.0, 0.2, run, len(items))
    assert timing.energy_j == run.energy_j and timing.energy_counter == RAPL
    assert {"energy_j", "energy_counter", "energy_note"} <= set(timing.to_dict())
    assert Timing(**json.loads(json.dumps(timing.to_dict()))) == timing


def test_protocol_without_a_counter_records_none_and_the_reason(tmp_path: Path) -> None:
    scorer = HeatingScorer(zone(tmp_path, "x", "package-0", 0, 10), 0, 10)
    run = measure_scoring(scorer, [1, 2], warmup=0, repeats=2, batch_size=1, energy=NoCounter("no counter here"))
    assert run.energy_j is None and run.energy_counter == NONE and run.energy_note == "no counter here"
    timing = timing_of_protocol(0.1, 1.0, 0.2, run, 2).to_dict()
    assert "energy_j" not in timing and timing["energy_counter"] == NONE


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    items = load_dataset("wmt16", max_segments=4).items
    return tiny_bert([t for it in items for t in (it.reference, it.hypothesis)])


@pytest.mark.integration
def test_cell_records_this_machines_counter_in_result_json_and_results_csv(tiny_dir: Path, tmp_path: Path) -> None:
    """A real cell (worker process): here there is no counter, so `none` with the reason and
    results.csv's "n/a (no counter)"; on a machine whose RAPL can be read, joules per segment."""
    spec = write_spec(tmp_path / "spec.yaml", [str(tiny_dir)], max_segments=4)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out)]) == 0
    (row,) = read_csv(out / "results.csv")
    timing = json.loads((out / "cells" / row["cell_id"] / "result.json").read_text())["timing"]
    expected = Device("cpu").energy_counter()
    assert timing["energy_counter"] == expected.name
    assert main(["report", str(out)]) == 0
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    header = page.split("<caption>Measured quantities</caption>")[1].split("</tr>")[0]
    assert "CPU J/seg" in header and "GPU J/seg" not in header  # the CUDA column has no cell: left out
    if isinstance(expected, NoCounter):
        assert timing["energy_note"] == expected.note and "energy_j" not in timing
        assert row["energy_counter"] == NO_COUNTER and row["energy_j_per_segment"] == ""
        assert f"<td>{NO_COUNTER}</td>" in page  # the per-encoder table
        assert f"{NO_COUNTER}: {html.escape(expected.note)}" in page  # the run's facts say why
    else:
        assert len(timing["energy_j"]) == len(timing["repeat_s"])
        assert row["energy_counter"] == expected.name and float(row["energy_j_per_segment"]) > 0


def test_cells_recorded_before_energy_show_no_energy(tmp_path: Path) -> None:
    """Cells written before energy was measured (the committed example's, their energy fields taken
    out) have no energy column, no fact, not 'n/a'."""
    copy = tmp_path / "example"
    shutil.copytree(REPORTS / "example", copy)
    cells = copy / "report" / "cells.jsonl"
    records = [json.loads(line) for line in cells.read_text(encoding="utf-8").splitlines() if line.strip()]
    for record in records:
        for key in ("energy_j", "energy_counter", "energy_note"):
            record["timing"].pop(key, None)
    written = cells.read_text(encoding="utf-8").splitlines()
    assert any("energy_counter" in json.loads(line)["timing"] for line in written)  # today's cells have it
    cells.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["report", str(copy)]) == 0
    page = (copy / "report" / "index.html").read_text(encoding="utf-8")
    assert "J/seg" not in page and NO_COUNTER not in page and "<dt>energy</dt>" not in page


def test_energy_per_encoder_mean_no_counter_or_unknown() -> None:
    measured = pd.DataFrame({"energy_j_per_segment": [0.5, np.nan, 0.25], "energy_counter": ["rapl", "none", "rapl"]})
    assert energy_of(measured) == pytest.approx((0.5 + 0.25) / 2)
    assert energy_of(pd.DataFrame({"energy_j_per_segment": [np.nan], "energy_counter": ["none"]})) == NO_COUNTER
    assert np.isnan(energy_of(pd.DataFrame({"energy_j_per_segment": [np.nan], "energy_counter": [""]})))
    assert np.isnan(energy_of(pd.DataFrame({"ms_per_segment": [1.0]})))
