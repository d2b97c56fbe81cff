"""The trainer's own advantages, as it logged them (verl's ``advantages`` tensor, prime-rl / verifiers node
advantages, prime-rl's trainer token export, TRL's completions log).

A_t = the advantage the trainer logged for token t, on the estimator mask (0 where it logged none). Nothing is
recomputed: rewards, groups, placement, in-reward KL and the profile's advantage conventions do not reach it, so
stage 4 (aggregation, policy loss, rollout correction, gradient weight) runs on the advantages the trainer
trained with. It is also the reference a recomputed scheme is compared with (Compare page; lint
``logged_advantage_mismatch``). returns = advantages (there is no critic to regress on).

rLLM's stepwise modes (broadcast, per_step) recompute advantages from per-step rewards; the logged ones are
already the trainer's final per-token advantages, so only ``stepwise_mode="trajectory"`` is accepted (the config
refuses the others, so the sidebar can set the mode back).
"""

from __future__ import annotations

from engine.registry import EstimatorInput, EstimatorOutput, register_estimator


@register_estimator(
    "logged",
    label="Logged (the trainer's own advantages)",
    short="logged advantages",
    kind="token",
    requires=("logged_advantages",),
    formula=r"A_t = \text{the trainer's logged advantage at } t",
    reference="the run's own: verl batch advantages, prime-rl / verifiers traces, prime-rl trainer token exports",
)
def logged(inp: EstimatorInput, cfg) -> EstimatorOutput:
    if inp.logged_advantages is None or inp.logged_advantage_mask is None:
        raise ValueError(
            "estimator 'logged' needs the advantages the trainer logged (metadata.logged_advantages: verl dumps, "
            "prime-rl traces and token exports); the run has none"
        )
    on = inp.logged_advantage_mask * inp.response_mask  # (B, T) logged tokens the estimator mask keeps
    advantages = inp.logged_advantages * on  # (B, T)
    notes = {}
    missing = (inp.response_mask > 0) & (inp.logged_advantage_mask == 0)  # (B, T)
    if bool(missing.any()):
        rows = int(missing.any(-1).sum())
        notes["logged"] = (
            f"{int(missing.sum())} token(s) of the estimator mask in {rows} row(s) have no logged advantage: 0 there"
        )
    extras = {"logged_tokens": on.sum(-1)}  # (B,) tokens whose logged advantage is used
    return EstimatorOutput(advantages, advantages.clone(), extras, notes)
