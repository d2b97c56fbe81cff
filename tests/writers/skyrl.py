"""Mimic of SkyRL's eval dump, ``{export_path}/dumped_evals/global_step_<N>_evals/<data_source>.jsonl``.

Source: NovaSky-AI/SkyRL at commit a9564572eb8e91076be43c1bd5e4615e3de17265.

* ``skyrl/train/utils/trainer_utils.py``, ``dump_per_dataset_eval_results``: decodes
  ``generator_output["prompt_token_ids"]`` and ``["response_ids"]`` with ``tokenizer.decode(ids)`` (special
  tokens kept); groups rows by ``env_extras["data_source"]`` (``None`` -> ``"unknown"``, ``/`` -> ``_``); writes one
  JSON line per rollout ``{"input_prompt", "output_response", "score": rewards[i], "stop_reason", "env_class",
  "env_extras", "data_source"}`` (``json.dumps(..., ensure_ascii=False)``) to ``<data_source>.jsonl``, then the
  eval metrics as one line to ``aggregated_results.jsonl``. Called from ``skyrl/train/evaluate.py``,
  ``evaluate``, into ``dumped_evals/global_step_<N>_evals``.
* ``skyrl/train/generators/utils.py``, ``prepare_generator_input``: each prompt is repeated
  ``eval_n_samples_per_prompt`` times with a deep copy of its ``env_extras``; the uid is not dumped.
* ``skyrl/train/generators/skyrl_gym_generator.py``, ``SkyRLGymGenerator.agent_loop`` with
  ``use_conversation_multi_turn`` and no custom chat template (token-in-token-out): each turn appends the
  generated ``output_ids`` (ending in the EOS ``<|im_end|>`` when the engine stopped) with loss mask 1, then
  ``obs_ids`` = the chat template of the observation messages after a fixed base conversation
  (``get_obs_ids_from_obs``: for Qwen ``\\n<|im_start|>user\\n...<|im_end|>`` plus ``\\n<|im_start|>assistant\\n``
  when not done) with loss mask 0; the response is cut after the last generated token (``response_end_idx``),
  so the final observation is dropped. ``_build_per_token_rewards`` puts each step reward on its turn's last
  generated token: ``rewards[i]`` is a list of one float per response token. A generation that hit
  ``max_tokens`` has ``stop_reason == "length"`` and no EOS.

Lossy in the dump (and so here): token ids and the loss mask are not written, only the decoded texts.
The ground truth returned is what the trainer had: response ids, loss mask, per-token rewards, groups (the
dataset row each rollout came from), truncation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM = "You are a helpful assistant."


@dataclass
class Rollout:
    """One rollout as the generator holds it (the ground truth for a loader)."""

    row: int  # dataset row (the group)
    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    rewards: list[float]  # one per response token
    stop_reason: str
    env_extras: dict = field(default_factory=dict)


def _chat_prompt(question: str) -> str:
    return f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def agent_loop(tok, row: int, question: str, turns: list[tuple[str, str | None, float]], stop_reason: str, extras):
    """``turns``: (generated text, observation text or None when the env is done, step reward) per turn.

    A generated text ending in ``<|im_end|>`` is a stopped generation; the last turn of a ``length`` rollout has
    none. The final observation is dropped from the response as ``agent_loop`` does.
    """
    enc = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    prompt_ids = enc(_chat_prompt(question))
    ids: list[int] = []
    mask: list[int] = []
    step_rewards: list[tuple[float, int]] = []
    for k, (output, obs, reward) in enumerate(turns):
        output_ids = enc(output)
        ids += output_ids
        mask += [1] * len(output_ids)
        step_rewards.append((reward, len(ids) - 1))  # response_end_idx of this turn
        done = k == len(turns) - 1
        if obs is not None and not done:
            obs_ids = enc(f"\n<|im_start|>user\n{obs}<|im_end|>\n<|im_start|>assistant\n")
            ids += obs_ids
            mask += [0] * len(obs_ids)
    token_rewards = [0.0] * len(ids)
    for reward, idx in step_rewards:
        token_rewards[idx] += reward
    return Rollout(row, prompt_ids, ids, mask, token_rewards, stop_reason, dict(extras))


def write_eval_dump(
    tok, export_path: Path, rollouts: list[Rollout], global_step: int = 5, metrics: dict | None = None
) -> Path:
    """``dump_per_dataset_eval_results`` into ``evaluate``'s ``export_path / "dumped_evals" /
    f"global_step_{global_step}_evals"``: one file per data source plus ``aggregated_results.jsonl`` (``metrics``)."""
    metrics = {"eval/all/avg_score": 0.5, "eval/all/pass_at_2": 1.0} if metrics is None else metrics
    out = export_path / "dumped_evals" / f"global_step_{global_step}_evals"
    out.mkdir(parents=True, exist_ok=True)
    by_source: dict[str, list[Rollout]] = {}
    for r in rollouts:
        source = r.env_extras.get("data_source") or "unknown"
        by_source.setdefault(source, []).append(r)
    for source, rows in by_source.items():
        with open(out / f"{source.replace('/', '_')}.jsonl", "w") as f:
            for r in rows:
                entry = {
                    "input_prompt": tok.decode(r.prompt_ids),
                    "output_response": tok.decode(r.response_ids),
                    "score": r.rewards,
                    "stop_reason": r.stop_reason,
                    "env_class": "search",
                    "env_extras": r.env_extras,
                    "data_source": source,
                }
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    with open(out / "aggregated_results.jsonl", "w") as f:
        f.write(json.dumps(metrics, ensure_ascii=False) + "\n")
    return out


def sample_rollouts(tok) -> list[Rollout]:
    """Two dataset rows x 2 samples: a two-turn search rollout, a one-turn answer, a truncated one, a step reward."""
    q1 = {"data_source": "searchR1_nq", "reward_spec": {"ground_truth": "Bob"}}
    q2 = {"data_source": "searchR1_nq", "reward_spec": {"ground_truth": "Paris"}}
    return [
        agent_loop(
            tok,
            0,
            "Who wrote it?",
            [
                ("<search> who wrote it </search><|im_end|>", "<information>Doc: Bob wrote it.</information>", 0.0),
                ("<answer> Bob </answer><|im_end|>", None, 1.0),
            ],
            "stop",
            q1,
        ),
        agent_loop(tok, 0, "Who wrote it?", [("<answer> Alice </answer><|im_end|>", None, 0.0)], "stop", q1),
        agent_loop(
            tok,
            1,
            "Capital of France?",
            [
                ("<search> capital of France </search><|im_end|>", "<information>Paris.</information>", 0.25),
                ("<answer> Par", None, 0.0),
            ],
            "length",
            q2,
        ),
        agent_loop(tok, 1, "Capital of France?", [("<answer> Paris </answer><|im_end|>", None, 1.0)], "stop", q2),
    ]
