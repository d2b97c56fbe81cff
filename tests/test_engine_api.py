"""The engine's public surface: batch validation, verl interop, config validation and profiles, the estimator
registry, GAE's value stand-ins, a sweep of every estimator × every rLLM mode, and the import rule."""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.batches import synthetic_batch
from benchmarks.credit import main as bench_main
from benchmarks.reference_loops import gae_loop
from engine import (
    ESTIMATORS,
    FIELD_HELP,
    PROFILES,
    CreditConfig,
    TrajectoryBatch,
    compute_credit,
    get_estimator,
    list_estimators,
)
from engine.config import STEPWISE_MODES
from engine.registry import register_estimator

ENGINE_DIR = Path(__file__).resolve().parents[1] / "engine"


def base(B: int = 2, T: int = 4, **kw) -> dict:
    """Valid constructor arguments for a B×T batch (no holes, one turn), overridden by ``kw``."""
    args = dict(
        token_ids=torch.zeros(B, T, dtype=torch.long),
        attention_mask=torch.ones(B, T),
        action_mask=torch.ones(B, T),
        turn_ids=torch.zeros(B, T, dtype=torch.long),
        group_ids=list(range(B)),
    )
    return args | kw


def raises_naming(field: str, **kw):
    with pytest.raises(ValueError, match=rf"\b{re.escape(field)}\b"):
        TrajectoryBatch(**base(**kw))


# ---------------------------------------------------------------------------------------------- batch validation
def test_valid_batch_converts_masks_and_ids():
    b = TrajectoryBatch(**base(group_ids=["q1", "q2"]))
    assert b.attention_mask.dtype == torch.float32 and b.action_mask.dtype == torch.float32
    assert b.token_ids.dtype == torch.long and b.turn_ids.dtype == torch.long
    assert b.group_ids.tolist() == [0, 1]  # string uids factorised in first-seen order
    assert b.trajectory_ids == ("traj-0", "traj-1")
    assert b.truncated.tolist() == [False, False]


@pytest.mark.parametrize(
    "field, value",
    [
        ("attention_mask", torch.ones(2, 5)),
        ("action_mask", torch.ones(3, 4)),
        ("turn_ids", torch.zeros(2, 3, dtype=torch.long)),
        ("values", torch.zeros(2, 5)),
        ("old_log_probs", torch.zeros(4)),
        ("token_scores", torch.zeros(1, 4)),
        ("reward_baselines", torch.zeros(3)),
        ("group_ids", [0, 1, 2]),
        ("turn_rewards", torch.zeros(2, 3)),  # needs [B, K, C]
        ("global_rewards", torch.zeros(3, 1)),
    ],
)
def test_wrong_shape_is_rejected_naming_the_field(field, value):
    extra = {}
    if field == "turn_rewards":
        extra = {"turn_reward_names": ("a",)}
    raises_naming(field, **{field: value}, **extra)


def test_token_ids_must_be_two_dimensional():
    with pytest.raises(ValueError, match="token_ids"):
        TrajectoryBatch(**base(token_ids=torch.zeros(8, dtype=torch.long)))


@pytest.mark.parametrize(
    "field, value",
    [
        ("values", torch.ones(2, 4, dtype=torch.bool)),
        ("token_scores", torch.ones(2, 4, dtype=torch.complex64)),
        ("token_ids", torch.full((2, 4), 0.5)),  # float ids that are not integers
        ("turn_ids", torch.full((2, 4), 1.5)),
    ],
)
def test_wrong_dtype_is_rejected_naming_the_field(field, value):
    raises_naming(field, **{field: value})


@pytest.mark.parametrize("field", ["attention_mask", "action_mask"])
@pytest.mark.parametrize("bad", [2.0, -1.0, 0.5])
def test_mask_values_must_be_zero_or_one(field, bad):
    m = torch.ones(2, 4)
    m[1, 2] = bad
    kw = {field: m}
    if field == "attention_mask" and bad > 1:
        kw["action_mask"] = torch.ones(2, 4)
    raises_naming(field, **kw)


def test_nan_in_mask_is_rejected():
    m = torch.ones(2, 4)
    m[0, 0] = float("nan")
    raises_naming("attention_mask", attention_mask=m)


def test_action_outside_attention_is_rejected():
    attn = torch.ones(2, 4)
    attn[0, 3] = 0
    with pytest.raises(ValueError, match=r"action_mask.*outside the attention mask"):
        TrajectoryBatch(**base(attention_mask=attn, turn_ids=torch.where(attn > 0, 0, -1)))


