"""Golden data from OpenRLHF's advantage computation, called unmodified.

Run in the separate environment made by `bash references/setup_env.sh openrlhf` (CreditLens itself never imports
openrlhf):

    .venv-references-openrlhf/bin/python references/openrlhf/generate.py

Writes tests/golden/openrlhf_advantages.json. Running it again with the pinned versions reproduces the committed
file byte for byte (`--check` compares instead of writing).

For every estimator OpenRLHF 0.11.2 accepts (`--algo.advantage.estimator` choices: gae, reinforce, rloo,
reinforce_baseline, group_norm, dr_grpo, flash_reinforce) the trainer's own two steps run, as
RemoteExperienceMaker.make_experience_batch chains them:

1. make_experience's per-token KL: `compute_approx_kl(action_log_probs, base_action_log_probs,
   kl_estimator=args.algo.kl.estimator)` (openrlhf/models/utils.py; the trainer does not mask it, the actor and
   reference models' forward already multiplies the log-probs by the action mask, and so do these inputs);
2. `RemoteExperienceMaker.compute_advantages_and_returns(stub, experiences)`, unbound, on real
   `Experience` objects (openrlhf/trainer/ppo_utils/experience.py) carrying that kl, the scalar rewards, the
   action mask, the experience.index permutation and (gae) the critic values. It calls apply_length_penalties,
   compute_reward, get_cumulative_returns / get_advantages_and_returns (bound to the same stub) and whitens.

The stub `self` carries only strategy.args (a nested namespace), advantage_estimator, kl_ctl (OpenRLHF's own
FixedKLController, as PPOTrainer builds it) and the two bound methods; reading any other attribute, of `self` or
of args, raises, and every attribute read is listed in the file's reference. The inputs are the shared fixtures of
the verl golden files (masks and scores of tests/golden/verl_grpo_outcome.json, critic values of
tests/golden/verl_gae.json), read from those files; groups are rebuilt to OpenRLHF's equal group sizes (group =
experience.index // n_samples_per_prompt); old/reference log-probs are seeded.

Heavy imports that the computation never reaches are stubbed (STUBS, also written to the file): deepspeed, the
`openrlhf.models` and `openrlhf.trainer.ray` package __init__s (bare packages whose __path__ is the installed
directory, so models/utils.py loads from the installed file) and `openrlhf.trainer.ray.launcher`. ray and
transformers are the real packages at OpenRLHF's own pins (ray is never initialised).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
import types
from pathlib import Path

import openrlhf
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)

OUT_FILE = "openrlhf_advantages.json"
OPENRLHF_VERSION = "0.11.2"
TORCH_VERSION = "2.13.0+cpu"
ROOT = Path(openrlhf.__file__).resolve().parent
FILES_RUN = [
    "openrlhf/trainer/ppo_utils/experience_maker.py",
    "openrlhf/models/utils.py",
    "openrlhf/trainer/ppo_utils/length_penalty.py",
    "openrlhf/trainer/ppo_utils/kl_controller.py",
    "openrlhf/trainer/ppo_utils/experience.py",
]

STUBS = [
    "sys.modules['deepspeed'] = an empty module (openrlhf/models/utils.py imports it at the top; only "
    "set_z3_leaf_modules, never called here, uses it)",
    "sys.modules['openrlhf.models'] = a bare package with __path__ = [<installed openrlhf>/models] in place of "
    "openrlhf/models/__init__.py (it imports the Actor and model classes: transformers models, peft, flash-attn, "
    "deepspeed); openrlhf/models/utils.py itself is imported from the installed file unmodified",
    "sys.modules['openrlhf.trainer.ray'] = a bare package with __path__ = [<installed openrlhf>/trainer/ray] in "
    "place of openrlhf/trainer/ray/__init__.py (it imports the vLLM engine)",
    "sys.modules['openrlhf.trainer.ray.launcher'] = a module holding only an empty class RayActorGroup "
    "(experience_maker.py imports it for type annotations; the real module builds Ray actors around the models)",
    "self = a stub (see reference.self_attributes_read): strategy.args = nested namespaces holding only the "
    "fields in params (reference.args_read lists what was read), advantage_estimator = args.algo.advantage."
    "estimator (as RemoteExperienceMaker.__init__ sets it), kl_ctl = openrlhf's FixedKLController(kl_coef) (as "
    "PPOTrainer builds it without a KL target), get_advantages_and_returns and get_cumulative_returns = "
    "RemoteExperienceMaker's own functions bound to the stub; any other attribute read raises",
]

sys.modules["deepspeed"] = types.ModuleType("deepspeed")
for _name in ("openrlhf.models", "openrlhf.trainer.ray"):
    _package = types.ModuleType(_name)
    _package.__path__ = [str(ROOT.joinpath(*_name.split(".")[1:]))]
    sys.modules[_name] = _package
_launcher = types.ModuleType("openrlhf.trainer.ray.launcher")
_launcher.RayActorGroup = type("RayActorGroup", (), {})
sys.modules["openrlhf.trainer.ray.launcher"] = _launcher

from openrlhf.models.utils import compute_approx_kl  # noqa: E402
from openrlhf.trainer.ppo_utils.experience import Experience  # noqa: E402
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker  # noqa: E402
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController  # noqa: E402

ESTIMATORS = ["gae", "reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo", "flash_reinforce"]
DEFAULT_CLIP = [-10.0, 10.0]  # --reward.clip_range's default

FORMAT = (
    "Tensors are plain nested lists, rows in the order the experiences hold them (experience 0's rows, then "
    "experience 1's, ...; params.split gives the rows per experience). Inputs were materialised as torch.float32 "
    "(rewards [B], log-probs, values) and action_mask as torch.int64 0/1 (the dtype OpenRLHF's samples generator "
    "builds) before calling the reference; outputs are its float32 results widened to float64 by tolist(). "
    "Non-finite floats are encoded as strings 'nan'/'inf'/'-inf'. A case whose reference call raised has "
    "outputs={'error': 'ExcType: message'}. Per case: outputs.kl = compute_approx_kl(inputs.old_log_probs, "
    "inputs.ref_log_probs, kl_estimator=params.kl_estimator) (make_experience's kl, when KL is in the reward, i.e. "
    "not --algo.kl.use_loss); then each experience e gets rewards = its inputs.rewards rows, index = its "
    "inputs.index rows (its samples' positions in the rollout batch; inputs.group = index // "
    "n_samples_per_prompt is the prompt group), action_mask, kl = its outputs.kl rows, values = its inputs.values "
    "rows (gae) or None, info = {}; RemoteExperienceMaker.compute_advantages_and_returns(stub, experiences) runs "
    "with args.algo.advantage.{estimator, gamma, lambd, no_std_norm}, args.rollout.n_samples_per_prompt, "
    "args.reward.clip_range and kl_ctl.value = params.kl_coef from params; length penalties are off "
    "(args.reward.overlong_buffer_len = None, args.reward.stop_properly_penalty_coef = None: apply_length_penalties "
    "leaves the rewards as they are). outputs.advantages, outputs.returns = e.advantages, e.returns; "
    "outputs.return_sum = e.info['return'] (the row sum of compute_reward's per-token reward, before any mask); "
    "outputs.gamma_after = args.algo.advantage.gamma after the call (OpenRLHF sets it to 1.0 for every estimator "
    "but gae and reinforce). The old/ref log-probs are 0 at masked positions (the actor and reference forward "
    "multiply by the action mask) unless a case note says otherwise. Suggested tolerance: atol=1e-5, rtol=1e-5."
)

# The verl cases whose inputs are the shared fixtures (tests/golden/README.md, "Shared input fixtures").
FIXTURES = {
    "multiturn_holes": "multiturn_holes_groups_3_2_1/norm_by_std=True",
    "random_dense_seed0": "random_dense_seed0/norm_by_std=True",
    "near_tie_float_noise": "near_tie_float_noise/norm_by_std=True",
}
GAE_VALUES = {
    "multiturn_holes": "multiturn_holes/gamma=1.0,lam=1.0",
    "random_dense_seed0": "random_dense_seed0/gamma=1.0,lam=1.0",
}
LOGPROB_SEEDS = {"multiturn_holes": 0, "random_dense_seed0": 1, "near_tie_float_noise": 2}


class Stub(types.SimpleNamespace):
    """An object that carries only the attributes given: reading another one is an error, and every attribute read
    is recorded under ``path.name`` (the file lists them)."""

    def __init__(self, reads: set[str], path: str, **kwargs):
        super().__init__(**kwargs)
        object.__setattr__(self, "_reads", reads)
        object.__setattr__(self, "_path", path)

    def __getattribute__(self, name):
        if not name.startswith("__") and name not in ("_reads", "_path"):
            path = object.__getattribute__(self, "_path")
            object.__getattribute__(self, "_reads").add(f"{path}.{name}" if path else name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        path = object.__getattribute__(self, "_path")
        raise AttributeError(f"the stub does not carry {f'{path}.{name}' if path else name!r}: OpenRLHF read it")


def _cases_by_name(file_name: str) -> dict:
    return {c["name"]: c for c in json.loads((golden_io.OUT_DIR / file_name).read_text())["cases"]}


def _fixtures() -> dict:
    """Masks, per-row scalar rewards and (where verl_gae.json has them) critic values of the shared fixtures."""
    outcome = _cases_by_name("verl_grpo_outcome.json")
    gae = _cases_by_name("verl_gae.json")
    fixtures = {}
    for name, case_name in FIXTURES.items():
        inputs = outcome[case_name]["inputs"]
        token_rewards = torch.tensor(golden_io.decode(inputs["token_level_rewards"]), dtype=torch.float32)
        mask = torch.tensor(golden_io.decode(inputs["response_mask"]), dtype=torch.float32).to(torch.int64)
        fixtures[name] = {
            "source": f"verl_grpo_outcome.json case {case_name!r}",
            "mask": mask,
            # A scalar per row: the float32 row sum of the fixture's token rewards (multiturn_holes: its outcome
            # scores [1, 0, .5, 1, 0, 1]).
            "rewards": token_rewards.sum(-1),
        }
        if name in GAE_VALUES:
            values = gae[GAE_VALUES[name]]["inputs"]
            assert values["response_mask"] == inputs["response_mask"], name
            fixtures[name]["values"] = torch.tensor(golden_io.decode(values["values"]), dtype=torch.float32)
            fixtures[name]["values_source"] = f"verl_gae.json case {GAE_VALUES[name]!r}"
    assert fixtures["multiturn_holes"]["rewards"].tolist() == [1.0, 0.0, 0.5, 1.0, 0.0, 1.0]
    return fixtures


def _log_probs(fixture_name: str, mask: torch.Tensor, kind: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    """(old, ref) log-probs [B, T] float32 and how they were made."""
    g = torch.Generator().manual_seed(LOGPROB_SEEDS[fixture_name])
    old = -1.0 + 0.3 * torch.randn(mask.shape, generator=g, dtype=torch.float32)
    ref = -1.0 + 0.3 * torch.randn(mask.shape, generator=g, dtype=torch.float32)
    how = (
        f"old, ref = -1 + 0.3 * torch.randn(B, T, generator=torch.Generator().manual_seed("
        f"{LOGPROB_SEEDS[fixture_name]})) (two draws, old first)"
    )
    if kind == "extreme":
        # On each row's first three action tokens: log-ratio old - ref shifted by +12, -12 and +5 (the lower of
        # the two log-probs is moved down, so both stay log-probabilities).
        for row in range(mask.shape[0]):
            valid = mask[row].nonzero().flatten().tolist()
            ref[row, valid[0]] -= 12.0
            old[row, valid[1]] -= 12.0
            ref[row, valid[2]] -= 5.0
        how += (
            "; then on each row's first three action tokens ref -= 12, old -= 12, ref -= 5 (log-ratios ~ +12, -12, +5)"
        )
    if kind == "unmasked":
        return old, ref, how + "; NOT multiplied by the action mask (nonzero log-ratios at masked positions)"
    return old * mask, ref * mask, how + "; both multiplied by the action mask, as the actor/reference forward does"


def _args(reads: set[str], params: dict) -> Stub:
    def ns(path: str, **kwargs) -> Stub:
        return Stub(reads, f"args.{path}", **kwargs)

    return Stub(
        reads,
        "args",
        algo=ns(
            "algo",
            advantage=ns(
                "algo.advantage",
                estimator=params["estimator"],
                gamma=params["gamma"],
                lambd=params["lambd"],
                no_std_norm=params["no_std_norm"],
            ),
        ),
        rollout=ns("rollout", n_samples_per_prompt=params["n_samples_per_prompt"]),
        reward=ns(
            "reward",
            clip_range=tuple(params["reward_clip_range"]) if params["reward_clip_range"] else None,
            overlong_buffer_len=None,
            stop_properly_penalty_coef=None,
        ),
    )


def _self(reads: set[str], args: Stub, estimator: str, kl_coef: float) -> Stub:
    stub = Stub(
        reads,
        "",
        strategy=Stub(reads, "strategy", args=args),
        advantage_estimator=estimator,
        kl_ctl=FixedKLController(kl_coef),
    )
    stub.get_advantages_and_returns = types.MethodType(RemoteExperienceMaker.get_advantages_and_returns, stub)
    stub.get_cumulative_returns = types.MethodType(RemoteExperienceMaker.get_cumulative_returns, stub)
    return stub


def _run(params: dict, rewards, index, mask, kl, values, self_reads: set[str], args_reads: set[str]) -> dict:
    """compute_advantages_and_returns on experiences split as params['split']; outputs or {'error': ...}."""
    args = _args(args_reads, params)
    stub = _self(self_reads, args, params["estimator"], params["kl_coef"])
    experiences, start = [], 0
    for size in params["split"]:
        rows = slice(start, start + size)
        experiences.append(
            Experience(
                rewards=rewards[rows].clone(),
                index=index[rows],
                action_mask=mask[rows].clone(),
                kl=kl[rows].clone(),
                values=None if values is None else values[rows].clone(),
                info={},
            )
        )
        start += size
    assert start == len(index)
    try:
        out = RemoteExperienceMaker.compute_advantages_and_returns(stub, experiences)
    except Exception as exc:  # recorded as the reference's answer
        return {"error": f"{type(exc).__name__}: {exc}"}
    advantages = torch.cat([e.advantages for e in out])
    returns = torch.cat([e.returns for e in out])
    return_sum = torch.cat([e.info["return"] for e in out])
    for t in (advantages, returns, return_sum):
        assert t.dtype == torch.float32, t.dtype
    assert all(e.kl is None for e in out)
    return {
        "advantages": advantages.tolist(),
        "returns": returns.tolist(),
        "return_sum": return_sum.tolist(),
        "gamma_after": vars(vars(vars(args)["algo"])["advantage"])["gamma"],  # not recorded as a read
    }


ESTIMATOR_NOTES = {
    "gae": "GAE over every position (rewards and values multiplied by the action mask first, holes not skipped), "
    "returns = advantages + masked values, then advantages whitened over all experiences' action tokens",
    "reinforce": "cumulative discounted return of the masked per-token reward (carried through holes), then "
    "whitened over all experiences' action tokens",
    "rloo": "reward minus the mean of the group's other rewards, then cumulative return (gamma forced to 1), "
    "no whitening",
    "reinforce_baseline": "reward minus its group mean, cumulative return (gamma forced to 1), then whitened over "
    "all experiences' action tokens",
    "group_norm": "(reward - group mean) / (group std (Bessel) + 1e-9), cumulative return (gamma forced to 1), "
    "no whitening",
    "dr_grpo": "reward minus its group mean, cumulative return (gamma forced to 1), no whitening",
    "flash_reinforce": "reward minus the mean over the whole rollout batch (no group), cumulative return "
    "(gamma forced to 1), no whitening",
}

MH = "multiturn_holes"
RD = "random_dense_seed0"
NT = "near_tie_float_noise"
# (fixture, index permutation, split) layouts: rows stay in fixture order, the index says where each row sat in the
# rollout batch (so which prompt group it belongs to).
ONE = {"index": None, "split": None}  # one experience, index = 0..B-1
MH_SPLIT3 = {"index": [4, 0, 5, 2, 1, 3], "split": [2, 4]}  # n=3: groups 1,0,1,0,0,1
MH_SPLIT2 = {"index": [3, 0, 5, 1, 4, 2], "split": [3, 3]}  # n=2: groups 1,0,2,0,2,1 (group 1 = rows 0, 5: tie 1, 1)
RD_SPLIT = {"index": [7, 2, 11, 0, 5, 9, 1, 10, 4, 8, 3, 6], "split": [5, 7]}
NT_PAIRS = {"index": [0, 2, 1, 3], "split": None}  # n=2: groups 0,1,0,1 (group 0 = rows 0, 2: 0.7 vs 0.7 + 1 ulp)


def _spec(
    estimator,
    fixture=MH,
    layout=ONE,
    n=3,
    gamma=1.0,
    lambd=1.0,
    no_std_norm=False,
    kl_coef=0.1,
    kl_estimator="k1",
    clip=DEFAULT_CLIP,
    logprobs="masked",
    tag="",
    note="",
):
    return {
        "estimator": estimator,
        "fixture": fixture,
        "layout": layout,
        "n": n,
        "gamma": gamma,
        "lambd": lambd,
        "no_std_norm": no_std_norm,
        "kl_coef": kl_coef,
        "kl_estimator": kl_estimator,
        "clip": clip,
        "logprobs": logprobs,
        "tag": tag,
        "note": note,
    }


SPLIT_NOTE = "two experiences with a shuffled index: rewards regrouped into prompt order, whitening over both"
CASES = [
    # gae: critic values of verl_gae.json
    _spec("gae", gamma=0.99, lambd=0.95, kl_coef=0.0),
    _spec("gae", gamma=0.99, lambd=0.95),
    _spec("gae", gamma=0.99, lambd=0.95, no_std_norm=True),
    _spec("gae"),
    _spec("gae", layout=MH_SPLIT3, gamma=0.99, lambd=0.95, note=SPLIT_NOTE),
    _spec("gae", gamma=0.99, lambd=0.95, kl_estimator="k3"),
    _spec(
        "gae",
        fixture=RD,
        layout=RD_SPLIT,
        n=4,
        gamma=0.99,
        lambd=0.95,
        note="a fully masked row (row 10); " + SPLIT_NOTE,
    ),
    # reinforce
    _spec("reinforce", kl_coef=0.0),
    _spec("reinforce"),
    _spec("reinforce", gamma=0.9, note="gamma 0.9 is used (reinforce is the one cumulative estimator that keeps it)"),
    _spec("reinforce", no_std_norm=True),
    _spec("reinforce", layout=MH_SPLIT3, note=SPLIT_NOTE),
    _spec(
        "reinforce",
        logprobs="unmasked",
        tag="unmasked_log_probs",
        note="log-probs not masked: kl is nonzero at masked positions; the returns drop it (the per-token reward is "
        "multiplied by the action mask) but return_sum keeps it",
    ),
    # rloo
    _spec("rloo", kl_coef=0.0),
    _spec("rloo"),
    _spec("rloo", gamma=0.9, note="gamma 0.9 asked for; OpenRLHF logs 'gamma is set to 1.0 for rloo' and uses 1.0"),
    _spec("rloo", layout=MH_SPLIT2, n=2, note=SPLIT_NOTE + "; a tied group"),
    _spec("rloo", n=1, note="n_samples_per_prompt=1: leave-one-out baseline 0/0"),
    # reinforce_baseline
    _spec("reinforce_baseline", kl_coef=0.0),
    _spec("reinforce_baseline"),
    _spec("reinforce_baseline", no_std_norm=True),
    _spec("reinforce_baseline", layout=MH_SPLIT3, note=SPLIT_NOTE),
    _spec("reinforce_baseline", kl_estimator="k2"),
    _spec("reinforce_baseline", logprobs="extreme", tag="kl_clamp", note="log-ratios +12, -12, +5: k1 clamped to ±10"),
    _spec(
        "reinforce_baseline",
        logprobs="extreme",
        kl_estimator="k2",
        tag="kl_clamp",
        note="log-ratios +12, -12, +5: k2 = lr^2/2 = 72, 72, 12.5 clamped to 10",
    ),
    _spec(
        "reinforce_baseline",
        logprobs="extreme",
        kl_estimator="k3",
        tag="kl_clamp",
        note="log-ratios +12, -12, +5: k3 = exp(-lr) - 1 + lr with lr clamped to >= -10 first, then clamped to 10",
    ),
    _spec("reinforce_baseline", fixture=RD, n=4, note="groups of 4, a fully masked row (row 10)"),
    # group_norm
    _spec("group_norm", kl_coef=0.0),
    _spec("group_norm"),
    _spec("group_norm", layout=MH_SPLIT2, n=2, note=SPLIT_NOTE + "; a tied group (std 0: 0 / 1e-9 = 0)"),
    _spec("group_norm", clip=[-0.5, 0.5], note="reward.clip_range (-0.5, 0.5) clamps the group-normalised reward"),
    _spec(
        "group_norm",
        fixture=NT,
        layout=NT_PAIRS,
        n=2,
        note="group 0 = rows 0 and 2, rewards 0.7 and 0.7 + 1 ulp (float32 row sums; group 1 = rows 1 and 3, 0.7 "
        "and 1.0): the 1e-9 epsilon lets the rounding difference through, shaped rewards -1.38 and 0 (the float32 "
        "group mean rounds to the larger reward)",
    ),
    _spec("group_norm", n=1, note="n_samples_per_prompt=1: the std of one reward (Bessel) is NaN"),
    _spec("group_norm", n=4, note="6 rows with n_samples_per_prompt=4: the rewards do not reshape to [-1, 4]"),
    # dr_grpo
    _spec("dr_grpo", kl_coef=0.0),
    _spec("dr_grpo"),
    _spec("dr_grpo", layout=MH_SPLIT3, note=SPLIT_NOTE),
    # flash_reinforce
    _spec("flash_reinforce", kl_coef=0.0),
    _spec("flash_reinforce"),
    _spec(
        "flash_reinforce",
        layout=MH_SPLIT3,
        n=1,
        note="n_samples_per_prompt=1, its intended regime; " + SPLIT_NOTE,
    ),
]


def _case_name(spec: dict) -> str:
    parts = [spec["estimator"], spec["fixture"], f"n={spec['n']}"]
    if spec["estimator"] in ("gae", "reinforce", "rloo") and (spec["gamma"], spec["lambd"]) != (1.0, 1.0):
        parts.append(f"gamma={spec['gamma']}" + (f",lambd={spec['lambd']}" if spec["estimator"] == "gae" else ""))
    parts.append(f"kl={spec['kl_coef']}" + (f",{spec['kl_estimator']}" if spec["kl_coef"] else ""))
    if spec["no_std_norm"]:
        parts.append("no_std_norm")
    if spec["layout"]["split"]:
        parts.append("split=" + "+".join(map(str, spec["layout"]["split"])))
    if spec["clip"] != DEFAULT_CLIP:
        parts.append(f"clip={spec['clip'][0]},{spec['clip'][1]}")
    if spec["tag"]:
        parts.append(spec["tag"])
    return "/".join(parts)


def _build_cases(self_reads: set[str], args_reads: set[str]) -> list[dict]:
    fixtures = _fixtures()
    cases = []
    for spec in CASES:
        fixture = fixtures[spec["fixture"]]
        mask, rewards = fixture["mask"], fixture["rewards"]
        batch = mask.shape[0]
        index = spec["layout"]["index"] or list(range(batch))
        split = spec["layout"]["split"] or [batch]
        assert sorted(index) == list(range(batch)) and sum(split) == batch, spec
        old, ref, logprob_how = _log_probs(spec["fixture"], mask, spec["logprobs"])
        kl = compute_approx_kl(old, ref, kl_estimator=spec["kl_estimator"])
        assert kl.dtype == torch.float32
        values = fixture["values"] if spec["estimator"] == "gae" else None
        params = {
            "estimator": spec["estimator"],
            "gamma": spec["gamma"],
            "lambd": spec["lambd"],
            "no_std_norm": spec["no_std_norm"],
            "kl_coef": spec["kl_coef"],
            "kl_estimator": spec["kl_estimator"],
            "n_samples_per_prompt": spec["n"],
            "reward_clip_range": spec["clip"],
            "split": split,
        }
        outputs = _run(params, rewards, index, mask, kl, values, self_reads, args_reads)
        if "error" not in outputs:
            outputs = {"kl": kl.tolist(), **outputs}
        if spec["kl_coef"] == 0.0:
            # PPOTrainer with --algo.kl.init_coef 0 builds no reference model, and make_experience then passes
            # kl = zeros: the same advantages, returns and return sums.
            zeros = _run(params, rewards, index, mask, torch.zeros_like(kl), values, set(), set())
            same = {k: v for k, v in outputs.items() if k != "kl"}
            assert golden_io.dump(zeros) == golden_io.dump(same), spec

        sources = fixture["source"]
        if values is not None:
            sources += f"; values from {fixture['values_source']}"
        note = (
            f"{spec['note'] + '. ' if spec['note'] else ''}{ESTIMATOR_NOTES[spec['estimator']]}. Masks from "
            f"{sources}; rewards = the fixture's float32 row sums; {logprob_how}"
        )
        if spec["kl_coef"] == 0.0:
            note += (
                "; kl_coef 0: the trainer (no reference model when init_coef is 0) would pass kl = zeros instead, "
                "which gives the same advantages, returns and return_sum (checked)"
            )
        inputs = {
            "rewards": rewards.tolist(),
            "index": index,
            "group": [i // spec["n"] for i in index],
            "action_mask": mask.tolist(),
            "old_log_probs": old.tolist(),
            "ref_log_probs": ref.tolist(),
        }
        if values is not None:
            inputs["values"] = values.tolist()
        cases.append({"name": _case_name(spec), "note": note, "params": params, "inputs": inputs, "outputs": outputs})
    names = [c["name"] for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    assert {c["params"]["estimator"] for c in cases} == set(ESTIMATORS)
    return cases


def _reference(self_reads: set[str], args_reads: set[str]) -> dict:
    return {
        "repo": "OpenRLHF/OpenRLHF",
        "version": OPENRLHF_VERSION,
        "package": f"openrlhf=={OPENRLHF_VERSION} (PyPI)",
        "path": FILES_RUN[0],
        "function": "RemoteExperienceMaker.compute_advantages_and_returns (experience_maker.py; calls "
        "apply_length_penalties (length_penalty.py), compute_reward (models/utils.py), "
        "RemoteExperienceMaker.get_cumulative_returns or RemoteExperienceMaker.get_advantages_and_returns), on "
        "the kl of compute_approx_kl (models/utils.py)",
        "functions": {
            "kl": "openrlhf.models.utils.compute_approx_kl",
            "advantages": "openrlhf.trainer.ppo_utils.experience_maker.RemoteExperienceMaker."
            "compute_advantages_and_returns",
            "reward": "openrlhf.models.utils.compute_reward",
            "gae": "RemoteExperienceMaker.get_advantages_and_returns",
            "cumulative": "RemoteExperienceMaker.get_cumulative_returns",
            "length_penalties": "openrlhf.trainer.ppo_utils.length_penalty.apply_length_penalties",
        },
        "estimators": ESTIMATORS,
        "sha256": {path: hashlib.sha256((ROOT.parent / path).read_bytes()).hexdigest() for path in FILES_RUN},
        "torch": torch.__version__,
        "stubs": STUBS,
        "self_attributes_read": sorted(self_reads),
        "args_read": sorted(args_reads),
    }


def main() -> int:
    args = golden_io.parse_args(__doc__)
    versions = {
        "openrlhf": (importlib.metadata.version("openrlhf"), OPENRLHF_VERSION),
        "torch": (torch.__version__, TORCH_VERSION),
    }
    if not golden_io.pinned(versions, "references/openrlhf/requirements.txt"):
        return 2
    torch.use_deterministic_algorithms(True)

    self_reads: set[str] = set()
    args_reads: set[str] = set()
    cases = _build_cases(self_reads, args_reads)
    text = golden_io.dump({"reference": _reference(self_reads, args_reads), "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
