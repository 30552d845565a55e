"""A local model folder is labelled by its name (or the spec's `label:`), never by a
path of the machine; two folders that would share a label are refused; an old run folder whose
labels were paths still reads; imported cells show device `imported` and no batch size, while their
config (and so their cell id) keeps device `none`."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import write_jsonl
from nlgbench.cli import main
from nlgbench.core.cell import IMPORTED, IMPORTED_DEVICE, CellConfig
from nlgbench.core.result import CellResult
from nlgbench.core.spec import parse_spec
from nlgbench.encoders.registry import EncoderRef, is_path_name, model_label
from nlgbench.foundations.errors import UserError
from nlgbench.reporting.encoder_lookup import find_encoder_label
from nlgbench.runs.store import Store
from test_no_machine_paths import machine_paths
from tiny import same_stat_other_bytes

pytestmark = pytest.mark.integration

RUN_V0 = Path(__file__).parent / "data" / "run_v0"
WORDS = "the a cat dog sat ran on under mat house red green big small".split()


def rows(n: int = 12) -> list[dict]:
    return [
        {
            "lp": "aa-en",
            "seg_id": i + 1,
            "system": f"S{i % 3}",
            "reference": " ".join(WORDS[(i + k) % len(WORDS)] for k in range(5)),
            "hypothesis": " ".join(WORDS[(2 * i + k) % len(WORDS)] for k in range(4)),
            "human": float((i * 7) % 5),
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert: Callable[..., Path]) -> Path:
    return tiny_bert([r[k] for r in rows() for k in ("reference", "hypothesis")], num_layers=2, name="student-minilm")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "mine.jsonl"
    write_jsonl(path, rows())
    return path


def spec(data: Path, *encoders: object) -> dict:
    return {
        "name": "t",
        "datasets": [{"path": str(data)}],
        "metrics": [{"metric": "bertscore", "encoders": [*encoders]}],
    }


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("/data/models/student-minilm", "student-minilm"),
        ("C:\\models\\student-minilm", "student-minilm"),
        ("~/models/student-minilm/", "student-minilm"),
        ("./student-minilm", "student-minilm"),
        ("reports/distill-models/minilm-l3", "minilm-l3"),
        ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),  # a Hub id
        ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2"),
    ],
)
def test_a_name_written_as_a_path_is_labelled_by_its_last_part(name: str, label: str) -> None:
    assert model_label(name) == label and EncoderRef(name).label == label
    assert is_path_name(name) == (label != name)


def test_a_local_folder_is_labelled_by_its_name_and_keeps_its_cell_id(tiny_dir: Path, data: Path) -> None:
    cells = parse_spec(
        spec(data, str(tiny_dir), {"name": str(tiny_dir), "num_layers": 1}, {"name": str(tiny_dir), "label": "mine"})
    ).cells()
    assert [c.encoder.label for c in cells] == ["student-minilm", "student-minilm[num_layers=1]", "mine"]
    assert all(str(tiny_dir.parent) not in c.label for c in cells)  # progress lines and config.json's label
    # the label is not part of the id unless given: the same config from a bare reference has the same id
    plain = CellConfig.from_dict({**cells[0].to_dict(), "encoder": {"name": str(tiny_dir)}})
    assert cells[0].to_dict()["encoder"] == {"name": str(tiny_dir)} and plain.cell_id == cells[0].cell_id
    assert cells[2].to_dict()["encoder"] == {"name": str(tiny_dir), "label": "mine"}
    assert cells[2].cell_id != cells[0].cell_id  # a given label is a key of the config, like a variant
    # config.json / result.json round trip: the label again (the weights fingerprint says it is a folder)
    assert [CellConfig.from_dict(c.to_dict()).encoder.label for c in cells] == [c.encoder.label for c in cells]


def test_a_relative_folder_that_reads_like_a_hub_id_is_labelled_by_its_name(
    tiny_dir: Path, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(tiny_dir, tmp_path / "models" / "student")
    monkeypatch.chdir(tmp_path)
    (cell,) = parse_spec(spec(data, "models/student")).cells()
    assert cell.encoder.name == "models/student" and cell.encoder.label == "student"
    assert CellConfig.from_dict(json.loads(json.dumps(cell.to_dict()))).encoder.label == "student"


def test_two_folders_of_one_name_are_refused_in_one_line(tiny_dir: Path, data: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "run1" / "student-minilm", tmp_path / "run2" / "student-minilm"
    shutil.copytree(tiny_dir, a)
    shutil.copytree(tiny_dir, b)
    with pytest.raises(UserError) as info:
        parse_spec(spec(data, str(a), str(b)))
    line = str(info.value)
    assert "would both be labelled 'student-minilm'" in line and "label:" in line and "\n" not in line
    cells = parse_spec(spec(data, str(a), {"name": str(b), "label": "student-minilm-2"})).cells()
    assert [c.encoder.label for c in cells] == ["student-minilm", "student-minilm-2"]
    with pytest.raises(UserError, match="would both be labelled 'x'"):  # a label given twice
        parse_spec(spec(data, {"name": str(a), "label": "x"}, {"name": str(b), "label": "x"}))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "all-MiniLM-L6-v2", "label": "a/b"}, "label 'a/b' may not contain '/'"),
        ({"name": "all-MiniLM-L6-v2", "label": ""}, "label must be a non-empty string"),
        ({"name": "all-MiniLM-L6-v2", "label": 3}, "label must be a non-empty string"),
        ({"name": "all-MiniLM-L6-v2", "lable": "x"}, "unknown encoder option 'lable'; did you mean 'label'"),
    ],
)
def test_a_bad_label_is_one_line(data: Path, entry: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_spec(spec(data, entry))


def test_compare_finds_a_folder_by_its_path_or_its_name() -> None:
    labels = ["student-minilm", "student-minilm[num_layers=1]", "all-MiniLM-L6-v2"]
    assert find_encoder_label("/old/machine/student-minilm", labels) == "student-minilm"
    assert find_encoder_label("/old/machine/student-minilm[num_layers=1]", labels) == "student-minilm[num_layers=1]"
    assert find_encoder_label("student-minilm", labels) == "student-minilm"
    assert find_encoder_label("/old/machine/other", labels) is None
    assert find_encoder_label("sentence-transformers/all-MiniLM-L6-v2", labels) == "all-MiniLM-L6-v2"


def test_an_old_run_folder_reads_with_names_and_imported_cells(tmp_path: Path) -> None:
    """tests/data/run_v0 was written with absolute folder labels and imported cells at device none,
    batch size 0: its results.csv now names the folders and shows imported cells as such, and the
    cells keep their ids (the stored configs are unchanged)."""
    results = [CellResult.from_json(p.read_text(encoding="utf-8")) for p in sorted(RUN_V0.glob("*.json"))]
    with Store(tmp_path) as store:
        run_id = store.start_run("v0", {}, {})
        for result in results:
            store.record(run_id, store.next_seq(), result, None)
        written = store.write_csv()
    got = list(csv.DictReader(io.StringIO(written.read_text(encoding="utf-8"), newline="")))
    old = list(csv.DictReader(io.StringIO((RUN_V0 / "results.csv").read_text(encoding="utf-8"), newline="")))
    assert [r["cell_id"] for r in got] == [r["cell_id"] for r in old] == [r.cell_id for r in results]
    assert [r["encoder"] for r in old][:3] == [
        "/tmp/h12/run/tiny",
        "/tmp/h12/run/tiny[num_layers=2]",
        "/tmp/h12/run/broken",
    ]
    assert [r["encoder"] for r in got][:3] == ["tiny", "tiny[num_layers=2]", "broken"]
    imported = [(r["device"], r["batch_size"]) for r in got if r["n_repeats"] == "0"]
    assert [(r["device"], r["batch_size"]) for r in old if r["n_repeats"] == "0"] == [("none", "0")] * 2
    assert imported == [(IMPORTED, "")] * 2
    assert [(r["device"], r["batch_size"]) for r in got if r["n_repeats"] != "0"] == [("cpu", "4")] * 4
    assert {r.config.device for r in results if r.imported} == {IMPORTED_DEVICE}  # what the ids hash
    assert not machine_paths(" ".join(r["encoder"] for r in got))


def run_cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    assert code == 0
    return out.getvalue()


def test_a_run_of_a_local_folder_and_an_import_name_no_machine_path(tiny_dir: Path, data: Path, tmp_path: Path) -> None:
    """End to end: results.csv, correlations.csv, compare's JSON and status name the folder, not its path;
    the imported cell shows device `imported` and no batch size, in results.csv and compare; importing
    the same file again replaces its cell (same id) instead of adding one."""
    spec_file, out = tmp_path / "spec.yaml", tmp_path / "run"
    body = {**spec(data, str(tiny_dir)), "batch_size": 4, "repeats": 1, "warmup": 0, "threads": 1}
    spec_file.write_text(json.dumps(body), encoding="utf-8")
    run_cli("run", str(spec_file), "--out", str(out))
    scores = tmp_path / "other-tool.csv"
    scores.write_text(
        "lp,seg_id,system,score\n"
        + "".join(f"{r['lp']},{r['seg_id']},{r['system']},{(i * 3) % 7 + i / 10}\n" for i, r in enumerate(rows())),
        encoding="utf-8",
    )
    for _ in range(2):
        run_cli(
            "import-scores",
            str(scores),
            "--dataset",
            str(data),
            "--metric",
            "bertscore",
            "--encoder",
            "ext",
            "--out",
            str(out),
        )
    table = list(csv.DictReader((out / "results.csv").open(encoding="utf-8", newline="")))
    assert [(r["encoder"], r["device"], r["batch_size"]) for r in table] == [
        ("student-minilm", "cpu", "4"),
        ("ext", IMPORTED, ""),
    ]
    (imported_id,) = [r["cell_id"] for r in table if r["encoder"] == "ext"]
    config = json.loads((out / "cells" / imported_id / "result.json").read_text(encoding="utf-8"))["config"]
    assert (config["device"], config["batch_size"]) == (IMPORTED_DEVICE, 0)  # the id's input, as before
    long = list(csv.DictReader((out / "correlations.csv").open(encoding="utf-8", newline="")))
    assert {(r["encoder"], r["device"]) for r in long} == {("student-minilm", "cpu"), ("ext", IMPORTED)}
    for candidate in (str(tiny_dir), "student-minilm"):
        result = json.loads(
            run_cli("compare", str(out), "--candidate", candidate, "--baseline", "ext", "--json", "--resamples", "100")
        )
        (row,) = result["rows"]
        assert result["candidate"] == "student-minilm" and row["device"] == f"cpu / {IMPORTED}"
        assert not machine_paths(json.dumps(result))
    status = json.loads(run_cli("status", str(out), "--json"))
    assert [c["label"] for c in status["cells"]] == [
        "bertscore | student-minilm | mine | cpu | bs4",
        "bertscore | ext | mine | imported",
    ]
    assert str(tiny_dir) not in (out / "results.csv").read_text(encoding="utf-8")
    assert not machine_paths(json.dumps([c["label"] for c in status["cells"]]))


def test_weights_changed_in_place_run_again_and_the_folder_still_reports(
    tiny_dir: Path, data: Path, tmp_path: Path
) -> None:
    """A model folder whose weight bytes changed (sizes and mtimes put back) is measured again in the same
    run folder: a new cell beside the old one, under one label, and the report still reads the folder (the
    relative table takes the first baseline cell of a label, as compare does)."""
    model = tmp_path / "student-minilm"
    shutil.copytree(tiny_dir, model)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(json.dumps({**spec(data, str(model)), "repeats": 1, "threads": 1}), encoding="utf-8")
    out = tmp_path / "run"
    run_cli("run", str(spec_file), "--out", str(out))
    changed = same_stat_other_bytes(model, tmp_path / "changed")
    shutil.copyfile(changed / "model.safetensors", model / "model.safetensors")
    stat = (changed / "model.safetensors").stat()
    os.utime(model / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    run_cli("run", str(spec_file), "--out", str(out))
    with (out / "results.csv").open(encoding="utf-8", newline="") as fh:
        cells = list(csv.DictReader(fh))
    assert [c["encoder"] for c in cells] == ["student-minilm", "student-minilm"]
    assert cells[0]["cell_id"] != cells[1]["cell_id"] and {c["status"] for c in cells} == {"ok"}
    assert cells[0]["pearson_global"] != cells[1]["pearson_global"]  # other weights, other scores
    run_cli("report", str(out))
    assert (out / "report" / "index.html").is_file()


def test_a_signature_names_a_local_folder_by_its_name_old_ones_too() -> None:
    from nlgbench.core.signature import recorded_signature

    old = "bertscore|enc:/home/ana/models/student-minilm@b183c0b|L2|idf:no|refs:max"
    assert (
        recorded_signature("bertscore", {"signature": old}) == "bertscore|enc:student-minilm@b183c0b|L2|idf:no|refs:max"
    )
    hub = "bertscore|enc:sentence-transformers/all-MiniLM-L6-v2@c9745ed|L6|refs:max"
    assert recorded_signature("bertscore", {"signature": hub}) == hub
