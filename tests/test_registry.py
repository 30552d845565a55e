"""Registries (nlgbench.foundations.lazyregistry): lazy entries, type check, did-you-mean; the user's own encoder and
dataset files (environment and spec keys); a metric installed by entry point, found by `list` and a sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from helpers import fake_da, minimal_spec
from nlgbench.cli import main
from nlgbench.data.catalogue import USER_CATALOGUES, dataset_names, load_catalogue
from nlgbench.encoders.registry import USER_ENCODERS, EncoderRef, check_layers, find_entry, registry, resolve_source
from nlgbench.foundations.errors import UserError
from nlgbench.foundations.lazyregistry import Registry, load_yaml, yaml_problem
from nlgbench.metrics import get_metric, metric_names, metric_registry
from nlgbench.metrics.base import MetricInfo

pytestmark = pytest.mark.unit

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def no_spec_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files merged by specs in one test do not reach the next one."""
    monkeypatch.setattr(USER_ENCODERS, "added", [])
    monkeypatch.setattr(USER_CATALOGUES, "added", [])
    monkeypatch.delenv("NLGBENCH_ENCODERS", raising=False)
    monkeypatch.delenv("NLGBENCH_CATALOGUE", raising=False)


# --------------------------------------------------------------------------- the Registry class


def test_lazy_entry_loads_on_first_get_only() -> None:
    calls: list[str] = []

    def load() -> str:
        calls.append("x")
        return "loaded"

    reg: Registry[str] = Registry("thing", str)
    reg.register_lazy("x", load)
    assert "x" in reg and reg.names() == ["x"] and calls == []
    assert reg.get("x") == "loaded" and reg.get("x") == "loaded"
    assert calls == ["x"]


def test_dotted_path_entry_and_type_check() -> None:
    reg: Registry[MetricInfo] = Registry("metric", MetricInfo)
    reg.register_lazy("bert", "nlgbench.metrics.bertscore:INFO")
    reg.register_lazy("module", "nlgbench.metrics.bertscore")
    assert reg.get("bert").name == "bertscore"
    with pytest.raises(UserError, match=r"metric 'module': registered entry is a module, not a MetricInfo"):
        reg.get("module")


def test_unknown_name_did_you_mean_and_override() -> None:
    reg: Registry[int] = Registry("number", int)
    reg.register("seven", 7)
    reg.register_lazy("eight", lambda: 8)
    with pytest.raises(UserError, match=r"unknown number 'sevn'; did you mean 'seven'\?"):
        reg.get("sevn")
    reg.register("eight", 80)  # a later registration replaces the lazy one
    assert [v for _, v in reg.items()] == [80, 7]


def test_packaged_registries_keep_their_names() -> None:
    assert metric_names() == sorted(
        [
            "bertscore",
            "moverscore",
            "baryscore",
            "bartscore",
            "xmoverscore",
            "sentsim",
            "frugalscore",
            "sentbleu",
            "chrf",
            "rouge1",
            "rouge2",
            "rougeL",
        ]
    )
    assert get_metric("bertscore").name == "bertscore"
    with pytest.raises(UserError, match="did you mean 'bertscore'"):
        get_metric("bertscor")
    assert "all-MiniLM-L6-v2" in registry() and resolve_source("all-MiniLM-L6-v2") == MINILM
    assert dataset_names() == ["wmt15", "wmt16", "wmt20", "wmt21"]


def test_check_layers_is_the_one_layer_check() -> None:
    check_layers(EncoderRef("m", num_layers=3), 6, 3, "here")
    for ref, depth, layer, message in [
        (EncoderRef("m"), 6, -1, "here: layer must be >= 0, got -1"),
        (EncoderRef("m", num_layers=7), 6, None, "here: num_layers=7 but m has only 6 layers"),
        (EncoderRef("m", num_layers=3), 6, 4, r"here: layer=4 but encoder m\[num_layers=3\] has only 3 layers"),
        (EncoderRef("m"), 6, 7, "here: layer=7 but encoder m has only 6 layers"),
    ]:
        with pytest.raises(UserError, match=message):
            check_layers(ref, depth, layer, "here")


