"""Mimic of ROLL's RLVR rollout dump, ``<rollout_dump_dir>/rollout_dump_data.step_<N>.jsonl``.

Source: alibaba/ROLL at commit 8eb27cc2dc34c4d1310b169d9b86d339004d811a.

* ``roll/pipeline/rlvr/rlvr_pipeline.py``, ``RLVRPipeline.run``: ``for global_step in range(max_steps)`` (line
  483, counted from 0), after generation and rewards (line 556)
  ``dump_rollout_to_specific_path(rollout_dump_dir, global_step, generate_output, tokenizer)``: every step's dump
  goes to the same folder.
* ``roll/pipeline/rlvr/utils.py``, ``dump_rollout_to_specific_path``: ``write_data`` = a deep copy of every
  ``non_tensor_batch`` column (numpy object arrays), then ``responses`` =
  ``tokenizer.batch_decode(batch["responses"], skip_special_tokens=True)`` (the right-padded response ids: EOS and
  padding vanish), ``scores`` = ``batch["scores"].tolist()``, ``sampling_params`` = ``[json.dumps(meta_info)] * n``,
  ``global_step`` = ``[global_step] * n`` (lines 55-66); written in a separate process by ``write_to_json_process``
  (lines 37-45): keeps only the ``COLUMMNS_CONFIG`` names, turns arrays into lists, and writes
  ``json.dumps(data, ensure_ascii=False)`` as the single line of
  ``f"rollout_dump_data.step_{global_step}.jsonl"`` with ``global_step = data.get('global_step', [0])[0]`` (mode
  ``"w"``): the step is both the ``global_step`` column and the file name.
* Rollouts of one prompt: the scheduler repeats each prompt's ``non_tensor_batch`` row ``num_return_sequences``
  times (``DataProto.repeat``), so they share ``id``/``messages``; ``scores`` comes from the reward worker
  (``MathRuleRewardWorker.compute_rewards``: 1 if the answer verifies else 0, float16).

Lossy in the dump: ids, the response mask and the EOS are not written; whether a response stopped or hit the
limit is not written. The ground truth returned is what the pipeline held: response ids (EOS included), the
response mask (1 on every generated token), scores, groups.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

COLUMNS = {
    "global_step",
    "id",
    "source",
    "difficulty",
    "prompt",
    "messages",
    "ground_truth",
    "case_type",
    "test_case_function",
    "test_cases",
    "tag",
    "domain",
    "responses",
    "scores",
    "sampling_params",
}


@dataclass
class Rollout:
    prompt_index: int
    response_ids: list[int]  # as generated, EOS included when the generation stopped
    score: float

    @property
    def response_mask(self) -> list[int]:
        return [1] * len(self.response_ids)


def dump_rollout(tok, path: Path, global_step: int, non_tensor_batch: dict, responses: torch.Tensor, scores, meta):
    """``dump_rollout_to_specific_path`` then ``write_to_json_process`` (run inline, not in a subprocess)."""
    write_data = {k: copy.deepcopy(v) for k, v in non_tensor_batch.items()}
    decoded = tok.batch_decode(responses, skip_special_tokens=True)
    n = len(decoded)
    write_data["responses"] = decoded
    write_data["scores"] = scores.tolist()
    write_data["sampling_params"] = [json.dumps(meta)] * n
    write_data["global_step"] = [global_step] * n
    path.mkdir(parents=True, exist_ok=True)
    data = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in write_data.items() if k in COLUMNS}
    step = data.get("global_step", [0])[0]
    out = path / f"rollout_dump_data.step_{step}.jsonl"
    with open(out, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, ensure_ascii=False) + "\n")
    return out


ANSWERS = [
    [("The answer is \\boxed{4}.", True, 1.0), ("It is \\boxed{5}.", True, 0.0)],
    [("3*3 = \\boxed{9}", True, 1.0), ("Let me compute 3*3 step by step, first", False, 0.0)],
]


def write_step(
    tok, path: Path, global_step: int = 4, answers: list[list[tuple[str, bool, float]]] | None = None
) -> tuple[Path, list[Rollout], list[dict]]:
    """Two math prompts x 2 rollouts (num_return_sequences = 2); by default one rollout hit the length limit (no
    EOS). ``answers[p]``: prompt p's rollouts as (text, stopped, score); the prompts are the same at every step (as
    from epoch to epoch)."""
    prompts = [
        {"id": "dm-17", "messages": json.dumps([{"role": "user", "content": "What is 2+2? Put it in \\boxed{}."}])},
        {"id": "dm-42", "messages": json.dumps([{"role": "user", "content": "What is 3*3? Put it in \\boxed{}."}])},
    ]
    answers = ANSWERS if answers is None else answers
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    truth, rows = [], []
    for p, (prompt, outs) in enumerate(zip(prompts, answers, strict=True)):
        for text, stopped, score in outs:
            ids = tok.encode(text, add_special_tokens=False) + ([eos] if stopped else [])
            truth.append(Rollout(p, ids, score))
            rows.append(prompt | {"tag": "deepmath_103k", "domain": "math_rule", "ground_truth": "x"})
    width = max(len(r.response_ids) for r in truth)
    responses = torch.tensor([r.response_ids + [pad] * (width - len(r.response_ids)) for r in truth])
    non_tensor_batch = {k: np.array([r[k] for r in rows], dtype=object) for k in rows[0]}
    non_tensor_batch["input_ids_len"] = np.array([5] * len(rows), dtype=object)  # not in COLUMMNS_CONFIG: dropped
    scores = torch.tensor([r.score for r in truth], dtype=torch.float16)
    meta = {"global_step": global_step, "is_offload_states": True}
    return dump_rollout(tok, path, global_step, non_tensor_batch, responses, scores, meta), truth, prompts
