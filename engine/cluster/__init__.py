"""Clustering and cluster ensembles: k-means, consensus clustering, stability, agreement.

A cluster ensemble combines many partitions through their co-association matrix
(:class:`ConsensusClustering`; Strehl and Ghosh 2002, Monti et al. 2003, Fred and Jain 2005),
and the "model explorer" algorithm (Ben-Hur, Elisseeff and Guyon 2002) rates a number of
clusters by how reproducible it is across subsamples
(:func:`clustering_stability`), comparing partitions with :func:`adjusted_rand_score`.
"""

from engine.cluster._consensus import ConsensusClustering
from engine.cluster._kmeans import KMeans
from engine.cluster._linkage import average_linkage, cut_linkage
from engine.cluster._metrics import adjusted_rand_score, contingency_matrix
from engine.cluster._stability import clustering_stability

__all__ = [
    "ConsensusClustering",
    "KMeans",
    "adjusted_rand_score",
    "average_linkage",
    "clustering_stability",
    "contingency_matrix",
    "cut_linkage",
]
