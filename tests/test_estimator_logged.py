"""The estimator ``logged``: the advantages the trainer itself logged, carried by the batch as
``logged_advantages`` [B, T] with ``logged_advantage_mask``, returned as they are (nothing recomputed), so stage 4
runs on the gradient the trainer gave each token. Hand-written micro cases, a verl dump whose advantages are no
estimator's, a prime-rl trainer token export (no rewards, no groups), refusals and the lint."""

from __future__ import annotations

import copy

import pytest
import torch
from test_io_writer_prime_rl_tokens import records, samples
from writers import verl as writer
from writers.prime_rl_tokens import write_run
from writers.verl import Turn

from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.io import export_verl_batch, load_run
from engine.io.data.logged import logged_advantage_tokens, logged_length_mismatch
from engine.io.text.tokenize import get_tokenizer
from engine.lint import run_lints
from engine.policy import policy_gradient

PRIME = dict(profile="prime-rl", policy_loss="dppo_tv", policy_ratio_base="rollout", clip_ratio_low=0.2)


def micro(**kw) -> TrajectoryBatch:
    """Two rows of 4 tokens: row 0 has a tool token at 2, row 1 is padded after 3 tokens and logged nothing at 1."""
    args = dict(
        token_ids=torch.zeros(2, 4, dtype=torch.long),
        attention_mask=torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        action_mask=torch.tensor([[1, 1, 0, 1], [1, 1, 1, 0]]),
        turn_ids=torch.tensor([[0, 0, 0, 1], [0, 0, 0, -1]]),
        group_ids=[0, 1],
        token_scores=torch.tensor([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 5.0, 0.0]]),
        logged_advantages=torch.tensor([[0.5, -1.0, 9.0, 2.0], [3.0, 0.0, -0.25, 0.0]]),
        logged_advantage_mask=torch.tensor([[1, 1, 1, 1], [1, 0, 1, 0]]),
    )
    return TrajectoryBatch(**(args | kw))


def test_micro_case_returns_the_logged_values_on_the_estimator_mask():
    res = compute_credit(micro(), CreditConfig(estimator="logged", use_kl_in_reward=False), device="cpu")
    # the tool token (row 0, t=2: logged 9) is off the action mask, row 1's t=1 has no logged value: both 0
    want = torch.tensor([[0.5, -1.0, 0.0, 2.0], [3.0, 0.0, -0.25, 0.0]])
    assert torch.equal(res.advantages, want) and torch.equal(res.returns, want)
    assert res.notes["logged"] == "1 token(s) of the estimator mask in 1 row(s) have no logged advantage: 0 there"
    assert res.extras["logged_tokens"].tolist() == [3.0, 2.0]
    # stage 4, verl's token-mean over the 6 action tokens: w = 1/6, grad = w · A (ratio 1, no correction)
    assert torch.allclose(res.grad_weight, want / 6)
    # the rewards (5 on row 1) and the profile's conventions do not reach it
    other = compute_credit(micro(), CreditConfig(profile="skyrl", estimator="logged"), device="cpu")
    assert torch.equal(other.advantages, want)


def test_batch_validates_the_logged_advantages():
    assert torch.equal(micro(logged_advantage_mask=None).logged_advantage_mask, micro().attention_mask)
    with pytest.raises(ValueError, match="logged_advantage_mask: logged advantage outside the attention mask"):
        micro(logged_advantage_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"logged_advantages: value 7.0 where none is logged \(mask 0\) at \[1, 1\]"):
        micro(logged_advantages=torch.tensor([[0.5, -1.0, 9.0, 2.0], [3.0, 7.0, -0.25, 0.0]]))
    with pytest.raises(ValueError, match="logged_advantages: non-finite value nan"):
        micro(logged_advantages=torch.tensor([[float("nan"), 0, 0, 0], [0, 0, 0, 0.0]]))
    with pytest.raises(ValueError, match="logged_advantage_mask: given without logged_advantages"):
        micro(logged_advantages=None)
    with pytest.raises(ValueError, match="logged_advantages: expected shape"):
        micro(logged_advantages=torch.zeros(2, 3), logged_advantage_mask=None)
    picked = micro().select([1])
    assert picked.logged_advantages.tolist() == [[3.0, 0.0, -0.25, 0.0]]
    b = TrajectoryBatch.from_tensors(response_mask=torch.ones(1, 2), advantages=torch.tensor([[0.5, -0.5]]))
    assert b.logged_advantages.tolist() == [[0.5, -0.5]]  # verl's own name


