"""No committed report or example holds a path of the machine that made it: a local model
folder is labelled by its name, distill.json names files by their names, import-scores records data
relative to the run folder. Every file git would commit under reports/ and examples/ is read
(binary ones as bytes), and any absolute path of a machine fails the test, with the file and path."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("reports", "examples")

# Absolute paths as machines write them: POSIX homes, temporary and work folders (not after a word
# character, '.', ':' or '/', so URLs and relative paths such as `wmt20-selection/x` do not count),
# a file URL, a Windows drive letter or share (in JSON its backslash is doubled).
MACHINE_PATH = re.compile(
    r"(?<![\w.:/-])/(?:work|tmp|home|root|Users|mnt|scratch|private|var/folders|opt/conda|data/users)/[^\s\"',]*"
    r"|file:///[^\s\"',]*"
    r"|(?<![A-Za-z0-9])[A-Za-z]:(?:\\{1,2}|/)(?:Users|Documents and Settings|[\w.-]+(?:\\{1,2}|/))[^\s\"',]*"
    r"|(?<![\w\\])\\\\{1,2}[\w.-]+\\{1,2}[\w.$-]+"
)


def machine_paths(text: str) -> list[str]:
    """The absolute paths of a machine in `text` (empty when it holds none)."""
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


def committed_files() -> list[Path]:
    """The files git would commit under reports/ and examples/: tracked, or new and not ignored (a
    local run's ignored cells/ and results.sqlite hold its paths by design); every file there
    outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *FOLDERS],
            cwd=REPO,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.decode("utf-8")
        files = [REPO / name for name in out.split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        files = [p for folder in FOLDERS for p in (REPO / folder).rglob("*")]
    return sorted(p for p in files if p.is_file())


@pytest.mark.parametrize(
    "text",
    [
        "encoder,/work/main/reports/distill-models/student,none",
        '{"candidate": "/home/ana/models/minilm-l3"}',
        "label: bertscore | /tmp/pytest-of-x/pytest-3/tiny | wmt16",
        "/root/.cache/nlgbench/distill/shards/1/2.json",
        "saved to /Users/ana/student",
        '{"files": {"C:\\\\Users\\\\ana\\\\train.jsonl": "ab"}}',
        "C:\\data\\models\\student",
        "D:/runs/student",
        "\\\\server\\share\\models",
        "file:///srv/x.jsonl",
        "/var/folders/xy/T/tmp1/student",
    ],
)
def test_the_checker_finds_a_planted_machine_path(text: str) -> None:
    assert machine_paths(text), text


@pytest.mark.parametrize(
    "text",
    [
        "reports/distill-models/minilm-l3-mpnet-bertscore",
        "sentence-transformers/all-MiniLM-L6-v2",
        "wmt20-selection/zhen-outputs/newstest2020.zh-en.DeepMind.381.txt",
        "distill/shards/d1549a718d9af8733b0a",
        "https://github.com/x/home/tmp/y",
        "<< /Type /Page /Root 1 0 R >>",
        "encoders: [path/to/student]",
        "ratio 1:2/3, time 10:30",
    ],
)
def test_the_checker_leaves_relative_paths_and_urls(text: str) -> None:
    assert machine_paths(text) == []


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_TEXT_CHUNKS = {b"tEXt", b"iTXt", b"zTXt"}


def png_text(data: bytes) -> str:
    """A PNG's text chunks (where a writer would record a path), not its compressed pixels: those are
    arbitrary bytes that can spell a Windows share (`\\\\x\\y`) by chance."""
    import struct
    import zlib

    texts, at = [], len(PNG_SIGNATURE)
    while at + 8 <= len(data):
        (length,), kind = struct.unpack(">I", data[at : at + 4]), data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        if kind in PNG_TEXT_CHUNKS:
            key, _, rest = body.partition(b"\0")
            value = zlib.decompress(rest[1:]) if kind == b"zTXt" else rest
            texts.append((key + b" " + value).decode("utf-8", errors="replace"))
        at += 12 + length
    return "\n".join(texts)


def file_text(path: Path) -> str:
    """What a path could hide in: a PNG's text chunks, any other file's bytes read as text (PDFs,
    SVGs and CSVs hold their text uncompressed or as text)."""
    data = path.read_bytes()
    return png_text(data) if data.startswith(PNG_SIGNATURE) else data.decode("utf-8", errors="replace")


def files_with_machine_paths(files: list[Path]) -> dict[str, list[str]]:
    """File -> the first machine paths it holds, for each of `files` that holds any (figures and PDFs
    too)."""
    return {
        p.name if not p.is_relative_to(REPO) else str(p.relative_to(REPO)): hits[:3]
        for p in files
        if (hits := machine_paths(file_text(p)))
    }


def test_committed_reports_and_examples_hold_no_machine_path() -> None:
    files = committed_files()
    assert any(p.name == "results.csv" for p in files) and any(p.suffix == ".yaml" for p in files)  # read something
    found = files_with_machine_paths(files)
    assert not found, f"paths of a machine in committed files: {found}"


def test_a_png_is_read_by_its_text_chunks_not_its_pixels(tmp_path: Path) -> None:
    """A path in a PNG's metadata is found; pixel bytes that happen to read like a share are not."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    fig.savefig(tmp_path / "planted.png", metadata={"Description": "made in /home/ana/run"})
    fig.savefig(tmp_path / "clean.png")
    plt.close(fig)
    pixels = tmp_path / "clean.png"
    data = pixels.read_bytes()
    pixels.write_bytes(data[:-12] + b"\\\\srv\\x" + data[-12:])  # after the last chunk: never text
    assert machine_paths(pixels.read_bytes().decode("latin-1"))  # read as plain bytes it would be flagged
    assert files_with_machine_paths([pixels, tmp_path / "planted.png"]) == {"planted.png": ["/home/ana/run"]}


def test_a_planted_file_fails_the_walk(tmp_path: Path) -> None:
    """The walk's own check, on files like the committed ones with a label of the old kind planted."""
    clean, planted = tmp_path / "clean.csv", tmp_path / "results.csv"
    clean.write_text("cell_id,encoder\nabc,minilm-l3-mpnet-bertscore\n", encoding="utf-8")
    planted.write_text("cell_id,encoder\nabc,/work/main/reports/distill-models/student\n", encoding="utf-8")
    assert files_with_machine_paths([clean, planted]) == {"results.csv": ["/work/main/reports/distill-models/student"]}
