"""Adapter ``verl_rollout``: verl's rollout dump (``trainer.rollout_data_dir/<step>.jsonl``).

Each line is ``{"input", "output", "gts", "score", "step", **reward_extra_infos}``, written by
``RayPPOTrainer._log_rollout_data`` / ``_write_generations`` (``verl/trainer/ppo/ray_trainer.py``) or by the v1
trainer (``verl/trainer/ppo/v1/trainer_base.py``, which adds ``uid``). verl decodes the padded prompt and response
tensors with ``skip_special_tokens=True``, so the dump is lossy, and this reader undoes what can be undone:

* Multi-turn agent-loop rows (``verl/experimental/agent_loop/tool_agent_loop.py``): a tool result decodes to
  ``user\\n<tool_response>…</tool_response>\\nassistant\\n`` and an interaction's reply to ``user\\n…\\nassistant\\n``
  (with a leading ``\\n`` at verl 1dda039, whose Qwen continuous-token merge inserts the newline after
  ``<|im_end|>``). Each such block becomes a ``tool`` / ``user`` segment with its ChatML tokens put back
  (``<|im_start|>user…<|im_end|>\\n<|im_start|>assistant\\n``), and the model turn before it gets back the
  ``<|im_end|>`` it generated (the loop only answers a turn that ended with its stop token). These are
  certain and listed in ``metadata.restored``.
* The last turn: ``<|im_end|>`` unless the row ran into the response length limit, which the dump does not say.
  With ``response_length`` (verl ``data.max_response_length``; ``load_run(response_length=...)``, CLI
  ``--response-length``) a row whose re-tokenized response reaches the limit is flagged ``truncated`` and gets
  no ``<|im_end|>``; without it the token is assumed (``metadata.synthesized: ["end_of_turn_token"]``) and one
  problem per file says so. Search-R1-style ``<information>`` blocks are plain text in the response (no
  template), so only the final ``<|im_end|>`` is added there.
* Rewards: ``score`` (``token_level_scores.sum(-1)``, what verl trains on) is the global reward ``score``; every
  other numeric column (``acc``, …) goes to ``metadata.reward_components`` and every other field to
  ``metadata.extra``: shown, never summed into the reward.
* Steps: every line's ``step`` is the trainer's ``global_steps`` (``Trajectory.step``, checked with ``as_step``), and
  the file is named after it: ``_write_generations`` (``verl/trainer/ppo/ray_trainer.py`` at verl-project/verl
  ``1dda039``, and ``verl/trainer/ppo/v1/trainer_base.py``) writes ``os.path.join(dump_path,
  f"{global_steps}.jsonl")`` with ``"step": [global_steps] * n``; volcengine/verl ``b178a3c``'s
  ``_dump_generations`` the same with ``self.global_steps``. ``STEP_FILE`` (``<N>.jsonl``) gives the step to a line
  without one; verl writes no step folder (``rollout_data_dir`` / ``validation_data_dir`` hold the files directly).
  In a file not named ``<N>.jsonl``, a line without a step among lines with one is a problem at that line and
  skipped (no step can be given to it; ``load_run`` would skip it too, naming only the file).
  A validation dump (``validation_data_dir``) is named the same way: step 0 before training
  (``val_before_train``), else the step it followed.
* Groups: the legacy dump has no uid, so rollouts of the same input text form a group (two dataset rows with
  the same prompt text would share one). The v1 dump's ``uid`` is the TransferQueue key
  ``{uid}_{session}_{index}``, unique per row: the prompt uid is recovered from it (reported), and the rows of
  one session (several agent-loop outputs) are joined into one trajectory, as v1 trains GRPO on a session's
  final row and broadcasts its advantage to the others. A ``uid`` of any other form is the group as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.io.adapters.common import require_mapping
from engine.io.data.model import Segment, Trajectory
from engine.io.reading.coerce import as_component, as_float, as_str, is_number
from engine.io.reading.context import LoadContext
from engine.io.reading.fields import as_id, as_step, mark_synthesized, prompt_group_id
from engine.io.reading.problems import RecordError
from engine.io.reading.records import iter_json_records, record_id
from engine.io.text.tags import split_tagged

NAME = "verl_rollout"
IM_START, END_OF_TURN = "<|im_start|>", "<|im_end|>"
CORE = frozenset({"input", "output", "gts", "step", "score", "uid", "id"})
# A ChatML turn of the environment as skip_special_tokens leaves it: [\n]user\n<body>\nassistant\n (chat_blocks).
USER, REPLY = "user\n", "\nassistant\n"
V1_KEY = re.compile(r"\A(?P<uid>.+)_(?P<session>\d+)_(?P<index>\d+)\Z", re.DOTALL)
STEP_FILE = re.compile(r"(\d+)\.jsonl")  # f"{global_steps}.jsonl" (_write_generations / _dump_generations)
STEPLESS = (
    "no step, while other lines of this file have one and its name (not <step>.jsonl) gives none: verl writes the "
    "step on every line (_write_generations), so this line's step is lost; record skipped"
)


def sniff(rec: object) -> bool:
    return isinstance(rec, Mapping) and {"input", "output", "score"} <= set(rec)


@dataclass
class _Row:
    """One parsed line: ``open_end`` says the last segment is a model turn whose end token is still undecided."""

    line: int | None
    prefix: str
    id: str
    key: str | None
    prompt: str
    segments: list[Segment]
    score: float
    metadata: dict
    open_end: bool
    explicit_id: bool = False
    step: int | None = None


def chat_blocks(text: str) -> Iterator[tuple[int, int, str, str]]:
    """``(start, end, lead, body)`` of each environment turn ``[\\n]user\\n<body>\\nassistant\\n`` in ``text``, the
    spans ``re.finditer(r"(\\n?)user(\\n.*?)\\nassistant\\n", text, re.DOTALL)`` gives (``lead`` the optional
    newline, ``body`` from the newline after ``user`` to the one before ``assistant``).

    A forward scan: each search starts where the last block ended, and a ``user`` line with no ``assistant`` line
    after it ends the scan (no later one can have one either), so the scan is linear in ``len(text)``; the
    regular expression searched to the end of the text from every ``user``."""
    pos = 0
    while (user := text.find(USER, pos)) >= 0:
        reply = text.find(REPLY, user + len(USER))
        if reply < 0:
            return
        start = user - 1 if user > pos and text[user - 1] == "\n" else user
        yield start, reply + len(REPLY), text[start:user], text[user + len(USER) - 1 : reply]
        pos = reply + len(REPLY)


def split_output(output: str) -> tuple[list[Segment], bool]:
    """Segments of a decoded response with the chat template's special tokens put back, and whether the last
    one is a model turn (whose final ``<|im_end|>`` is still to be decided). Model turns that the environment
    answered get their ``<|im_end|>`` here."""
    blocks = list(chat_blocks(output))
    if not blocks and "<information>" in output:
        segs = split_tagged(output)
        return segs, bool(segs) and segs[-1].role == "model"
    segs: list[Segment] = []
    pos = 0
    for start, end, lead, body in blocks:
        if start > pos:
            segs.append(Segment(role="model", text=output[pos:start] + END_OF_TURN))
        role = "tool" if body.lstrip("\n").startswith("<tool_response>") else "user"
        text = f"{lead}{IM_START}user{body}{END_OF_TURN}\n{IM_START}assistant\n"
        segs.append(Segment(role=role, text=text))
        pos = end
    if pos < len(output):
        segs.append(Segment(role="model", text=output[pos:]))
    return segs, bool(segs) and segs[-1].role == "model"


def _parse(rec: object, line: int | None, prefix: str, default_id: str) -> _Row:
    rec = require_mapping(rec)
    prompt = as_str(rec.get("input"), "input")
    output = as_str(rec.get("output"), "output")
    if not output.strip():
        raise RecordError("output", "empty output: the response has zero tokens")
    score = as_float(rec.get("score"), "score")
    step = as_step(rec["step"], "step") if rec.get("step") is not None else None
    metadata: dict = {}
    if rec.get("gts") is not None:
        metadata["ground_truth"] = rec["gts"]
    components = {k: as_component(v, k) for k, v in rec.items() if k not in CORE and is_number(v)}
    if components:
        metadata["reward_components"] = components
    extra = {k: v for k, v in rec.items() if k not in CORE and not is_number(v)}
    if extra:
        metadata["extra"] = extra
    segs, open_end = split_output(output)
    if any(s.role != "model" for s in segs) and next(chat_blocks(output), None):
        metadata["restored"] = ["chat_template_tokens"]
    key = as_id(rec["uid"], "uid") if rec.get("uid") is not None else None
    traj_id = as_id(rec["id"], "id") if rec.get("id") is not None else default_id
    return _Row(line, prefix, traj_id, key, prompt, segs, score, metadata, open_end, rec.get("id") is not None, step)


def _read_rows(path: Path, ctx: LoadContext) -> list[_Row]:
    rows = []
    stem = Path(path).stem
    for line, prefix, rec in iter_json_records(str(path), ctx):
        default_id = record_id(stem, line, prefix)
        row = ctx.attempt(line, prefix, _parse, rec, line, prefix, default_id)
        if row is not None:
            rows.append(row)
    if ctx.path_step is None and any(r.step is not None for r in rows):
        for r in rows:
            if r.step is None:  # verl writes the step on every line: this one lost it, and nothing else says it
                ctx.problem(r.line, f"{r.prefix}step", STEPLESS)
        rows = [r for r in rows if r.step is not None]
    return rows


def _close_last_turns(rows: list[_Row], ctx: LoadContext) -> None:
    """Decide each row's final ``<|im_end|>``: by the response length limit when known, else assumed."""
    open_rows = [r for r in rows if r.open_end]
    if ctx.response_length is None:
        for r in open_rows:
            r.segments[-1].text += END_OF_TURN
            mark_synthesized(r.metadata, "end_of_turn_token")
        if open_rows:
            ctx.note(
                None,
                f"{len(open_rows):,} rows: the final {END_OF_TURN} was re-added on the assumption that each row ended "
                "with its stop token. verl's rollout dump drops special tokens, so a row cut at the response length "
                "limit looks the same; pass response_length=<data.max_response_length> (CLI --response-length; the "
                "dashboard's Response length limit) to flag those rows as truncated",
            )
        return
    import numpy as np

    from engine.io.text.tokenize import encode_many, get_tokenizer

    # Tokenize the open rows once, in one batch; the ids stay on the segments, so the loader does not encode again.
    tok = get_tokenizer(ctx.tokenizer)
    segs = [s for r in open_rows for s in r.segments]
    for seg, ids in zip(segs, encode_many(tok, [s.text for s in segs]), strict=True):
        seg.token_ids = ids
    end_id = np.asarray([tok.convert_tokens_to_ids(END_OF_TURN)], dtype=segs[0].token_ids.dtype) if segs else None
    for r in open_rows:
        if sum(s.num_tokens for s in r.segments) >= ctx.response_length:
            r.metadata["truncated"] = True
        else:
            last = r.segments[-1]
            last.text += END_OF_TURN
            last.token_ids = np.concatenate([last.token_ids, end_id])
            r.metadata.setdefault("restored", []).append("end_of_turn_token")
    for r in rows:
        r.metadata.setdefault("truncated", False)


