"""Golden: the policy-loss stage (docs/conventions/policy-stage.md §14) against the trainers' own policy losses: verl
0.9.1's policy losses and rollout correction (``verl_policy_loss.json``, made by ``references/verl/generate.py``) and
OpenRLHF 0.11.2, TRL 1.16.0, SkyRL 0.3.0 and prime-rl 559b4477 (``{openrlhf,trl,skyrl,primerl}_policy_loss.json``, made
by ``references/*/generate_policy_loss.py``), and the old verl Search-R1 a14dc3a and KG-R1 7538a53 vendor
(``{searchr1,kgr1}_policy_loss.json``, made by ``references/oldverl/generate_policy_loss.py``): per token,
d loss / d log π (the gradient weight CreditLens shows, negated), the IS weights where the trainer records them, and
the rejection-masked mask.

Each trainer's case is mapped onto a ``CreditConfig`` under its profile (the conventions where the trainer differs
from verl come from the profile; the case's own parameters are options). Cases CreditLens does not reproduce are
named, with the reason, in ``NOT_REPRODUCED``; a new case is never skipped silently.
"""

from __future__ import annotations

import math

import pytest
import torch
from golden_utils import REFERENCE_ERRORS, assert_golden, golden_cases, is_error, load_golden, tensor

from engine import CreditConfig
from engine.aggregation import agg_weights
from engine.policy import policy_gradient, rollout_correction
from engine.profiles import trl_loss_agg
from engine.stages import token_weights

VERL = "verl_policy_loss.json"
NOT_YET: set[str] = set()


def _split(spec) -> tuple[str, ...]:
    return () if spec is None else tuple(s.strip() for s in str(spec).split(","))


def _config(p: dict) -> CreditConfig:
    rc = p["rollout_correction"] or {}
    bypass = p["loss_mode"] == "bypass_mode"
    # bypass + reinforce is −A·log π·w: gpg with the IS weights of π_θ against the rollout (π_θ = the trainer's)
    reinforce = bypass and rc.get("loss_type") == "reinforce"
    # The trainer's ppo_loss passes global_batch_size = every row of the mini-batch, the verl profile's
    # seq_mean_rows="all"; a case calling the loss without global_batch_info is verl's direct-call fallback, which
    # counts the non-empty rows.
    direct = p["global_batch_info"] is not None and not p["global_batch_info"]
    kl_cov = p.get("policy_loss") or {}  # kl_cov's PolicyLossConfig fields
    return CreditConfig(
        seq_mean_rows="nonempty" if direct else None,
        policy_loss="gpg" if reinforce else "vanilla" if bypass else p["loss_mode"],
        policy_ratio_base="rollout" if bypass and not reinforce else "trainer",
        clip_ratio_low=p["clip_ratio_low"],
        clip_ratio_high=p["clip_ratio_high"],
        clip_ratio_c=max(p["clip_ratio_c"], 1.0 + 1e-6),
        tau_pos=p["tau_pos"],
        tau_neg=p["tau_neg"],
        loss_agg_mode=p["loss_agg_mode"],
        rollout_is=rc.get("rollout_is"),
        rollout_is_threshold=str(rc.get("rollout_is_threshold", "2.0")),
        rollout_is_batch_normalize=rc.get("rollout_is_batch_normalize", False),
        rollout_rs=_split(rc.get("rollout_rs")),
        rollout_rs_threshold=_split(rc.get("rollout_rs_threshold")),
        **kl_cov,
    )


def _stage(case: dict):
    """What stage 4 computes, on the case's own log-probs (π_θ = inputs.log_prob, not the first mini-batch)."""
    p, x = case["params"], case["inputs"]
    cfg = _config(p)
    lp, old, adv, mask = (tensor(x[k]) for k in ("log_prob", "old_log_prob", "advantages", "response_mask"))
    rollout = tensor(x["rollout_log_prob"]) if "rollout_log_prob" in x else None
    bypass = cfg.policy_ratio_base == "rollout"
    if p["loss_mode"] == "bypass_mode":
        old = lp  # π_old is π_θ's own detached value in bypass mode (verl apply_bypass_mode)
    # bypass mode: π_old is the rollout's, so the mismatch is log π_θ − log π_rollout (verl apply_bypass_mode)
    corr = rollout_correction(lp if bypass else old, rollout, mask, cfg) if p["rollout_correction"] else None
    keep = corr.keep if corr is not None and corr.keep is not None else torch.ones_like(mask, dtype=torch.bool)
    agg = token_weights(mask if bypass else mask * keep, cfg) * keep
    after = mask * keep
    is_w = corr.weights if corr is not None and not bypass else None
    pg = policy_gradient(lp, rollout if bypass else old, adv, after, cfg, is_weights=is_w)
    if pg.aggregated:
        grad = pg.grad
    else:
        if cfg.policy_loss == "sapo":
            agg = token_weights(after, cfg.replace(loss_agg_mode="seq-mean-token-mean"))
        grad = pg.grad * agg * (is_w if is_w is not None else 1.0)
    return cfg, corr, after, torch.where(after.bool(), grad, 0.0)


def _reproduced(c: dict) -> bool:
    return not is_error(c) and c["name"] not in NOT_YET


@pytest.mark.parametrize("case", golden_cases(VERL, _reproduced))
def test_verl_policy_loss_gradient(case: dict) -> None:
    _, corr, after, grad = _stage(case)
    out = case["outputs"]
    assert_golden(grad, out["grad_log_prob"], what="d loss / d log_prob")
    if "response_mask_after" in out:
        assert_golden(after, out["response_mask_after"], what="rejection-masked mask")
    if out.get("rollout_is_weights") is not None:
        assert_golden(corr.weights, out["rollout_is_weights"], what="rollout IS weights")


