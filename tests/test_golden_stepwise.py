"""Golden: step-level credit — rLLM's stepwise per_step / broadcast pipelines (docs/conventions/rllm.md §2.2, §2.3) and
verl v1's multi-row session broadcast (docs/conventions/verl.md §1.7).

The goldens have one row per step. The engine holds one trajectory per (task, rollout) — or per verl session —
whose steps are consecutive turns (``turn_ids``), so each golden row is a slice of an engine trajectory
(``Layout``). Two layers: (a) ``engine.rllm.run_per_step`` / ``run_broadcast`` on an ``EstimatorInput``, (b)
``compute_credit`` with ``stepwise_mode`` per_step / broadcast under the trainer's profile. A step's tokens
outside its row length do not exist in the engine, so the golden row is compared over its full width with the
engine's values placed back in it (zeros elsewhere, as in the golden).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from golden_utils import assert_golden, golden_cases, tensor

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.registry import EstimatorInput, get_estimator
from engine.rllm import run_broadcast, run_per_step


@dataclass
class Layout:
    """Where golden row j lives in the engine batch: trajectory ``traj[j]``, turn ``step[j]``, tokens
    ``start[j] : start[j] + width[j]``."""

    batch: TrajectoryBatch
    traj: list[int]
    step: list[int]
    start: list[int]
    width: list[int]

    def to_rows(self, x: torch.Tensor, row_width: int) -> torch.Tensor:
        """Engine [B, T] values → golden-shaped [rows, row_width] (zeros past each row's width)."""
        out = torch.zeros(len(self.traj), row_width)
        for j, (b, s, w) in enumerate(zip(self.traj, self.start, self.width, strict=True)):
            out[j, :w] = x[b, s : s + w]
        return out


def rows_to_trajectories(keys, steps, rewards, action, widths, groups) -> Layout:
    """One trajectory per distinct key (first-seen order), its rows as turns in step order; row j contributes
    its first ``widths[j]`` tokens with rewards ``rewards[j]`` and action mask ``action[j]``."""
    order = list(dict.fromkeys(keys))
    traj = [order.index(k) for k in keys]
    start, length = [0] * len(keys), [0] * len(order)
    for j in sorted(range(len(keys)), key=lambda j: (traj[j], steps[j])):
        start[j], length[traj[j]] = length[traj[j]], length[traj[j]] + widths[j]
    B, T = len(order), max(length)
    scores, act, attn = torch.zeros(B, T), torch.zeros(B, T), torch.zeros(B, T)
    turn_ids = torch.full((B, T), -1, dtype=torch.long)
    for j, (b, s, w) in enumerate(zip(traj, start, widths, strict=True)):
        scores[b, s : s + w], act[b, s : s + w] = rewards[j, :w], action[j, :w]
        attn[b, s : s + w], turn_ids[b, s : s + w] = 1.0, steps[j]
    group_of = {traj[j]: groups[j] for j in range(len(keys))}
    batch = TrajectoryBatch.from_tensors(
        token_level_scores=scores, response_mask=act, attention_mask=attn, turn_ids=turn_ids,
        index=[group_of[b] for b in range(B)],
    )  # fmt: skip
    return Layout(batch, traj, list(steps), start, list(widths))


def _estimator_input(batch: TrajectoryBatch) -> EstimatorInput:
    return EstimatorInput(
        token_level_rewards=batch.token_scores,
        response_mask=batch.action_mask,
        group_ids=batch.group_ids,
        turn_ids=batch.turn_ids,
        action_mask=batch.action_mask,
    )


def run_layer(layer: str, batch: TrajectoryBatch, cfg: CreditConfig):
    """(advantages, returns, extras) from the rLLM-mode functions (a) or from compute_credit (b)."""
    if layer == "rllm":
        mode = run_per_step if cfg.stepwise_mode == "per_step" else run_broadcast
        out = mode(get_estimator(cfg.estimator), _estimator_input(batch), cfg)
        return out.advantages, out.returns, out.extras
    res = compute_credit(batch, cfg, device="cpu")
    return res.advantages, res.returns, res.extras


LAYERS = ["rllm", "compute_credit"]

# -------------------------------------------------------------------------- rLLM stepwise (legacy and workflow)


def _rllm_layout(case) -> Layout:
    i, rows = case["inputs"], case["inputs"]["rows"]
    # the golden's token rewards are the trainer's row rewards; the engine keeps the raw step reward on each
    # step's last token and derives the MC return (per_step) or the trajectory reward (broadcast) itself
    rewards = torch.zeros(len(rows), tensor(i["response_mask"]).shape[1])
    for j, r in enumerate(rows):
        rewards[j, r["len"] - 1] = r["step_reward"]
    return rows_to_trajectories(
        keys=[(r["task"], r["rollout"]) for r in rows],
        steps=[r["step"] for r in rows],
        rewards=rewards,
        action=tensor(i["response_mask"]),
        widths=[r["len"] for r in rows],
        groups=[r["task"] for r in rows],
    )


def _per_step(case) -> bool:
    return case["name"].startswith("legacy_per_step")


def _rllm_config(case) -> CreditConfig:
    p, name = case["params"], case["name"]
    if _per_step(case):
        return CreditConfig(
            profile="rllm-legacy", estimator="grpo", stepwise_mode="per_step", stepwise_gamma=p["gamma"],
            norm_adv_by_std_in_grpo=p["norm_adv_by_std_in_grpo"],
        )  # fmt: skip
    profile = "rllm-legacy" if "legacy_agent_ppo_trainer" in name else "rllm-workflow"
    return CreditConfig(
        profile=profile, estimator="grpo", stepwise_mode="broadcast", normalize_by_steps=p["normalize_by_steps"],
        norm_adv_by_std_in_grpo=p["norm_adv_by_std_in_grpo"],
    )  # fmt: skip


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("case", golden_cases("rllm_stepwise_pipelines.json"))
def test_rllm_stepwise(case, layer):
    lay, cfg = _rllm_layout(case), _rllm_config(case)
    row_width = len(case["outputs"]["advantages"][0])
    adv, _, extras = run_layer(layer, lay.batch, cfg)
    assert_golden(lay.to_rows(adv, row_width), case["outputs"]["advantages"], what="advantages")
    if cfg.stepwise_mode == "per_step":
        scalar = extras["step_advantage"][lay.traj, lay.step]
    else:
        scalar = extras["step_scalar"][lay.traj]
    assert_golden(scalar, case["outputs"]["per_row_scalar"], what="per_row_scalar")


@pytest.mark.parametrize("case", golden_cases("rllm_stepwise_pipelines.json", where=_per_step))
def test_rllm_per_step_rewards_are_the_trainers_mc_returns(case):
    """The engine's per-step MC returns equal the token_level_rewards the legacy trainer fed to GRPO."""
    lay = _rllm_layout(case)
    res = compute_credit(lay.batch, _rllm_config(case), device="cpu")
    expected = tensor(case["inputs"]["token_level_rewards(mc_returns)"]).sum(-1)  # one return per row
    assert_golden(res.extras["step_mc_returns"][lay.traj, lay.step], expected, what="mc_returns")


# ------------------------------------------------------------------------------ verl v1 multi-row sessions


def _v1_layout(case) -> Layout:
    i = case["inputs"]
    keys = [k.rsplit("_", 1) for k in i["batch_keys"]]  # "{uid}_{session}_{k}" → ("{uid}_{session}", k)
    rewards, mask = tensor(i["token_level_rewards"]), tensor(i["response_mask"])
    return rows_to_trajectories(
        keys=[s for s, _ in keys],
        steps=[int(k) for _, k in keys],
        rewards=rewards,
        action=mask,
        widths=[mask.shape[1]] * mask.shape[0],
        groups=i["uid"],
    )


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("case", golden_cases("verl_v1_multi_trajectory_grpo_broadcast.json"))
def test_verl_v1_session_broadcast(case, layer):
    p = case["params"]
    cfg = CreditConfig(
        profile="verl", estimator=p["adv_estimator"], stepwise_mode="broadcast", placement="as_given",
        norm_adv_by_std_in_grpo=p["norm_adv_by_std_in_grpo"],
    )  # fmt: skip
    lay = _v1_layout(case)
    row_width = len(case["outputs"]["advantages"][0])
    adv, ret, _ = run_layer(layer, lay.batch, cfg)
    assert_golden(lay.to_rows(adv, row_width), case["outputs"]["advantages"], what="advantages")
    assert_golden(lay.to_rows(ret, row_width), case["outputs"]["returns"], what="returns")