def test_real_token_without_turn_is_rejected():
    turn = torch.zeros(2, 4, dtype=torch.long)
    turn[1, 1] = -1
    raises_naming("turn_ids", turn_ids=turn)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("field", ["values", "old_log_probs", "ref_log_probs", "token_scores", "reward_baselines"])
def test_non_finite_numbers_are_rejected_naming_the_field(field, bad):
    shape = (2,) if field == "reward_baselines" else (2, 4)
    x = torch.zeros(shape)
    x.view(-1)[1] = bad
    raises_naming(field, **{field: x})


def test_non_finite_structured_rewards_are_rejected():
    tr = torch.zeros(2, 3, 1)
    tr[1, 2, 0] = float("nan")
    raises_naming("turn_rewards", turn_rewards=tr, turn_reward_names=("step",))
    gr = torch.zeros(2, 2)
    gr[0, 1] = float("inf")
    raises_naming("global_rewards", global_rewards=gr, global_reward_names=("a", "b"))


def test_component_names_must_match_components():
    raises_naming("turn_reward_names", turn_rewards=torch.zeros(2, 3, 2), turn_reward_names=("a",))
    raises_naming("global_reward_names", global_rewards=torch.zeros(2, 2), global_reward_names=("a", "b", "c"))


def test_turn_mask_without_turn_rewards_is_rejected():
    raises_naming("turn_mask", turn_mask=torch.ones(2, 3))


def test_trajectory_ids_must_match_batch_size():
    raises_naming("trajectory_ids", trajectory_ids=("a", "b", "c"))


def test_select_and_replace_return_validated_batches():
    b = TrajectoryBatch(**base(B=3, values=torch.arange(12.0).reshape(3, 4)))
    s = b.select([2, 0])
    assert s.values[:, 0].tolist() == [8.0, 0.0]
    assert s.trajectory_ids == ("traj-2", "traj-0")
    with pytest.raises(ValueError, match="values"):
        b.replace(values=torch.full((3, 4), float("nan")))


# ---------------------------------------------------------------------------------------------- verl interop
def test_from_tensors_accepts_verl_names():
    P, T = 3, 4  # attention_mask covers prompt + response; only its last T columns are the response
    attention = torch.tensor([[0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]])
    response_mask = torch.tensor([[1, 0, 1, 0], [1, 1, 0, 1]])
    scores = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.5]])
    b = TrajectoryBatch.from_tensors(
        responses=torch.arange(8).reshape(2, 4),
        attention_mask=attention,
        response_mask=response_mask,
        token_level_scores=scores,
        values=torch.ones(2, T),
        old_log_prob=torch.full((2, T), -1.0),
        ref_log_prob=torch.full((2, T), -2.0),
        uid=["u7", "u7"],
    )
    assert b.token_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert b.attention_mask.tolist() == attention[:, P:].float().tolist()
    assert b.action_mask.tolist() == response_mask.float().tolist()
    assert b.token_scores.tolist() == scores.tolist()
    assert b.old_log_probs[0, 0].item() == -1.0 and b.ref_log_probs[0, 0].item() == -2.0
    assert b.group_ids.tolist() == [0, 0]
    assert b.turn_ids.tolist() == [[0, 0, 0, -1], [0, 0, 0, 0]]  # −1 exactly on padding


def test_from_tensors_defaults_like_verl_compute_advantage():
    # no response_mask → the attention mask (verl does the same); no token ids → zeros; groups = one per row
    b = TrajectoryBatch.from_tensors(token_level_rewards=torch.ones(3, 2), index=[5, 5, 9])
    assert b.action_mask.tolist() == b.attention_mask.tolist() == [[1.0, 1.0]] * 3
    assert b.group_ids.tolist() == [0, 0, 1]
    b = TrajectoryBatch.from_tensors(response_mask=torch.ones(2, 3))
    assert b.group_ids.tolist() == [0, 1] and b.token_ids.abs().sum().item() == 0


def test_from_tensors_rejects_two_aliases_of_one_field():
    with pytest.raises(ValueError, match="token_scores"):
        TrajectoryBatch.from_tensors(token_level_scores=torch.ones(1, 2), token_level_rewards=torch.ones(1, 2))
    with pytest.raises(ValueError, match="B, T"):
        TrajectoryBatch.from_tensors(index=[0])