@pytest.mark.parametrize("case", golden_cases(VERL, is_error))
def test_refused_where_verl_raises(case: dict) -> None:
    with pytest.raises(REFERENCE_ERRORS):
        p = case["params"]
        if p["clip_ratio_c"] <= 1.0:
            CreditConfig(clip_ratio_c=p["clip_ratio_c"])
        _stage(case)


def test_not_yet_reproduced_is_named() -> None:
    names = {c["name"] for c in load_golden(VERL)["cases"]}
    assert NOT_YET <= names and len(names) == 46  # every case but the three errors is reproduced


# ------------------------------------------------------------------------------------------------ other trainers
def _engine_grad(cfg: CreditConfig, lp, old, rollout, adv, mask, ref=None, group_ids=None):
    """Stage 4 (``weigh_loss`` then ``weigh_policy``) on the case's tensors, π_θ = ``lp``: the rollout correction
    and its rejection mask, the aggregation weights (a rejected token still counted under
    ``rejected_tokens_counted``; ``group_ids``: the prompt groups), the policy gradient, the IS weights, and a KL loss
    aggregated on its own (``kl_loss_agg``) on the counted mask. (correction, mask after rejection, grad)."""
    bypass = cfg.policy_ratio_base == "rollout"
    corr = None
    if cfg.rollout_is is not None or cfg.rollout_rs:
        corr = rollout_correction(lp if bypass else old, rollout, mask, cfg)
    keep = corr.keep if corr is not None and corr.keep is not None else torch.ones_like(mask, dtype=torch.bool)
    after = mask * keep
    counted = mask if bypass or cfg.rejected_tokens_counted else after
    agg = token_weights(counted, cfg, group_ids) * keep
    is_w = corr.weights if corr is not None and not bypass else None
    if cfg.policy_loss in cfg.seq_mean_losses:
        agg = token_weights(after, cfg.replace(loss_agg_mode="seq-mean-token-mean"))
    pg = policy_gradient(
        lp,
        rollout if bypass else old,
        adv,
        after,
        cfg,
        is_weights=is_w,
        agg=agg,
        rollout_log_prob=rollout,
        ref_log_prob=ref,
        kl_mask=counted,
    )
    return corr, after, pg.total(agg, is_w, after)


def _openrlhf(p: dict) -> CreditConfig:
    """OpenRLHF PolicyLoss(...): ppo = vanilla, dual_clip = clip_ratio_c (None: off); GSPO's per-sample mean comes
    from the profile (seq_mean_losses); is_correction: token ratio gate = rollout_is token (clip: truncate into
    [lo, hi]; mask: 0 outside), a sequence or divergence gate = rejection of the unit (seq_mean_k1 on the
    geometric-mean ratio, token/seq_mean bkl or tv) with each survivor's untruncated per-token IS weight; GSPO with
    is_correction takes its ratio against the rollout log-probs and no IS weight (bypass). The actor's KL loss
    (params.kl): init_kl_coef = kl_loss_coef, kl_estimator k1/k2/k3 = kl_loss_type by those names; the profile's
    kl_loss_agg="token-mean" and kl_clamp="all" give its token mean over the action mask and its ±10 clamp."""
    gspo = p["policy_loss_type"] == "gspo"
    kw = dict(
        profile="openrlhf",
        policy_loss="gspo" if gspo else "vanilla",
        clip_ratio_low=p["clip_eps_low"],
        clip_ratio_high=p["clip_eps_high"],
        clip_ratio_c=p["dual_clip"],
        loss_agg_mode=p["loss_agg_mode"],  # the profile makes GSPO's seq-mean-token-mean
    )
    if p.get("kl"):
        kw.update(kl_loss_coef=p["kl"]["init_kl_coef"], kl_loss_type=p["kl"]["kl_estimator"])
    level, mode, gate = p["is_correction_level"], p["is_correction_mode"], p["is_correction_gating"]
    lo, hi = p["is_correction_threshold"]
    band = f"{hi}" if lo == 0 else f"{lo}_{hi}"
    if level == "off":
        pass
    elif gspo:
        kw.update(policy_ratio_base="rollout")
    elif gate == "ratio" and (level == "token" or mode == "clip"):
        # seq + clip: a sequence-level IS weight, which the openrlhf profile refuses as OpenRLHF does
        kw.update(rollout_is=level.replace("seq", "sequence"), rollout_is_threshold=band)
        kw.update(rollout_is_mode="truncate" if mode == "clip" else "mask")
    else:
        stat = "k1" if gate == "ratio" else {"binary_kl": "bkl", "tv": "tv"}[gate]
        spec = f"{1 / hi}_{1 / lo}" if gate == "ratio" else band  # k1 bounds log(π_rollout/π_old)
        kw.update(rollout_is="token", rollout_is_threshold="inf")
        kw.update(rollout_rs=(f"{'token' if level == 'token' else 'seq_mean'}_{stat}",), rollout_rs_threshold=(spec,))
    return CreditConfig(**kw)


