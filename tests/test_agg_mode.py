"""engine.credit.with_loss_agg_mode: a result under another loss aggregation mode, without recomputing the
advantages, must equal compute_credit under that mode, tensor for tensor."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from dashboard import sources
from engine import CreditConfig, compute_credit
from engine.config import LOSS_AGG_MODES
from engine.credit import with_loss_agg_mode
from engine.io import load_run

CONFIGS = [
    CreditConfig(estimator="grpo"),
    CreditConfig(estimator="gae", rejection_sample=True),
    CreditConfig(estimator="rloo", state_masking=False, loss_scale_factor=512.0),
    CreditConfig(estimator="grpo", stepwise_mode="per_step", mask_truncated_samples=True),
    CreditConfig(profile="kg-r1", estimator="grpo"),
    CreditConfig(profile="verl-legacy", estimator="grpo"),
    CreditConfig(profile="skyrl", estimator="grpo"),  # prompt-mean-token-mean: SkyRL's prompt_mean
    CreditConfig(profile="skyrl", estimator="grpo", policy_loss="kl_cov", kl_cov_ratio=0.2, ppo_kl_coef=1.0),
]


def _batches():
    for name in ("kgqa_multiturn", "python_tool_two_rollouts", "search_agent"):
        yield name, load_run(sources.sample_path(name)).run.to_batch()


# On the run with both engines' log-probs: rollout rejection under trainers that still count a rejected token in
# the aggregation (SkyRL, OpenRLHF, verl's bypass mode) and under one that does not (verl decoupled)
_REJECTION = dict(estimator="grpo", rollout_is="token", rollout_rs=("token_k1",), rollout_rs_threshold=("0.5_2.0",))
REJECTION_CONFIGS = [
    CreditConfig(profile="skyrl", **_REJECTION),
    CreditConfig(profile="verl", policy_ratio_base="rollout", **_REJECTION),
    CreditConfig(profile="verl", **_REJECTION),
    CreditConfig(profile="openrlhf", **_REJECTION),
]


def _policy_sample(cfg: CreditConfig):
    """The bundled policy sample (groups of 4 and 3 rows) as ``cfg``'s trainer can have made it: one group of 7
    under OpenRLHF, whose groups are all one size (Profile.group_sizes)."""
    batch = load_run(sources.sample_path("lint_cases/policy")).run.to_batch()
    if cfg.trainer.group_sizes == "equal":
        batch = batch.replace(group_ids=torch.zeros_like(batch.group_ids))
    return batch


@pytest.mark.parametrize("cfg", REJECTION_CONFIGS, ids=lambda c: f"{c.profile}-{c.policy_ratio_base}")
def test_equals_compute_credit_when_the_trainer_counts_rejected_tokens(cfg) -> None:
    batch = _policy_sample(cfg)
    base = compute_credit(batch, cfg, token_extras=False)
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum"):
        want = compute_credit(batch, cfg.replace(loss_agg_mode=mode), token_extras=False)
        got = with_loss_agg_mode(base, mode)
        for name in ("agg_weights", "effective_weights", "grad_weight"):
            torch.testing.assert_close(getattr(got, name), getattr(want, name), msg=f"{mode} {name}")
    assert bool(base.rejected.any())  # the rejection fires on this run (read last: reading a view lets go of stage 4)
    assert (base.count_mask is not base.loss_mask) == (
        cfg.rejected_tokens_counted or cfg.policy_ratio_base == "rollout"
    )


@pytest.mark.parametrize("name, batch", list(_batches()), ids=lambda x: x if isinstance(x, str) else "")
def test_equals_compute_credit_under_every_mode(name, batch) -> None:
    checked = raised = 0
    for cfg in CONFIGS:
        try:
            base = compute_credit(batch, cfg, token_extras=False)
        except (ValueError, NotImplementedError):
            continue
        for mode in LOSS_AGG_MODES:
            try:
                want = compute_credit(batch, cfg.replace(loss_agg_mode=mode), token_extras=False)
            except ValueError as e:
                with pytest.raises(ValueError, match=str(e)[:30]):
                    with_loss_agg_mode(base, mode)
                raised += 1
                continue
            got = with_loss_agg_mode(base, mode)
            assert got.config == want.config
            for f in dataclasses.fields(want):
                a, b = getattr(got, f.name), getattr(want, f.name)
                if isinstance(b, torch.Tensor):
                    assert torch.equal(a, b), (name, cfg, mode, f.name)
            checked += 1
    assert checked >= 12  # most configs run on every sample, each under several modes
    assert raised >= 1  # verl-legacy has no token-sum (the others no prompt mean): refused the same way


def test_weights_differ_between_modes() -> None:
    """The modes are not all the same weights (so the equality above is not vacuous)."""
    batch = load_run(sources.sample_path("kgqa_multiturn")).run.to_batch()
    base = compute_credit(batch, CreditConfig(estimator="grpo"), token_extras=False)
    sums = {m: float(with_loss_agg_mode(base, m).agg_weights.sum()) for m in ("token-mean", "token-sum")}
    assert sums["token-mean"] == pytest.approx(1.0) and sums["token-sum"] == float(base.loss_mask.sum())


def test_run_analytics_aggregation_table_is_the_same_as_computing_each_mode() -> None:
    """services.variant_table over loss_agg_mode (derived from the cached result) gives exactly the table that
    computing the scheme once per mode gives."""
    import pandas as pd

    from dashboard import analysis, loading, services
    from dashboard.sources import RunRef

    h = loading.open_run(RunRef("sample", "kgqa_multiturn"), {})
    b = services.batch(h)
    for cfg in (
        CreditConfig(estimator="gae"),
        CreditConfig(profile="verl-legacy", estimator="grpo"),
        CreditConfig(profile="skyrl", estimator="grpo"),
    ):
        got = services.variant_table(h, cfg, "loss_agg_mode", LOSS_AGG_MODES, analysis.aggregation_weights)
        frames = []
        for mode in LOSS_AGG_MODES:
            try:
                res = compute_credit(b, cfg.replace(loss_agg_mode=mode), token_extras=False)
            except ValueError:
                continue
            frames.append(analysis.aggregation_weights(b, {mode: res}))
        want = pd.concat(frames, ignore_index=True)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        assert got["mode"].nunique() == len(frames) >= 4


def test_skyrl_kl_cov_off_ratio_one_is_recomputed_per_mode() -> None:
    """SkyRL's kl_cov ranks the reduction-scaled advantage and adds its penalty outside the reduction, so away from
    ratio 1 (bypass: π_trainer/π_rollout) a mode's gradient is not the old one rescaled: with_loss_agg_mode runs stage
    4 again under the mode, and Run analytics' table is what computing each mode gives."""
    import pandas as pd

    from dashboard import analysis, loading, services
    from dashboard.sources import RunRef

    h = loading.open_run(RunRef("sample", "lint_cases/policy"), {})
    b = services.batch(h)
    cfg = CreditConfig(profile="skyrl", estimator="grpo", policy_loss="kl_cov", kl_cov_ratio=0.2, ppo_kl_coef=1.0)
    cfg = cfg.replace(policy_ratio_base="rollout")
    base = compute_credit(b, cfg, token_extras=False)
    got = with_loss_agg_mode(base, "seq-mean-token-mean")
    want = compute_credit(b, cfg.replace(loss_agg_mode="seq-mean-token-mean"), token_extras=False)
    torch.testing.assert_close(got.grad_weight, want.grad_weight, rtol=0, atol=0)
    assert not torch.equal(got.grad_weight, base.grad_weight * got.agg_weights / base.agg_weights.clamp(min=1e-30))
    got = services.variant_table(h, cfg, "loss_agg_mode", LOSS_AGG_MODES, analysis.aggregation_weights)
    frames = []
    for mode in LOSS_AGG_MODES:
        res = compute_credit(b, cfg.replace(loss_agg_mode=mode), token_extras=False)
        frames.append(analysis.aggregation_weights(b, {mode: res}))
    pd.testing.assert_frame_equal(got, pd.concat(frames, ignore_index=True), check_exact=True)


