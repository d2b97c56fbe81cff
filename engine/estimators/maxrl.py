"""MaxRL (SkyRL ``compute_maxrl_advantage``): the group-centred score divided by the group's mean score.

A_i = (s_i − μ_g)/(μ_g + ε) in a group of two or more rows, and s_i − 0 (the raw score) for a singleton, broadcast
over the response mask. The scale is the group's mean reward, not its spread: a prompt the policy already
solves often (μ_g near 1) moves it less than one it rarely solves, and a group whose mean is near −ε blows up.
"""

from __future__ import annotations

import torch

from engine.estimators.outcome import broadcast_rows
from engine.groups import group_stats
from engine.registry import EstimatorInput, EstimatorOutput, register_estimator


@register_estimator(
    "maxrl",
    label="MaxRL (÷ group mean)",
    short="MaxRL",
    singleton="raw",
    formula=r"A_i = \frac{s_i - \mathrm{mean}_{g(i)}(s)}{\mathrm{mean}_{g(i)}(s) + \epsilon}",
    reference="SkyRL ppo_utils.compute_maxrl_advantage (NovaSky-AI/SkyRL, skyrl 0.3.0)",
)
def maxrl(inp: EstimatorInput, cfg) -> EstimatorOutput:
    scores = inp.token_level_rewards.sum(-1)
    st = group_stats(scores, inp.group_ids)  # a singleton: μ = 0
    scale = torch.where(st.size > 1, st.mean + cfg.epsilon, 1.0)  # SkyRL: s − 0 for a singleton, undivided
    a = (scores - st.mean) / scale
    return broadcast_rows(a, inp.response_mask, {"scores": scores, "group_mean": st.mean, "group_size": st.size})
