"""One model, one name: a registered Hub id and its registry name are one encoder in
compare and report, a variant suffix kept."""

from __future__ import annotations

import pytest

import nlgbench
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.encoder_lookup import find_encoder_label

pytestmark = pytest.mark.integration

LABELS = ["all-mpnet-base-v2", "all-MiniLM-L6-v2", "all-MiniLM-L6-v2[num_layers=3]"]


def test_a_hub_id_finds_its_registry_names_label() -> None:
    assert find_encoder_label("sentence-transformers/all-MiniLM-L6-v2", LABELS) == "all-MiniLM-L6-v2"
    assert find_encoder_label("sentence-transformers/all-MiniLM-L6-v2[num_layers=3]", LABELS) == LABELS[2]
    assert find_encoder_label("all-MiniLM-L6-v2[num_layers=2]", LABELS) is None  # another variant
    assert find_encoder_label("sentence-transformers/all-distilroberta-v1", LABELS) is None


def test_compare_takes_either_spelling() -> None:
    short = nlgbench.compare("reports/example", "all-MiniLM-L6-v2", "all-mpnet-base-v2", resamples=100)
    hub = nlgbench.compare(
        "reports/example",
        "sentence-transformers/all-MiniLM-L6-v2",
        "sentence-transformers/all-mpnet-base-v2",
        resamples=100,
    )
    assert hub["rows"] == short["rows"] and hub["candidate"] == "all-MiniLM-L6-v2"
    with pytest.raises(UserError, match="unknown encoder 'sentence-transformers/nope'"):
        nlgbench.compare("reports/example", "sentence-transformers/nope", "all-mpnet-base-v2", resamples=100)


def test_status_reads_what_report_reads_without_a_store(capsys: pytest.CaptureFixture[str]) -> None:
    from nlgbench.cli import main

    assert main(["status", "reports/example"]) == 0
    assert capsys.readouterr().out.startswith(
        "reports/example: 3 cell(s) recorded (3 ok, 0 not ok) (read from report/; no results.sqlite)"
    )