def test_prompt_mean_weighs_each_prompt_group_alike() -> None:
    """SkyRL's prompt_mean by hand: rows 0 and 1 are prompt 7 (2 + 1 = 3 loss tokens), row 2 is prompt 3 (2 tokens),
    so P = 2: a token of prompt 7 weighs 1/(2·3), one of prompt 3 1/(2·2), and each prompt sums to 1/2 (token-mean
    would give every token 1/5)."""
    from engine.aggregation import agg_weights

    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    w = agg_weights(mask, "prompt-mean-token-mean", group_ids=torch.tensor([7, 7, 3]))
    torch.testing.assert_close(w, mask / torch.tensor([[6.0], [6.0], [4.0]]))
    # a prompt without a loss token still counts in P (SkyRL counts every prompt): P = 2, prompt 0 has 3 tokens
    empty = mask * torch.tensor([[1.0], [1.0], [0.0]])
    w = agg_weights(empty, "prompt-mean-token-mean", group_ids=torch.tensor([0, 0, 1]))
    torch.testing.assert_close(w, empty / 6.0)
    with pytest.raises(ValueError, match="needs the batch's group ids"):
        agg_weights(mask, "prompt-mean-token-mean")
    with pytest.raises(ValueError, match="does not exist in profile 'verl'"):
        CreditConfig(loss_agg_mode="prompt-mean-token-mean")


