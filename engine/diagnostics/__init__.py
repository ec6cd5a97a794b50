"""Diagnostics of learners and ensembles: bias–variance decomposition and member diversity.

- :func:`bias_variance_decomposition` refits a learner on bootstrap samples and splits its
  test error into bias and variance: squared loss (Geman, Bienenstock and Doursat 1992), or
  Domingos' (2000) 0-1 loss.
- :func:`ensemble_diversity` measures how differently a classification ensemble's members
  err — disagreement, Yule's Q, the correlation of their oracle outputs — beside their mean
  accuracy p and the majority vote's P_maj (the patterns of success and failure of Kuncheva,
  Whitaker, Shipp and Duin 2003).
"""

from engine.diagnostics._bias_variance import (
    SquaredLossDecomposition,
    ZeroOneLossDecomposition,
    bias_variance_decomposition,
    squared_loss_decomposition,
    zero_one_loss_decomposition,
)
from engine.diagnostics._diversity import (
    EnsembleDiversity,
    ensemble_diversity,
    member_predictions,
    oracle_diversity,
)

__all__ = [
    "EnsembleDiversity",
    "SquaredLossDecomposition",
    "ZeroOneLossDecomposition",
    "bias_variance_decomposition",
    "ensemble_diversity",
    "member_predictions",
    "oracle_diversity",
    "squared_loss_decomposition",
    "zero_one_loss_decomposition",
]
