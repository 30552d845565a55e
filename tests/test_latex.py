"""The report's .tex files compile: every .tex that `nlgbench report` writes
into DIR/report (the tables, figures.tex, preview.tex) is set by pdflatex inside a minimal document
that loads the packages the file's header names, at a paper's text width (6.3 in), without an
error, an undefined command or an overfull line; its first page is rendered to PNG with pdftoppm
and is not blank; the text of the PDF says what the tables hold (no `wmt16[:100]` slice, no `1.00x`,
no inverted exclamation mark where a `<` was meant). Needs Debian's texlive-latex-base,
texlive-latex-recommended, texlive-science and poppler-utils (scripts/setup.sh installs them):
skipped without them, except under CI, where it fails."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nlgbench.reporting.markup import latex_printable, latex_text, table_format
from nlgbench.reporting.report import write_report
from nlgbench.reporting.tex_files import MAX_ROWS, tradeoff_latex

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("pdflatex", "pdftoppm", "pdftotext")
TEXT_WIDTH = "6.3in"  # a two-column paper's text width (a table* float spans it)
MAX_OVERFULL_PT = 1.0
LOG_ERRORS = ("Undefined control sequence", "Missing", "Unicode character", "Float too large", "LaTeX Error")
TABLES = ("tradeoff", "quantities")  # relative.* has no LaTeX: the trade-off table holds its numbers


def need_tex() -> None:
    """Skip where TeX or poppler is missing (a bare machine), fail under CI, which installs them."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not missing:
        return
    why = f"{', '.join(missing)} not installed: scripts/setup.sh installs Debian's TeX packages and poppler-utils"
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def packages(tex: str) -> list[str]:
    """The packages a .tex fragment's leading % lines name (`% needs \\usepackage{booktabs,siunitx}`)."""
    header = "\n".join(line for line in tex.splitlines() if line.startswith("%"))
    return [p.strip() for group in re.findall(r"\\usepackage\{([^}]*)\}", header) for p in group.split(",")]


def compile_tex(tex: Path, build: Path) -> tuple[Path, str]:
    """pdflatex a report .tex in `build` (the report folder on TEXINPUTS, for \\input and figures): a
    document as it is, a fragment inside a minimal article loading the packages its header names.
    Returns the PDF and the log; asserts pdflatex succeeded."""
    build.mkdir(parents=True, exist_ok=True)
    source = tex.read_text(encoding="utf-8")
    if "\\documentclass" in source:
        main = tex.name
    else:
        named = packages(source)
        assert named, f"{tex.name}: no '% needs \\usepackage{{...}}' line names the packages it needs"
        main = f"wrap-{tex.stem}.tex"
        (build / main).write_text(
            "\\documentclass{article}\n"
            f"\\usepackage[textwidth={TEXT_WIDTH},textheight=9in]{{geometry}}\n"
            f"\\usepackage{{{','.join(named)}}}\n"
            f"\\begin{{document}}\n\\input{{{tex.stem}}}\n\\end{{document}}\n",
            encoding="utf-8",
        )
    env = {**os.environ, "TEXINPUTS": f"{tex.parent}:"}
    done = subprocess.run(
        ["pdflatex", "-halt-on-error", "-interaction=nonstopmode", main],
        cwd=build,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )
    log = (build / main).with_suffix(".log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, f"{tex.name}: pdflatex failed\n{log[-3000:]}"
    return (build / main).with_suffix(".pdf"), log


def check_log(name: str, log: str) -> None:
    """No error, undefined command, missing character or float too large; no line more than
    MAX_OVERFULL_PT too wide."""
    for error in LOG_ERRORS:
        assert error not in log, f"{name}: {error}\n{log[log.index(error) - 500 : log.index(error) + 500]}"
    overfull = [float(w) for w in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]
    assert max(overfull, default=0.0) <= MAX_OVERFULL_PT, f"{name}: lines too wide by {overfull} pt"


def first_page_png(pdf: Path) -> Path:
    """Page 1 of `pdf` as a PNG at 80 dpi (pdftoppm), asserted not blank."""
    import matplotlib.image

    stem = pdf.with_name(pdf.stem + "-page1")
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-f", "1", "-l", "1", "-singlefile", str(pdf), str(stem)],
        check=True,
        timeout=60,
    )
    png = stem.with_suffix(".png")
    pixels = np.asarray(matplotlib.image.imread(png))[..., :3].mean(axis=-1)
    assert (pixels < 0.5).mean() > 0.002, f"{png.name}: page 1 is blank"
    return png


