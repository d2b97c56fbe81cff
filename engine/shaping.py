"""Reward shaping: structured components → turn and global rewards → token-level scores (docs/TUTORIAL.md §7.1).

Turn reward  r_{i,k} = Σ_c w_c · turn_rewards[i, k, c]   (KG-R1 defaults: format 0.15, validity 0.1, answer 0.1)
Global reward G_i    = Σ_c w_c · global_rewards[i, c] over components not starting with an excluded prefix.
Both sums are added left to right in the run's component order (``weighted_components``, docs/conventions/README.md §9).
A run without structured rewards but with token scores has G_i = Σ_t token_scores[i, t] and no turns.

Placements (``cfg.placement``), on the placement mask m (action tokens under state masking):
* ``final_token_only``: (mean or Σ of r_{i,·}) + G_i on the last m-token (KG-R1 converter, GAE path);
* ``turn_proportional``: r_{i,k} / n_{i,k} on each m-token of turn k, plus G_i / n_i on every m-token (KG-R1
  converter, KL path); a turn with no m-token loses its reward, as in the reference;
* ``turn_final_token``: r_{i,k} on the last m-token of turn k, G_i on the last m-token;
* ``uniform``: the whole score spread evenly over the m-tokens;
* ``as_given``: the run's own token scores.
"""

from __future__ import annotations

import torch

from engine.batch import TrajectoryBatch


def weighted_components(components: torch.Tensor, names: tuple[str, ...], table, keep=None) -> torch.Tensor:
    """Σ_c w_c · components[..., c] (w_c from ``table``; a name it lacks weighs 1), over the components ``keep``
    allows, added left to right in the run's component order: the order KG-R1's reward manager adds its values in.

    Written as explicit float32 products and sums rather than ``(components * w).sum(-1)``: torch's reduction
    order over the last axis depends on its length and on the CPU's vector width, so the last bit of a sum of five
    or more components would depend on the machine; here it does not, and it is faster (no [..., C] product)."""
    w = dict(table)
    cols = [c for c in range(len(names)) if keep is None or keep[c]]
    if not cols:
        return torch.zeros(components.shape[:-1], dtype=components.dtype, device=components.device)
    # each weight in the components' precision, as a tensor of weights would hold it
    weights = torch.tensor([w.get(names[c], 1.0) for c in cols], dtype=components.dtype).tolist()
    total = components[..., cols[0]] * weights[0]
    for c, wc in zip(cols[1:], weights[1:], strict=True):
        total = total + components[..., c] * wc  # two roundings per term, as the sum is written (no fused add)
    return total


def weighted_turn_rewards(batch: TrajectoryBatch, cfg) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(r [B, K], turn_mask [B, K]) or (None, None) when the run has no per-turn components."""
    if batch.turn_rewards is None:
        return None, None
    r = weighted_components(batch.turn_rewards, batch.turn_reward_names, cfg.turn_weights)
    return r * batch.turn_mask, batch.turn_mask


def global_component_included(names: tuple[str, ...], cfg) -> list[bool]:
    """Which global components enter G (KG-R1 excludes only '_raw_' keys; the fixed convention excludes '_')."""
    return [not any(n.startswith(p) for p in cfg.global_exclude_prefixes) for n in names]


def weighted_global_reward(batch: TrajectoryBatch, cfg) -> torch.Tensor | None:
    """G [B], or None when the run has neither global components nor token scores."""
    if batch.global_rewards is not None:
        keep = global_component_included(batch.global_reward_names, cfg)
        return weighted_components(batch.global_rewards, batch.global_reward_names, cfg.global_weights, keep)
    if batch.turn_rewards is None and batch.token_scores is not None:
        return batch.token_scores.sum(-1)
    return None


def turn_score(turn_r: torch.Tensor | None, turn_mask: torch.Tensor | None, reduce: str, B: int, like) -> torch.Tensor:
    """Per-row combination of turn rewards: mean (KG-R1) or sum (rLLM) over existing turns. (B,)."""
    if turn_r is None:
        return torch.zeros(B, dtype=like.dtype, device=like.device)
    total = turn_r.sum(-1)
    return total / turn_mask.sum(-1).clamp(min=1) if reduce == "mean" else total


def resolve_placement(batch: TrajectoryBatch, cfg) -> str:
    """The placement actually used: ``auto`` → as_given for runs with only token scores, else KG-R1's rule."""
    if cfg.placement != "auto":
        if cfg.placement == "as_given" and batch.token_scores is None:
            raise ValueError("placement='as_given' but the run has no per-token scores")
        return cfg.placement
    if batch.token_scores is not None and batch.turn_rewards is None and batch.global_rewards is None:
        return "as_given"
    return "turn_proportional" if cfg.use_kl_in_reward else "final_token_only"