def _trl(p: dict, profile: str = "trl") -> CreditConfig:
    """TRL GRPOTrainer._compute_loss: loss_type → the policy loss and (``trl_loss_agg``) the aggregation;
    importance_sampling_level sequence = gspo (VESPO stays vespo: its own weight is per row whatever the level);
    delta = clip_ratio_c; vLLM IS mode = rollout_is × rollout_is_mode, clip_min/clip_max = the threshold; vespo
    k/lambda = vespo_params; off_policy_mask_threshold; beta = kl_loss_coef (k3 = low_var_kl, unclamped under the
    profile's kl_clamp="none"), use_bias_correction_kl = kl_loss_ratio_weighted (the loss's own ratio: per token, or
    GSPO's sequence ratio)."""
    lt = p["loss_type"]
    loss = {"cispo": "cispo", "sapo": "sapo", "vespo": "vespo"}.get(
        lt, "gspo" if p["importance_sampling_level"] == "sequence" else "vanilla"
    )
    kw = dict(
        profile=profile,
        policy_loss=loss,
        clip_ratio_low=p["epsilon_low"],
        clip_ratio_high=p["epsilon_high"],
        clip_ratio_c=p["delta"],
        tau_pos=p["sapo_temperature_pos"],
        tau_neg=p["sapo_temperature_neg"],
        vespo_params=(p["vespo_k_pos"], p["vespo_lambda_pos"], p["vespo_k_neg"], p["vespo_lambda_neg"]),
        off_policy_mask_threshold=p["off_policy_mask_threshold"],
        kl_loss_coef=p["beta"],
        kl_loss_type="low_var_kl",
        kl_loss_ratio_weighted=p["use_bias_correction_kl"],
        **trl_loss_agg(lt, p["max_completion_length"]),
    )
    if p["use_vllm"] and p["vllm_importance_sampling_correction"]:
        level, mode = p["vllm_importance_sampling_mode"].split("_")
        lo, hi = p["vllm_importance_sampling_clip_min"], p["vllm_importance_sampling_clip_max"]
        kw.update(rollout_is=level, rollout_is_mode=mode, rollout_is_threshold=f"{hi}" if lo is None else f"{lo}_{hi}")
    return CreditConfig(**kw)


SKYRL_REDUCTIONS = {
    "token_mean": "token-mean",
    "sequence_mean": "seq-mean-token-mean",
    "seq_mean_token_sum_norm": "seq-mean-token-sum-norm",
    "prompt_mean": "prompt-mean-token-mean",
}


def _skyrl(p: dict) -> CreditConfig:
    """SkyRL's registered policy loss and loss_reduction (applied to the advantage: the same token weights);
    regular = vanilla without dual clip; importance_sampling (−ρ·A summed) = cispo with nothing clipped; kl_cov's
    kl_cov_frac = kl_cov_ratio; prompt_mean's groups = the index (its prompt boundaries are the index's runs);
    dppo's μ = the rollout log-probs when passed (bypass). off_policy_correction: TIS = rollout_is truncated;
    token / geometric / product masks = rollout_rs token_k1 / seq_mean_k1 / seq_sum_k1 (k1 bounds log(π_rollout/π_old)),
    the rejected tokens still counted (the reduction was fixed before)."""
    cf, t = p["config"], p["policy_loss_type"]
    kw = dict(profile="skyrl", clip_ratio_low=cf["eps_clip_low"], clip_ratio_high=cf["eps_clip_high"])
    kw.update(clip_ratio_c=cf["clip_ratio_c"] if t == "dual_clip" else None)
    if t in ("regular", "dual_clip"):
        kw.update(policy_loss="vanilla")
    elif t == "gspo":
        kw.update(policy_loss="gspo")
    elif t == "sapo":
        kw.update(policy_loss="sapo", tau_pos=cf["sapo"]["tau_pos"], tau_neg=cf["sapo"]["tau_neg"])
    elif t == "cispo":
        c = cf["cispo"]
        kw.update(policy_loss="cispo", clip_ratio_low=c["cispo_eps_clip_low"], clip_ratio_high=c["cispo_eps_clip_high"])
    elif t == "rollout_is":
        kw.update(policy_loss="masked_is", policy_ratio_base="rollout")
    elif t == "importance_sampling":
        kw.update(policy_loss="cispo", clip_ratio_low=1.0, clip_ratio_high=1e30)
    elif t == "kl_cov":
        c = cf["kl_cov"]
        kw.update(policy_loss="kl_cov", kl_cov_ratio=c["kl_cov_frac"], ppo_kl_coef=c["ppo_kl_coef"])
    elif t == "dppo":
        d = cf["dppo"]
        kw.update(policy_loss="dppo_" + d["dppo_type"].removeprefix("binary_"))
        kw.update(clip_ratio_low=d["delta_low"], clip_ratio_high=d["delta_high"])
        if p["rollout_logprobs_passed"]:
            kw.update(policy_ratio_base="rollout")
    kw["loss_agg_mode"] = SKYRL_REDUCTIONS[p["loss_reduction"]]
    if cf.get("use_kl_loss"):  # the worker's KL loss (SkyRL's k1/k2/k3/abs are CreditLens's estimators by those names)
        kw.update(kl_loss_coef=cf["kl_loss_coef"], kl_loss_type=cf["kl_estimator_type"])
    if p["loss_reduction"] == "seq_mean_token_sum_norm":
        kw["loss_scale_factor"] = float(cf["max_seq_len"])
    oc = cf["off_policy_correction"]
    if p["rollout_logprobs_passed"] and t not in ("dppo", "rollout_is"):
        if oc["tis_ratio_type"] is not None:
            cap = oc["token_tis_ratio_clip_high" if oc["tis_ratio_type"] == "token" else "sequence_tis_ratio_clip_high"]
            kw.update(rollout_is=oc["tis_ratio_type"], rollout_is_mode="truncate", rollout_is_threshold=str(cap))
        masks = []
        if oc["outlier_token_is_threshold_low"] is not None:  # both bounds set in the golden case
            masks.append(("seq_all_k1", oc["outlier_token_is_threshold_low"], oc["outlier_token_is_threshold_high"]))
        if oc["token_mask_is_threshold_low"] is not None:
            masks.append(("token_k1", oc["token_mask_is_threshold_low"], oc["token_mask_is_threshold_high"]))
        if oc["sequence_mask_metric"] == "geometric":
            masks.append(("seq_mean_k1", oc["geo_mask_low"], oc["geo_mask_high"]))
        if oc["sequence_mask_metric"] == "product":
            masks.append(("seq_sum_k1", oc["product_mask_low"], oc["product_mask_high"]))
        kw.update(
            rollout_rs=tuple(m[0] for m in masks), rollout_rs_threshold=tuple(f"{1 / h}_{1 / lo}" for _, lo, h in masks)
        )
    return CreditConfig(**kw)


