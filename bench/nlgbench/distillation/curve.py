"""The student's validation curve as a figure (`training_curve.png` beside distill.json): validation MSE
(left axis) and Pearson with the teacher (right axis) against pairs seen, the best validation marked.

Self-contained (the distillation layer may not import `nlgbench.reporting`); it follows the report's
figure style where it fits: a single-column width, 7-8 pt text, tab: colours, no top spine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CURVE_FILE = "training_curve.png"
WIDTH, HEIGHT = 3.3, 2.4  # inches: the report's single-column width
MSE_COLOR, PEARSON_COLOR, BEST_COLOR = "tab:blue", "tab:orange", "tab:gray"
STYLE = {
    "font.size": 8,
    "axes.labelsize": 8,
    "axes.titlesize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "axes.spines.top": False,
    "savefig.dpi": 200,
}


def plot_curve(curve: Sequence[dict[str, Any]], best_step: int, path: Path) -> None:
    """Draw the curve (distill.json's `training.curve`) into the PNG file `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seen = [p["pairs_seen"] for p in curve]
    style: Any = STYLE  # matplotlib types its keys as a Literal of every rc name
    with plt.rc_context(style):
        fig, mse_ax = plt.subplots(figsize=(WIDTH, HEIGHT), layout="constrained")
        try:
            mse_ax.plot(seen, [p["val_mse"] for p in curve], marker="o", ms=3, color=MSE_COLOR, label="val MSE")
            mse_ax.set_xlabel("training pairs seen")
            mse_ax.set_ylabel("validation MSE", color=MSE_COLOR)
            best = [p for p in curve if p["step"] == best_step]
            if best:
                mse_ax.axvline(best[0]["pairs_seen"], color=BEST_COLOR, lw=0.8, ls="--", label="best (kept)")
            r_ax = mse_ax.twinx()
            r_ax.spines["top"].set_visible(False)
            pearson = [p["val_pearson"] for p in curve]
            r_ax.plot(seen, pearson, marker="s", ms=3, color=PEARSON_COLOR, label="val Pearson")
            r_ax.set_ylabel("Pearson with the teacher", color=PEARSON_COLOR)
            if all(math.isfinite(v) for v in pearson if v is not None):
                r_ax.set_ylim(min(0.0, *(v for v in pearson if v is not None)), 1.0)
            handles = mse_ax.get_legend_handles_labels()[0] + r_ax.get_legend_handles_labels()[0]
            fig.legend(handles=handles, loc="outside upper center", ncols=len(handles), frameon=False)
            fig.savefig(path)
        finally:
            plt.close(fig)