def test_refused_without_logged_advantages_and_under_stepwise_modes():
    bare = micro(logged_advantages=None, logged_advantage_mask=None)
    with pytest.raises(ValueError, match="estimator 'logged' needs the advantages the trainer logged"):
        compute_credit(bare, CreditConfig(estimator="logged"), device="cpu")
    for mode in ("broadcast", "per_step"):
        with pytest.raises(ValueError, match="use stepwise_mode 'trajectory'"):
            compute_credit(micro(), CreditConfig(profile="rllm", estimator="logged", stepwise_mode=mode), device="cpu")


# ---------------------------------------------------------------------------------------------- verl dump
@pytest.fixture(scope="module")
def verl_run(tmp_path_factory):
    """A verl agent-loop step whose ``advantages`` tensor is no estimator's (per-token values that vary within a
    row, nonzero on the tool tokens too): ``logged`` must hand back exactly those on the response mask."""
    tok = get_tokenizer(None)
    rows = [
        writer.agent_loop_row(tok, "What is 6*7?", turns, 64, "head", score)
        for turns, score in (
            ([Turn("<tool_call>mul(6,7)</tool_call>", tools=["42"]), Turn("42")], 1.0),
            ([Turn("42")], 1.0),
            ([Turn("41")], 0.0),
        )
    ]
    proto = writer.agent_loop_batch(rows, ["u", "u", "u"], 24, 64)
    mask = proto.batch["response_mask"]
    T = mask.shape[1]
    weird = torch.linspace(-1.5, 2.0, T)[None, :] * torch.tensor([[1.0], [-2.0], [0.5]])  # (B, T)
    proto.batch["advantages"] = weird * (proto.batch["attention_mask"][:, 24:] > 0)
    path = tmp_path_factory.mktemp("verl_logged") / "step.pt"
    export_verl_batch(proto, path)
    return load_run(path), weird, mask


def test_logged_on_a_verl_dump_is_verls_own(verl_run):
    load, weird, mask = verl_run
    batch = load.run.to_batch()
    res = compute_credit(batch, CreditConfig(estimator="logged"), device="cpu")
    for i, traj in enumerate(load.run.trajectories):
        n = traj.num_tokens
        logged = torch.tensor(logged_advantage_tokens(traj), dtype=torch.float32)
        assert torch.equal(res.advantages[i, :n], logged * batch.action_mask[i, :n])
        assert torch.equal(res.advantages[i, :n], (weird[i, :n] * mask[i, :n]).float())  # the dump's numbers
    assert bool((res.advantages[:, batch.num_tokens :] == 0).all())
    assert bool((batch.info_mask * batch.logged_advantages).abs().sum() > 0)  # the tool tokens had values: dropped
    assert not (batch.info_mask * res.advantages).any()
    grpo = compute_credit(batch, CreditConfig(estimator="grpo"), device="cpu")
    assert not torch.allclose(grpo.advantages, res.advantages)  # a recomputation is not the dump's
    (finding,) = run_lints(batch, CreditConfig(estimator="grpo"), run=load.run, checks=["logged_advantage_mismatch"])
    assert finding.count == 3
    assert run_lints(batch, CreditConfig(estimator="logged"), run=load.run, checks=["logged_advantage_mismatch"]) == []


