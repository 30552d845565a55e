"""The device of a cell, read once: `nlgbench.foundations.devicenames` (the one reader of device names),
`nlgbench.measurement.devices.Device` (what the protocol asks of the device), the protocol's cell
sequence (`measure_cell`: every phase in order, the worker's callables, one record back) and the
metric's process warm-up hook (`MetricInfo.warm_up`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from nlgbench.data.items import Dataset
from nlgbench.foundations.devicenames import CPU, CUDA, cuda_index, device_kind, is_cuda, known_device, parse_device
from nlgbench.foundations.errors import UserError
from nlgbench.measurement import allocator
from nlgbench.measurement.devices import Device, check_device
from nlgbench.measurement.energy import NONE, NVML, RAPL
from nlgbench.measurement.protocol import WARMUP_MIN_ITEMS, measure_cell
from nlgbench.metrics.base import PhaseTimer, Scores

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "kind", "index"), [("cpu", CPU, 0), ("cuda", CUDA, 0), ("cuda:0", CUDA, 0), ("cuda:3", CUDA, 3)]
)
def test_a_device_name_is_read_once_into_kind_and_index(name: str, kind: str, index: int) -> None:
    parsed = parse_device(name)
    assert (parsed.name, parsed.kind, parsed.index, parsed.is_cuda) == (name, kind, index, kind == CUDA)
    assert known_device(name) and is_cuda(name) == (kind == CUDA)
    assert device_kind(name) == kind and cuda_index(name) == index
    device = Device(name)
    assert (device.name, device.is_cuda, device.index) == (name, kind == CUDA, index)


@pytest.mark.parametrize("name", ["gpu", "cuda:", "cuda:x", "CPU", " cpu", "cuda:1 ", "", 3, None])
def test_an_unknown_device_name_is_one_line(name: Any) -> None:
    assert not known_device(name)
    with pytest.raises(UserError, match=r"^unknown device .* \(use cpu, cuda or cuda:N\)$"):
        parse_device(name)
    with pytest.raises(UserError, match="unknown device"):
        Device(name)
    with pytest.raises(UserError, match="unknown device"):
        check_device(name)


def test_the_cpu_device_does_nothing_the_gpu_would() -> None:
    cpu = Device("cpu")
    cpu.require()
    cpu.synchronise()
    cpu.reset_peaks()
    assert cpu.peaks_mb() == (None, None) and cpu.sm_clock_mhz() is None
    assert cpu.energy_counter().name in (RAPL, NONE)
    check_device("cpu")


class FakeNvml:
    """pynvml's calls the energy counter makes, answering for GPU `index`."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.asked.append(index)
        return f"gpu{index}"

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.asked.append(uuid)
        return uuid

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        return 1000


def test_a_cuda_device_reads_nvml_of_its_own_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here: NVML is asked by its UUID (tests/test_energy.py)")
    fake = FakeNvml()
    counter = Device("cuda:2").energy_counter(nvml=fake)
    assert counter.name == NVML and "cuda:2" in counter.note
    assert fake.asked == [2]  # by the index the name gives, where torch sees no GPU


class Scorer:
    """Records what the protocol asked of it, in order."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def prepare(self, items: Sequence[Any]) -> None:
        self.calls.append(f"prepare {len(items)}")

    def score(self, items: Sequence[Any], timer: PhaseTimer) -> Scores:
        self.calls.append(f"score {len(items)}")
        return Scores(primary="f1", columns={"f1": [float(i) for i in range(len(items))]})

    def describe(self) -> dict[str, Any]:
        return {}


def test_the_protocol_runs_every_phase_in_order_and_returns_one_record() -> None:
    calls: list[str] = []
    items = list(range(40))

    def load_data() -> Dataset:
        calls.append("data")
        return Dataset(name="toy", items=items, has_systems=False)  # items of any kind: the scorer is a stand-in

    def check(dataset: Dataset) -> str:
        calls.append(f"check {dataset.name}")
        return "nothing to check"

    def load_scorer() -> tuple[Scorer, float | None]:
        calls.append("load")
        return Scorer(calls), 0.25

    stages: list[str] = []
    measured = measure_cell(
        Device("cpu"), load_data, check, load_scorer, warmup=1, repeats=2, batch_size=4, on_stage=stages.append
    )
    assert calls == [
        "data",
        "check toy",
        "load",
        "prepare 40",
        "score 40",  # the memory pass: all items
        f"score {WARMUP_MIN_ITEMS}",  # the CPU warm-up: a prefix
        "score 40",
        "score 40",
    ]
    assert stages == ["prepare", "memory pass", "warm-up", "repeat 1/2", "repeat 2/2"]
    assert measured.dataset.items == items and measured.checked == "nothing to check"
    assert measured.export_s == 0.25 and measured.load_s < 0  # the export's seconds are taken out of load_s
    assert len(measured.run.repeat_s) == 2 and measured.run.agree and measured.memory_pass_s >= 0
    assert measured.memory.baseline_rss_mb > 0 and measured.memory.peak_rss_mb > 0  # read when the window closed
    assert measured.memory.allocator_policy == (allocator.MEASURING if allocator.on_glibc() else None)


def test_a_failed_data_check_stops_before_the_model_loads() -> None:
    loaded: list[str] = []

    def refuse(dataset: Dataset) -> str:
        raise ValueError("leak")

    def load_scorer() -> tuple[Scorer, float | None]:
        loaded.append("load")
        return Scorer([]), None

    with pytest.raises(ValueError, match="leak"):
        measure_cell(
            Device("cpu"),
            lambda: Dataset(name="toy", items=[], has_systems=False),
            refuse,
            load_scorer,
            warmup=0,
            repeats=1,
            batch_size=1,
        )
    assert loaded == []


def test_the_metric_warm_up_hook() -> None:
    """Nothing by default; BaryScore compiles its kernels there (run by the worker's start-up), not at import."""
    from nlgbench.metrics import get_metric
    from nlgbench.metrics.barycentre import compile_kernels

    assert get_metric("bertscore").warm_up() is None
    assert get_metric("baryscore").warm_up is compile_kernels
