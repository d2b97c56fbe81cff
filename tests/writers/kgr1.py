"""KG-R1's two sample writers, re-stated: the evaluator's ``{dataset}_detailed_results.jsonl`` and the trainer's
generation dump ``{step}.jsonl``; both fed by a re-statement of KG-R1's generation loop.

Source: Jinyeop3110/KG-R1 at ``7538a53742ff5a4d389558759898d814c9ca13ae`` (2025-10-17).

Generation (``kg_r1/llm_agent/generation.py``, ``LLMGenerationManager``), mimicked by ``rollout``:

* ``_postprocess_responses``: each turn's generated ids are decoded with ``skip_special_tokens=True`` (the
  ``<|im_end|>`` goes), cut right after the first ``</answer>`` or ``</kg-query>`` (whichever comes first), and
  re-tokenized by ``_batch_tokenize`` with ``add_special_tokens=False``.
* ``execute_predictions``: the observation after a query is ``"\\n\\n<information>{result}</information>\\n\\n"``
  (tokenized alone, ``_process_next_obs``); after an answer it is ``""``.
* ``_compose_final_output``: ``input_ids = cat(prompts, responses)``; prompts are left-padded, responses
  right-padded with the pad token ``<|endoftext|>``.

Evaluator (``verl/trainer/ppo/ray_evaluator_kg.py``, ``RayKGEvaluator``), mimicked by ``write_eval_results``:

* ``_evaluate_batch``: one uuid per prompt, then ``repeat(n_rollout_eval, interleave=True)``: sample i of a batch
  is rollout ``i % n`` of prompt ``i // n``; ``inputs = decode(input_ids)`` (prompt AND response, since the union
  takes ``input_ids`` from the generation output), ``outputs = decode(responses)``, both
  ``skip_special_tokens=True``; ``scores = reward_results['reward_tensor'].tolist()`` only if the reward result
  has one, and ``reward_extra_infos = reward_results.get('extra_info', [])``.
* ``_save_batch_details``: one line per sample ``{"uid": f"{dataset}_batch{batch_idx:03d}_sample{i:03d}",
  "dataset", "batch_idx", "sample_idx", "prompt", "response", "score": scores[i] else 0.0, "metrics": numbers of
  extra_info[i] (never present: no reward manager returns 'extra_info'), "metadata": {"response_length",
  "prompt_length"}}``. With ``kg_format_multiturn`` (``verl/trainer/config/evaluation_k_beam.yaml``, used by
  ``main_eval``) the result is ``{"structured_rewards", "reward_extra_info"}``: every score is the ``0.0``
  fallback. A manager with a ``reward_tensor`` ([B, T], score on the last valid token) gives a list per sample.

``verl/trainer/main_eval.py`` then writes ``{dataset}_passatk_results.json`` (``json.dump(metrics, indent=2,
sort_keys=True)`` of ``_aggregate_metrics``: per k ``{exact_match,retrieval_quality,f1,precision,recall}_pass@{k}``
``/mean`` and ``/std``, plus ``f1/mean`` etc.) beside it, mimicked by ``write_passatk_results``.

Trainer dump (``verl/trainer/ppo/ray_trainer_kg.py``), mimicked by ``write_generation_dump``:

* ``_validate`` collects ``reward_extra_infos_dict["reward"]`` (= the scores, ``total_score`` per sample) and the
  reward manager's ``reward_extra_info``; ``_dump_generations`` (lines 959-981) writes
  ``os.path.join(dump_path, f"{self.global_steps}.jsonl")`` with ``input`` (prompt only, decoded without special
  tokens), ``output``, ``score``, ``"step": [self.global_steps] * n`` and every extra list of length n.
  ``validation_data_dir`` gets it from ``_validate`` (lines 1224-1231), ``rollout_data_dir`` from ``fit`` (lines
  2026-2037, the step's batch with its ``reward_extra_infos_dict``); ``fit`` starts at ``global_steps = 0``
  (validation before training) and counts training steps from 1 (lines 1653, 1672, 2075).
* The evaluator writes no step: ``_save_batch_details`` records have none and the file is named after the dataset.
* ``KGFormatMultiTurnRewardManager._compute_wandb_metrics`` (``verl/workers/reward_manager/kg_format_multiturn.py``):
  per sample ``exact_match`` / ``retrieval_quality`` (the ``_raw_`` values), ``exact_match_binary, f1, precision,
  recall`` (0 without answer metrics), ``turn_kg_query_validity`` and ``turn_format_score`` (means over turns),
  ``turn_is_answer_score`` (1 if any turn answered), ``num_turns``, ``total_score`` (mean turn reward + globals).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PAD = 151643  # <|endoftext|>, Qwen2.5's pad token
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


@dataclass
class Rollout:
    """One sample as the generation loop leaves it, and what the loader must recover."""

    question: str
    prompt_ids: list[int]
    segments: list[tuple[str, list[int]]]  # (model | tool, ids) in response order
    turn_components: list[dict]  # KG-R1's per-turn components (format_score, kg_query_validity, is_answer_score)

    @property
    def response_ids(self) -> list[int]:
        return [x for _, ids in self.segments for x in ids]

    @property
    def action_mask(self) -> list[int]:
        return [int(role == "model") for role, ids in self.segments for _ in ids]


def prompt_text(question: str) -> str:
    return (
        f"<|im_start|>system\n{QWEN_SYSTEM}<|im_end|>\n<|im_start|>user\n"
        f"Answer with <kg-query> calls and <answer>.\nQuestion: {question}<|im_end|>\n<|im_start|>assistant\n"
    )


def _clean_response(resp: str) -> str:
    """``_postprocess_responses.clean_response``: cut after the first closing action tag."""
    answer = resp.find("</answer>")
    query = resp.find("</kg-query>")
    if answer != -1 and (query == -1 or answer < query):
        return resp[: answer + len("</answer>")]
    if query != -1:
        return resp[: query + len("</kg-query>")]
    return resp


def rollout(tok, question: str, generations: list[str], results: list[str]) -> Rollout:
    """Run the loop on raw generations (what vLLM sampled, ``<|im_end|>`` included) and KG results."""
    segments, components = [], []
    for k, raw in enumerate(generations):
        raw_ids = tok(raw, add_special_tokens=False)["input_ids"]
        turn = _clean_response(tok.decode(raw_ids, skip_special_tokens=True))
        segments.append(("model", tok(turn, add_special_tokens=False)["input_ids"]))
        is_answer = "</answer>" in turn
        components.append(
            {"format_score": 1.0, "kg_query_validity": 0.0 if is_answer else 1.0, "is_answer_score": float(is_answer)}
        )
        if k < len(results):
            obs = f"\n\n<information>{results[k].strip()}</information>\n\n"
            segments.append(("tool", tok(obs, add_special_tokens=False)["input_ids"]))
    prompt_ids = tok(prompt_text(question), add_special_tokens=False)["input_ids"]
    return Rollout(question, prompt_ids, segments, components)


def _pad_batch(rows: list[list[int]], left: bool) -> list[list[int]]:
    width = max(len(r) for r in rows)
    return [[PAD] * (width - len(r)) + r if left else r + [PAD] * (width - len(r)) for r in rows]


# ------------------------------------------------------------------------------------------------ evaluator
def write_eval_results(
    tok, out_dir: Path, batches: list[list[Rollout]], dataset: str = "test", reward_tensor: list | None = None
) -> Path:
    """``_save_batch_details`` over ``batches`` (each already in interleaved order). ``reward_tensor``: per batch a
    list of per-sample rewards for a manager that returns one; None for ``kg_format_multiturn`` (0.0 fallback)."""
    path = Path(out_dir) / f"{dataset}_detailed_results.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for batch_idx, samples in enumerate(batches):
            prompts = _pad_batch([s.prompt_ids for s in samples], left=True)
            responses = _pad_batch([s.response_ids for s in samples], left=False)
            inputs = [tok.decode(p + r, skip_special_tokens=True) for p, r in zip(prompts, responses, strict=True)]
            outputs = [tok.decode(r, skip_special_tokens=True) for r in responses]
            scores = []
            if reward_tensor is not None:
                width = len(responses[0])
                for s, r in zip(samples, reward_tensor[batch_idx], strict=True):
                    row = [0.0] * width
                    row[len(s.response_ids) - 1] = r
                    scores.append(row)
            for i in range(max(len(inputs), len(outputs), len(scores))):
                prompt, response = inputs[i], outputs[i]
                record = {
                    "uid": f"{dataset}_batch{batch_idx:03d}_sample{i:03d}",
                    "dataset": dataset,
                    "batch_idx": batch_idx,
                    "sample_idx": i,
                    "prompt": prompt,
                    "response": response,
                    "score": scores[i] if i < len(scores) else 0.0,
                    "metrics": {},
                    "metadata": {"response_length": len(response), "prompt_length": len(prompt)},
                }
                json.dump(record, f, ensure_ascii=False)
                f.write("\n")
    return path


def write_passatk_results(out_dir: Path, em: list[float], k_values=(1, 2), dataset: str = "test") -> Path:
    """``main_eval``'s summary: metric means over samples (a stand-in computation, the real file's key layout)."""
    metrics = {}
    for k in k_values:
        for name in ("exact_match", "retrieval_quality", "f1", "precision", "recall"):
            metrics[f"{name}_pass@{k}/mean"] = sum(em) / len(em)
            metrics[f"{name}_pass@{k}/std"] = 0.0
    path = Path(out_dir) / f"{dataset}_passatk_results.json"
    path.write_text(json.dumps(metrics, indent=2, sort_keys=True))
    return path


# ------------------------------------------------------------------------------------------------ trainer dump
def _wandb_metrics(sample: Rollout, em: float, rq: float) -> tuple[float, dict]:
    """(total_score, ``_compute_wandb_metrics`` row) with the reward manager's default weights."""
    turns = [
        0.15 * c["format_score"] + 0.1 * c["kg_query_validity"] + 0.1 * c["is_answer_score"]
        for c in sample.turn_components
    ]
    total = sum(turns) / len(turns) + 0.3 * em + 0.4 * rq
    comps = sample.turn_components
    return total, {
        "exact_match": em,
        "retrieval_quality": rq,
        "exact_match_binary": 0.0,
        "f1": 0.0,
        "precision": 0.0,
        "recall": 0.0,
        "turn_kg_query_validity": sum(c["kg_query_validity"] for c in comps) / len(comps),
        "turn_format_score": sum(c["format_score"] for c in comps) / len(comps),
        "turn_is_answer_score": 1.0 if any(c["is_answer_score"] > 0 for c in comps) else 0.0,
        "num_turns": len(comps),
        "total_score": total,
    }


def write_generation_dump(
    tok, dump_dir: Path, samples: list[Rollout], outcomes: list[tuple[float, float]], step: int
) -> Path:
    """``_validate`` + ``_dump_generations``: ``outcomes`` are (exact match, retrieval quality) per sample."""
    Path(dump_dir).mkdir(parents=True, exist_ok=True)
    extras: dict[str, list] = {"reward": []}
    for sample, (em, rq) in zip(samples, outcomes, strict=True):
        total, row = _wandb_metrics(sample, em, rq)
        extras["reward"].append(total)
        for key, value in row.items():
            extras.setdefault(key, []).append(value)
    n = len(samples)
    base = {
        "input": [tok.decode(p, skip_special_tokens=True) for p in _pad_batch([s.prompt_ids for s in samples], True)],
        "output": [tok.decode(s.response_ids, skip_special_tokens=True) for s in samples],
        "score": list(extras["reward"]),
        "step": [step] * n,
    }
    base.update({k: v for k, v in extras.items() if len(v) == n})
    path = Path(dump_dir) / f"{step}.jsonl"
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({k: v[i] for k, v in base.items()}, ensure_ascii=False) + "\n")
    return path
