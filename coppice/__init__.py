"""Coppice's Python client: ``from coppice import Client``.

Needs httpx and NumPy only; pandas (DataFrames in and out), tqdm (progress bars) and
matplotlib (plots) are used when they are installed. Never imports the server or the engine.
"""

from coppice.batch import BatchPrediction
from coppice.client import Client
from coppice.datasets import Dataset
from coppice.errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    ClientError,
    ConflictError,
    ConnectionFailedError,
    CoppiceError,
    JobCancelledError,
    JobFailedError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    SearchFailedError,
    ServerError,
    ServiceUnavailableError,
    ValidationError,
)
from coppice.estimator import RemoteEstimator
from coppice.jobs import Job
from coppice.models import Explanation, Model
from coppice.pagination import Page
from coppice.registry import Alias, AliasMove, ModelVersion, RegisteredModel
from coppice.searches import Search

__all__ = [
    "APIError",
    "Alias",
    "AliasMove",
    "AuthenticationError",
    "BadRequestError",
    "BatchPrediction",
    "Client",
    "ClientError",
    "ConflictError",
    "ConnectionFailedError",
    "CoppiceError",
    "Dataset",
    "Explanation",
    "Job",
    "JobCancelledError",
    "JobFailedError",
    "Model",
    "ModelVersion",
    "NotFoundError",
    "Page",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RegisteredModel",
    "RemoteEstimator",
    "Search",
    "SearchFailedError",
    "ServerError",
    "ServiceUnavailableError",
    "ValidationError",
]
