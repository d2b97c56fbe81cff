"""Generalized Advantage Estimation (Schulman et al. 2016) as verl computes it, with both hole conventions.

δ_t = r_t + γ V_next − V_t,  A_t = δ_t + γλ A_next,  returns = A + V,  advantages = masked_whiten(A, m).

* ``gae_skip_holes=True`` (verl ≥ PR #2337): "next" is the next *valid* token; tool tokens are skipped, rewards on
  them dropped; a hole position reports the advantage of the next valid token; trailing padding 0.
* ``gae_skip_holes=False`` (old verl, Search-R1, KG-R1): every column is a TD step, V_T := 0; the mask only
  feeds the whitening statistics.
Both run as one vectorized discounted scan (``engine.scan``), no loop over time.
"""

from __future__ import annotations

import torch

from engine.masked import masked_whiten, whiten
from engine.registry import EstimatorInput, EstimatorOutput, register_estimator
from engine.scan import Compaction, by_row_blocks, discounted_reverse_cumsum


def gae_raw(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float, skip_holes: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unwhitened GAE advantages and TD errors, both (B, T). Rows are independent: a big batch runs in row
    blocks (``engine.scan.by_row_blocks``)."""
    return by_row_blocks(lambda r, v, m: _gae_rows(r, v, m, gamma, lam, skip_holes), rewards, values, mask)


def _gae_rows(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float, skip_holes: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    if skip_holes:
        cm = Compaction(mask)
        r = cm.compact(rewards)  # (B, T) valid tokens first
        v = cm.compact(values)
        v_next = torch.nn.functional.pad(v[:, 1:], (0, 1))  # next valid value; 0 after the last
        delta_c = (r + gamma * v_next - v) * cm.valid
        adv_c = discounted_reverse_cumsum(delta_c, gamma * lam)
        return cm.expand_next_valid(adv_c), cm.expand_next_valid(delta_c)
    v_next = torch.nn.functional.pad(values[:, 1:], (0, 1))
    delta = rewards + gamma * v_next - values
    return discounted_reverse_cumsum(delta, gamma * lam), delta


def compute_gae_advantage_return(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    lam: float,
    skip_holes: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl-compatible functional form: (advantages, returns), both (B, T)."""
    adv, _ = gae_raw(token_level_rewards, values, response_mask, gamma, lam, skip_holes)
    return masked_whiten(adv, response_mask), adv + values


def _gae_values(inp: EstimatorInput, cfg) -> tuple[torch.Tensor, str]:
    source = cfg.value_source
    if source is None:
        if inp.values is None:
            raise ValueError(
                "GAE needs critic values and this run has none: set value_source='zeros' "
                "(discounted Monte-Carlo returns) or 'group_mean' (the group's mean score as baseline)"
            )
        source = "critic"
    if source == "critic":
        if inp.values is None:
            raise ValueError("value_source='critic' but the run has no critic values")
        return inp.values, source
    if source == "zeros":
        return torch.zeros_like(inp.token_level_rewards), source
    from engine.estimators.outcome import row_scores  # here: importing it above would register outcome before gae
    from engine.groups import group_stats

    mean = group_stats(row_scores(inp), inp.group_ids, singleton_mean=None).mean
    return mean[:, None].expand_as(inp.token_level_rewards).clone(), source


@register_estimator(
    "gae",
    label="GAE (PPO critic)",
    short="GAE",
    formula=r"\delta_t = r_t + \gamma V_{t+1} - V_t,\quad A_t = \sum_{l\ge 0} (\gamma\lambda)^l \delta_{t+l},"
    r"\quad \hat A = \mathrm{whiten}_{\text{batch}}(A)",
    requires=("values",),
    kind="token",
    whitened=True,
    reference="verl core_algos.compute_gae_advantage_return (1dda039b; hole skipping PR #2337)",
)
def gae(inp: EstimatorInput, cfg) -> EstimatorOutput:
    values, source = _gae_values(inp, cfg)
    rewards = inp.token_level_rewards
    if cfg.gae_value_mask == "attention":
        values = values * (inp.turn_ids >= 0).to(values.dtype)
    elif cfg.gae_value_mask == "action":  # OpenRLHF: values and rewards off the action mask are 0
        values = values * inp.response_mask
        rewards = rewards * inp.response_mask
    elif cfg.gae_value_mask == "attention_shifted":
        attn = (inp.turn_ids >= 0).to(values.dtype)
        shifted = torch.nn.functional.pad(attn[:, :-1], (1, 0), value=1.0)
        values = values * shifted
    adv, delta = gae_raw(rewards, values, inp.response_mask, cfg.gamma, cfg.lam, cfg.gae_skip_holes)
    advantages = whiten(adv, inp.response_mask, cfg.whitening, cfg.whiten_std)
    extras = {"values": values, "td_errors": delta, "advantages_raw": adv}
    return EstimatorOutput(advantages, adv + values, extras, notes={"value_source": source})