# ---------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "field, value",
    [
        ("estimator", "ppo_magic"),
        ("profile", "deepspeed-chat"),
        ("stepwise_mode", "per_token"),
        ("loss_agg_mode", "token-median"),
        ("placement", "everywhere"),
        ("advantage_mask", "loss"),
        ("value_source", "oracle"),
        ("gamma", 1.5),
        ("stepwise_gamma", -0.1),
    ],
)
def test_config_rejects_unknown_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"CreditConfig\.{field}\b"):
        CreditConfig(**{field: value})


@pytest.mark.parametrize("profile", list(PROFILES))
def test_profiles_fill_every_convention(profile):
    cfg = CreditConfig(profile=profile)
    for name, value in PROFILES[profile].conventions.items():
        got = getattr(cfg, name)
        assert got is not None, f"{profile}: {name} left unset"
        assert got == (tuple(value) if isinstance(value, list) else value)


def test_profiles_differ_where_the_references_differ():
    verl, kgr1, rllm = CreditConfig(profile="verl"), CreditConfig(profile="kg-r1"), CreditConfig(profile="rllm")
    assert (verl.gae_skip_holes, kgr1.gae_skip_holes) == (True, False)
    assert (verl.advantage_mask, kgr1.advantage_mask) == ("action", "attention")
    assert (verl.std_ddof, rllm.std_ddof) == (1, 0)
    assert verl.global_exclude_prefixes == ("_",) and kgr1.global_exclude_prefixes == ("_raw_",)
    assert CreditConfig(profile="verl-legacy").reinforce_hole_mode == "reset"


def test_explicit_values_win_over_the_profile():
    cfg = CreditConfig(profile="kg-r1", gae_skip_holes=True, advantage_mask="action", std_ddof=0)
    assert (cfg.gae_skip_holes, cfg.advantage_mask, cfg.std_ddof) == (True, "action", 0)
    assert cfg.gae_value_mask == PROFILES["kg-r1"].conventions["gae_value_mask"]  # the rest still from the profile


def test_replace_with_a_new_profile_refills_its_conventions():
    cfg = CreditConfig(profile="verl", gamma=0.9).replace(profile="kg-r1")
    assert cfg.gae_skip_holes is False and cfg.gamma == 0.9
    same = CreditConfig(profile="verl").replace(lam=0.5)
    assert same.lam == 0.5 and same.gae_skip_holes is True


def test_config_round_trips_through_a_dict_and_is_hashable():
    cfg = CreditConfig(profile="kg-r1", estimator="gae", turn_weights={"format_score": 0.2})
    again = CreditConfig.from_dict(cfg.to_dict())
    assert again == cfg and hash(again) == hash(cfg)
    with pytest.raises(ValueError, match="unknown field"):
        CreditConfig.from_dict({"gama": 1.0})


def test_every_config_field_has_help():
    fields = {f.name for f in dataclasses.fields(CreditConfig)}
    assert fields <= set(FIELD_HELP), sorted(fields - set(FIELD_HELP))


# ---------------------------------------------------------------------------------------------- registry
def test_list_estimators_describes_each_one():
    entries = list_estimators()
    names = [e.name for e in entries]
    assert len(names) == len(set(names)) and set(names) == set(ESTIMATORS)
    assert {"gae", "grpo", "rloo", "reinforce_plus_plus", "remax", "grpo_multiturn"} <= set(names)
    batch_fields = {f.name for f in dataclasses.fields(TrajectoryBatch)}
    for e in entries:
        assert e.name and e.label and e.formula and e.reference, e.name
        assert isinstance(e.requires, tuple) and all(isinstance(r, str) for r in e.requires), e.name
        assert set(e.requires) <= batch_fields, f"{e.name} requires inputs a batch cannot hold: {e.requires}"
        assert callable(e.fn) and e.kind in ("token", "outcome")


def test_registry_refuses_unknown_and_duplicate_names():
    with pytest.raises(ValueError, match="unknown estimator"):
        get_estimator("GRPO")  # case-sensitive, as verl
    with pytest.raises(ValueError, match="already registered"):
        register_estimator("grpo", label="x", formula="x", reference="x")(lambda inp, cfg: None)
    assert get_estimator("grpo") is ESTIMATORS["grpo"]


