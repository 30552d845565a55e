"""The transport benchmarks' phase arithmetic (benchmarks/cpu_phases.py): the rest of a round's time,
the time outside the encoder and its share, and CPU seconds recorded beside wall seconds."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import load_script

pytestmark = pytest.mark.unit


def load_cpu_phases() -> Any:
    return load_script("benchmarks/cpu_phases.py", "cpu_phases")


def test_the_time_outside_the_encoder_and_its_share() -> None:
    cpu_phases = load_cpu_phases()
    # a BaryScore round of 10 s: encode 5, tokenize 0.1, barycentre 4.5, transport 0.2, and 0.2 s in no phase;
    # the overlapped tokenisation ran hidden behind the encoder and is not part of the sum
    one = cpu_phases.with_rest(
        {"encode": 5.0, "tokenize": 0.1, "barycentre": 4.5, "transport": 0.2, "tokenize_overlapped": 3.0}, 10.0
    )
    assert one == pytest.approx({"encode": 5.0, "tokenize": 0.1, "barycentre": 4.5, "transport": 0.2, "other": 0.2})
    # outside the encoder: 0.1 + 4.5 + 0.2 + 0.2 = 5.0 s of 10 s
    two = cpu_phases.with_rest({"encode": 6.0, "barycentre": 1.0}, 8.0)  # 1.0 + other 1.0 = 2.0 s of 8 s
    three = cpu_phases.with_rest({"encode": 3.0, "barycentre": 1.0}, 4.0)  # 1.0 s of 4 s, other 0
    outside, share = cpu_phases.outside_encoder([one, two, three])
    assert outside == pytest.approx(2.0)  # median of 5.0, 2.0, 1.0
    assert share == pytest.approx(0.25)  # median of 0.5, 0.25, 0.25
    # per phase the median over the three rounds, over 100 segments (s / 100 * 1000 ms): encode 5, 6, 3 -> 50 ms;
    # tokenize 0.1, 0, 0 -> 0; barycentre 4.5, 1, 1 -> 10; transport 0.2, 0, 0 -> 0; other 0.2, 1, 0 -> 2
    line = cpu_phases.phase_line("baryscore wall", [one, two, three], 100)
    assert line.startswith("baryscore wall: encode 50.00, tokenize 0.00, barycentre 10.00, transport 0.00, other 2.00")
    assert line.endswith("outside the encoder 20.00 ms/segment (25.0% of the total)")
    # a round shorter than its phases (clock granularity) leaves no negative rest
    assert cpu_phases.with_rest({"encode": 1.0}, 0.9)["other"] == 0.0


def test_cpu_seconds_are_recorded_beside_wall_seconds() -> None:
    cpu_phases = load_cpu_phases()
    timer = cpu_phases.CpuPhaseTimer()
    with timer.phase("barycentre"):
        sum(i * i for i in range(200_000))  # work on this thread: CPU time, not sleep
    with timer.phase("barycentre"):
        pass
    assert set(timer.seconds) == set(timer.cpu_seconds) == {"barycentre"}
    assert timer.cpu_seconds["barycentre"] > 0 and timer.seconds["barycentre"] > 0
