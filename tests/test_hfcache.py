"""nlgbench.encoders.hfcache: importing local model folders into the HF hub cache, sizing checkpoints; encoders.yaml."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import huggingface_hub.constants
import pytest
import torch
import yaml
from tests.tiny import same_stat_other_bytes
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel, BertTokenizer

from nlgbench.encoders import hfcache
from nlgbench.foundations.errors import UserError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "##s", "##ed", "hello", "world", "."]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private, empty hub cache, used by hfcache (env) and by transformers (constants) alike."""
    cache = tmp_path / "hf-home" / "hub"
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(cache.parent))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads the environment once at import; transformers looks these up per call.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny random BERT with a WordPiece tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + WORDS) + "\n", encoding="utf-8")
    # from_pretrained on a folder holding vocab.txt works in transformers 4 and 5 alike
    # (5.x's constructor takes `vocab=` and silently ignores `vocab_file=`).
    tokenizer = BertTokenizer.from_pretrained(folder, do_lower_case=True)
    assert tokenizer.tokenize("cats") == ["cat", "##s"]
    config = BertConfig(
        vocab_size=len(SPECIALS) + len(WORDS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = BertModel(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "desktop.ini").write_text("[.ShellClassInfo]\n", encoding="utf-8")
    return folder


def test_hub_cache_dir_follows_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hfcache.hub_cache_dir() == tmp_path / "home" / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hfcache.hub_cache_dir() == tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "direct"))
    assert hfcache.hub_cache_dir() == tmp_path / "direct"


@pytest.mark.component
def test_import_then_load_offline(tiny_bert: Path, hub_cache: Path) -> None:
    snapshot = hfcache.import_model(tiny_bert, "org/tiny")
    repo = hub_cache / "models--org--tiny"
    assert snapshot.parent == repo / "snapshots"
    assert (repo / "refs" / "main").read_text() == snapshot.name
    assert len(snapshot.name) == 40 and int(snapshot.name, 16) >= 0
    assert not (snapshot / "desktop.ini").exists()
    assert hfcache.local_snapshot("org/tiny") == snapshot

    text = "the cats sat on a mat ."
    original = BertModel.from_pretrained(tiny_bert).eval()
    reference_tok = BertTokenizer.from_pretrained(tiny_bert)
    loaded = AutoModel.from_pretrained("org/tiny").eval()
    tokenizer = AutoTokenizer.from_pretrained("org/tiny")
    batch = tokenizer(text, return_tensors="pt")
    assert batch["input_ids"].tolist() == reference_tok(text, return_tensors="pt")["input_ids"].tolist()
    assert tokenizer.convert_ids_to_tokens(batch["input_ids"][0])[:4] == ["[CLS]", "the", "cat", "##s"]
    with torch.no_grad():
        expected = original(**batch).last_hidden_state
        got = loaded(**batch).last_hidden_state
    assert torch.equal(expected, got)


@pytest.mark.component
def test_import_is_idempotent(tiny_bert: Path, hub_cache: Path) -> None:
    first = hfcache.import_model(tiny_bert, "org/tiny")
    second = hfcache.import_model(tiny_bert, "org/tiny")
    assert first == second
    assert [p.name for p in (hub_cache / "models--org--tiny" / "snapshots").iterdir()] == [first.name]
    assert not list((hub_cache / "models--org--tiny").glob(".nlgbench-import-*"))


@pytest.mark.component
def test_changed_folder_gets_new_commit(tiny_bert: Path, hub_cache: Path, tmp_path: Path) -> None:
    first = hfcache.import_model(tiny_bert, "tiny")
    changed = tmp_path / "changed"
    shutil.copytree(tiny_bert, changed)
    (changed / "README.md").write_text("changed\n", encoding="utf-8")
    second = hfcache.import_model(changed, "tiny")
    assert first != second
    assert (hub_cache / "models--tiny" / "refs" / "main").read_text() == second.name
    assert hfcache.local_snapshot("tiny") == second


