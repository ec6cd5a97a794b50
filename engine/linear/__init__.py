"""Linear models: logistic regression, least squares (ordinary and ridge), the perceptron.

Strong-ish learners on their own and, bagged, Flach's (2012, §11.1) example: a majority vote
of linear classifiers fitted on bootstrap samples has a piecewise-linear decision boundary.
"""

from engine.linear._least_squares import LinearRegression, Ridge
from engine.linear._logistic import ConvergenceWarning, LogisticRegression
from engine.linear._perceptron import Perceptron

__all__ = ["ConvergenceWarning", "LinearRegression", "LogisticRegression", "Perceptron", "Ridge"]
