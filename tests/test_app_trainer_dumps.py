"""Trainer dumps in the dashboard: the trainer's own advantages beside CreditLens's in the token view, and the
response length limit that a lossy verl rollout dump needs."""

from __future__ import annotations

import json

import pytest
from test_app import PAGES, new_app, no_errors
from writers import verl as writer
from writers.verl import Turn

from dashboard import sources
from dashboard.state import K, cfg_key
from engine import compute_credit
from engine.io import export_verl_batch, load_run
from engine.io.text.tokenize import get_tokenizer


@pytest.fixture(scope="module")
def verl_step(tmp_path_factory):
    tok = get_tokenizer(None)
    rows = [
        writer.agent_loop_row(tok, "What is 6*7?", [Turn(answer)], 64, "head", score)
        for answer, score in (("42", 1.0), ("42", 1.0), ("41", 0.0), ("40", 0.0))
    ]
    path = tmp_path_factory.mktemp("verl") / "step.pt"
    export_verl_batch(writer.agent_loop_batch(rows, ["u"] * 4, 24, 64), path)
    return load_run(path)


def caption_text(at) -> str:
    return "\n".join(c.value for c in at.caption)


def test_token_view_shows_the_logged_advantages_beside_creditlens(verl_step):
    at = new_app({"page": "tokens"}, load=verl_step)
    at.run()
    at.switch_page(PAGES["tokens"]).run()
    at.sidebar.selectbox(key=cfg_key("estimator")).set_value("grpo").run()
    no_errors(at, "grpo")
    assert "The trainer logged its own advantages" in caption_text(at)
    assert "matches this scheme" in caption_text(at)  # verl's GRPO is CreditLens's verl profile
    assert "logged advantage" in at.selectbox(key=K.QUANTITY).options
    at.sidebar.selectbox(key=cfg_key("estimator")).set_value("rloo").run()
    assert "differs from this scheme (see Diagnostics)" in caption_text(at)


def test_verl_rollout_dump_takes_the_response_length_limit(tmp_path, monkeypatch):
    from test_io_writer_verl import R, multiturn_rows

    rows = multiturn_rows(get_tokenizer(None), "head")
    writer.write_ray_trainer_dump(get_tokenizer(None), rows, tmp_path / "rollouts", step=5)
    monkeypatch.setenv(sources.DATA_DIR_ENV, str(tmp_path))
    at = new_app({"run": "data:rollouts/5.jsonl"})
    at.run()
    no_errors(at, "verl rollout dump")
    run = at.session_state[K.CONTEXT].handle.run
    assert [t.truncated for t in run.trajectories] == [False] * 6  # unknown limit: the end token is assumed
    assert [p.field for p in at.session_state[K.CONTEXT].handle.problems] == [None]
    at.sidebar.number_input(key=K.RESPONSE_LENGTH).set_value(R).run()
    no_errors(at, "with the limit")
    handle = at.session_state[K.CONTEXT].handle
    assert [t.truncated for t in handle.run.trajectories] == [r.truncated for r in rows]
    assert handle.problems == []


def test_a_trl_completion_log_opens_under_the_trl_profile(tmp_path):
    from writers import trl

    written = trl.write_completions(
        str(tmp_path),
        step=3,
        prompts=[[{"role": "user", "content": "What is 2+2?"}], [{"role": "user", "content": "Say hi."}]],
        completions=[["4", "5", "four", "22"], ["hi", "hello", "yo", "hey"]],
        reward_funcs={"accuracy": lambda p, c: 1.0 if c.strip() in ("4", "hi") else 0.0},
    )
    at = new_app({"page": "tokens"}, load=load_run(written.path))
    at.session_state[cfg_key("estimator")] = "gae"  # whatever the sidebar held before
    at.run()
    at.switch_page(PAGES["tokens"]).run()
    no_errors(at, "trl upload")
    assert at.session_state[cfg_key("profile")] == "trl" and at.session_state[cfg_key("estimator")] == "grpo"
    assert "This run opens with profile `trl`, estimator `grpo`: TRL's GRPOTrainer conventions" in caption_text(at)
    assert "matches this scheme" in caption_text(at)  # TRL's logged advantages are CreditLens's under `trl`
    # the user's later choice stays: the profile is set the first time the run is shown, not on every rerun
    at.sidebar.selectbox(key=cfg_key("profile")).set_value("verl").run()
    assert at.session_state[cfg_key("profile")] == "verl"
    assert "differs from this scheme (see Diagnostics)" in caption_text(at)