def _trajectory(r: _Row, group: str, traj_id: str | None = None) -> Trajectory:
    return Trajectory(
        id=traj_id or r.id,
        group_id=group,
        prompt=r.prompt,
        segments=r.segments,
        global_rewards={"score": r.score},
        metadata=r.metadata,
        step=r.step,
    )


def _v1_sessions(rows: list[_Row], ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    """v1 dump: group by the prompt uid in ``{uid}_{session}_{index}``; join the rows of a session in index order."""
    sessions: dict[tuple[str, str], list[tuple[int, _Row]]] = {}
    for r in rows:
        m = V1_KEY.match(r.key)
        sessions.setdefault((m["uid"], m["session"]), []).append((int(m["index"]), r))
    sizes: dict[str, int] = {}
    joined = resets = 0
    for (uid, session), members in sessions.items():
        members.sort(key=lambda x: x[0])
        sizes[uid] = sizes.get(uid, 0) + 1
        parts = [r for _, r in members]
        if len(parts) > 1:
            joined += 1
        last = parts[-1]
        own_id = parts[0].id if parts[0].explicit_id else parts[0].key
        traj = _trajectory(parts[0], uid, traj_id=own_id if len(parts) == 1 else f"{uid}_{session}")
        traj.metadata = dict(last.metadata, v1_key=[r.key for r in parts] if len(parts) > 1 else parts[0].key)
        traj.global_rewards = {"score": last.score}
        for prev, nxt in zip(parts, parts[1:], strict=False):
            seen = prev.prompt + _plain(prev.segments)
            if nxt.prompt.startswith(seen):
                glue = nxt.prompt[len(seen) :]
            else:  # the agent loop started the next output from a new context: show all of it
                glue, resets = nxt.prompt, resets + 1
            if glue:
                traj.segments += _observation(glue)
            traj.segments.extend(nxt.segments)
        yield last.line, last.prefix, traj
    counts = sorted(set(sizes.values()))
    reason = (
        "uid values have verl v1's '{uid}_{session}_{index}' form (unique per row): grouped by the prompt uid "
        f"before the last two '_' fields, {len(sizes):,} groups of {'/'.join(map(str, counts))} sessions"
    )
    if joined:
        reason += (
            f"; {joined:,} sessions with several rows were joined into one trajectory each (v1 trains GRPO on a "
            "session's final row and broadcasts its advantage to the other rows)"
        )
    if resets:
        reason += (
            f"; {resets:,} of their rows did not continue the previous row's conversation, so the whole prompt of "
            "such a row is shown as a user segment"
        )
    ctx.note("uid", reason)


def _observation(glue: str) -> list[Segment]:
    """The conversation between two rows of a session (the next prompt's new text), template tokens put back."""
    segs, _ = split_output(glue)
    return [s if s.role != "model" else Segment(role="user", text=s.text.removesuffix(END_OF_TURN)) for s in segs]


def _plain(segments: list[Segment]) -> str:
    """The text verl decoded for these segments (special tokens dropped again)."""
    return "".join(s.text.replace(IM_START, "").replace(END_OF_TURN, "") for s in segments)


def read(path: Path, ctx: LoadContext) -> Iterator[tuple[int | None, str, Trajectory]]:
    rows = _read_rows(path, ctx)
    _close_last_turns(rows, ctx)
    if rows and all(r.key is not None and V1_KEY.match(r.key) for r in rows):
        yield from _v1_sessions(rows, ctx)
        return
    for r in rows:
        yield r.line, r.prefix, _trajectory(r, r.key if r.key is not None else prompt_group_id(r.prompt))