def _primerl(p: dict) -> CreditConfig:
    """prime-rl's loss against the inference log-probs (bypass: prime-rl has no separate old policy): default =
    dppo_tv with the DPPO masks as ε_low / ε_high, ipo with ipo_threshold as ε_high; adv_tau, kl_tau; rl_scale =
    the global loss-token count (token-mean)."""
    cf = p["config"]
    if p["loss"] == "default":
        kw = dict(policy_loss="dppo_tv", clip_ratio_low=cf["dppo_mask_low"], clip_ratio_high=cf["dppo_mask_high"])
    else:
        kw = dict(policy_loss="ipo", clip_ratio_high=cf["ipo_threshold"])
    return CreditConfig(
        profile="prime-rl",
        policy_ratio_base="rollout",
        loss_agg_mode="token-mean",
        adv_tau=cf["adv_tau"],
        kl_tau=cf["kl_tau"],
        **kw,
    )


def _searchr1(p: dict) -> CreditConfig:
    """Search-R1's compute_policy_loss: one cliprange for both sides; no dual clip and no clamp on log ρ come from
    the profile (dual_clip_form="none", log_ratio_clamp="none"); its masked_mean is a token mean."""
    return CreditConfig(
        profile="search-r1", clip_ratio_low=p["cliprange"], clip_ratio_high=p["cliprange"], loss_agg_mode="token-mean"
    )


def _kgr1(p: dict) -> CreditConfig:
    """KG-R1's compute_policy_loss: cliprange_low / cliprange_high, clip_ratio_c (a min_loss dual clip, as verl's) and
    agg_loss's mode; its ±10 clamp on log ρ comes from the profile (log_ratio_clamp="10"). unbiased-fixed-norm is
    Σ_i S_i / MAX_LENGTH: seq-mean-token-sum-norm with loss_scale_factor = MAX_LENGTH under the profile's old
    sum-norm (sum_norm_divides_by_seqs=False)."""
    kw = dict(loss_agg_mode=p["loss_agg_mode"])
    if p["loss_agg_mode"] == "unbiased-fixed-norm":
        kw = dict(loss_agg_mode="seq-mean-token-sum-norm", loss_scale_factor=float(p["MAX_LENGTH"]))
    return CreditConfig(
        profile="kg-r1",
        clip_ratio_low=p["cliprange_low"],
        clip_ratio_high=p["cliprange_high"],
        clip_ratio_c=p["clip_ratio_c"],
        **kw,
    )


def _tensors(file: str, x: dict):
    """(log π_θ, log π_old, log π_rollout, advantages [B, T], loss mask, log π_ref, group ids) as each file names
    them (None where a file has no such input)."""
    if file.startswith("trl"):
        mask = tensor(x["mask"])
        adv = tensor(x["advantages"])[:, None].expand_as(mask)
    else:
        mask, adv = tensor(x["loss_mask"] if "loss_mask" in x else x["response_mask"]), tensor(x["advantages"])
    rollout = x.get("inference_log_prob", x.get("rollout_log_prob"))
    old, ref, index = x.get("old_log_prob"), x.get("ref_log_prob"), x.get("index")
    return (
        tensor(x["log_prob"]),
        tensor(old) if old is not None else None,
        tensor(rollout) if rollout is not None else None,
        adv,
        mask,
        tensor(ref) if ref is not None else None,
        torch.tensor(index) if index is not None else None,
    )


CONFIGS = {
    "openrlhf_policy_loss.json": lambda c: _openrlhf(c["params"]),
    "trl_policy_loss.json": lambda c: _trl(c["params"]),
    "trl_policy_sequence.json": lambda c: _trl(c["params"]),
    "skyrl_policy_loss.json": lambda c: _skyrl(c["params"]),
    "primerl_policy_loss.json": lambda c: _primerl(c["params"]),
    "searchr1_policy_loss.json": lambda c: _searchr1(c["params"]),
    "kgr1_policy_loss.json": lambda c: _kgr1(c["params"]),
}
OLD_VERL_MICRO_BATCHES = (
    "dp_actor takes the loss per micro-batch and divides it by gradient_accumulation, so a token of a micro-batch "
    "holding n_m loss tokens weighs 1/(M·n_m) under its token mean, not 1/N (here 22 and 11 tokens); the engine "
    "aggregates the whole batch as one micro-batch"
)
KGR1_NAN_ROW = (
    "a fully masked row under KG-R1's seq-mean-token-mean is 0/0: the loss is NaN and so is that row's gradient; "
    "CreditLens gives the row 0 (docs/conventions/kg-r1.md §3.6; "
    "test_kgr1_seq_mean_token_mean_differs_only_on_the_empty_row "
    "checks every other row)"
)


