"""Built-in advantage estimators; importing this package registers them all."""

from engine.estimators import gae, gdpo, kgr1, maxrl, otb, outcome, returns  # noqa: F401