# ---------------------------------------------------------------------------------------------- GAE value stand-ins
def gae_batch(values: bool) -> TrajectoryBatch:
    g = torch.Generator().manual_seed(0)
    act = torch.tensor([[1, 1, 0, 0, 1, 1, 0], [1, 0, 1, 1, 1, 0, 0]], dtype=torch.float32)
    attn = torch.tensor([[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0, 0]], dtype=torch.float32)
    return TrajectoryBatch(
        **base(
            B=2,
            T=7,
            attention_mask=attn,
            action_mask=act,
            turn_ids=torch.where(attn > 0, 0, -1),
            token_scores=torch.randn(2, 7, generator=g) * act,
            values=torch.randn(2, 7, generator=g) if values else None,
        )
    )


def test_gae_without_values_asks_for_a_value_source():
    with pytest.raises(ValueError, match="value_source"):
        compute_credit(gae_batch(values=False), CreditConfig(estimator="gae"))
    with pytest.raises(ValueError, match="critic"):
        compute_credit(gae_batch(values=False), CreditConfig(estimator="gae", value_source="critic"))


@pytest.mark.parametrize("lam", [1.0, 0.95, 0.0])
def test_gae_with_zero_values_gives_discounted_monte_carlo_returns(lam):
    # V ≡ 0: returns = A_raw + 0; with λ = 1 that is Σ_k γ^k r over the following valid tokens (holes skipped)
    b = gae_batch(values=False)
    r = compute_credit(b, CreditConfig(estimator="gae", value_source="zeros", gamma=0.9, lam=lam))
    assert r.notes["value_source"] == "zeros"
    m = b.action_mask
    _, loop_returns = gae_loop(r.token_level_rewards, torch.zeros(2, 7), m, 0.9, lam)
    torch.testing.assert_close(r.returns * m, loop_returns * m)
    if lam == 1.0:
        rewards = r.token_level_rewards
        # row 0, valid tokens 0, 1, 4, 5: G_5 = r5, G_4 = r4 + .9 r5, G_1 = r1 + .9 G_4, G_0 = r0 + .9 G_1
        g5 = rewards[0, 5]
        g4 = rewards[0, 4] + 0.9 * g5
        g1 = rewards[0, 1] + 0.9 * g4
        g0 = rewards[0, 0] + 0.9 * g1
        torch.testing.assert_close(r.returns[0, [0, 1, 4, 5]], torch.stack([g0, g1, g4, g5]))


def test_gae_group_mean_value_source_uses_the_group_mean_score():
    b = gae_batch(values=False).replace(group_ids=torch.tensor([0, 0]))
    r = compute_credit(b, CreditConfig(estimator="gae", value_source="group_mean"))
    expected = r.token_level_rewards.sum(-1).mean()
    torch.testing.assert_close(r.values, torch.full((2, 7), expected.item()))


def test_compute_credit_does_not_mutate_its_inputs():
    b = synthetic_batch(8, 48, turns=3, group_size=4, seed=5)
    before = {f.name: getattr(b, f.name).clone() for f in dataclasses.fields(b) if torch.is_tensor(getattr(b, f.name))}
    for est in ("gae", "reinforce_plus_plus", "grpo_multiturn"):
        # the views too: what the batch derives for them (turn runs, row extents) must not touch its tensors
        compute_credit(b, CreditConfig(profile="verl", estimator=est, use_kl_in_reward=True)).materialize()
    for name, t in before.items():
        assert torch.equal(getattr(b, name), t), name


# ---------------------------------------------------------------------------------------------- sweep
SWEEP_BATCH = synthetic_batch(16, 64, turns=3, group_size=4, seed=11)


@pytest.mark.parametrize("mode", STEPWISE_MODES)
@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
@pytest.mark.parametrize("profile", ["verl", "search-r1", "kg-r1", "rllm"])
def test_sweep_every_estimator_in_every_mode(profile, estimator, mode):
    if estimator == "logged" and mode != "trajectory":  # the trainer's own advantages: no step rewards to recompute
        with pytest.raises(ValueError, match="stepwise_mode 'trajectory'"):
            CreditConfig(profile=profile, estimator=estimator, stepwise_mode=mode)
        return
    cfg = CreditConfig(profile=profile, estimator=estimator, stepwise_mode=mode, use_kl_in_reward=True)
    r = compute_credit(SWEEP_BATCH, cfg)
    B, T = SWEEP_BATCH.token_ids.shape
    for name, x in r.token_quantities().items():
        assert x.shape == (B, T), name
        assert bool(torch.isfinite(x).all()), f"{name} has non-finite values"
    assert torch.equal(r.loss_mask, SWEEP_BATCH.action_mask)  # state masking, nothing rejected
    assert bool((r.effective_weights[r.loss_mask == 0] == 0).all())
    assert float(r.effective_weights.abs().sum()) > 0, "no token got any credit"
    assert r.turn_advantage.shape[0] == B and r.sample_scores.shape == (B,)