def _not_reproduced(file: str, c: dict) -> str | None:
    """Why CreditLens does not reproduce case ``c`` of ``file`` (None: it does)."""
    p = c["params"]
    if file.startswith("skyrl"):
        t, red = p["policy_loss_type"], p["loss_reduction"]
        if t == "clip_cov":
            return "clip_cov picks its tokens at random (torch.randperm among the covariance-selected ones)"
        if t == "cross_entropy":
            return "cross_entropy is SFT (−log π summed): advantages unused, not a policy loss"
        if red == "token_mean_legacy":
            return "token_mean_legacy normalises per micro-batch: the engine aggregates the whole batch"
    elif file.startswith("openrlhf"):
        if (p.get("kl") or {}).get("unbiased_gradient"):
            return (
                "the KL loss's unbiased_gradient: the estimator's value forward, a straight-through gradient "
                "min(π_θ/π_old, 10)·(log π_θ − log π_ref) (detached ratio); no convention for it yet"
            )
    elif file == "trl_policy_sequence.json" and c["name"].startswith("compute_loss/"):
        return (
            "TRL's constructor refuses VESPO with a sequence-level vLLM IS mode (the init/ cases), so profile 'trl' "
            "does too; _compute_loss's numbers are checked under profile 'verl' "
            "(test_vespo_counts_a_sequence_is_weight_once)"
        )
    elif file in ("searchr1_policy_loss.json", "kgr1_policy_loss.json"):
        if p["micro_batch_size"] < len(c["inputs"]["response_mask"]):
            return OLD_VERL_MICRO_BATCHES
        if p.get("loss_agg_mode") == "seq-mean-token-mean" and not all(map(any, c["inputs"]["response_mask"])):
            return KGR1_NAN_ROW
    elif file == "trl_policy_sequence.json" and c["outputs"].get("passed_vespo_check"):
        return "TRL's constructor passed its VESPO check: no loss (test_trl_accepts_what_its_constructor_accepts)"
    elif c["inputs"].get("rl_weights") is not None:
        return "rl_weights: per-token loss weights (and a weight-0 token out of rl_scale) the batch has no field for"
    return None


OTHER_FILES = {  # file: (cases, reproduced, refused)
    "openrlhf_policy_loss.json": (46, 42, 3),
    "trl_policy_loss.json": (33, 33, 0),
    "trl_policy_sequence.json": (23, 15, 2),
    "skyrl_policy_loss.json": (50, 46, 0),
    "primerl_policy_loss.json": (18, 17, 0),
    "searchr1_policy_loss.json": (11, 10, 0),
    "kgr1_policy_loss.json": (20, 18, 0),
}
OTHER_CASES = [  # the cases reproduced or refused; test_other_trainers_cases_are_reproduced_or_named counts the rest
    pytest.param(file, c, id=f"{file.removesuffix('_policy_loss.json')}:{c['name']}")
    for file in OTHER_FILES
    for c in load_golden(file)["cases"]
    if not _not_reproduced(file, c)
]


@pytest.mark.parametrize("file", list(OTHER_FILES))
def test_other_trainers_cases_are_reproduced_or_named(file: str) -> None:
    cases = load_golden(file)["cases"]
    named = [c for c in cases if _not_reproduced(file, c)]
    refused = [c for c in cases if is_error(c) and c not in named]
    assert (len(cases), len(cases) - len(named) - len(refused), len(refused)) == OTHER_FILES[file]
    assert all({"grad_log_prob", "error", "passed_vespo_check"} & set(c["outputs"]) for c in cases)


@pytest.mark.parametrize("file, case", OTHER_CASES)
def test_other_trainers_policy_loss_gradient(file: str, case: dict) -> None:
    if is_error(case):
        with pytest.raises(REFERENCE_ERRORS):
            cfg = CONFIGS[file](case)
            _engine_grad(cfg, *_tensors(file, case["inputs"]))
        return
    cfg = CONFIGS[file](case)
    lp, old, rollout, adv, mask, ref, group_ids = _tensors(file, case["inputs"])
    corr, _, grad = _engine_grad(cfg, lp, old, rollout, adv, mask, ref, group_ids)
    out = case["outputs"]
    assert_golden(grad, out["grad_log_prob"], what="d loss / d log_prob")
    if out.get("importance_sampling_ratio") is not None:  # TRL: [B, T] (token modes) or [B, 1] (sequence modes)
        expected = tensor(out["importance_sampling_ratio"])
        weights = corr.weights[:, : expected.shape[-1]]
        seen = mask.bool() if expected.shape[-1] == mask.shape[-1] else mask.bool().any(-1, keepdim=True)
        assert_golden(weights, expected, mask=seen, what="vLLM IS ratio")


OLD_VERL = ("searchr1_policy_loss.json", "kgr1_policy_loss.json")


@pytest.mark.parametrize(
    "file, case",
    [
        pytest.param(file, c, id=f"{file.removesuffix('_policy_loss.json')}:{c['name']}")
        for file in OLD_VERL
        for c in load_golden(file)["cases"]
        if _not_reproduced(file, c) == OLD_VERL_MICRO_BATCHES
    ],
)
def test_old_verl_micro_batches_are_token_means_of_their_own(file: str, case: dict) -> None:
    """What the micro-batch cases do is the named difference and nothing else: the engine's gradient on each
    micro-batch's rows alone (its own token mean), divided by gradient_accumulation, is the trainer's."""
    p = case["params"]
    cfg = CONFIGS[file](case)
    lp, old, _, adv, mask, _, _ = _tensors(file, case["inputs"])
    parts = []
    for rows in torch.arange(len(mask)).split(p["micro_batch_size"]):
        parts.append(_engine_grad(cfg, lp[rows], old[rows], None, adv[rows], mask[rows])[2])
    expected = case["outputs"]["grad_log_prob"]
    assert_golden(torch.cat(parts) / p["gradient_accumulation"], expected, what="per micro-batch")
    with pytest.raises(AssertionError):  # the whole batch's token mean is not it
        assert_golden(_engine_grad(cfg, lp, old, None, adv, mask)[2], expected, what="whole batch")