def test_a_prime_rl_trace_log_opens_under_the_prime_rl_profile(tmp_path):
    from writers import prime_rl
    from writers.prime_rl import Rollout, Turn

    def rollout(answer: str, correct: float) -> Rollout:
        return Rollout("You are terse.", "2+2?", [Turn(answer)], {"correct": (correct, 1.0)})

    # the token view shows the first rollout: alone in its group, prime-rl logged advantage 0 for it
    groups = {"h": [rollout("4", 1.0)], "g": [rollout("4", 1.0), rollout("5", 0.0), rollout("four", 1.0)]}
    path, _ = prime_rl.write_step(str(tmp_path), 1, groups)
    at = new_app({"page": "tokens"}, load=load_run(path))
    at.run()
    at.switch_page(PAGES["tokens"]).run()
    no_errors(at, "prime-rl upload")
    ss = at.session_state
    assert (ss[cfg_key("profile")], ss[cfg_key("estimator")], ss[cfg_key("norm_adv_by_std_in_grpo")]) == (
        "prime-rl",
        "grpo",
        False,
    )
    assert "This run opens with profile `prime-rl`, estimator `grpo`, std normalisation `off`" in caption_text(at)
    assert "matches this scheme" in caption_text(at)  # prime-rl's logged advantage, 0
    at.sidebar.selectbox(key=cfg_key("profile")).set_value("verl").run()
    assert "differs from this scheme (see Diagnostics)" in caption_text(at)  # verl gives the lone row its raw score


def test_prime_rl_length_penalty_from_the_sidebar(tmp_path):
    """A prime-rl run scored with the length penalty: its logged advantages match once the sidebar's length penalty
    is on at prime-rl's defaults, the link carries it, and a scheme that cannot apply it drops it."""
    from writers import prime_rl
    from writers.prime_rl import Rollout, Turn

    def rollout(answer: str, correct: float) -> Rollout:
        return Rollout("You are terse.", "2+2?", [Turn(answer)], {"correct": (correct, 1.0)})

    answers = [("4", 1.0), ("The answer is 4, since two plus two makes four.", 1.0), ("5", 0.0), ("It is 5.", 0.0)]
    path, _ = prime_rl.write_step(
        str(tmp_path), 1, {"g": [rollout(a, c) for a, c in answers]}, length_penalty=(0.25, 0.1, 0.1)
    )
    at = new_app({"page": "tokens"}, load=load_run(path))
    at.run()
    at.switch_page(PAGES["tokens"]).run()
    no_errors(at, "prime-rl with length penalty")
    assert "differs from this scheme (see Diagnostics)" in caption_text(at)  # the penalty is off
    at.sidebar.toggle(key=K.LP_ON).set_value(True).run()
    no_errors(at, "length penalty on")
    assert [n.value for n in at.sidebar.number_input if n.key in K.LP_WEIGHTS] == [0.25, 0.1, 0.1]
    assert at.session_state[cfg_key("length_penalty")] == (0.25, 0.1, 0.1)
    assert "lp:0.25/0.1/0.1" in at.query_params["scheme"]
    assert "matches this scheme" in caption_text(at)
    at.sidebar.number_input(key=K.LP_WEIGHTS[0]).set_value(0.5).run()
    assert at.session_state[cfg_key("length_penalty")] == (0.5, 0.1, 0.1)
    assert "differs from this scheme (see Diagnostics)" in caption_text(at)
    at.sidebar.selectbox(key=cfg_key("estimator")).set_value("rloo").run()  # GRPO only: dropped, no error
    no_errors(at, "rloo")
    assert at.session_state[cfg_key("length_penalty")] is None
    assert not [t for t in at.sidebar.toggle if t.key == K.LP_ON]


