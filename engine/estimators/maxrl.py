"""MaxRL (SkyRL ``compute_maxrl_advantage``, prime-rl ``MaxRLAlgorithm``): the group-centred score divided by the
group's mean score.

``maxrl_form="skyrl"``: A_i = (s_i − μ_g)/(μ_g + ε) in a group of two or more rows, and s_i − 0 (the raw score) for
a singleton. ``"prime_rl"``: A_i = (s_i − μ_g)/μ_g, and 0 for every row of a group whose μ_g ≤ 0 (a singleton gets
0 either way). Broadcast over the response mask. The scale is the group's mean reward, not its spread: a prompt
the policy already solves often (μ_g near 1) moves it less than one it rarely solves, and under SkyRL's form a
group whose mean is near −ε blows up.
"""

from __future__ import annotations

import torch

from engine.estimators.outcome import RowOutput, per_row
from engine.groups import group_stats
from engine.registry import EstimatorInput, register_estimator


@register_estimator(
    "maxrl",
    label="MaxRL (÷ group mean)",
    short="MaxRL",
    singleton=lambda cfg: "raw" if cfg.maxrl_form == "skyrl" else "zero",
    formula=r"A_i = \frac{s_i - \mathrm{mean}_{g(i)}(s)}{\mathrm{mean}_{g(i)}(s) + \epsilon}",
    reference="SkyRL ppo_utils.compute_maxrl_advantage (skyrl 0.3.0); prime-rl orchestrator/algo/max_rl.py (559b4477)",
)
@per_row
def maxrl(scores: torch.Tensor, inp: EstimatorInput, cfg) -> RowOutput:
    if cfg.maxrl_form == "prime_rl":
        st = group_stats(scores, inp.group_ids, singleton_mean=None)
        a = torch.where(st.mean > 0, (scores - st.mean) / st.mean, 0.0)
    else:
        st = group_stats(scores, inp.group_ids)  # a singleton: μ = 0
        scale = torch.where(st.size > 1, st.mean + cfg.epsilon, 1.0)  # SkyRL: s − 0 for a singleton, undivided
        a = (scores - st.mean) / scale
    return a, {"group_mean": st.mean, "group_size": st.size}