@pytest.mark.parametrize(
    "case", golden_cases("kgr1_policy_loss.json", lambda c: c["name"] == "seq-mean-token-mean/dense")
)
def test_kgr1_seq_mean_token_mean_differs_only_on_the_empty_row(case: dict) -> None:
    """KG-R1's seq-mean-token-mean on the dense fixture (row 10 fully masked): NaN there, CreditLens's 0; every other
    row's gradient is reproduced."""
    cfg = _kgr1(case["params"])
    lp, old, _, adv, mask, _, _ = _tensors("kgr1_policy_loss.json", case["inputs"])
    grad = _engine_grad(cfg, lp, old, None, adv, mask)[2]
    expected = tensor(case["outputs"]["grad_log_prob"])
    empty = ~mask.bool().any(-1)
    assert empty.tolist().count(True) == 1 and bool(expected[empty].isnan().all()) and bool(grad[empty].eq(0).all())
    assert_golden(grad[~empty], expected[~empty], what="the rows with a loss token")


@pytest.mark.parametrize(
    "profile, expected",
    [
        ("verl", [0.0, math.exp(15.0), 0.0]),
        ("search-r1", [4.0, math.exp(15.0), math.exp(25.0)]),
        ("kg-r1", [0.0, 0.0, 0.0]),
    ],
)
def test_old_verl_dual_clip_and_log_ratio_clamp_by_hand(profile: str, expected: list) -> None:
    """Three rows of one token each, A = −1: log ρ = ln 4 with clip_ratio_c = 3, then log ρ = 15 and 25 with
    clip_ratio_c = 1e30 (no dual clip in reach). verl: the dual clip cuts ρ = 4 (4 > 3), its ±20 clamp passes 15 and
    stops 25. Search-R1: no dual clip, no clamp: g = −A·ρ = 4, e¹⁵, e²⁵. KG-R1: the dual clip cuts ρ = 4, its ±10
    clamp stops 15 and 25."""
    lp = torch.tensor([[-0.01], [-0.01], [-0.01]])
    old = lp - torch.tensor([[math.log(4.0)], [15.0], [25.0]])
    adv, mask = torch.full((3, 1), -1.0), torch.ones(3, 1)
    got = []
    for row, c in zip(range(3), (3.0, 1e30, 1e30), strict=True):
        cfg = CreditConfig(profile=profile, clip_ratio_c=c)
        got.append(policy_gradient(lp[row : row + 1], old[row : row + 1], adv[:1], mask[:1], cfg).grad.item())
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), rtol=1e-5, atol=1e-5)


TRL_SEQUENCE = "trl_policy_sequence.json"


@pytest.mark.parametrize("case", golden_cases(TRL_SEQUENCE, lambda c: c["name"].startswith("compute_loss/")))
def test_vespo_counts_a_sequence_is_weight_once(case: dict) -> None:
    """VESPO's w takes the log of a sequence-level IS weight once per row (TRL's ``get_gamma_weights`` sums a [B, 1]
    ratio), not once per token. TRL's constructor refuses the combination, so the maths is checked under profile
    'verl', where it is a what-if."""
    with pytest.raises(ValueError, match="token_truncate or token_mask"):
        _trl(case["params"])
    cfg = _trl(case["params"], profile="verl")
    lp, old, rollout, adv, mask, ref, group_ids = _tensors(TRL_SEQUENCE, case["inputs"])
    _, _, grad = _engine_grad(cfg, lp, old, rollout, adv, mask, ref, group_ids)
    assert_golden(grad, case["outputs"]["grad_log_prob"], what="d loss / d log_prob")


@pytest.mark.parametrize("case", golden_cases(TRL_SEQUENCE, lambda c: c["name"].startswith("init/")))
def test_trl_accepts_what_its_constructor_accepts(case: dict) -> None:
    """GRPOTrainer.__init__ refuses VESPO with a sequence-level vLLM IS mode and lets the token modes through; the
    trl profile draws the same line."""
    if is_error(case):
        with pytest.raises(ValueError, match="token_truncate or token_mask"):
            _trl(case["params"])
    else:
        assert _trl(case["params"]).rollout_is == "token"


@pytest.mark.parametrize("case", golden_cases("verl_policy_loss_vanilla.json"))
def test_the_gradient_is_the_derivative_of_the_loss_value(case: dict) -> None:
    """On verl 1dda039b's vanilla cases (``engine.aggregation.policy_loss_vanilla`` reproduces their loss values in
    test_golden_verl_loss.py), the stage's closed-form gradient equals autograd through that loss."""
    from engine.aggregation import policy_loss_vanilla

    p, x = case["params"], case["inputs"]
    lp = tensor(x["log_prob"]).requires_grad_(True)
    old, adv, mask = tensor(x["old_log_prob"]), tensor(x["advantages"]), tensor(x["response_mask"])
    kw = dict(clip_ratio_low=p["clip_ratio_low"], clip_ratio_high=p["clip_ratio_high"], clip_ratio_c=p["clip_ratio_c"])
    loss, _ = policy_loss_vanilla(old, lp, adv, mask, loss_agg_mode=p["loss_agg_mode"], **kw)
    loss.backward()
    cfg = CreditConfig(loss_agg_mode=p["loss_agg_mode"], **kw)
    pg = policy_gradient(lp.detach(), old, adv, mask, cfg)
    grad = torch.where(mask.bool(), pg.grad * agg_weights(mask, p["loss_agg_mode"]), 0.0)
    assert_golden(grad, lp.grad, what="closed form vs autograd")


def _as_the_trainer_groups(batch, cfg: CreditConfig):
    """The policy sample's groups (4 and 3 rows) as one group of 7 where the trainer has groups of one size only
    (OpenRLHF, Profile.group_sizes): the loss stage checked here does not depend on the groups."""
    if cfg.trainer.group_sizes == "equal":
        return batch.replace(group_ids=torch.zeros_like(batch.group_ids))
    return batch