@pytest.mark.component
def test_interrupted_import_leaves_no_reference(
    tiny_bert: Path, hub_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"n": 0}
    real_copy = shutil.copyfile

    def failing_copy(src: object, dst: object) -> object:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError("disk full")
        return real_copy(src, dst)

    monkeypatch.setattr(shutil, "copyfile", failing_copy)
    with pytest.raises(UserError, match="disk full"):
        hfcache.import_model(tiny_bert, "org/tiny")
    repo = hub_cache / "models--org--tiny"
    assert not (repo / "refs" / "main").exists()
    assert not any((repo / "snapshots").iterdir())
    assert not list(repo.glob(".nlgbench-import-*"))
    assert hfcache.local_snapshot("org/tiny") is None


def test_sizes_of_safetensors_checkpoint(tiny_bert: Path) -> None:
    model = BertModel.from_pretrained(tiny_bert)
    files = hfcache.weight_files(tiny_bert)
    assert files == [tiny_bert / "model.safetensors"]
    assert hfcache.checkpoint_params(tiny_bert) == sum(t.numel() for t in model.state_dict().values())
    assert hfcache.checkpoint_params(tiny_bert) == sum(p.numel() for p in model.parameters())
    assert hfcache.disk_bytes(tiny_bert) == (tiny_bert / "model.safetensors").stat().st_size


def test_sizes_follow_symlinks(tiny_bert: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "config.json").symlink_to(tiny_bert / "config.json")
    (linked / "model.safetensors").symlink_to(tiny_bert / "model.safetensors")
    assert hfcache.disk_bytes(linked) == (tiny_bert / "model.safetensors").stat().st_size
    assert hfcache.checkpoint_params(linked) == hfcache.checkpoint_params(tiny_bert)