def test_a_list_that_cannot_be_aligned_is_left_out_and_said(verl_run):
    load = verl_run[0]
    run = copy.deepcopy(load.run)
    assert logged_length_mismatch(run.trajectories) is None and load.problems == []
    short = run.trajectories[1]
    short.metadata["logged_advantages"] = short.metadata["logged_advantages"][:-1]
    why = logged_length_mismatch(run.trajectories)
    assert why.startswith("1 trajectory' logged_advantages cannot be aligned to the response tokens (first: ")
    assert f"has {short.num_tokens - 1} values for {short.num_tokens} tokens" in why
    batch = run.to_batch()
    assert not batch.logged_advantage_mask[1].any() and batch.logged_advantage_mask[0].any()
    res = compute_credit(batch, CreditConfig(estimator="logged"), device="cpu")
    assert not res.advantages[1].any() and "have no logged advantage: 0 there" in res.notes["logged"]


# ---------------------------------------------------------------------------------------------- prime-rl export
@pytest.fixture(scope="module")
def prime_run(tmp_path_factory):
    s = samples()
    root = write_run(tmp_path_factory.mktemp("prime_logged"), {3: {0: [[s["single"], s["tool"]], [s["tied"]]]}})
    return load_run(root / "step_3"), records(root / "step_3" / "rank_0.jsonl")


def test_logged_on_a_prime_rl_token_export_is_prime_rls_own(prime_run):
    """The export has no rewards and no groups: a recomputed advantage is 0, ``logged`` is the exported column
    on the loss tokens (0.5, −0.75 and 0 for the three samples), and the gradient weight is prime-rl's loss on it."""
    load, recs = prime_run
    batch = load.run.to_batch()
    cfg = CreditConfig(estimator="logged", **PRIME)
    res = compute_credit(batch, cfg, device="cpu")
    assert not compute_credit(batch, CreditConfig(estimator="grpo", **PRIME), device="cpu").advantages.any()
    for i, rec in enumerate(recs):
        start = rec["loss_mask"].index(True)
        exported = [a if m else 0.0 for a, m in zip(rec["advantages"][start:], rec["loss_mask"][start:], strict=True)]
        n = len(exported)
        assert res.advantages[i, :n].tolist() == pytest.approx(exported, abs=0)
    assert sorted({round(float(a), 4) for a in res.advantages[batch.action_mask.bool()]}) == [-0.75, 0.0, 0.5]
    # stage 4 on them: prime-rl's DPPO-TV against the inference log-probs, its zero-advantage tokens out of the loss
    act = batch.action_mask.bool()
    assert not res.loss_mask[act & (res.advantages == 0)].any()
    grad = res.grad_weight
    assert bool((grad[act & (res.advantages != 0) & ~res.pg_clipped] != 0).all())
    pg = policy_gradient(batch.old_log_probs, batch.rollout_log_probs, res.advantages, res.loss_mask, cfg)
    assert torch.equal(pg.clipped & res.loss_mask.bool(), res.pg_clipped)
    keep = res.loss_mask.bool() & ~res.pg_clipped
    assert bool((torch.sign(grad[keep]) == torch.sign(res.advantages[keep])).all())
    assert run_lints(batch, cfg, run=load.run, checks=["logged_advantage_mismatch"]) == []


def test_a_trl_scalar_stands_on_every_token(prime_run):
    run = copy.deepcopy(prime_run[0].run)
    for t in run.trajectories:
        t.metadata.pop("logged_advantages")
    run.trajectories[0].metadata["logged_advantage"] = -0.5  # TRL's completions log: one value per completion
    batch = run.to_batch()
    res = compute_credit(batch, CreditConfig(estimator="logged"), device="cpu")
    assert torch.equal(res.advantages[0], -0.5 * batch.action_mask[0])
    assert not res.advantages[1:].any() and not batch.logged_advantage_mask[1:].any()