@pytest.mark.parametrize(
    "fields",
    [
        dict(profile="openrlhf", policy_loss="gspo"),
        dict(
            profile="openrlhf",
            rollout_is="token",
            rollout_is_threshold="inf",
            rollout_rs=("seq_mean_tv",),
            rollout_rs_threshold=("0.02",),
        ),  # fmt: skip
        dict(profile="trl", policy_loss="cispo", clip_ratio_high=0.5),
        dict(
            profile="trl",
            policy_loss="vespo",
            rollout_is="token",  # TRL refuses VESPO with a sequence-level IS weight (trl_policy_sequence.json)
            rollout_is_mode="mask",
            rollout_is_threshold="0.5_3",
            off_policy_mask_threshold=0.01,
        ),  # fmt: skip
        dict(
            profile="skyrl",
            policy_loss="sapo",
            loss_agg_mode="token-mean",
            rollout_rs=("seq_all_k1",),
            rollout_rs_threshold=("0.5_2",),
        ),  # fmt: skip
        dict(profile="prime-rl", policy_loss="dppo_tv", policy_ratio_base="rollout", adv_tau=0.5, kl_tau=0.1),
        dict(profile="verl", policy_loss="kl_cov", kl_cov_ratio=0.1, ppo_kl_coef=1.0, policy_ratio_base="rollout"),
        dict(
            profile="skyrl",
            policy_loss="kl_cov",
            kl_cov_ratio=0.2,
            ppo_kl_coef=1.0,
            policy_ratio_base="rollout",
            loss_agg_mode="prompt-mean-token-mean",
        ),  # fmt: skip
    ],
    ids=lambda f: f"{f['profile']}:{f.get('policy_loss', 'vanilla')}",
)
def test_the_stage_computes_what_the_golden_mapping_checks(fields: dict) -> None:
    """compute_credit's grad_weight on the bundled policy sample (both engines' log-probs) is −_engine_grad's, with
    π_θ = the trainer's log-probs: the stage wires the conventions as the golden cases do."""
    from pathlib import Path

    from engine import compute_credit
    from engine.io.load import load_run
    from engine.stages import masks_for

    batch = load_run(Path(__file__).resolve().parents[1] / "sample_runs" / "lint_cases" / "policy").run.to_batch()
    cfg = CreditConfig(**fields)
    batch = _as_the_trainer_groups(batch, cfg)
    res = compute_credit(batch, cfg, device="cpu")
    lp, rollout = batch.old_log_probs, batch.rollout_log_probs
    _, _, grad = _engine_grad(cfg, lp, lp, rollout, res.advantages, masks_for(batch, cfg).state, None, batch.group_ids)
    assert_golden(res.grad_weight, -grad, what="stage vs golden mapping")
    assert bool(grad.ne(0).any())


@pytest.mark.parametrize("profile", ["verl", "skyrl", "openrlhf"])
def test_the_stage_aggregates_the_kl_loss_as_the_golden_mapping(profile: str) -> None:
    """With a KL loss and a per-token rejection that fires, compute_credit's grad_weight is −_engine_grad's: under
    skyrl the KL term keeps its own weights 1/(B·max(n_i, 1)) and under openrlhf 1/N on the mask before rejection
    (a rejected token keeps its KL gradient), under verl it is aggregated with the loss on the rejection-masked
    mask."""
    from pathlib import Path

    from engine import compute_credit
    from engine.io.load import load_run
    from engine.stages import masks_for

    batch = load_run(Path(__file__).resolve().parents[1] / "sample_runs" / "lint_cases" / "policy").run.to_batch()
    lp, rollout = batch.old_log_probs, batch.rollout_log_probs
    ref = lp + 0.3 * torch.sin(torch.arange(lp.numel(), dtype=lp.dtype)).view_as(lp)  # a reference policy nearby
    batch = batch.replace(ref_log_probs=ref)
    cfg = CreditConfig(profile=profile, kl_loss_coef=0.1, rollout_rs=("token_k1",), rollout_rs_threshold=("0.8_1.25",))
    batch = _as_the_trainer_groups(batch, cfg)
    res = compute_credit(batch, cfg, device="cpu")
    mask = masks_for(batch, cfg).state
    _, after, grad = _engine_grad(cfg, lp, lp, rollout, res.advantages, mask, ref, batch.group_ids)
    assert_golden(res.grad_weight, -grad, what="stage vs golden mapping")
    rejected = mask.bool() & ~after.bool()
    assert bool(rejected.any())
    assert bool(grad[rejected].ne(0).all()) == (profile != "verl")