def test_a_prime_rl_token_export_opens_under_prime_rl_dppo(tmp_path):
    """A token export (no rewards, no groups) opens under prime-rl's default loss against the inference log-probs,
    on prime-rl's own advantages (estimator ``logged``): the gradient weights are the ones prime-rl trained with;
    under a recomputing estimator the token view says why its advantages are 0; the policy views draw."""
    from writers.prime_rl_tokens import Sample, write_run

    prompt = "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    root = write_run(tmp_path, {2: {0: [[Sample("math", [(prompt, False), ("4<|im_end|>", True)], 0.5, 1)]]}})
    at = new_app({"page": "tokens"}, load=load_run(root / "step_2" / "rank_0.jsonl"))
    at.run()
    at.switch_page(PAGES["tokens"]).run()
    no_errors(at, "prime-rl token export")
    ss = at.session_state
    assert (ss[cfg_key("profile")], ss[cfg_key("policy_loss")], ss[cfg_key("policy_ratio_base")]) == (
        "prime-rl",
        "dppo_tv",
        "rollout",
    )
    assert ss[cfg_key("estimator")] == "logged"
    assert "This run opens with profile `prime-rl`, estimator `logged`" in caption_text(at)
    assert "mean over action tokens +0.5 (CreditLens +0.5)" in caption_text(at)
    assert "estimator `logged` takes them as the advantages, so the gradient weights are the trainer's" in caption_text(
        at
    )
    shown = ss[K.CONTEXT]  # the scheme the sidebar built, on the run the page shows
    res = compute_credit(shown.handle.run.to_batch(), shown.config, device="cpu")
    action = res.loss_mask.bool()
    assert action.any() and (res.advantages[action] == 0.5).all()
    assert (res.grad_weight[action] > 0).all()  # A = +0.5 on every token: prime-rl's gradient, not 0
    assert "Logged (the trainer's own advantages)" in at.sidebar.selectbox(key=cfg_key("estimator")).options
    at.sidebar.selectbox(key=cfg_key("estimator")).set_value("grpo").run()
    no_errors(at, "grpo")
    assert "the run holds no rewards, so a recomputed advantage is 0" in caption_text(at)
    at.sidebar.selectbox(key=cfg_key("estimator")).set_value("logged").run()
    # rLLM's per-step mode would recompute advantages from step rewards: the sidebar sets it back and says why
    at.sidebar.segmented_control(key=cfg_key("stepwise_mode")).set_value("per_step").run()
    no_errors(at, "logged per_step")
    assert ss[cfg_key("stepwise_mode")] == "trajectory"
    assert [w.value for w in at.sidebar.warning][0].startswith("rLLM mode reset to its default")
    assert "train/inference mismatch" in at.selectbox(key=K.QUANTITY).options
    assert "entropy" in at.selectbox(key=K.QUANTITY).options
    worst = at.dataframe[0].value  # the run's most mismatched tokens: π_trainer / π_rollout is prime-rl's ratio
    exported = json.loads((root / "step_2" / "rank_0.jsonl").read_text())
    ratios = {round(r, 5) for r, m in zip(exported["importance_ratio"], exported["loss_mask"], strict=True) if m}
    assert len(worst) and {round(float(r), 5) for r in worst["π_trainer / π_rollout"]} <= ratios
    for page in ("analytics", "overview"):
        at.switch_page(PAGES[page]).run()
        no_errors(at, page)
