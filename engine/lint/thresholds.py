"""Every threshold a lint compares against, named once (the tests and the dashboard import them)."""

# |ΔA| or |A| at or below this counts as "no change" / "zero advantage" (float32 noise after whitening).
ADVANTAGE_TOL = 1e-6
# docs/conventions/verl.md §1.3 near_tie_float_noise: a score spread below this is a float-rounding tie ...
NEAR_TIE_SPREAD = 1e-6
# ... and an |A| above this in such a group is rounding noise amplified by 1/(σ + ε).
NEAR_TIE_MIN_ADVANTAGE = 1e-3
# max |A| / score spread of a group above this is a std blow-up (verl issue #957 class): tiny reward
# differences become unit-size advantages.
STD_BLOWUP_RATIO = 1000.0
# Share of trained trajectories in zero-variance groups above which the finding is a warning, not info.
ZERO_VARIANCE_WARN_SHARE = 0.5
# rLLM per_step: step groups smaller than this (and smaller than their prompt group) are "small".
SMALL_STEP_GROUP = 4
# Pearson correlation between trained length and Σ_t |w·A| per trajectory above which length drives credit.
LENGTH_BIAS_CORRELATION = 0.8
# Per-trajectory credit whose std is below this fraction of its mean is equal up to rounding: no verdict.
LENGTH_BIAS_MIN_CV = 1e-4
# Fewer trained trajectories than this: no length-bias verdict.
LENGTH_BIAS_MIN_ROWS = 4
# Aggregations whose loss is not divided by a token count, so its scale itself grows with length
# (docs/conventions/verl.md §1.5).
LENGTH_SCALED_MODES = ("token-sum", "seq-mean-token-sum", "seq-mean-token-sum-norm")
# A trainer's logged advantage and CreditLens's recomputation agree when |ΔA| is at most this (float32 noise of
# two implementations of one formula; a different ε, std ddof or weight moves them further).
LOGGED_ADVANTAGE_TOL = 1e-4
# |log π_trainer − log π_rollout| above this on a trained token is a train/inference mismatch: the two engines give
# the sampled token probabilities more than 2× apart (verl's default TIS threshold is a ratio of 2).
MISMATCH_LOG_RATIO = 0.6931471805599453  # log 2
# Mean policy entropy (nats) of the trained tokens below this: the policy is nearly deterministic where it is
# trained (entropy collapse; a uniform choice between two tokens is 0.69 nats).
ENTROPY_COLLAPSE_NATS = 0.1
