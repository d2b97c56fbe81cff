"""Mimic of AReaL's rollout dump, ``<log_path>/rollout/<tail_version>/<task_id>.jsonl``.

Source: inclusionAI/AReaL at commit 4aef98d8d818af55b43621aaadba047ae10f4e77.

* ``areal/workflow/rlvr.py``, ``RLVRWorkflow.arun_episode``: one generation per episode; ``input_ids`` =
  ``input_tokens + output_tokens``, ``loss_mask`` = ``[0] * input_len + [1] * output_len`` (int32),
  ``versions`` = ``[-1] * input_len + output_versions``, ``attention_mask`` all ones, ``rewards`` = the scalar
  reward; every tensor gets a batch dimension of 1.
* ``areal/infra/remote_inf_engine.py``, ``GroupedRolloutWorkflow.arun_episode``: ``group_size`` episodes of one
  data item, concatenated by ``areal/utils/data.py``, ``concat_padded_tensors`` (right-padded with 0; the
  attention mask padded with 0).
* ``areal/infra/workflow_executor.py``, ``WorkflowExecutor._dump_trajectory``: directory ``rollout/`` (or
  ``eval-rollout/``) ``/<max(versions)>/``, file ``<task_id>.jsonl`` opened for append; per row ``i``:
  ``seqlen = attention_mask[i].sum()`` (rows of 0 skipped), ``mask = loss_mask[i, :seqlen]`` (rows whose last
  mask value is not 1 skipped), ``prompt_end = seqlen - sum(mask)``, ``prompt``/``completion`` =
  ``tokenizer.decode(ids[:prompt_end] / ids[prompt_end:], skip_special_tokens=False)``; the line is
  ``json.dumps({"task_id", "sample_idx": i, "seqlen", "prompt_len": prompt_end, "head_version": min(versions),
  "tail_version": max(versions), "reward": rewards[i].item(), "prompt", "completion"})``. ``versions`` is the
  whole padded [B, T] tensor flattened, so ``head_version`` is -1 (prompt tokens) and padding adds 0.

* ``areal/trainer/rl_trainer.py``, ``RLTrainer.train``: after ``global_step``'s update, ``rollout.set_version(
  global_step + 1)``; ``areal/infra/remote_inf_engine.py`` stamps each generated token with ``get_version()``. So the
  version folder of a synchronous run (``max_head_offpolicyness`` 0) is the step that trains the samples.

Lossy in the dump: ids, the loss mask, log-probs and the stop reason are not written. The ground truth returned is
what the workflow held: completion ids, loss mask, reward, group (task), whether the generation hit the limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass
class Sample:
    task_id: int
    sample_idx: int
    prompt_ids: list[int]
    output_ids: list[int]
    reward: float
    truncated: bool  # the generation hit max_new_tokens (no EOS)

    @property
    def loss_mask(self) -> list[int]:
        return [1] * len(self.output_ids)


def episode(tok, question: str, answer: str, reward: float, version: int) -> dict[str, torch.Tensor]:
    """``RLVRWorkflow.arun_episode``: a stopped answer ends with ``<|im_end|>`` (the EOS the engine returns)."""
    input_ids = tok.encode(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    output_ids = tok.encode(answer, add_special_tokens=False)
    seq = input_ids + output_ids
    res = {
        "input_ids": torch.tensor(seq, dtype=torch.int32),
        "loss_mask": torch.tensor([0] * len(input_ids) + [1] * len(output_ids), dtype=torch.int32),
        "versions": torch.tensor([-1] * len(input_ids) + [version] * len(output_ids), dtype=torch.int32),
        "attention_mask": torch.ones(len(seq), dtype=torch.bool),
        "rewards": torch.tensor(reward, dtype=torch.float32),
    }
    return {k: v.unsqueeze(0) for k, v in res.items()}


def concat_padded(episodes: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """``concat_padded_tensors``: right-pad every [1, T] tensor with 0 to the longest, concatenate on dim 0."""
    out = {}
    for key in episodes[0]:
        values = [e[key] for e in episodes]
        if values[0].dim() < 2:
            out[key] = torch.cat(values)
            continue
        width = max(v.shape[1] for v in values)
        out[key] = torch.cat([torch.nn.functional.pad(v, (0, width - v.shape[1]), value=0) for v in values])
    return out


def dump_trajectory(tok, root: Path, traj: dict[str, torch.Tensor], task_id: int) -> Path:
    """``WorkflowExecutor._dump_trajectory`` (``rollout/``, not eval)."""
    versions = traj["versions"].flatten().tolist()
    version_dir = root / "rollout" / str(max(versions))
    version_dir.mkdir(parents=True, exist_ok=True)
    path = version_dir / f"{task_id}.jsonl"
    with open(path, "a") as f:
        for i in range(traj["input_ids"].shape[0]):
            seqlen = traj["attention_mask"][i].sum().item()
            if seqlen == 0:
                continue
            ids = traj["input_ids"][i, :seqlen].tolist()
            mask = traj["loss_mask"][i, :seqlen].tolist()
            if mask[-1] != 1:
                continue
            prompt_end = seqlen - sum(mask)
            record = {
                "task_id": task_id,
                "sample_idx": i,
                "seqlen": seqlen,
                "prompt_len": prompt_end,
                "head_version": min(versions),
                "tail_version": max(versions),
                "reward": traj["rewards"][i].item(),
                "prompt": tok.decode(ids[:prompt_end], skip_special_tokens=False),
                "completion": tok.decode(ids[prompt_end:], skip_special_tokens=False),
            }
            f.write(json.dumps(record) + "\n")
    return path


def write_rollouts(
    tok, root: Path, version: int = 3, first_task_id: int = 7, rewards: tuple[float, float] = (1.0, 0.0)
) -> tuple[Path, list[Sample]]:
    """Two tasks of a group of 2 at policy version ``version`` (the trainer's step in synchronous AReaL: the engine's
    version during ``global_step`` s is s); task ids count on from ``first_task_id`` (``WorkflowExecutor``'s task
    counter runs over the whole run, so the same prompts at another step have other ids); the first task's two
    samples score ``rewards``; the second task has a truncated sample. Returns the version dir."""
    t1, t2 = first_task_id, first_task_id + 1
    tasks = {
        t1: (
            "What is 2+2?",
            [("<answer>4</answer><|im_end|>", rewards[0]), ("<answer>5</answer><|im_end|>", rewards[1])],
        ),
        t2: ("Name a prime.", [("<answer>7</answer><|im_end|>", 1.0), ("Let me think about primes: 2, 3", 0.0)]),
    }
    truth = []
    for task_id, (question, answers) in tasks.items():
        episodes = [episode(tok, question, a, r, version=version) for a, r in answers]
        dump_trajectory(tok, root, concat_padded(episodes), task_id)
        for i, (e, (a, r)) in enumerate(zip(episodes, answers, strict=True)):
            n_prompt = int((e["loss_mask"][0] == 0).sum())
            ids = e["input_ids"][0].tolist()
            truth.append(Sample(task_id, i, ids[:n_prompt], ids[n_prompt:], r, not a.endswith("<|im_end|>")))
    return root / "rollout" / str(version), truth
