"""Loss aggregation (verl ``agg_loss``, docs/conventions/verl.md §1.5) as a per-token weight: length bias shows.

loss = Σ_{i,t} w_{i,t} · L_{i,t} with n_i = Σ_t m_{i,t}, N = Σ n_i, G = #{i: n_i > 0}:
  token-mean: w = m/N · dp;  token-sum: w = m · dp;  seq-mean-token-sum: w = m/G · dp;
  seq-mean-token-mean: w = m/((n_i + 1e-8)·G) · dp;  seq-mean-token-sum-norm: w = m/(G·S) · dp (verl ≥ PR #5366;
  older verl: m/S, without the dp factor), S = loss_scale_factor (default T);
  prompt-mean-token-mean (SkyRL's prompt_mean): w = m/(P·max(n_p, 1)), P the number of prompt groups (``group_ids``),
  n_p the loss tokens of row i's group: a token mean within each group, then the mean over the P groups.
G counts every row instead with ``seq_mean_rows="all"`` (verl's trainer, TRL, SkyRL: a fully masked row still counts).
The effective gradient weight of a token is w · A: how hard (and which way) it moves the policy.
"""

from __future__ import annotations

import torch

from engine.config import LOSS_AGG_MODES


def agg_weights(
    loss_mask: torch.Tensor,
    mode: str,
    dp_size: int = 1,
    batch_num_tokens: float | None = None,
    global_batch_size: float | None = None,
    loss_scale_factor: float | None = None,
    sum_norm_divides_by_seqs: bool = True,
    token_sum_supported: bool = True,
    seq_mean_rows: str = "nonempty",
    group_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """w [B, T] such that agg_loss(L) = Σ w·L (masked entries of L neutralised). ``sum_norm_divides_by_seqs`` off
    = older verl (sum-norm = Σ_i S_i / S without /G or dp factor, no dp_size checks); ``token_sum_supported`` off
    = older verl, which had no token-sum mode (ValueError, as verl raised). ``seq_mean_rows="all"``: the seq-mean
    modes divide by the number of rows B, not by the rows with a loss token (verl's ppo_loss, TRL's loss_type grpo
    and dr_grpo). ``group_ids`` [B]: the prompt groups prompt-mean-token-mean averages over (every group counts, one
    without a loss token too, as SkyRL counts every prompt of the mini-batch)."""
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"loss_agg_mode {mode!r} is not one of {list(LOSS_AGG_MODES)}")
    if mode == "token-sum" and not token_sum_supported:
        raise ValueError("loss_agg_mode 'token-sum' does not exist in this verl version (added 2026-08)")
    m = loss_mask
    n = m.sum(-1, keepdim=True)  # (B, 1)
    if mode == "prompt-mean-token-mean":
        return _prompt_mean(m, n, group_ids, dp_size)
    if dp_size > 1 and sum_norm_divides_by_seqs:
        if mode == "token-mean" and batch_num_tokens is None:
            raise ValueError("token-mean with dp_size > 1 needs batch_num_tokens (the global token count)")
        if mode.startswith("seq-mean") and global_batch_size is None:
            raise ValueError(f"{mode} with dp_size > 1 needs global_batch_size (the global sequence count)")
    # An empty loss mask (every row rejected) trains nothing: its weights are 0, not 0/0.
    N = batch_num_tokens if batch_num_tokens is not None else m.sum().clamp(min=1)
    if global_batch_size is not None:
        G = global_batch_size
    else:
        G = m.shape[0] if seq_mean_rows == "all" else (n > 0).sum().clamp(min=1)
    if mode == "token-mean":
        w = m / N
    elif mode == "token-sum":
        w = m.clone()
    elif mode == "seq-mean-token-sum":
        w = m / G
    elif mode == "seq-mean-token-mean":
        w = m / (n + 1e-8) / G
    else:
        S = loss_scale_factor if loss_scale_factor is not None else m.shape[-1]
        if not sum_norm_divides_by_seqs:
            return m / S  # older verl: no division by G and no dp_size factor
        w = m / (G * S)
    return w * dp_size


def _prompt_mean(m: torch.Tensor, n: torch.Tensor, group_ids: torch.Tensor | None, dp_size: int) -> torch.Tensor:
    """SkyRL's prompt_mean (``apply_loss_reduction_to_advantages_minibatch``): w = m/(P·max(n_p, 1)) [B, T]. SkyRL
    takes its groups as the runs of equal uids (and asserts that a uid's rows are contiguous); here a group is a
    group id, wherever its rows are."""
    if group_ids is None:
        raise ValueError("loss_agg_mode 'prompt-mean-token-mean' needs the batch's group ids (its prompt groups)")
    if dp_size > 1:
        raise ValueError("loss_agg_mode 'prompt-mean-token-mean' takes no dp_size: SkyRL scales the whole mini-batch")
    ids, group = torch.unique(group_ids.to(m.device), return_inverse=True)  # group [B]: row i's group
    tokens = torch.zeros(len(ids), dtype=m.dtype, device=m.device).index_add_(0, group, n[:, 0])  # (P,)
    return m / (len(ids) * tokens.clamp(min=1))[group][:, None]


def agg_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, mode: str, **kw) -> torch.Tensor:
    """Scalar loss: Σ w · where(m, L, 0)."""
    w = agg_weights(loss_mask, mode, **kw)
    return (w * torch.where(loss_mask.bool(), loss_mat, torch.zeros_like(loss_mat))).sum()


def policy_loss_vanilla(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
    **agg_kw,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """verl's dual-clip PPO loss: ratio = exp(clamp(lp − old, ±20)); pg = max(−A·r, −A·clip(r, 1−εl, 1+εh)),
    and for A < 0, min(pg, −A·c). Returns (loss, per-token pg [B, T] and clip fractions)."""
    neg_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(neg_kl)
    pg1 = -advantages * ratio
    pg2 = -advantages * torch.clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    clipped = torch.maximum(pg1, pg2)
    pg3 = -advantages * clip_ratio_c
    dual = torch.minimum(pg3, clipped)
    pg = torch.where(advantages < 0, dual, clipped)
    loss = agg_loss(pg, response_mask, loss_agg_mode, **agg_kw)
    m = response_mask
    denom = m.sum().clamp(min=1e-8)
    metrics = {
        "pg_losses": pg,
        "ppo_kl": (-neg_kl * m).sum() / denom,
        "pg_clipfrac": ((pg2 > pg1).float() * m).sum() / denom,
        "pg_clipfrac_lower": ((clipped > pg3).float() * (advantages < 0).float() * m).sum() / denom,
    }
    return loss, metrics
