"""Built-in advantage estimators; importing this package registers them all."""

from engine.estimators import gae, kgr1, outcome, returns  # noqa: F401
