"""Golden: the policy-loss stage where the values a trainer's min, max or clamp compares are exactly equal
(docs/conventions/policy-stage.md §14, "Ties at clip boundaries").
``{verl,skyrl,openrlhf,trl,primerl}_policy_ties.json``, made by ``references/*/generate_policy_ties.py`` on the float32
inputs of ``references/tie_inputs.py`` (ratios exactly 1 ± ε, the dual clip, GSPO's e¹⁰ cap, the ±20 clamp, DPPO's and
IPO's trust-region bounds), hold each trainer's d loss / d log π by autograd, which at a tie of torch.maximum /
torch.minimum gives each equal input half the gradient.

Each case is mapped onto a ``CreditConfig`` under the trainer's profile as in ``test_golden_policy_loss.py`` (the same
mappings and the same stage-4 computation). Cases CreditLens does not reproduce are named with the reason in
``NOT_REPRODUCED``.
"""

from __future__ import annotations

import pytest
import torch
from golden_utils import assert_golden, load_golden
from test_golden_policy_loss import CONFIGS, _engine_grad, _stage, _tensors

from engine import CreditConfig
from engine.policy import policy_gradient

FILES = {  # file: (cases, reproduced)
    "verl_policy_ties.json": (8, 8),
    "skyrl_policy_ties.json": (6, 6),
    "openrlhf_policy_ties.json": (4, 4),
    "trl_policy_ties.json": (5, 5),
    "primerl_policy_ties.json": (4, 4),
}
NOT_REPRODUCED: dict[str, dict[str, str]] = {}


def _cases(file: str, reproduced: bool) -> list:
    named = NOT_REPRODUCED.get(file, {})
    return [
        pytest.param(file, c, id=f"{file.removesuffix('_policy_ties.json')}:{c['name']}")
        for c in load_golden(file)["cases"]
        if (c["name"] not in named) == reproduced
    ]


CASES = [p for file in FILES for p in _cases(file, True)]
NAMED = [p for file in FILES for p in _cases(file, False)]


def _grad(file: str, case: dict) -> torch.Tensor:
    """Stage 4's d loss / d log π on the case, as test_golden_policy_loss.py computes it for the trainer's file."""
    if file.startswith("verl"):
        return _stage(case)[3]
    cfg = CONFIGS[file.replace("_ties", "_loss")](case)
    lp, old, rollout, adv, mask, ref, group_ids = _tensors(file, case["inputs"])
    return _engine_grad(cfg, lp, old, rollout, adv, mask, ref, group_ids)[2]


@pytest.mark.parametrize("file", list(FILES))
def test_every_case_is_reproduced_or_named(file: str) -> None:
    cases = load_golden(file)["cases"]
    names = {c["name"] for c in cases}
    assert set(NOT_REPRODUCED.get(file, {})) <= names
    assert (len(cases), len(cases) - len(NOT_REPRODUCED.get(file, {}))) == FILES[file]
    assert all("grad_log_prob" in c["outputs"] for c in cases)


@pytest.mark.parametrize("file, case", CASES)
def test_the_gradient_at_a_tie_is_the_trainers(file: str, case: dict) -> None:
    assert_golden(_grad(file, case), case["outputs"]["grad_log_prob"], what="d loss / d log_prob")


def test_every_case_is_reproduced() -> None:
    """Every tie case of every trainer is reproduced under its profile (verl's truncated DPPO weight, TRL's and
    prime-rl's unclamped log-ratio included: ``dppo_ratio``, ``log_ratio_clamp``); NOT_REPRODUCED names none."""
    assert not NAMED and len(CASES) == sum(n for n, _ in FILES.values()) == 27


@pytest.mark.parametrize("profile, share", [("verl", 0.5), ("skyrl", 0.5), ("openrlhf", 0.5), ("trl", 1.0)])
def test_a_dual_clip_tie_by_hand(profile: str, share: float) -> None:
    """One token, A = −1, log π − log π_old = 0.6931472 (float32 ln 2), whose ratio is exactly 2.0 = c. verl, SkyRL and
    OpenRLHF take min(−A·c, loss): −A·c = 2 = −A·ρ, a tie, half of −A·ρ = 2: g = 1. TRL caps ρ at δ = 2 inside its
    PPO min (dual_clip_form="ratio_cap"): the clamp passes at its bound, g = 2. Just past c both give 0."""
    lp = torch.tensor([[-0.05685281753540039, -0.05685281753540039 + 1e-3]])
    old = torch.tensor([[-0.75, -0.75]])
    adv, mask = torch.full((1, 2), -1.0), torch.ones(1, 2)
    cfg = CreditConfig(profile=profile, clip_ratio_c=2.0)
    assert torch.exp(lp - old)[0, 0].item() == 2.0
    pg = policy_gradient(lp, old, adv, mask, cfg)
    torch.testing.assert_close(pg.grad, torch.tensor([[2.0 * share, 0.0]]))
    assert pg.clipped.tolist() == [[False, True]]


@pytest.mark.parametrize("profile", ["verl", "skyrl", "openrlhf", "trl"])
@pytest.mark.parametrize("clip", [{"clip_ratio_high": 0.0}, {"clip_ratio_low": 0.0}])
def test_the_ratio_one_shortcut_holds_on_a_zero_clip(profile: str, clip: dict) -> None:
    """With ε = 0 the ratio 1 sits on a clip bound: max(−A·ρ, −A·clip(ρ)) ties, but both branches pass the gradient
    (a clamp passes at its bounds), so every token keeps −A: ``unit_at_ratio_one`` still holds, and the full
    computation agrees with it. (The dual clip c > 1 is never reached at ratio 1.)"""
    from benchmarks.batches import synthetic_batch
    from engine import compute_credit
    from engine.policy import unit_at_ratio_one
    from engine.stages import weigh_policy

    batch = synthetic_batch(8, 12, group_size=4, seed=5)
    for loss in ("vanilla", "gspo"):
        cfg = CreditConfig(profile=profile, estimator="grpo", policy_loss=loss, **clip)
        res = compute_credit(batch, cfg, device="cpu")
        full = weigh_policy(
            batch, cfg, res.advantages, res.loss_mask, res.agg_weights, res.effective_weights, None, shortcut=False
        )
        assert unit_at_ratio_one(cfg) == (cfg.policy_loss not in cfg.seq_mean_losses)
        expected = res.effective_weights if unit_at_ratio_one(cfg) else res.grad_weight
        torch.testing.assert_close(full.grad_weight, expected, atol=1e-7, rtol=1e-6)
