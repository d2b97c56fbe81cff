"""Small synthetic runs that trigger each lint, with a clean scheme (or repaired data) that does not.

Every case is a handful of rollouts written as layout strings: ``"mmmttmm"`` = 3 model tokens, 2 tool tokens,
2 model tokens (two turns). Model tokens are the Qwen2.5 token " step", tool tokens " result", so text and ids
agree and a case saves as a native run (``python -m engine.lint.sample_run`` writes ``sample_runs/lint_cases``).
The outcome reward sits on the last model token as a per-token score (verl's token_level_scores), unless a case
says otherwise. Cases whose defect no native run can hold (turn ids that go backwards or skip) edit the batch.

    from engine.lint.cases import lint_cases
    case = lint_cases()["reward_on_masked_token"]
    run_lints(case.batch, case.scheme)        # fires case.check
    run_lints(case.clean_batch, case.clean)   # silent for case.check
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.batch import TrajectoryBatch
from engine.config import KGR1_GLOBAL_WEIGHTS, CreditConfig
from engine.io.data.batching import build_batch
from engine.io.data.model import FLOAT_DTYPE, TOKEN_DTYPE, Segment, Trajectory

MODEL_PIECE, MODEL_ID = " step", 3019  # one Qwen2.5 token each (tests check it against the tokenizer)
TOOL_PIECE, TOOL_ID = " result", 1102
STEP_S_IDS = (3019, 82)  # " step" + "s": decodes to " steps", whose canonical tokenization is one token (7354)


def segment(role: str, n: int, start: int = 0) -> Segment:
    """n model or tool tokens; critic values rise along the response (0.5 + 0.05·position) so GAE has a critic."""
    piece, tid = (MODEL_PIECE, MODEL_ID) if role == "model" else (TOOL_PIECE, TOOL_ID)
    values = (0.5 + 0.05 * np.arange(start, start + n)).astype(FLOAT_DTYPE)
    return Segment(role=role, text=piece * n, token_ids=np.full(n, tid, dtype=TOKEN_DTYPE), values=values)


def rollout(
    rid: str,
    layout: str,
    reward: float | list[float] | None = 0.0,
    group: str = "q",
    *,
    reward_on_last_token: bool = False,
    truncated: bool = False,
    turn_rewards: list[dict[str, float]] | None = None,
    global_rewards: dict[str, float] | None = None,
) -> Trajectory:
    """One trajectory from a layout string; ``reward`` (a value or the values of the last few tokens) goes on
    the last model token(s), or on the very last token with ``reward_on_last_token``; None = no token scores."""
    segs, start = [], 0
    for ch, run in itertools.groupby(layout):
        n = len(list(run))
        segs.append(segment("model" if ch == "m" else "tool", n, start))
        start += n
    if reward is not None:
        parts = [float(reward)] if not isinstance(reward, list) else [float(r) for r in reward]
        target = segs[-1] if reward_on_last_token else [s for s in segs if s.role == "model"][-1]
        for s in segs:
            s.scores = np.zeros(s.num_tokens, dtype=FLOAT_DTYPE)
        target.scores[-len(parts) :] = parts
    return Trajectory(
        id=rid,
        group_id=group,
        prompt=f"Prompt {group}",
        segments=segs,
        turn_rewards=list(turn_rewards or []),
        global_rewards=dict(global_rewards or {}),
        metadata={"truncated": truncated},
    )


def group(prefix: str, layouts: list[str], rewards: list, **kw) -> list[Trajectory]:
    """Rollouts of one prompt ``prefix``: ids ``prefix-0``, ``prefix-1``, …"""
    return [
        rollout(f"{prefix}-{i}", lay, r, prefix, **kw) for i, (lay, r) in enumerate(zip(layouts, rewards, strict=True))
    ]


@dataclass(frozen=True)
class LintCase:
    """``batch`` under ``scheme`` triggers ``check``; ``clean_batch`` under ``clean`` does not. ``run`` is the
    engine.io Run of the case (None when the defect lives only in the batch); ``clean_run`` likewise."""

    name: str
    check: str
    description: str
    batch: TrajectoryBatch
    scheme: CreditConfig
    clean_batch: TrajectoryBatch
    clean: CreditConfig
    trajectories: tuple[Trajectory, ...] = ()
    run: object | None = None
    clean_run: object | None = None


def make_case(
    name: str,
    description: str,
    trajs: list[Trajectory],
    scheme: CreditConfig,
    clean: CreditConfig | None = None,
    *,
    check: str | None = None,
    repaired: list[Trajectory] | None = None,
    edit: Callable[[TrajectoryBatch], TrajectoryBatch] | None = None,
) -> LintCase:
    """A case from trajectories; ``repaired`` (fixed data) or ``edit`` (a batch-only defect) for data lints."""
    from engine.io.data.run import Run

    batch = build_batch(trajs)
    clean_trajs = repaired or trajs
    return LintCase(
        name=name,
        check=check or name,
        description=description,
        batch=edit(batch) if edit else batch,
        scheme=scheme,
        clean_batch=build_batch(clean_trajs),
        clean=clean or scheme,
        trajectories=tuple(trajs),
        run=None if edit else Run(list(trajs), name=name),
        clean_run=Run(list(clean_trajs), name=name),
    )


# Four tool-using rollouts of one prompt; tool blocks of different lengths; two solved.
TOOL_LAYOUTS = ["mmmtttmm", "mmtmmm", "mmmmttttmm", "mmttm"]
TOOL_REWARDS = [1.0, 0.0, 1.0, 0.0]


def tool_group(**kw) -> list[Trajectory]:
    return group("tool", TOOL_LAYOUTS, TOOL_REWARDS, **kw)


def _backwards_turns(batch: TrajectoryBatch) -> TrajectoryBatch:
    """Row 0's last token labelled turn 0 after a turn-1 token: the turn tensor lost alignment."""
    turn = batch.turn_ids.clone()
    turn[0, 7] = 0
    return batch.replace(turn_ids=turn)


