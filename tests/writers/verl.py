"""verl's rollout writers, re-stated: multi-turn agent-loop rows and the two JSONL dumps of them.

References (verl-project/verl at ``1dda039b9c6311889a9c9a26040677e1254814f9``; the older layout at volcengine/verl
``b178a3cd56f58b2d502255daba591e92833930a7``):

* Response tokens of a row, ``verl/experimental/agent_loop/tool_agent_loop.py``:
  - ``_handle_generating_state``: the policy's ids, ending in the stop token ``<|im_end|>`` (Qwen's hermes tool
    parser adds no stop ids), are appended with mask 1; ``len(response_mask) >= response_length`` ends the loop.
  - ``_handle_processing_tools_state``: the tool messages are rendered with the chat template and appended with
    mask 0, unless the response already reached ``response_length`` (then the loop ends and no tool block is
    added). At ``1dda039`` this goes through ``ContinuousTokenBuilder.merge_non_assistant_tokens``
    (``verl/utils/tokenizer/continuous_token.py``): the tool group's delta
    ``<|im_start|>user\\n<tool_response>\\n…\\n</tool_response><|im_end|>\\n`` plus the generation prompt
    ``<|im_start|>assistant\\n``; ``QwenContinuousTokenBuilder._merge_non_assistant_token_ids`` first inserts the
    ``\\n`` that the template writes after ``<|im_end|>`` (mask 0). At ``b178a3c`` the block is
    ``apply_chat_template(tool messages, add_generation_prompt=True)`` minus the system prompt: the same tokens
    without the inserted ``\\n``; ``_handle_interacting_state`` appends an interaction's user message the same way.
  - ``run``: ``response_ids[: self.response_length]``, ``response_mask[: self.response_length]`` (a cut row).
* ``RayPPOTrainer._log_rollout_data`` + ``_write_generations`` (``verl/trainer/ppo/ray_trainer.py``): one
  ``{global_steps}.jsonl`` per step (``_write_generations``, lines 454-477 at ``1dda039``: ``filename =
  os.path.join(dump_path, f"{global_steps}.jsonl")``, ``"step": [global_steps] * n``, with ``global_steps =
  self.global_steps`` taken by ``_dump_generations`` when it is called; ``_dump_generations`` lines 396-422 at
  ``b178a3c``, the same with ``self.global_steps``). ``fit`` counts steps from 1 (``self.global_steps += 1`` before
  the loop) and dumps step N's rollouts before it increments; ``_validate`` dumps to ``validation_data_dir`` under
  the same name (step 0 for ``val_before_train``); ``input``/``output`` are
  ``tokenizer.batch_decode(prompts|responses, skip_special_tokens=True)`` of the padded tensors (so every
  ``<|im_start|>``/``<|im_end|>`` and the padding vanish), ``score`` = ``token_level_scores.sum(-1)``, ``gts`` =
  ``reward_model.ground_truth``, ``step``, then every ``reward_extra_infos_dict`` entry of length n (``request_id``
  from the batch if present); one ``json.dumps(entry, ensure_ascii=False)`` line per row, in batch order (no uid).
* The v1 trainer, ``verl/trainer/ppo/v1/trainer_base.py::_log_rollout_data``: the same line format, ``score`` =
  ``rm_scores.sum(dim=1)``, rows sorted by the TransferQueue key ``{uid}_{session_id}_{index}``
  (``verl/trainer/ppo/v1/agent_loop_tq.py::_agent_loop_postprocess``: session = rollout index in ``[0, n)``,
  index = the agent loop's output number), and the key written as ``uid``; its ``_write_generations`` (lines
  1137-1170 at ``1dda039``) names the file ``{global_steps}.jsonl`` and writes ``step`` as the legacy trainer does.

Qwen2.5's chat template renders tool results as ``<|im_start|>user`` + ``\\n<tool_response>\\n{content}
\\n</tool_response>`` per result + ``<|im_end|>\\n`` and a user message as ``<|im_start|>user\\n{content}
<|im_end|>\\n``; those strings are written out below rather than rendered by CreditLens's own ChatML code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

IM_END = "<|im_end|>"
PAD_ID = 151643  # <|endoftext|>, Qwen2.5's pad token


@dataclass
class Turn:
    """One assistant generation and what the environment answered: ``tools`` (tool results) or ``user``
    (an interaction's reply), or nothing for the last turn."""

    text: str
    tools: list[str] = field(default_factory=list)
    user: str | None = None
    stopped: bool = True  # the policy emitted <|im_end|>


@dataclass
class Row:
    """What the writer sees of one row and what a loader must recover from its dump."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    score: float
    truncated: bool
    extras: dict = field(default_factory=dict)


def tool_block(tools: list[str]) -> str:
    """The tool group's template text (Qwen2.5) followed by the generation prompt."""
    body = "".join(f"\n<tool_response>\n{t}\n</tool_response>" for t in tools)
    return f"<|im_start|>user{body}<|im_end|>\n<|im_start|>assistant\n"


def user_block(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def agent_loop_row(tok, prompt: str, turns: list[Turn], response_length: int, layout: str = "head", score=0.0):
    """Token ids and mask of one agent-loop row, as ``ToolAgentLoop.run`` builds them (``layout`` = "head" for
    1dda039's continuous-token merge, "legacy" for b178a3c's apply_chat_template minus the system prompt)."""
    enc = lambda s: tok.encode(s, add_special_tokens=False)
    prompt_ids = enc(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
    ids: list[int] = []
    mask: list[int] = []
    for turn in turns:
        gen = enc(turn.text + (IM_END if turn.stopped else ""))
        ids += gen
        mask += [1] * len(gen)
        if len(mask) >= response_length:
            break
        if not (turn.tools or turn.user is not None):
            break
        glue = enc("\n") if layout == "head" and ids[-1] == enc(IM_END)[0] else []
        block = enc(tool_block(turn.tools) if turn.tools else user_block(turn.user))
        if len(mask) + len(glue) + len(block) >= response_length:  # the loop ends; the block is never added
            break
        ids += glue + block
        mask += [0] * (len(glue) + len(block))
    truncated = len(ids) > response_length or (len(ids) == response_length and not turns[-1].stopped)
    return Row(prompt_ids, ids[:response_length], mask[:response_length], float(score), truncated)


def _padded(rows: list[list[int]], left: bool) -> list[list[int]]:
    width = max(len(r) for r in rows)
    return [([PAD_ID] * (width - len(r)) + r) if left else (r + [PAD_ID] * (width - len(r))) for r in rows]


def _decode(tok, rows: list[list[int]]) -> list[str]:
    return tok.batch_decode(rows, skip_special_tokens=True)


def write_ray_trainer_dump(tok, rows: list[Row], dump_dir: Path, step: int, gts=None, extras=None) -> Path:
    """``RayPPOTrainer._log_rollout_data`` -> ``_write_generations``: ``{dump_dir}/{step}.jsonl``."""
    n = len(rows)
    base = {
        "input": _decode(tok, _padded([r.prompt_ids for r in rows], left=True)),
        "output": _decode(tok, _padded([r.response_ids for r in rows], left=False)),
        "gts": gts if gts is not None else [None] * n,
        "score": [r.score for r in rows],
        "step": [step] * n,
    }
    for key, values in (extras or {}).items():
        if len(values) == n:
            base[key] = values
    return _write(dump_dir, step, base, n)


def write_v1_trainer_dump(tok, keyed_rows: dict[str, Row], dump_dir: Path, step: int) -> Path:
    """``v1.trainer_base._log_rollout_data``: rows sorted by their ``{uid}_{session}_{index}`` key, key as ``uid``."""
    keys = list(keyed_rows)

    def sort_key(key: str):
        parts = key.rsplit("_", 2)
        return (parts[0], int(parts[1]), int(parts[2])) if len(parts) == 3 else (key, 0, 0)

    order = sorted(range(len(keys)), key=lambda i: sort_key(keys[i]))
    rows = [keyed_rows[keys[i]] for i in order]
    base = {
        "input": _decode(tok, _padded([r.prompt_ids for r in rows], left=True)),
        "output": _decode(tok, _padded([r.response_ids for r in rows], left=False)),
        "gts": [None] * len(rows),
        "score": [r.score for r in rows],
        "step": [step] * len(rows),
        "uid": [keys[i] for i in order],
    }
    return _write(dump_dir, step, base, len(rows))


def _write(dump_dir: Path, step: int, base: dict, n: int) -> Path:
    dump_dir.mkdir(parents=True, exist_ok=True)
    path = dump_dir / f"{step}.jsonl"
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({k: v[i] for k, v in base.items()}, ensure_ascii=False, default=str) + "\n")
    return path


# ------------------------------------------------------------------------------------------------ batch dumps
# The DataProto a step holds (verl 1dda039):
# * ``AgentLoopWorker._postprocess`` (``verl/experimental/agent_loop/agent_loop.py``): ``prompts`` [B, P] left-padded,
#   ``responses`` / ``response_mask`` [B, T] right-padded, ``attention_mask`` [B, P+T], ``input_ids``,
#   ``position_ids``, ``rollout_log_probs`` [B, T] (float32), ``rm_scores`` [B, T] (float32, the reward on the last
#   response token); ``non_tensor_batch["__num_turns__"]`` (int32).
# * Steps: none in the batch. ``fit`` sets ``gen_batch.meta_info["global_steps"]`` (line 1489 at 1dda039, 1382 at
#   b178a3c), but ``generate_sequences`` returns its own ``meta_info`` (``{"timing", **outputs[0].meta_info}``,
#   ``_postprocess``: ``metrics`` / ``reward_extra_keys``), so after ``batch.union(gen_batch_output)`` the training
#   batch's ``meta_info`` holds ``temperature`` (and ``global_token_num``, ``images_seqlens``), no step. The step is
#   the file name of docs/FORMAT.md's export, ``export_verl_batch(batch, f"creditlens/{self.global_steps}.pt")``
#   (``export_step`` below).
# * ``RayPPOTrainer.fit`` (``verl/trainer/ppo/ray_trainer.py``): ``uid`` = ``np.array([str(uuid4()) …],
#   dtype=object)`` repeated ``rollout.n`` times, reward extras added to ``non_tensor_batch`` as numpy arrays,
#   ``token_level_scores`` = the reward tensor, ``old_log_probs`` from the actor, ``token_level_rewards``,
#   ``advantages`` (``compute_advantage``; GRPO: ``compute_grpo_outcome_advantage`` in ``core_algos.py``:
#   per-uid mean and unbiased ``torch.std`` of the summed scores, singletons μ = 0, σ = 1,
#   ``(s − μ) / (σ + 1e-6)`` broadcast over ``response_mask``).


@dataclass
class DataProtoLike:
    batch: dict
    non_tensor_batch: dict
    meta_info: dict


def grpo_advantages(scores: list[float], uids: list[str], mask):
    import torch

    s = torch.tensor(scores, dtype=torch.float32)
    adv = torch.zeros_like(s)
    for uid in dict.fromkeys(uids):
        idx = torch.tensor([i for i, u in enumerate(uids) if u == uid])
        mean, std = (s[idx].mean(), s[idx].std()) if len(idx) > 1 else (torch.tensor(0.0), torch.tensor(1.0))
        adv[idx] = (s[idx] - mean) / (std + 1e-6)
    return adv.unsqueeze(-1) * mask


def agent_loop_batch(rows: list[Row], uids: list[str], prompt_length: int, response_length: int, extras=None):
    """The step's DataProto after ``compute_advantage`` (GRPO), as plain tensors and numpy arrays."""
    import numpy as np
    import torch

    B = len(rows)
    prompts = torch.full((B, prompt_length), PAD_ID, dtype=torch.int64)
    responses = torch.full((B, response_length), PAD_ID, dtype=torch.int64)
    response_mask = torch.zeros((B, response_length), dtype=torch.int64)
    attention_mask = torch.zeros((B, prompt_length + response_length), dtype=torch.int64)
    rm_scores = torch.zeros((B, response_length), dtype=torch.float32)
    rollout_log_probs = torch.zeros((B, response_length), dtype=torch.float32)
    for b, r in enumerate(rows):
        P, T = len(r.prompt_ids), len(r.response_ids)
        prompts[b, prompt_length - P :] = torch.tensor(r.prompt_ids)
        responses[b, :T] = torch.tensor(r.response_ids)
        response_mask[b, :T] = torch.tensor(r.response_mask)
        attention_mask[b, prompt_length - P : prompt_length + T] = 1
        rm_scores[b, T - 1] = r.score
        rollout_log_probs[b, :T] = -0.25 * torch.tensor(r.response_mask, dtype=torch.float32)
    batch = {
        "prompts": prompts,
        "responses": responses,
        "response_mask": response_mask,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(-1) - 1).clamp(min=0),
        "rollout_log_probs": rollout_log_probs,
        "rm_scores": rm_scores,
        "token_level_scores": rm_scores.clone(),
        "token_level_rewards": rm_scores.clone(),
        "old_log_probs": (rollout_log_probs - 0.01 * response_mask).to(torch.bfloat16),  # actor ran in bf16
        "advantages": grpo_advantages([r.score for r in rows], uids, response_mask),
    }
    non_tensor = {
        "uid": np.array(uids, dtype=object),
        "__num_turns__": np.array([3] * B, dtype=np.int32),
        "data_source": np.array(["calc"] * B, dtype=object),
        **{k: np.array(v) for k, v in (extras or {}).items()},
    }
    meta = {"temperature": 1.0, "global_token_num": attention_mask.sum(-1).tolist()}  # no step (see above)
    return DataProtoLike(batch, non_tensor, meta)


def _with_fake_module(name: str, cls_name: str, fn):
    """Run ``fn`` while ``name.cls_name`` exists, so pickle records that global exactly as the real class would."""
    import sys
    import types

    module = types.ModuleType(name)
    cls = type(cls_name, (), {"__module__": name})
    setattr(module, cls_name, cls)
    parents = name.split(".")
    added = [".".join(parents[: k + 1]) for k in range(len(parents)) if ".".join(parents[: k + 1]) not in sys.modules]
    for mod_name in added:
        sys.modules[mod_name] = module if mod_name == name else types.ModuleType(mod_name)
    try:
        return fn(cls)
    finally:
        for mod_name in added:
            sys.modules.pop(mod_name, None)


def save_to_disk(proto: DataProtoLike, path: Path) -> Path:
    """``DataProto.save_to_disk`` (``verl/protocol.py``): ``pickle.dump(self, f)``; ``__getstate__`` stores the
    TensorDict as ``torch.save`` bytes, plus ``non_tensor_batch`` and ``meta_info``."""
    import io
    import pickle

    import torch

    def write(cls):
        obj = cls()
        buffer = io.BytesIO()
        torch.save(proto.batch, buffer)
        obj.__dict__.update(state=(buffer.getvalue(), proto.non_tensor_batch, proto.meta_info))
        with open(path, "wb") as f:
            pickle.dump(obj, f)

    _with_fake_module("verl.protocol", "DataProto", write)
    return path


def torch_save_tensordict(proto: DataProtoLike, path: Path) -> Path:
    """``torch.save(batch.batch, path)``: a ``tensordict._td.TensorDict`` object in the pickle."""
    import torch

    def write(cls):
        td = cls()
        td.__dict__.update(_tensordict=dict(proto.batch), _batch_size=torch.Size([len(proto.batch["responses"])]))
        torch.save(td, path)

    _with_fake_module("tensordict._td", "TensorDict", write)
    return path


def savez_batch(proto: DataProtoLike, path: Path) -> Path:
    """``np.savez(path, **tensors_as_numpy, **non_tensor_batch)``: ``uid`` stays a numpy object array."""
    import numpy as np

    arrays = {k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in proto.batch.items()}
    np.savez(path, **arrays, **proto.non_tensor_batch)
    return path


def export_step(proto: DataProtoLike, dump_dir: Path, step: int) -> Path:
    """docs/FORMAT.md's "verl batches" recipe in ``RayPPOTrainer.fit`` after ``compute_advantage``:
    ``export_verl_batch(batch, f"creditlens/{self.global_steps}.pt")``."""
    from engine.io import export_verl_batch

    dump_dir.mkdir(parents=True, exist_ok=True)
    path = dump_dir / f"{step}.pt"
    export_verl_batch(proto, path)
    return path