@pytest.mark.component
def test_sizes_of_pytorch_bin_checkpoint(tiny_bert: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bin-model"
    folder.mkdir()
    shutil.copy(tiny_bert / "config.json", folder)
    state = BertModel.from_pretrained(tiny_bert).state_dict()
    expected = sum(t.numel() for t in state.values())
    state["tied.weight"] = state["embeddings.word_embeddings.weight"]  # shared storage counts once
    state["position_ids"] = torch.arange(64)  # integer buffers are not parameters
    torch.save(state, folder / "pytorch_model.bin")
    torch.save({"step": torch.zeros(1000)}, folder / "optimizer.bin")
    assert hfcache.weight_files(folder) == [folder / "pytorch_model.bin"]
    assert hfcache.checkpoint_params(folder) == expected
    assert hfcache.disk_bytes(folder) == (folder / "pytorch_model.bin").stat().st_size


def test_local_snapshot_of_folder_and_unknown(tiny_bert: Path, hub_cache: Path, tmp_path: Path) -> None:
    assert hfcache.local_snapshot(str(tiny_bert)) == tiny_bert
    assert hfcache.local_snapshot("org/not-there") is None
    assert hfcache.local_snapshot(str(tmp_path / "missing" / "folder")) is None
    assert hfcache.local_snapshot("bad--id") is None


@pytest.mark.parametrize("case", ["missing", "no-config", "no-weights"])
def test_bad_source_folder(case: str, tiny_bert: Path, hub_cache: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    if case != "missing":
        src.mkdir()
        (src / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")
        if case == "no-weights":
            shutil.copy(tiny_bert / "config.json", src)
    with pytest.raises(UserError) as info:
        hfcache.import_model(src, "org/tiny")
    message = str(info.value)
    assert "\n" not in message and str(src) in message
    assert not (hub_cache / "models--org--tiny").exists()


@pytest.mark.parametrize("hub_id", ["", "a/b/c", "org--x/y", "-x", "org/na me", "../x", "x/"])
def test_bad_hub_id(hub_id: str, tiny_bert: Path, hub_cache: Path) -> None:
    with pytest.raises(UserError, match="Hub id"):
        hfcache.import_model(tiny_bert, hub_id)


REQUIRED = {"hub_id", "family", "kind", "multilingual", "layers", "default_layers", "notes"}
KINDS = {"encoder", "seq2seq", "causal-lm", "cross-encoder"}


def test_encoders_yaml() -> None:
    from bert_score.utils import model2layers

    data = yaml.safe_load((REPO / "encoders.yaml").read_text(encoding="utf-8"))
    encoders = data["encoders"]
    assert {"all-MiniLM-L6-v2", "all-mpnet-base-v2", "bert-base", "roberta-large"} <= set(encoders)
    hub_ids = [entry["hub_id"] for entry in encoders.values()]
    assert len(hub_ids) == len(set(hub_ids))
    for name, entry in encoders.items():
        assert REQUIRED <= set(entry), name
        assert entry["kind"] in KINDS, name
        assert isinstance(entry["multilingual"], bool), name
        assert isinstance(entry["layers"], int) and entry["layers"] > 0, name
        assert isinstance(entry["notes"], str) and entry["notes"], name
        hfcache.check_hub_id(entry["hub_id"])
        for metric, layer in entry["default_layers"].items():
            assert isinstance(layer, int) and 0 <= layer <= entry["layers"], (name, metric)
        bertscore = entry["default_layers"].get("bertscore")
        if entry["hub_id"] in model2layers:
            assert bertscore == model2layers[entry["hub_id"]], name
        elif bertscore is not None:
            assert "no published tuned layer" in entry["notes"], name


# --------------------------------------------------------------------------- checking model folders


def broken_copy(tiny_bert: Path, tmp_path: Path, cut: int | None = None, header: bytes | None = None) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(tiny_bert, folder)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    if cut is not None:
        data = data[:cut]
    if header is not None:
        data = len(header).to_bytes(8, "little") + header
    weights.write_bytes(data)
    return folder


@pytest.mark.component
def test_intact_folder_passes(tiny_bert: Path) -> None:
    hfcache.check_model_folder(tiny_bert)
    header = hfcache.safetensors_header(tiny_bert / "model.safetensors")
    assert b"embeddings.word_embeddings.weight" in header


@pytest.mark.component
@pytest.mark.parametrize(
    ("cut", "header", "message"),
    [
        (4, None, "not a safetensors file"),
        (20, None, "is truncated"),
        (-1, None, "is truncated"),  # one byte short of the last tensor
        (None, b"{not json", "not JSON"),
        (None, b'{"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]}}', "offsets of tensor 'w'"),
        (None, b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', "is truncated"),
    ],
)
def test_broken_safetensors_refused(
    tiny_bert: Path, tmp_path: Path, cut: int | None, header: bytes | None, message: str
) -> None:
    folder = broken_copy(tiny_bert, tmp_path, cut=cut, header=header)
    with pytest.raises(UserError, match=message) as info:
        hfcache.check_model_folder(folder)
    assert "\n" not in str(info.value) and str(folder) in str(info.value)


@pytest.mark.component
def test_broken_config_or_bin_refused(tiny_bert: Path, tmp_path: Path) -> None:
    folder = tmp_path / "m"
    shutil.copytree(tiny_bert, folder)
    (folder / "config.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(UserError, match="must hold a JSON object"):
        hfcache.check_model_folder(folder)
    (folder / "config.json").write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match=r"config.json is not valid JSON \(.* line 1, column 2\)"):
        hfcache.check_model_folder(folder)
    shutil.copy(tiny_bert / "config.json", folder)
    (folder / "model.safetensors").unlink()
    torch.save({"w": torch.zeros(100)}, folder / "pytorch_model.bin")
    hfcache.check_model_folder(folder)
    data = (folder / "pytorch_model.bin").read_bytes()
    (folder / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="truncated or corrupt zip"):
        hfcache.check_model_folder(folder)
    (folder / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(UserError, match="pytorch_model.bin is empty"):
        hfcache.check_model_folder(folder)


@pytest.mark.component
def test_import_refuses_truncated_weights(tiny_bert: Path, hub_cache: Path, tmp_path: Path) -> None:
    folder = broken_copy(tiny_bert, tmp_path, cut=1000)
    with pytest.raises(UserError, match="is truncated"):
        hfcache.import_model(folder, "org/tiny")
    assert not (hub_cache / "models--org--tiny").exists()


@pytest.mark.component
def test_content_fingerprint_follows_weights_and_config(tiny_bert: Path, tmp_path: Path) -> None:
    folder = tmp_path / "m"
    shutil.copytree(tiny_bert, folder)
    first = hfcache.content_fingerprint(folder)
    assert first == hfcache.content_fingerprint(folder) and len(first) == 16
    (folder / "README.md").write_text("changed\n", encoding="utf-8")  # not read by the loading: same
    assert hfcache.content_fingerprint(folder) == first
    stat = (folder / "model.safetensors").stat()
    os.utime(folder / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert hfcache.content_fingerprint(folder) == first  # touched, same bytes: the same weights
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:-1] + bytes([255 - data[-1]]))
    second = hfcache.content_fingerprint(folder)
    assert second != first
    (folder / "config.json").write_text((folder / "config.json").read_text(encoding="utf-8") + " ", encoding="utf-8")
    assert hfcache.content_fingerprint(folder) not in (first, second)


@pytest.mark.component
def test_content_fingerprint_hashes_the_weight_bytes(tiny_bert: Path, tmp_path: Path) -> None:
    """Two folders alike in names, sizes, mtimes and safetensors header but not in weight bytes have
    different fingerprints; so does one folder edited in place with its mtime put back."""
    a = tmp_path / "a"
    shutil.copytree(tiny_bert, a)
    b = same_stat_other_bytes(a, tmp_path / "b")
    assert (a / "model.safetensors").stat().st_mtime_ns == (b / "model.safetensors").stat().st_mtime_ns
    assert hfcache.content_fingerprint(a) != hfcache.content_fingerprint(b)
    before = hfcache.content_fingerprint(a)
    shutil.copyfile(b / "model.safetensors", a / "model.safetensors")  # edited in place ...
    stat = (b / "model.safetensors").stat()
    os.utime(a / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ... and touch -r
    assert hfcache.content_fingerprint(a) == hfcache.content_fingerprint(b) != before


@pytest.mark.component
def test_weights_edited_in_place_make_a_new_cell_and_signature(tiny_bert: Path, tmp_path: Path) -> None:
    """A model folder whose weight bytes changed, its sizes and mtimes put back, is not "done already":
    the sweep's cell over it has another id, and the scorer's signature another revision."""
    from nlgbench.core.signature import encoder_revision
    from nlgbench.core.spec import load_spec

    folder = tmp_path / "model"
    shutil.copytree(tiny_bert, folder)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "datasets": ["wmt16"],
                "metrics": [{"metric": "bertscore", "encoders": [str(folder)]}],
            }
        ),
        encoding="utf-8",
    )
    [before] = load_spec(spec).cells()
    revision = encoder_revision(str(folder))
    other = same_stat_other_bytes(folder, tmp_path / "other")
    shutil.copyfile(other / "model.safetensors", folder / "model.safetensors")
    stat = (other / "model.safetensors").stat()
    os.utime(folder / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    [after] = load_spec(spec).cells()
    assert after.inputs[str(folder)] != before.inputs[str(folder)]
    assert after.cell_id != before.cell_id
    assert encoder_revision(str(folder)) != revision


def read_chars() -> int:
    """Bytes this process has read through read calls so far (Linux's /proc/self/io `rchar`)."""
    for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.component
@pytest.mark.skipif(not Path("/proc/self/io").is_file(), reason="needs Linux's /proc/self/io")
def test_a_second_fingerprint_reads_no_weight_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights' digest is kept in the cache while the file's stat is unchanged: the first fingerprint
    reads the 8 MB, the second (another process's, with the same cache) reads none of them; a file
    rewritten in place is read again."""
    monkeypatch.setenv("NLGBENCH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    size = 8 * 2**20
    (folder / "model.safetensors").write_bytes(os.urandom(size))
    start = read_chars()
    first = hfcache.content_fingerprint(folder)
    middle = read_chars()
    assert hfcache.content_fingerprint(folder) == first
    end = read_chars()
    assert middle - start >= size and end - middle < 2**16
    assert len(list((tmp_path / "cache" / "digests").iterdir())) == 2  # config.json and the weights
    (folder / "model.safetensors").write_bytes(os.urandom(size))
    assert hfcache.content_fingerprint(folder) != first
    assert read_chars() - end >= size


@pytest.mark.component
def test_a_cached_model_loads_without_asking_the_hub(
    tiny_bert: Path, hub_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the snapshot on disk the loads pass local_files_only, so no Hub request is made even
    without HF_HUB_OFFLINE: an endpoint that cannot be reached would otherwise cost retries."""
    from nlgbench.encoders.registry import EncoderRef
    from nlgbench.encoders.runtime import load_encoder

    assert hfcache.load_options("org/never-downloaded") == {}
    hfcache.import_model(tiny_bert, "org/tiny")
    assert hfcache.load_options("org/tiny") == {"local_files_only": True}
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: any request fails at once
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    encoder = load_encoder(EncoderRef("org/tiny"), "cpu")
    assert encoder.layers_run == encoder.total_layers