@pytest.mark.parametrize("profile", ["verl", "openrlhf", "trl", "skyrl", "prime-rl"])
def test_the_ratio_one_shortcut_is_the_full_computation(profile: str) -> None:
    """Where ``engine.policy.unit_at_ratio_one`` lets stage 4 hand back w · A itself, the full policy-gradient
    computation gives the same numbers, for every loss and the options that move the gradient at ratio 1."""
    from benchmarks.batches import synthetic_batch
    from engine import compute_credit
    from engine.policy import POLICY_LOSSES, unit_at_ratio_one
    from engine.stages import weigh_policy

    batch = synthetic_batch(16, 24, group_size=4, seed=3)
    variants = [
        {},
        {"adv_tau": 2.0},
        {"clip_ratio_high": 1.5},
        {"kl_loss_coef": 0.1},
        {"loss_agg_mode": "seq-mean-token-mean"},
        {"kl_cov_ratio": 1.0, "ppo_kl_coef": 5.0},  # kl_cov: every token picked, a large penalty (0 at ratio 1)
    ]
    if profile == "skyrl":
        variants.append({"loss_agg_mode": "prompt-mean-token-mean"})
    checked = 0
    for loss in POLICY_LOSSES:
        for extra in variants:
            cfg = CreditConfig(profile=profile, estimator="grpo", policy_loss=loss, **extra)
            res = compute_credit(batch, cfg, device="cpu")
            full = weigh_policy(
                batch, cfg, res.advantages, res.loss_mask, res.agg_weights, res.effective_weights, None, shortcut=False
            )
            if unit_at_ratio_one(cfg):
                torch.testing.assert_close(full.grad_weight, res.effective_weights, atol=1e-7, rtol=1e-6)
                checked += 1
            else:
                torch.testing.assert_close(full.grad_weight, res.grad_weight)
    assert checked >= 8  # the shortcut is taken for several losses and options


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_openrlhf_kl_loss_is_a_clamped_token_mean(mode: str) -> None:
    """OpenRLHF's actor KL loss by hand: k1 with β = 0.3 on 4 action tokens, d = log π − log π_ref =
    [[0.5, 12, ·], [−11, 2, ·]]; clamp(d, ±10) has gradient 1 at 0.5 and 2, 0 at 12 and −11 (past the clamp); the
    token mean over the batch weighs each token 1/4 whatever loss_agg_mode says: 0.3/4 = 0.075 at (0, 0) and (1, 1)."""
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    lp = torch.full((2, 3), -1.0)
    ref = lp - torch.tensor([[0.5, 12.0, 0.0], [-11.0, 2.0, 0.0]])
    cfg = CreditConfig(profile="openrlhf", loss_agg_mode=mode, kl_loss_coef=0.3, kl_loss_type="k1")
    pg = policy_gradient(lp, lp, torch.zeros(2, 3), mask, cfg, ref_log_prob=ref)
    torch.testing.assert_close(pg.kl, torch.tensor([[0.075, 0.0, 0.0], [0.0, 0.075, 0.0]]))


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(profile="verl", policy_loss="gspo"), r"profile 'verl'.*own_token"),
        (dict(profile="skyrl", policy_loss="gspo"), r"profile 'skyrl'.*own_token"),
        (dict(profile="trl", policy_loss="geo_mean"), r"geo_mean's ratio"),
    ],
)
def test_a_kl_weighted_by_a_ratio_no_trainer_defines_is_refused(fields: dict, message: str) -> None:
    """TRL weighs its KL by its loss's own ratio; where no trainer has such a ratio-weighted KL the scheme is
    refused when it is made, naming the profile, not when it is computed."""
    with pytest.raises(ValueError, match=message):
        CreditConfig(kl_loss_coef=0.04, kl_loss_ratio_weighted=True, **fields)
    CreditConfig(kl_loss_coef=0.04, kl_loss_ratio_weighted=False, **fields)  # the plain KL term is fine


def test_trl_k3_is_unclamped_and_verl_k3_is_clamped() -> None:
    """ref − log π = 12: TRL's k3 is e¹² − 12 − 1 (about 162742), verl's low_var_kl stops at 10."""
    from engine.kl import kl_penalty

    lp, ref = torch.tensor([-12.5]), torch.tensor([-0.5])
    assert kl_penalty(lp, ref, "low_var_kl", clamp="none").item() == pytest.approx(math.exp(12.0) - 13.0, rel=1e-6)
    assert kl_penalty(lp, ref, "low_var_kl").item() == 10.0
    assert CreditConfig(profile="trl").kl_clamp == "none"


def test_each_loss_names_the_golden_files_that_check_it() -> None:
    """A registered loss's ``checked_by`` (the README's loss table) is exactly the golden files with a reproduced
    case under that loss, as the mappings above read them."""
    from collections import defaultdict

    from engine.policy_losses import list_policy_losses

    seen: dict[str, set[str]] = defaultdict(set)
    for c in load_golden(VERL)["cases"]:
        if not is_error(c):
            seen[_config(c["params"]).policy_loss].add(VERL)
    seen["vanilla"].add("verl_policy_loss_vanilla.json")  # test_the_gradient_is_the_derivative_of_the_loss_value
    for file in OTHER_FILES:
        for c in load_golden(file)["cases"]:
            if not _not_reproduced(file, c) and not is_error(c):
                seen[CONFIGS[file](c).policy_loss].add(file)
    from test_golden_policy_ties import FILES as TIES
    from test_golden_policy_ties import NOT_REPRODUCED as TIES_NAMED

    for file in TIES:
        for c in load_golden(file)["cases"]:
            if c["name"] not in TIES_NAMED.get(file, {}):
                mapped = _config(c["params"]) if file.startswith("verl") else CONFIGS[file.replace("_ties", "_loss")](c)
                seen[mapped.policy_loss].add(file)
    assert {loss.name: set(loss.checked_by) for loss in list_policy_losses()} == dict(seen)


def test_the_registry_refuses_a_second_loss_of_one_name_and_an_unknown_name() -> None:
    from engine.policy_losses import get_policy_loss, register_policy_loss

    with pytest.raises(ValueError, match="already registered"):
        register_policy_loss("gpg", label="x", formula="x", reads=(), reference="x", checked_by=())(lambda i, c: None)
    with pytest.raises(ValueError, match="is not one of"):
        get_policy_loss("ppo2")
    with pytest.raises(ValueError, match=r"CreditConfig.policy_loss: 'ppo2' is not one of"):
        CreditConfig(policy_loss="ppo2")


def test_every_field_a_loss_reads_is_a_scheme_field() -> None:
    import dataclasses

    from engine.policy_losses import list_policy_losses

    fields = {f.name for f in dataclasses.fields(CreditConfig)}
    assert {f for loss in list_policy_losses() for f in loss.reads} <= fields