@pytest.mark.parametrize(
    "cfg",
    [CreditConfig(estimator="grpo", policy_loss="sapo"), CreditConfig(profile="openrlhf", estimator="grpo",
                                                                      policy_loss="gspo")],
    ids=["verl-sapo", "openrlhf-gspo"],
)  # fmt: skip
def test_losses_with_their_own_aggregation_show_it_whatever_the_mode(cfg) -> None:
    """verl's SAPO and OpenRLHF's GSPO aggregate seq-mean-token-mean whatever loss_agg_mode says: the weights the
    result shows are those (each row's loss tokens 1/(n_i·G)), and another mode changes nothing."""
    batch = _policy_sample(cfg)
    res = compute_credit(batch, cfg.replace(loss_agg_mode="token-mean"), token_extras=False)
    m = res.loss_mask
    n = m.sum(-1, keepdim=True)
    torch.testing.assert_close(res.agg_weights, m / n.clamp(min=1) / int((n > 0).sum()))
    torch.testing.assert_close(res.effective_weights, res.agg_weights * res.advantages)
    other = with_loss_agg_mode(res, "token-sum")
    assert other.config.loss_agg_mode == "token-sum" and other.agg_weights is res.agg_weights
    assert other.grad_weight is res.grad_weight


def test_a_kl_loss_with_its_own_aggregation_is_recomputed_per_mode() -> None:
    """SkyRL's KL loss keeps its weights 1/(B·max(n_i, 1)) whatever the mode (kl_loss_agg), so a mode's gradient is
    not the old one rescaled; verl's KL loss follows the mode. with_loss_agg_mode runs stage 4 again: both are what
    computing the mode gives."""
    from benchmarks.batches import synthetic_batch

    batch = synthetic_batch(8, 12, group_size=4, seed=5)
    for profile in ("skyrl", "verl"):
        cfg = CreditConfig(profile=profile, estimator="grpo", kl_loss_coef=0.1)
        base = compute_credit(batch, cfg, token_extras=False)
        want = compute_credit(batch, cfg.replace(loss_agg_mode="seq-mean-token-mean"), token_extras=False)
        got = with_loss_agg_mode(base, "seq-mean-token-mean")
        torch.testing.assert_close(got.grad_weight, want.grad_weight, rtol=0, atol=0)


def test_a_result_whose_views_are_computed_is_not_reweighed_silently() -> None:
    """Stage 4's inputs go once a result's views are read: another aggregation then raises (compute the scheme),
    while the mode the loss already aggregates by gives the result's own views."""
    batch = load_run(sources.sample_path("kgqa_multiturn")).run.to_batch()
    res = compute_credit(batch, CreditConfig(estimator="grpo"), token_extras=False).materialize()
    with pytest.raises(ValueError, match="compute the scheme under loss_agg_mode='token-sum'"):
        with_loss_agg_mode(res, "token-sum")
    same = with_loss_agg_mode(res, res.config.loss_agg_mode)
    assert same.agg_weights is res.agg_weights and same.config == res.config