def pdf_text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module", params=["example", "similarity"])
def report_folder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a copy of what git holds of reports/<example|similarity> (no store, no cells),
    regenerated with 200 resamples."""
    need_tex()
    name = request.param
    listed = subprocess.run(
        ["git", "ls-files", f"reports/{name}"], cwd=REPO, capture_output=True, text=True, check=True
    )
    run = tmp_path_factory.mktemp(name) / name
    for file in listed.stdout.split():
        dest = run / Path(file).relative_to(f"reports/{name}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / file, dest)
    write_report(run, n_resamples=200)
    return run / "report"


def test_every_report_tex_compiles_and_renders(report_folder: Path) -> None:
    """Every .tex of the report folder compiles (fragments in a wrapper from their own package
    header, preview.tex as it is), without errors or overfull lines at 6.3 in, and page 1 renders."""
    written = sorted(report_folder.glob("*.tex"))
    assert {f"{t}.tex" for t in TABLES} | {"preview.tex"} <= {p.name for p in written}
    for tex in written:
        source = tex.read_text(encoding="utf-8")
        if tex.stem in TABLES:
            assert "% needs \\usepackage{booktabs,siunitx}" in source.splitlines()[:3], tex.name
        pdf, log = compile_tex(tex, report_folder.parent / "latex" / tex.stem)
        check_log(tex.name, log)
        assert first_page_png(pdf).stat().st_size > 0


def test_tables_are_complete_floats_that_print_their_numbers(report_folder: Path) -> None:
    """tradeoff.tex: a captioned, labelled float per dataset and device, rows grouped by metric;
    the PDF prints each row's retained share and speed-up (as x with a times sign), the caption names
    the dataset's subset, the human dimension, level and method, and no slice notation or bare <."""
    tex = (report_folder / "tradeoff.tex").read_text(encoding="utf-8")
    trade = pd.read_csv(report_folder / "tradeoff.csv")
    parts = trade[["dataset", "device"]].drop_duplicates()
    assert tex.count("\\begin{table*}") == len(parts) == tex.count("\\caption[") == tex.count("\\label{tab:tradeoff-")
    assert tex.count("\\multicolumn") == len(trade[["dataset", "device", "group"]].drop_duplicates())
    assert "S[table-format=" in tex and "\\toprule" in tex and "\\bottomrule" in tex
    assert len(re.findall(r"\\label\{(tab:[^}]*)\}", tex)) == len(set(re.findall(r"\\label\{(tab:[^}]*)\}", tex)))
    pdf, _ = compile_tex(report_folder / "tradeoff.tex", report_folder.parent / "latex-text")
    text = pdf_text(pdf)
    flat = " ".join(text.split())
    for _, row in trade.iterrows():
        assert f"{100 * row['retained']:.1f}" in text, row["encoder"]
        assert f"{row['speedup']:.2f}" in text  # its range: tradeoff.md and .csv
    assert "speed-up (×)" in text and "[:" not in text and "¡" not in text and "x [" not in text
    assert "< 0.0" in text or "<" not in tex  # p below 2/resamples printed as a less-than sign
    for dataset in dict.fromkeys(trade["dataset"]):
        m = re.fullmatch(r"wmt(\d+)\[:(\d+)\]", dataset)
        assert m, dataset
        assert f"WMT{m[1]}, first {m[2]} segments per language pair" in flat
    assert "% quality = Pearson (global), against the dataset's human scores" in tex  # the method: a comment
    assert not (report_folder / "relative.tex").exists()