@pytest.mark.parametrize("estimator", [e.name for e in list_estimators() if e.requires])
def test_estimators_name_what_they_miss(estimator):
    # drop every input the estimator requires: it must refuse with a ValueError, not compute garbage
    req = get_estimator(estimator).requires
    drop = {name: None for name in req}
    if "turn_rewards" in drop:
        drop["turn_mask"] = None
    if "logged_advantages" in drop:
        drop["logged_advantage_mask"] = None
    if "global_rewards" in drop:
        drop |= {"token_scores": None}
    b = SWEEP_BATCH.replace(**drop)
    with pytest.raises(ValueError):
        compute_credit(b, CreditConfig(profile="verl", estimator=estimator))


# ---------------------------------------------------------------------------------------------- import rule, bench
def engine_imports() -> dict[str, set[str]]:
    out = {}
    for path in ENGINE_DIR.rglob("*.py"):
        mods = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module",
                "__import__",
            ):
                mods |= {a.value.split(".")[0] for a in node.args if isinstance(a, ast.Constant)}
        out[str(path.relative_to(ENGINE_DIR.parent))] = mods
    return out


def test_engine_never_imports_ui_libraries():
    imports = engine_imports()
    assert len(imports) > 10  # the scan really saw the package
    offenders = {path: sorted(mods & {"streamlit", "plotly"}) for path, mods in imports.items()}
    assert not {p: m for p, m in offenders.items() if m}


MATHS = {
    f"engine/{name}.py"
    for name in (
        "aggregation", "batch", "credit", "groups", "kl", "masked", "profiles", "registry", "rllm", "scan",
        "shaping", "stages",
    )
} | {
    str(p.relative_to(ENGINE_DIR.parent)) for pkg in ("estimators", "config") for p in (ENGINE_DIR / pkg).glob("*.py")
}  # fmt: skip


def test_engine_maths_imports_only_torch_and_the_standard_library():
    allowed = {"torch", "engine"} | set(sys.stdlib_module_names)
    imports = engine_imports()
    assert MATHS <= set(imports)
    bad = {p: sorted(imports[p] - allowed) for p in MATHS if imports[p] - allowed}
    assert not bad


def test_bench_quick_smoke(capsys):
    assert bench_main(["--quick", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    for row in ("GAE (skip holes)", "REINFORCE++ (carry)", "GRPO", "RLOO", "compute_credit, all estimators"):
        assert row in out
    for est in ESTIMATORS:
        assert f"compute_credit[{est}]" in out
    for row in ("gae (structured rewards)", "grpo (structured rewards)", "grpo (token scores)"):
        assert row in out.split("pipeline: one torch thread")[1]


def test_describe_score_names_the_reduction() -> None:
    """The words shown next to every score: a mean of turn rewards (KG-R1, verl) is never called a sum (rLLM)."""
    from engine.shaping import describe_score

    assert describe_score("final_token_only", "mean", True, True, False) == "mean of turn rewards + global reward"
    assert describe_score("final_token_only", "sum", True, False, False) == "Σ of turn rewards"
    assert describe_score("turn_proportional", "mean", True, True, True) == "Σ of turn rewards + global reward − β·KL"
    assert describe_score("as_given", "mean", False, False, False) == "Σ of the run's token scores"
    assert describe_score("uniform", "mean", False, True, False) == "global reward"


def test_only_the_ray_runner_imports_ray_and_the_app_does_not_require_it():
    """``--ray`` is an option of the command line: the engine imports Ray in one module, only when asked for, and
    the app's requirements leave it out (requirements-dev.txt installs it for the tests)."""
    imports = engine_imports()
    assert {p for p, mods in imports.items() if "ray" in mods} == {"engine/timeline/raydata.py"}
    root = ENGINE_DIR.parent
    assert not any(line.startswith("ray") for line in (root / "requirements.txt").read_text().splitlines())
    assert "ray[data]==" in (root / "requirements-dev.txt").read_text()
    for page in [root / "app.py", *sorted((root / "dashboard").rglob("*.py"))]:
        assert "import ray" not in page.read_text(), page
