"""nlgbench: benchmark the efficiency-quality trade-off of NLG evaluation metrics.

Python API (see the README): `score` / `score_outputs` for lists of strings, `run` for a sweep
spec, `load_run` / `load_scores` for a run folder. Heavy libraries load on first use only.
"""

from nlgbench.api import load_run, load_scores, run, score, score_outputs
from nlgbench.foundations.version import __version__

__all__ = ["__version__", "load_run", "load_scores", "run", "score", "score_outputs"]