def turn_token_counts(turn_ids: torch.Tensor, mask: torch.Tensor, K: int) -> torch.Tensor:
    """n[i, k] = number of mask tokens in turn k. (B, K)."""
    idx = turn_ids.clamp(min=0, max=max(K - 1, 0)).long()
    inside = (turn_ids >= 0) & (turn_ids < K)
    return torch.zeros(mask.shape[0], K, dtype=mask.dtype, device=mask.device).scatter_add_(1, idx, mask * inside)


def turn_last_positions(turn_ids: torch.Tensor, mask: torch.Tensor, K: int) -> torch.Tensor:
    """Position of the last mask token of each turn, −1 if none. (B, K) long."""
    B, T = mask.shape
    idx = turn_ids.clamp(min=0, max=max(K - 1, 0)).long()
    ok = mask.bool() & (turn_ids >= 0) & (turn_ids < K)
    pos = torch.where(ok, torch.arange(T, device=mask.device).expand(B, T), -1)
    return torch.full((B, K), -1, dtype=torch.long, device=mask.device).scatter_reduce_(1, idx, pos, "amax")


def describe_score(placement: str, turn_score_reduce: str, has_turns: bool, has_global: bool, kl: bool) -> str:
    """How a trajectory's score (Σ_t of its token rewards, what outcome estimators see) is made from its rewards
    under ``placement``, in words: shown next to every score, so a mean and a sum are never confused."""
    if placement == "as_given":
        parts = ["Σ of the run's token scores"]
    else:
        parts = []
        if has_turns:
            spread = placement in ("turn_proportional", "turn_final_token")
            parts.append("Σ of turn rewards" if spread or turn_score_reduce == "sum" else "mean of turn rewards")
        if has_global:
            parts.append("global reward")
        parts = parts or ["0 (no rewards)"]
    text = " + ".join(parts)
    return text + " − β·KL" if kl else text


def place_rewards(
    batch: TrajectoryBatch,
    placement: str,
    turn_r: torch.Tensor | None,
    turn_mask: torch.Tensor | None,
    global_r: torch.Tensor | None,
    mask: torch.Tensor,
    turn_score_reduce: str,
    score: torch.Tensor | None = None,
) -> torch.Tensor:
    """Token-level scores [B, T] from turn and global rewards under ``placement`` (module docstring). ``score``:
    the rows' ``turn_score`` when the caller has it already."""
    if placement == "as_given":
        return batch.token_scores.clone()
    B, T = mask.shape
    out = torch.zeros_like(mask)
    g = global_r if global_r is not None else torch.zeros(B, dtype=mask.dtype, device=mask.device)
    last, has, n_valid = batch.row_extent(mask)
    if placement in ("final_token_only", "uniform"):
        if score is None:
            score = turn_score(turn_r, turn_mask, turn_score_reduce, B, mask)
        total = score + g
        if placement == "final_token_only":
            return out.scatter_(1, last[:, None], (total * has)[:, None])
        return total[:, None] * mask / n_valid.clamp(min=1)[:, None]
    if placement == "turn_proportional":
        out = g[:, None] * mask / n_valid.clamp(min=1)[:, None]
        if turn_r is not None:
            K = turn_r.shape[1]
            n = turn_token_counts(batch.turn_ids, mask, K)
            per_tok = torch.where(n > 0, turn_r / n.clamp(min=1), torch.zeros_like(turn_r))
            idx = batch.turn_ids.clamp(min=0, max=max(K - 1, 0)).long()
            inside = (batch.turn_ids >= 0) & (batch.turn_ids < K)
            out = out + torch.gather(per_tok, 1, idx) * mask * inside
        return out
    if placement == "turn_final_token":
        out = out.scatter_(1, last[:, None], (g * has)[:, None])
        if turn_r is not None:
            K = turn_r.shape[1]
            pos = turn_last_positions(batch.turn_ids, mask, K)
            val = torch.where(pos >= 0, turn_r, torch.zeros_like(turn_r))
            out = out.scatter_add_(1, pos.clamp(min=0), val)
        return out
    raise ValueError(f"unknown placement {placement!r}")
