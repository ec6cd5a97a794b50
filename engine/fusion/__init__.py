"""Fusion of member classifiers' labels (Kuncheva 2004, ch. 4), and the mixture of experts.

Label-fusion combiners (Kuncheva, *Combining Pattern Classifiers*, ch. 4) learn, from the
labels the members give to rows they were not fitted on, how to turn a vector of member labels
into a class:

* :class:`NaiveBayesCombiner` — members independent given the class, confusion matrices;
* :class:`BKSCombiner` — behaviour knowledge space, a look-up table of label vectors;
* :class:`WerneckeCombiner` — BKS cells labelled only when a class dominates them;
* :class:`DependenceTreeCombiner` — Bayes with a Chow–Liu dependence tree over the members;
* :class:`SVDCombiner` — correspondence analysis of the decision profiles (Merz).

:class:`MixtureOfExpertsRegressor` and :class:`MixtureOfExpertsClassifier` (Jacobs et al.
1991) sit between fusion and selection (Kuncheva 2004, ch. 6): a softmax gate over the inputs
weights the experts, all trained together by EM (Jordan and Jacobs 1994).
"""

from engine.fusion._bks import BKSCombiner
from engine.fusion._dependence_tree import DependenceTreeCombiner, chow_liu_tree
from engine.fusion._mixture_of_experts import MixtureOfExpertsClassifier, MixtureOfExpertsRegressor
from engine.fusion._naive_bayes import NaiveBayesCombiner
from engine.fusion._svd import SVDCombiner
from engine.fusion._wernecke import WerneckeCombiner

__all__ = [
    "BKSCombiner",
    "DependenceTreeCombiner",
    "MixtureOfExpertsClassifier",
    "MixtureOfExpertsRegressor",
    "NaiveBayesCombiner",
    "SVDCombiner",
    "WerneckeCombiner",
    "chow_liu_tree",
]
