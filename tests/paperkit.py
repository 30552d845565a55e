"""The run the paper-report tests read (tests/test_report_paper_*.py), a pytest plugin (tests/conftest.py
lists it): `paper_run`, a real sweep reported once a session; the Pearson quality options and one
bootstrap draw within language pairs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nlgbench.cli import main
from nlgbench.data.loaders import load_dataset
from nlgbench.reporting.quality import QualityOptions
from tiny import make_tiny_bert

REPO = Path(__file__).resolve().parents[1]
PEARSON = QualityOptions()


@pytest.fixture(scope="session")
def paper_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep: BERTScore with a tiny random BERT and its 1-layer cut, and sentBLEU (no encoder),
    on two DA datasets (WMT15, WMT16 heads) and one MQM dataset (WMT21 zh-en head)."""
    root = tmp_path_factory.mktemp("paper")
    datasets = [
        {"name": "wmt15", "max_segments": 6},
        {"name": "wmt16", "max_segments": 5},
        {"name": "wmt21", "max_segments": 20},
    ]
    texts = [
        t
        for d in datasets
        for it in load_dataset(d["name"], max_segments=d["max_segments"]).items
        for t in (it.reference, it.hypothesis)
    ]
    model = make_tiny_bert(root / "tiny", texts, num_layers=3)
    spec = {
        "name": "paper",
        "datasets": datasets,
        "batch_size": 16,
        "repeats": 2,
        "threads": 1,
        "metrics": [
            {"metric": "bertscore", "encoders": [str(model), {"name": str(model), "num_layers": 1}]},
            {"metric": "sentbleu"},
        ],
    }
    (root / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    out = root / "run"
    assert main(["run", str(root / "spec.json"), "--out", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    return out


def stratified_draw(lps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One bootstrap draw of segment positions within each language pair (pairs in order of first
    appearance), each pair keeping its size: what report and compare resample at the global level."""
    parts = []
    for lp in dict.fromkeys(lps.tolist()):
        pos = np.flatnonzero(lps == lp)
        parts.append(pos[rng.integers(0, len(pos), size=len(pos))])
    return np.concatenate(parts)