# --------------------------------------------------------------------------- user files: environment


def write_yaml(path: Path, doc: object) -> Path:
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@pytest.mark.component
def test_env_encoder_file_merged_over_packaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = write_yaml(
        tmp_path / "enc.yaml",
        {
            "encoders": {
                "my-minilm": {"hub_id": MINILM, "family": "bert", "layers": 6},
                "bert-base": {"hub_id": "someone/my-bert", "layers": 12, "notes": "mine"},
            }
        },
    )
    monkeypatch.setenv("NLGBENCH_ENCODERS", str(mine))
    assert resolve_source("my-minilm") == MINILM
    entry = find_entry("bert-base")
    assert entry is not None and entry.hub_id == "someone/my-bert" and entry.notes == "mine"
    assert main(["list", "encoders"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["my-minilm"][1] == MINILM and rows["bert-base"][1] == "someone/my-bert"
    assert "all-mpnet-base-v2" in rows


def test_env_catalogue_file_merged_over_packaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue = fake_da(
        tmp_path,
        monkeypatch,
        {"source": ["s1", "s2"], "reference": ["r1", "r2"], "mt-system": ["h1", "h2"], "human": ["0.5", "-1"]},
    )
    catalogue["datasets"]["wmt16"] = dict(load_catalogue()["datasets"]["wmt16"], description="my wmt16")
    monkeypatch.setenv("NLGBENCH_CATALOGUE", str(write_yaml(tmp_path / "cat.yaml", catalogue)))
    assert dataset_names() == ["fake", "wmt15", "wmt16", "wmt20", "wmt21"]
    assert main(["list", "datasets"]) == 0
    out = capsys.readouterr().out
    assert "my wmt16" in out and any(line.split()[0] == "fake" for line in out.splitlines())


@pytest.mark.parametrize(
    "var, what, content, message",
    [
        ("NLGBENCH_ENCODERS", "encoders", None, "cannot read the encoder registry {path}"),
        ("NLGBENCH_ENCODERS", "encoders", "encoders: [unclosed", "encoder registry {path} is not valid YAML"),
        ("NLGBENCH_ENCODERS", "encoders", "models: {}", "encoder registry {path} has no 'encoders' mapping"),
        (
            "NLGBENCH_ENCODERS",
            "encoders",
            "encoders: {mine: {layers: 3}}",
            "encoder registry {path}: entry 'mine' needs a 'hub_id'",
        ),
        ("NLGBENCH_CATALOGUE", "datasets", None, "cannot read the dataset catalogue {path}"),
        (
            "NLGBENCH_CATALOGUE",
            "datasets",
            "datasets: {mine: 3}",
            "dataset catalogue {path}: entry 'mine' must be a mapping",
        ),
        (
            "NLGBENCH_ENCODERS",
            "encoders",
            "encoders:\n  mine: {hub_id: a/b}\n  mine: {hub_id: c/d}\n",
            "encoder registry {path} is not valid YAML at line 3, column 3: repeated key 'mine' (first at line 2)",
        ),
    ],
    ids=["enc-missing", "enc-yaml", "enc-key", "enc-hub_id", "cat-missing", "cat-entry", "enc-repeated"],
)
def test_bad_env_file_is_one_line_exit_2(
    var: str,
    what: str,
    content: str | None,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "mine.yaml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setenv(var, str(path))
    assert main(["list", what]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(path=path) in err


# --------------------------------------------------------------------------- user files: spec keys


@pytest.mark.component
def test_spec_files_relative_to_the_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue = fake_da(
        tmp_path,
        monkeypatch,
        {"source": ["s1", "s2"], "reference": ["r1", "r2"], "mt-system": ["h1", "h2"], "human": ["0.5", "-1"]},
    )
    (tmp_path / "reg").mkdir()
    write_yaml(tmp_path / "reg" / "cat.yaml", catalogue)
    write_yaml(tmp_path / "reg" / "enc.yaml", {"encoders": {"my-minilm": {"hub_id": MINILM, "layers": 6}}})
    spec = minimal_spec(
        encoders_file="reg/enc.yaml",
        catalogue_file="reg/cat.yaml",
        datasets=["fake"],
        metrics=[{"metric": "bertscore", "encoders": [{"name": "my-minilm", "num_layers": 3}]}],
    )
    write_yaml(tmp_path / "spec.yaml", spec)
    monkeypatch.chdir(tmp_path / "reg")  # paths resolve against the spec's folder, not the working one
    assert main(["run", str(tmp_path / "spec.yaml"), "--dry-run"]) == 0
    assert "bertscore | my-minilm[num_layers=3] | fake | cpu | bs64" in capsys.readouterr().out


def test_spec_files_travel_in_the_cells_config_not_the_environment(tmp_path: Path) -> None:
    """A spec's registry files reach the worker in its cell's config.json (`registry_files`), not in
    its environment; they join neither the cell id nor result.json's config, so ids stay as they were."""
    from nlgbench.core.cell import read_config, use_registry_files, write_config
    from nlgbench.core.spec import load_spec
    from nlgbench.execution.workerprocess import worker_environment

    enc = write_yaml(tmp_path / "enc.yaml", {"encoders": {"my-minilm": {"hub_id": MINILM, "layers": 6}}})
    metrics = [{"metric": "chrf"}]
    plain = load_spec(write_yaml(tmp_path / "plain.yaml", minimal_spec(metrics=metrics))).cells()
    assert [c.registry_files for c in plain] == [{}]
    (cell,) = load_spec(
        write_yaml(tmp_path / "own.yaml", minimal_spec(encoders_file="enc.yaml", metrics=metrics))
    ).cells()
    assert cell.registry_files == {"encoders": (str(enc.resolve()),)}
    assert cell.cell_id == plain[0].cell_id and "registry_files" not in cell.to_dict()
    assert "NLGBENCH_ENCODERS" not in worker_environment(1)
    write_config(tmp_path, cell.cell_id, cell.label, cell)
    assert read_config(tmp_path)[2].registry_files == cell.registry_files
    USER_ENCODERS.added.clear()  # a fresh worker: nothing merged until its config says so
    use_registry_files(read_config(tmp_path)[2].registry_files)
    assert USER_ENCODERS.added == [enc.resolve()] and "my-minilm" in registry().names()


@pytest.mark.parametrize(
    "key, content, message",
    [
        ("encoders_file", None, "spec.yaml.encoders_file: cannot read the encoder registry {path}"),
        (
            "catalogue_file",
            "datasets: [a, b]",
            "spec.yaml.catalogue_file: dataset catalogue {path} has no 'datasets' mapping",
        ),
        (
            "encoders_file",
            "encoders: {m: {hub_id: x/y, layers: 0}}",
            "encoder registry {path}: entry 'm': layers must be an integer >= 1",
        ),
    ],
)
def test_bad_spec_file_is_one_line_exit_2(
    key: str, content: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.yaml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    write_yaml(tmp_path / "spec.yaml", minimal_spec(**{key: "mine.yaml"}))
    assert main(["run", str(tmp_path / "spec.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(path=path) in err
    assert USER_ENCODERS.added == [] and USER_CATALOGUES.added == []  # a bad file is not merged


# --------------------------------------------------------------------------- a metric by entry point

PLUGIN = '''"""A trivial metric installed as a plugin: the hypothesis length in characters."""
from dataclasses import dataclass

from nlgbench.encoders.registry import resolve_source
from nlgbench.metrics.base import MetricInfo, Scores


@dataclass
class LengthOptions:
    pass


class LengthScorer:
    def __init__(self, encoder_ref, options, device, batch_size):
        self.source = resolve_source(encoder_ref.name)
        if self.source != "{expected}":  # in a sweep's worker: the spec's encoder file must have reached it
            raise RuntimeError(f"encoder {{encoder_ref.name}} resolved to {{self.source}}")

    def prepare(self, items):
        pass

    def score(self, items, timer):
        return Scores("length", {{"length": [float(len(it.hypothesis)) for it in items]}})

    def describe(self):
        return {{"params": 0, "disk_bytes": 0, "source": self.source}}


INFO = MetricInfo(name="hyplength", description="hypothesis length in characters (test plugin)", needs=(),
                  higher_is_better=True, corpus_state=False, options_class=LengthOptions, accepts_aligners=False,
                  build=LengthScorer)
'''


def make_distribution(root: Path, entry_points: str) -> Path:
    """A tiny installed distribution on a folder: module `hyplength_plugin` and its dist-info with entry points."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "hyplength_plugin.py").write_text(PLUGIN.format(expected=MINILM), encoding="utf-8")
    info = root / "hyplength_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hyplength-plugin\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[nlgbench.metrics]\n{entry_points}", encoding="utf-8")
    return root


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Install a plugin distribution with the given entry points on sys.path; the metric registry is read afresh."""

    def put(entry_points: str) -> None:
        monkeypatch.syspath_prepend(str(make_distribution(tmp_path / "site", entry_points)))
        metric_registry.cache_clear()

    yield put
    metric_registry.cache_clear()  # before sys.path is restored: the next use reads the real entry points
    sys.modules.pop("hyplength_plugin", None)


def test_entry_point_metric_module_or_info(install: Callable[[str], None]) -> None:
    install("hyplength = hyplength_plugin\nlength2 = hyplength_plugin:INFO\n")
    assert {"hyplength", "length2", "bertscore"} <= set(metric_names())
    import hyplength_plugin  # type: ignore[import-not-found]

    assert get_metric("hyplength") is hyplength_plugin.INFO and get_metric("length2") is hyplength_plugin.INFO


def test_entry_point_without_info_is_a_user_error(install: Callable[[str], None]) -> None:
    install("broken = nlgbench.foundations.errors\n")
    assert "broken" in metric_names()
    with pytest.raises(UserError, match="metric 'broken': registered entry is a module, not a MetricInfo"):
        get_metric("broken")


def nlgbench_command(*args: str, pythonpath: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed `nlgbench` command in a fresh process, with `pythonpath` first on its path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(pythonpath), os.environ.get("PYTHONPATH")) if p))
    return subprocess.run(
        [str(Path(sys.executable).parent / "nlgbench"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.integration
def test_entry_point_metric_listed_by_the_command(tmp_path: Path) -> None:
    site = make_distribution(tmp_path / "site", "hyplength = hyplength_plugin\n")
    done = nlgbench_command("list", "metrics", pythonpath=site, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert "hypothesis length in characters (test plugin)" in rows["hyplength"] and "bertscore" in rows


@pytest.mark.integration
def test_sweep_with_plugin_metric_and_spec_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real sweep: plugin metric, the spec's own encoder and dataset files; the worker process sees all three."""
    site = make_distribution(tmp_path / "site", "hyplength = hyplength_plugin\n")
    catalogue = fake_da(
        tmp_path,
        monkeypatch,
        {
            "source": ["s1", "s2", "s3"],
            "reference": ["r1", "r2", "r3"],
            "mt-system": ["a", "bbb", "cc"],
            "human": ["0.5", "-1", "0.2"],
        },
    )
    write_yaml(tmp_path / "cat.yaml", catalogue)
    write_yaml(tmp_path / "enc.yaml", {"encoders": {"my-minilm": {"hub_id": MINILM, "layers": 6}}})
    spec = minimal_spec(
        encoders_file="enc.yaml",
        catalogue_file="cat.yaml",
        datasets=["fake"],
        repeats=1,
        warmup=0,
        metrics=[{"metric": "hyplength", "encoders": ["my-minilm"]}],
    )
    write_yaml(tmp_path / "spec.yaml", spec)
    done = nlgbench_command("run", "spec.yaml", "--out", "out", pythonpath=site, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 ok, 0 not ok" in done.stdout
    assert "hyplength | my-minilm | fake | cpu | bs64" in done.stdout
    (config,) = (tmp_path / "out" / "cells").glob("*/config.json")
    files = json.loads(config.read_text(encoding="utf-8"))["registry_files"]
    assert files == {
        "encoders": [str((tmp_path / "enc.yaml").resolve())],
        "catalogue": [str((tmp_path / "cat.yaml").resolve())],
    }
    assert "registry_files" not in json.loads((config.parent / "result.json").read_text(encoding="utf-8"))["config"]


def test_load_yaml_refuses_repeated_keys_at_any_depth() -> None:
    assert load_yaml("a: 1\nb: {c: 2, d: 3}\n") == {"a": 1, "b": {"c": 2, "d": 3}}
    with pytest.raises(yaml.YAMLError) as info:
        load_yaml("a: 1\nb: {c: 2, c: 3}\n")
    assert yaml_problem(info.value) == " at line 2, column 11: repeated key 'c' (first at line 2)"
    assert load_yaml("x: &x {k: 1}\ny: {<<: *x, k: 2}\n")["y"] == {"k": 2}  # a merge key may be overridden


# --------------------------------------------------------------------------- uncached models with the Hub off


def test_uncached_registry_model_is_refused_at_spec_time_when_the_hub_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`roberta-large` (registered, not cached) passed --dry-run with a warning and then
    failed inside the cell; with HF_HUB_OFFLINE=1 it is now one line and exit 2, before any cell.
    With the Hub on, a registered name stays valid (it downloads on first use)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = write_yaml(
        tmp_path / "spec.yaml", minimal_spec(metrics=[{"metric": "bertscore", "encoders": ["roberta-large"]}])
    )
    for extra in (["--dry-run"], []):
        assert main(["run", str(spec), "--out", str(tmp_path / "run"), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "'roberta-large' (roberta-large) is not in the local Hugging Face cache" in err
    assert not (tmp_path / "run" / "cells").exists()
    from nlgbench.encoders.registry import resolve_encoder

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    resolve_encoder("roberta-large").check("spec")  # online: accepted


@pytest.mark.parametrize(
    ("encoder", "message"),
    [
        (
            "microsoft/deberta-xlarge-mnli",
            "model 'microsoft/deberta-xlarge-mnli' is not in the local Hugging Face cache and the Hub is off "
            "(HF_HUB_OFFLINE=1): download it where the Hub is reachable, or copy a folder in with "
            "`nlgbench models import FOLDER --as microsoft/deberta-xlarge-mnli`",
        ),
        ("./models/mine", "model folder './models/mine' does not exist ({cwd}/models/mine)"),
        ("~/mine", "model folder '~/mine' does not exist ({cwd}/mine)"),
    ],
)
def test_uncached_hub_id_or_missing_folder_says_what_it_is(
    encoder: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Hub id that is not cached while the Hub is off, or a folder that is not there, is named as such
    (not "unknown encoder ... did you mean" some registered name)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "h.txt").write_text("a b\n", encoding="utf-8")
    assert main(["score", "-c", "h.txt", "-r", "h.txt", "--encoder", encoder, "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err == f"nlgbench: error: encoder: {message.format(cwd=tmp_path.resolve())}\n"


@pytest.mark.component
@pytest.mark.parametrize(
    "metric",
    [
        {"metric": "bertscore", "encoders": [""]},
        {"metric": "bertscore", "encoders": [{"name": "  "}]},
        {"metric": "xmoverscore", "encoders": ["all-MiniLM-L6-v2"], "options": {"lm": ""}},
    ],
)
def test_empty_model_name_in_a_spec_is_refused(
    metric: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty name was read as Path('') = the current folder, a model folder '.'."""
    spec = write_yaml(tmp_path / "spec.yaml", minimal_spec(metrics=[metric]))
    assert main(["run", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the model name is empty" in err