def _kgr1(prefix: str, em: list[float], kg_turns: list[int], **extra: list[float]) -> list[Trajectory]:
    """KG-R1 style rollouts: two rewarded turns each, global components with the bookkeeping keys (and the
    ``extra`` components, one value per rollout)."""
    turns = [{"format_score": 1.0, "kg_query_validity": 1.0}, {"format_score": 1.0, "is_answer_score": 1.0}]
    return [
        rollout(
            f"{prefix}-{i}",
            "mmtttmm",
            None,
            prefix,
            turn_rewards=turns,
            global_rewards={
                "exact_match": e,
                "retrieval_quality": e,
                "_raw_exact_match": e,
                "_otc_scaling_factor": 1.0,
                "_kg_turns_used": float(k),
            }
            | {name: vals[i] for name, vals in extra.items()},
        )
        for i, (e, k) in enumerate(zip(em, kg_turns, strict=True))
    ]


def _retok_run(consistent: bool) -> list[Trajectory]:
    trajs = tool_group()
    if not consistent:
        trajs[0].segments[0].token_ids = np.full(3, TOOL_ID, dtype=TOKEN_DTYPE)  # ids say " result" ×3
        seg = trajs[1].segments[0]  # text " steps", ids " step" + "s": same text, non-canonical ids
        seg.text, seg.token_ids = " steps", np.array(STEP_S_IDS, dtype=TOKEN_DTYPE)
    return trajs


def _trl_logged(trajs: list[Trajectory], rewards: list[float]) -> list[Trajectory]:
    """Each rollout's ``metadata.logged_advantage`` as TRL's GRPO logs it: (r − μ)/(σ + 1e-4) per group,
    unbiased σ (``grpo_trainer.py`` sum_then_normalize, scale_rewards='group')."""
    by_group: dict[str, list[float]] = {}
    for t, r in zip(trajs, rewards, strict=True):
        by_group.setdefault(t.group_id, []).append(r)
    for t, r in zip(trajs, rewards, strict=True):
        g = np.asarray(by_group[t.group_id], dtype=np.float64)
        t.metadata["logged_advantage"] = float((r - g.mean()) / (g.std(ddof=1) + 1e-4))
    return trajs


def _mismatched(trajs: list[Trajectory], off: dict[tuple[int, int], float], entropy: float = 0.8) -> list[Trajectory]:
    """The trainer's log-probs (−0.3 on every model token) and the rollout engine's, equal except at ``off``:
    (rollout, model token) → log π_trainer − log π_rollout there; the policy's entropy ``entropy`` on every model
    token (these cases share the ``policy/`` sample, which has both log-probs and the entropy on every row)."""
    for r, t in enumerate(trajs):
        k = 0
        for seg in t.segments:
            if seg.role != "model":
                continue
            lp = np.full(seg.num_tokens, -0.3, dtype=FLOAT_DTYPE)
            rollout_lp = lp.copy()
            for j in range(seg.num_tokens):
                rollout_lp[j] -= off.get((r, k + j), 0.0)
            seg.log_probs, seg.rollout_log_probs = lp, rollout_lp
            seg.entropy = np.full(seg.num_tokens, entropy, dtype=FLOAT_DTYPE)
            k += seg.num_tokens
    return trajs


