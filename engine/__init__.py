"""CreditLens engine: where an RL trainer puts credit, token by token (torch only; no UI imports).

from engine import TrajectoryBatch, CreditConfig, compute_credit, list_estimators
result = compute_credit(batch, CreditConfig(profile="verl", estimator="gae"))
"""

from engine.batch import TrajectoryBatch
from engine.config import FIELD_HELP, CreditConfig
from engine.credit import CreditResult, compute_credit, resolve_device
from engine.policy_losses import PolicyLoss, get_policy_loss, list_policy_losses
from engine.profiles import PROFILES, Profile
from engine.registry import ESTIMATORS, Estimator, get_estimator, list_estimators

__all__ = [
    "ESTIMATORS",
    "FIELD_HELP",
    "PROFILES",
    "CreditConfig",
    "CreditResult",
    "Estimator",
    "PolicyLoss",
    "Profile",
    "TrajectoryBatch",
    "compute_credit",
    "get_estimator",
    "get_policy_loss",
    "list_estimators",
    "list_policy_losses",
    "resolve_device",
]
