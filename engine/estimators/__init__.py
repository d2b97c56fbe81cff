"""Built-in advantage estimators; importing this package registers them all."""

# ``logged`` last: it is listed after the estimators that compute advantages (registration order is list order)
from engine.estimators import gae, gdpo, kgr1, maxrl, otb, outcome, returns  # noqa: F401, I001
from engine.estimators import logged  # noqa: F401