def lint_cases() -> dict[str, LintCase]:
    """Every case, by name (a check's name, or the check plus a suffix for a second trigger)."""
    verl = CreditConfig()
    cases = [
        make_case(
            "info_tokens_in_loss",
            "Search-R1 without state_masking: the tool tokens of four rollouts are trained on",
            tool_group(),
            CreditConfig(profile="search-r1", state_masking=False),
            CreditConfig(profile="search-r1"),
        ),
        make_case(
            "advantage_on_info_tokens",
            "Search-R1 conventions with REINFORCE++-baseline: tool tokens enter the token-weighted whitening",
            tool_group(),
            CreditConfig(profile="search-r1", estimator="reinforce_plus_plus_baseline"),
            CreditConfig(estimator="reinforce_plus_plus_baseline"),
        ),
        make_case(
            "reward_on_masked_token",
            "the outcome reward sits on the last token, a tool token; REINFORCE++ sums r·m and drops it",
            group("end_tool", ["mmtt", "mmmt", "mmmtt", "mmt"], [1.0, 0.0, 1.0, 0.0], reward_on_last_token=True),
            CreditConfig(estimator="reinforce_plus_plus"),
            CreditConfig(estimator="reinforce_plus_plus", placement="final_token_only"),
        ),
        make_case(
            "no_trainable_tokens",
            "a rollout cut off during its first tool output has no model token but stays in its group",
            tool_group() + [rollout("tool-4", "ttt", None, "tool", truncated=True)],
            verl,
            CreditConfig(mask_truncated_samples=True),
        ),
        make_case(
            "gae_through_holes",
            "Search-R1 GAE with a critic (γ=0.99, λ=0.95) takes TD steps through the tool blocks",
            tool_group(),
            CreditConfig(profile="search-r1", estimator="gae", gamma=0.99, lam=0.95),
            CreditConfig(estimator="gae", gamma=0.99, lam=0.95),
        ),
        make_case(
            "reinforce_reset_at_holes",
            "verl-legacy REINFORCE++ resets the return at each tool block: first turns get return 0",
            tool_group(),
            CreditConfig(profile="verl-legacy", estimator="reinforce_plus_plus"),
            CreditConfig(estimator="reinforce_plus_plus"),
        ),
        make_case(
            "singleton_raw_score",
            "one prompt has a single rollout: GRPO gives it its raw score",
            group("q", ["mmm", "mmmm", "mm"], [1.0, 0.0, 1.0]) + group("solo", ["mmm"], [1.0]),
            verl,
            CreditConfig(estimator="rloo_vectorized"),
        ),
        make_case(
            "non_finite_advantage",
            "OpenRLHF group_norm with one rollout per prompt: the std of one reward is NaN, so is every advantage",
            group("a", ["mmm"], [1.0]) + group("b", ["mmmm"], [0.0]) + group("c", ["mmtm"], [1.0]),
            CreditConfig(profile="openrlhf", estimator="grpo"),
            CreditConfig(profile="openrlhf", estimator="grpo", norm_adv_by_std_in_grpo=False),
        ),
        make_case(
            "train_inference_mismatch",
            "the rollout engine sampled three tokens 3× less likely than the trainer finds them",
            _mismatched(
                group("mm", ["mmmtmm", "mmmm", "mmtmm", "mmm"], [1.0, 0.0, 1.0, 0.0]),
                {(0, 1): 1.1, (0, 4): -1.2, (2, 0): 1.1},
            ),
            verl,
            CreditConfig(rollout_is="token", rollout_is_threshold="0.5_2.0"),
        ),
        make_case(
            "entropy_collapse",
            "the policy's entropy is 0.02 nats on every trained token: it samples the same tokens every time",
            _mismatched(group("low", ["mmmm", "mmm", "mmmmm"], [1.0, 0.0, 1.0]), {}, entropy=0.02),
            verl,
            repaired=_mismatched(group("low", ["mmmm", "mmm", "mmmmm"], [1.0, 0.0, 1.0]), {}, entropy=0.9),
        ),
        make_case(
            "zero_variance_groups",
            "an all-solved and an all-failed prompt: 6 of 9 rollouts get advantage 0",
            group("easy", ["mmm"] * 3, [1.0] * 3)
            + group("hard", ["mmm"] * 3, [0.0] * 3)
            + group("mid", ["mmm"] * 3, [1.0, 0.0, 1.0]),
            verl,
            CreditConfig(rejection_sample=True),
        ),  # fmt: skip
        make_case(
            "near_tie_amplified",
            "0.1 + 0.6 against 0.7 in float32: the 1-ulp difference becomes an advantage of ~0.057",
            group("tie", ["mmm", "mmm"], [[0.1, 0.6], 0.7]) + group("q", ["mmm", "mmm"], [1.0, 0.0]),
            verl,
            CreditConfig(norm_adv_by_std_in_grpo=False),
        ),
        make_case(
            "near_tie_amplified_exact_tie",
            "eight rollouts all scored 0.35: the float32 group mean misses 0.35 and every rollout gets ≈ 0.029",
            group("q8", ["mmm"] * 8, [0.35] * 8) + group("q", ["mmm", "mmm"], [1.0, 0.0]),
            verl,
            CreditConfig(norm_adv_by_std_in_grpo=False),
            check="near_tie_amplified",
        ),
        make_case(
            "std_blowup",
            "scores 0.5, 0.5, 0.5, 0.5001: a 1e-4 difference becomes an advantage of 1.5",
            group("q", ["mmm"] * 4, [0.5, 0.5, 0.5, 0.5001]),
            verl,
            CreditConfig(norm_adv_by_std_in_grpo=False),
        ),
        make_case(
            "broadcast_group_split",
            "rLLM workflow broadcast: a 1-step rollout lands alone, away from its two 2-step siblings",
            group("q", ["mmm", "mmtmm", "mmtmm"], [1.0, 1.0, 0.0]),
            CreditConfig(profile="rllm-workflow", stepwise_mode="broadcast"),
            CreditConfig(profile="rllm-legacy", stepwise_mode="broadcast"),
        ),
        make_case(
            "zero_advantage_steps",
            "rLLM per_step with γ = 0 (the workflow default): first steps all return 0 and get no credit",
            group("q", ["mmtmm"] * 4, [1.0, 0.0, 1.0, 0.0]),
            CreditConfig(stepwise_mode="per_step", stepwise_gamma=0.0),
            CreditConfig(stepwise_mode="per_step", stepwise_gamma=0.95),
        ),
        make_case(
            "small_step_groups",
            "rLLM per_step over rollouts of 1, 2 and 3 steps: the third step's group is a singleton",
            group("q", ["mm", "mmtmm", "mmtmmtmm"], [0.0, 1.0, 1.0]),
            CreditConfig(stepwise_mode="per_step"),
            CreditConfig(stepwise_mode="trajectory"),
        ),
        make_case(
            "length_bias",
            "seq-mean-token-sum over rollouts of 2, 4, 8 and 16 tokens with equal |A|",
            group("q", ["mm", "mmmm", "m" * 8, "m" * 16], [1.0, 0.0, 0.0, 1.0]),
            CreditConfig(loss_agg_mode="seq-mean-token-sum"),
            CreditConfig(loss_agg_mode="seq-mean-token-mean"),
        ),
        make_case(
            "truncated_in_loss",
            "two of four rollouts ran into the length limit and are trained with reward 0",
            [rollout(f"q-{i}", "mmtmm", r, truncated=i >= 2) for i, r in enumerate([1.0, 1.0, 0.0, 0.0])],
            verl,
            CreditConfig(mask_truncated_samples=True),
        ),
        make_case(
            "turn_ids_backwards",
            "row 0's last token is labelled turn 0 after a turn-1 token (misaligned turn tensor)",
            tool_group(),
            verl,
            edit=_backwards_turns,
        ),
        make_case(
            "bookkeeping_reward_leak",
            "KG-R1 global rewards with '_otc_scaling_factor' and '_kg_turns_used' under the kg-r1 profile",
            _kgr1("kg", [1.0, 0.0], [2, 3]) + _kgr1("kg2", [1.0, 1.0], [1, 1]),
            CreditConfig(profile="kg-r1"),
            verl,
        ),
        make_case(
            "implicit_global_weights",
            "a 'num_retrieved' count kept as a global component weighs 1 and is added to the reward",
            _kgr1("ret", [1.0, 0.0], [2, 2], num_retrieved=[3.0, 5.0]),
            verl,
            CreditConfig(global_weights=dict(KGR1_GLOBAL_WEIGHTS, num_retrieved=0.0)),
        ),
        make_case(
            "retokenization_mismatch",
            "one segment's ids decode to ' result' ×3 under text ' step' ×3; another is ' step'+'s' for ' steps'",
            _retok_run(consistent=False),
            verl,
            repaired=_retok_run(consistent=True),
        ),
        make_case(
            "logged_advantage_mismatch",
            "TRL logged (r − μ)/(σ + 1e-4); the scheme is Dr.GRPO (no std): 4 of 7 rollouts disagree",
            _trl_logged(
                group("q", ["mmm"] * 4, [1.0, 0.0, 1.0, 0.0]) + group("p", ["mm"] * 3, [1.0, 1.0, 1.0]),
                [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0],
            ),
            CreditConfig(norm_adv_by_std_in_grpo=False),
            CreditConfig(profile="trl"),
        ),
    ]
    return {c.name: c for c in cases}
