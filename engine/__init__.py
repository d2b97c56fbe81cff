"""CreditLens engine: where an RL trainer puts credit, token by token (torch only; no UI imports).

from engine import TrajectoryBatch, CreditConfig, compute_credit, list_estimators
result = compute_credit(batch, CreditConfig(profile="verl", estimator="gae"))
"""

from engine.batch import TrajectoryBatch
from engine.config import FIELD_HELP, CreditConfig
from engine.credit import CreditResult, compute_credit, resolve_device
from engine.profiles import PROFILES, Profile
from engine.registry import ESTIMATORS, Estimator, get_estimator, list_estimators

__all__ = [
    "ESTIMATORS",
    "FIELD_HELP",
    "PROFILES",
    "CreditConfig",
    "CreditResult",
    "Estimator",
    "Profile",
    "TrajectoryBatch",
    "compute_credit",
    "get_estimator",
    "list_estimators",
    "resolve_device",
]