def frames(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A trade-off and a relative table whose names hold every LaTeX special character, with an
    undefined quality, a negative one, a p below 2/resamples and a tiny p."""
    nan = math.nan
    base = {
        "group": name,
        "metric": name,
        "dataset": f"{name}[:10]",
        "device": "cpu",
        "baseline_metric": name,
        "baseline": "big",
        "n": 20,
        "human_dim": "x",
    }
    trade = pd.DataFrame(
        [
            {**base, "encoder": "big", "quality": 0.5, "retained": 1.0, "speedup": 1.0, "p_value": nan},
            {**base, "encoder": name, "quality": -0.25, "retained": -0.5, "speedup": 12.5, "p_value": 0.0},
            {**base, "encoder": "tiny", "quality": 0.45, "retained": 0.9, "speedup": 2.0, "p_value": 2.1e-05},
            {**base, "encoder": "flat", "quality": nan, "retained": nan, "speedup": 3.0, "p_value": nan},
        ]
    )
    is_base = trade["encoder"] == "big"
    for low, high, column in (
        ("quality_ci_low", "quality_ci_high", "quality"),
        ("retained_ci_low", "retained_ci_high", "retained"),
        ("speedup_low", "speedup_high", "speedup"),
    ):
        trade[low] = np.where(is_base, nan, trade[column] - 0.1)
        trade[high] = np.where(is_base, nan, trade[column] + 0.1)
    relative = trade[["metric", "encoder", "device", "dataset", "baseline", "quality", "retained", "speedup"]].assign(
        ms_per_segment=[10.0, 0.8, 5.0, nan], score_type="DA", human_dim="x"
    )
    return trade, relative


def test_specials_in_names_print_as_written(tmp_path: Path) -> None:
    """Metric, encoder and dataset names holding _ % & # $ { } ~ ^ \\ and a leading [ compile, and
    the PDF prints them as written; p = 0 prints as '< 0.01', an undefined quality as 'n/a'."""
    need_tex()
    name = "[x]_%&#${}~^\\a"
    trade, _ = frames(name)
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "tradeoff.tex").write_text(
        tradeoff_latex(trade, "a note: p < 0.05, r +-1, 'x', '-': none", 200), encoding="utf-8"
    )
    printed = name.replace("_", " ").replace("~", "˜").replace("^", "ˆ")  # how pdftotext reads OT1's _ ~ ^
    for table in ("tradeoff",):
        pdf, log = compile_tex(folder / f"{table}.tex", tmp_path / table)
        check_log(table, log)
        text = pdf_text(pdf)
        assert text.count(printed) >= 2, text
        assert "n/a" in text and "¡" not in text
    tex = (folder / "tradeoff.tex").read_text(encoding="utf-8")
    assert "{$<$ 0.01}" in tex and "2.1e-05" in tex and "S[table-format=1.1e-2]" in tex
    assert "% a note: p < 0.05, r +-1, 'x', '-': none\n" in tex  # the note: a comment, not the caption


def test_names_pdflatex_cannot_print_compile_as_code_points(tmp_path: Path) -> None:
    """A dataset, metric and encoder named in Chinese: the tables (and so preview.tex) compile, each such
    character printed as its code point; accented Latin letters print as themselves."""
    need_tex()
    trade, _ = frames("数据 Łódź")
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "tradeoff.tex").write_text(tradeoff_latex(trade, "human dimension 流畅度", 200), encoding="utf-8")
    pdf, log = compile_tex(folder / "tradeoff.tex", tmp_path / "tradeoff")
    check_log("tradeoff", log)
    text = unicodedata.normalize("NFC", pdf_text(pdf))
    assert "[U+6570][U+636E]" in text and "ódź" in text, text  # pdftotext reads OT1's Ł as L
    assert "% human dimension 流畅度" in (folder / "tradeoff.tex").read_text(encoding="utf-8")  # the note: a comment


def test_every_character_latex_text_keeps_compiles(tmp_path: Path) -> None:
    """Each character up to U+2FFF that `latex_printable` lets through is set by pdflatex in a document
    that loads no font package; the first it refuses (Chinese) becomes a code point."""
    need_tex()
    kept = [chr(c) for c in range(0x80, 0x3000) if latex_printable(chr(c)) and chr(c).isprintable()]
    assert "é" in kept and "ő" in kept and "ł" in kept and "—" in kept
    assert not any(latex_printable(c) for c in "数ж\u03b1ąðǸ\U0001f600")
    folder = tmp_path / "report"
    folder.mkdir()
    body = "\n".join(f"{latex_text(c)}\\par % U+{ord(c):04X}" for c in kept)
    (folder / "chars.tex").write_text(f"% needs \\usepackage{{booktabs}}\n{body}\n", encoding="utf-8")
    _, log = compile_tex(folder / "chars.tex", tmp_path / "chars")
    check_log("chars", log)
    assert latex_text("数") == "[U+6570]"


def test_labels_stay_unique_where_names_differ_only_in_dropped_characters(tmp_path: Path) -> None:
    """Datasets `a+b` and `a_b` (and devices `cuda` with a continued float and `cuda:2`) would share a
    label: each float gets its own, and LaTeX reports no label defined twice."""
    need_tex()
    parts = []
    for name, device, copies in (("a+b", "cpu", 1), ("a_b", "cpu", 1), ("x", "cuda:2", 1), ("x", "cuda", 14)):
        trade, _ = frames("m")
        for k in range(copies):  # 14 metrics of 4 rows: more than MAX_ROWS, so a float `...-cuda-2` follows
            parts.append(
                trade.assign(dataset=name, device=device, metric=f"m{k}", group=f"m{k}", baseline_metric=f"m{k}")
            )
    table = pd.concat(parts, ignore_index=True)
    tex = tradeoff_latex(table, "a note", 200)
    labels = re.findall(r"\\label\{([^}]*)\}", tex)
    assert len(labels) == len(set(labels)) == tex.count("\\begin{table*}"), labels
    assert labels[:4] == [
        "tab:tradeoff-a-b-cpu",
        "tab:tradeoff-a-b-cpu_",
        "tab:tradeoff-x-cuda-2",
        "tab:tradeoff-x-cuda",
    ]
    assert "tab:tradeoff-x-cuda-2_" in labels  # the continued float of cuda, after cuda:2 took its plain label
    assert "Continued from Table~\\ref{tab:tradeoff-x-cuda}" in tex
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "tradeoff.tex").write_text(tex, encoding="utf-8")
    _, log = compile_tex(folder / "tradeoff.tex", tmp_path / "tradeoff")
    check_log("tradeoff", log)
    assert "multiply defined" not in log


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        (["0.623", "-0.25", "n/a"], "-1.3"),
        (["100.0", "96.0", ""], "3.1"),
        (["600", "12"], "3"),
        (["0.068", "2.1e-05", "{$<$ 0.002}"], "1.3e-2"),
        (["-", "n/a"], "1.0"),
    ],
)
def test_table_format_fits_the_numbers(cells: list[str], expected: str) -> None:
    assert table_format(cells) == expected


def test_long_tables_continue_in_a_next_float_and_empty_ones_compile(tmp_path: Path) -> None:
    """48 rows of one dataset in 3 metric groups: floats of at most MAX_ROWS rows (whole metric groups), the later ones
    labelled `-2` and captioned as continued; a table without rows is a file without floats."""
    need_tex()
    trade, _ = frames("m")
    rows = [
        {
            **r,
            "metric": f"metric{k}",
            "group": f"metric{k}",
            "baseline_metric": f"metric{k}",
            "encoder": r["encoder"] if r["encoder"] == "big" else f"{r['encoder']}{j}",
        }
        for k in range(3)
        for j in range(5)
        for r in trade.to_dict("records")
        if j == 0 or r["encoder"] != "big"
    ]
    long = pd.DataFrame(rows)
    assert len(long) == 3 * 16
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "tradeoff.tex").write_text(tradeoff_latex(long, "a note", 200), encoding="utf-8")
    tex = (folder / "tradeoff.tex").read_text(encoding="utf-8")
    labels = re.findall(r"\\label\{([^}]*)\}", tex)
    assert labels == ["tab:tradeoff-m-10-cpu", "tab:tradeoff-m-10-cpu-2"]  # 17 + 17 lines, then 17
    for body in tex.split("\\begin{table*}")[1:]:
        assert body.count(" \\\\\n") - 1 <= MAX_ROWS  # rows and group headings, less the header row
    assert tex.count("Continued from Table~\\ref{tab:tradeoff-m-10-cpu}") == 1
    _, log = compile_tex(folder / "tradeoff.tex", tmp_path / "tradeoff")
    check_log("tradeoff", log)
    (folder / "empty.tex").write_text(tradeoff_latex(long.iloc[:0], "no rows", 200), encoding="utf-8")
    _, log = compile_tex(folder / "empty.tex", tmp_path / "empty")
    check_log("empty", log)
    assert "\\begin{table*}" not in (folder / "empty.tex").read_text(encoding="utf-8")
