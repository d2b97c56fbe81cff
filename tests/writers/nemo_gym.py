"""Mimic of NVIDIA NeMo Gym's rollout writer (``ng_collect_rollouts``) for four agent paths.

Source: github.com/NVIDIA-NeMo/Gym at commit 07d6b0d07b22fcf530b4c211dae2ee23100428e4 (read, not copied).

The file: ``nemo_gym/rollout_collection.py``, ``RolloutCollectionHelper.run_from_config``. For each finished
rollout it takes ``result`` (the agent's verify response: ``responses_create_params``, ``response``, ``reward``
and whatever else the agent / resources server returns), sets ``result["_ng_task_index"]``,
``result["_ng_rollout_index"]`` and ``result["agent_ref"]`` from the input row, and appends
``orjson.dumps(result) + b"\\n"`` to the output JSONL (compact JSON, one line each, in completion order; a
result with a failure class goes to the failures sidecar instead). Rollouts of one task share
``_ng_task_index`` (``_preprocess_rows_from_config``: one index per distinct input row, a GRPO group);
``_ng_rollout_index`` counts the repeats within the task.

What each writer below reproduces (``response`` is a ``NeMoGymResponse.model_dump()``, reduced here to the
fields a loader reads: ``id``, ``object``, ``model``, ``output``, ``tools``, ``status``):

* ``write_hermes``: ``responses_api_agents/hermes_agent/app.py``, ``_trajectory_to_output_items``. Each
  assistant chat message becomes a ``message`` item (one ``output_text`` part) carrying
  ``prompt_token_ids=item.get("prompt_token_ids") or []``, the same for ``generation_token_ids`` and
  ``generation_log_probs``: ``[]`` whenever the model server returned no ids (any non-vLLM endpoint). Its
  ``tool_calls`` follow as ``function_call`` items (``arguments`` the JSON string, ``call_id`` = ``id``), and a
  ``tool`` message becomes a ``function_call_output`` (``output`` the text). Lossy: no ids, no log-probs.
* ``write_aviary``: ``responses_api_agents/aviary_agent/app.py``, ``AviaryAgent.responses`` with
  ``return_transitions=True`` (the default). The agent state starts as the request input (``[]`` here) plus the
  environment's first observation (``/seed_session``); each step appends the model's output items and the
  ``/step`` observations (``function_call_output`` items, or nothing when the model answers without a tool call
  and ``done_if_no_tool_calls``), and ``agent_state_history`` keeps a copy of the whole state after every step.
  ``output`` = that list of lists; ``group_id = str(task_idx)``, ``contains_transitions=True``; the logged
  request keeps ``input: []`` and ``tools: []`` (the tools come from ``/seed_session`` and reach the model, whose
  echo is ``response.tools``). With ``collapse_old_env_states`` (``update_agent_state``) every earlier
  ``AviaryEnvStateEasyInputMessage`` (``is_env_state: true``) is replaced by the user message
  ``"[Previous environment state - hidden]"`` before the step's items are appended, so a later step rewrites
  items of the earlier one (and the first observation is already hidden in step 0).
* ``write_image_tools``: ``responses_api_agents/image_tools_agent/app.py``, ``_run_image_tools_loop`` and
  ``_tool_user_message``: the prompt is the dataset row's ``responses_create_params.input`` (a system message and
  a user message whose content parts are ``input_text`` and ``input_image``, the image a data URL, as
  ``resources_servers/circle_click/generate_data.py`` and the image_tools example rows write them); each model
  reply is an assistant ``message``; a tool result goes back as a *user* message whose content is
  ``[input_text, input_image]`` (the crop) inside ``response.output``.
* ``write_anyswe``: ``responses_api_agents/anyswe_agent/app.py``, ``AnySweAgent.run``: the verify response
  spreads ``SWEBenchMetrics`` at the top level (``resolved``, ``patch_exists``, ``model_patch``,
  ``agent_timed_out``, ``agent_error_kind``, ``eval_timed_out``, ``error_kind``, ``mask_sample``,
  ``agent_run_time``; ``None`` kept as null), ``reward = 1.0 if resolved else 0.0``, and ``instance_config``
  (the instance's ``AnySweInstanceConfig``, whose own ``mask_sample`` field defaults to False).
  ``mask_sample = _should_mask_sample(...)``: resolved after ``max_iteration``/``context_window``, an agent
  timeout, or an ``eval_timeout``/``sandbox`` error. ``nemo_gym/token_id_capture/delivery.py`` (``MASK_SAMPLE_KEY``)
  says what it means: "A consumer reads this top-level field to exclude a rollout from the loss."
  ``write_conversation_sim``: ``resources_servers/conversational_tool_use_simulation/app.py`` writes the same
  flag as ``instance_config: {"mask_sample": self._should_mask_sample(state)}`` and no top-level field.

Ground truth. None of these agents logged token ids, so the truth of the response is what a Qwen3 model
served by vLLM saw: the Qwen chat template's text (assistant content + ``<tool_call>`` blocks + ``<|im_end|>`` for
the policy; the ``\n<|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n`` glue on the observation side,
the same in Qwen2.5's and Qwen3's templates), written out by hand below and tokenized with the Qwen3 tokenizer.
Prompts follow CreditLens's documented Qwen2.5 ChatML rendering (its default system message when none is given).
Images: Qwen-VL's template puts ``<|vision_start|><|image_pad|><|vision_end|>`` where the part is (vLLM then
expands the pad per patch; the truth keeps one pad, all a text-only loader can know).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.io.text.tokenize import get_tokenizer

IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
HIDDEN = "[Previous environment state - hidden]"  # AviaryAgentConfig.old_env_state_message
_HIDDEN_MSG = {"role": "user", "content": HIDDEN, "type": "message"}
ASSISTANT = "\n<|im_start|>assistant\n"
DEFAULT_SYSTEM = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"


def _user_prompt(text: str) -> str:
    """A one-user-message prompt in the Qwen2.5 ChatML rendering (its default system message first)."""
    return f"{DEFAULT_SYSTEM}<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


@dataclass
class Truth:
    """What the loader must recover, one entry per rollout in file order."""

    path: Path
    ids: list[str] = field(default_factory=list)
    group_ids: list[int] = field(default_factory=list)  # factorized in first-seen order
    rewards: list[float] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)
    segments: list[list[tuple[str, str]]] = field(default_factory=list)  # (role, chat-template text)
    prompts: list[str] = field(default_factory=list)
    excluded: list[bool] = field(default_factory=list)  # mask_sample: out of the loss

    def token_ids(self, i: int) -> list[int]:
        tok = get_tokenizer("qwen3")
        return [t for _, text in self.segments[i] for t in tok.encode(text, add_special_tokens=False)]

    def action_mask(self, i: int) -> list[float]:
        tok = get_tokenizer("qwen3")
        flag = 0.0 if self.excluded[i] else 1.0
        return [
            flag if role == "model" else 0.0
            for role, text in self.segments[i]
            for _ in tok.encode(text, add_special_tokens=False)
        ]


def _dump(records: list[dict], path: Path) -> Path:
    """``orjson.dumps(result) + b"\\n"`` per rollout (compact separators, UTF-8)."""
    path.write_text("".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records))
    return path


def _collected(result: dict, task: int, rollout: int, agent: str) -> dict:
    """What ``run_from_config`` adds to each result before writing it."""
    return result | {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"type": "responses_api_agents", "name": agent},
    }


def _response(output: list, tools: list | None = None, rid: str = "resp_0") -> dict:
    return {"id": rid, "object": "response", "model": "Qwen/Qwen3-8B", "output": output, "tools": tools or []}


def _text_message(text: str, role: str = "assistant", **extra) -> dict:
    part = {"annotations": [], "text": text, "type": "output_text"}
    return {"id": "msg-0", "content": [part], "role": role, "status": "completed", "type": "message"} | extra


def _call(name: str, args: dict, call_id: str) -> dict:
    arguments = json.dumps(args)
    return {
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
        "type": "function_call",
        "id": call_id,
        "status": "completed",
    }


def _call_text(name: str, args: dict) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(args)}}}\n</tool_call>'


def _output(call_id: str, text: str) -> dict:
    return {"call_id": call_id, "output": text, "type": "function_call_output", "status": "completed"}


def _tool_response(text: str, last: bool = False) -> str:
    tail = "<|im_end|>" if last else "<|im_end|>" + ASSISTANT
    return f"\n<|im_start|>user\n<tool_response>\n{text}\n</tool_response>{tail}"


# --- hermes_agent: generation_token_ids: [] -----------------------------------------------------------------

NO_IDS = {"prompt_token_ids": [], "generation_token_ids": [], "generation_log_probs": [], "routed_experts": None}


def write_hermes(tmp: Path) -> Truth:
    """Two rollouts of one math task by the hermes agent against a model server that returns no token ids."""
    question = "What is 6 * 7? Use the python tool."
    params = {"input": [{"role": "user", "content": question, "type": "message"}], "tools": []}
    args = {"code": "print(6 * 7)"}
    solved = [
        _text_message("I'll compute it.", **NO_IDS),
        _call("python", args, "call_a"),
        _output("call_a", "42"),
        _text_message("The answer is 42.", **NO_IDS),
    ]
    guessed = [_text_message("The answer is 41.", **NO_IDS)]
    records = [
        _collected({"responses_create_params": params, "response": _response(solved), "reward": 1.0}, 0, 0, "hermes"),
        _collected({"responses_create_params": params, "response": _response(guessed), "reward": 0.0}, 0, 1, "hermes"),
    ]
    truth = Truth(_dump(records, tmp / "hermes_rollouts.jsonl"))
    prompt = _user_prompt(question)
    truth.segments = [
        [
            ("model", "I'll compute it.\n" + _call_text("python", args) + "<|im_end|>"),
            ("tool", _tool_response("42")),
            ("model", "The answer is 42.<|im_end|>"),
        ],
        [("model", "The answer is 41.<|im_end|>")],
    ]
    _fill(truth, "hermes_rollouts", [(0, 0, 1.0), (0, 1, 0.0)], [prompt, prompt])
    return truth


def _fill(truth: Truth, stem: str, rows: list[tuple[int, int, float]], prompts: list[str], excluded=None) -> None:
    tasks = list(dict.fromkeys(task for task, _, _ in rows))
    truth.ids = [f"{stem}/task-{task}/rollout-{rollout}" for task, rollout, _ in rows]
    truth.group_ids = [tasks.index(task) for task, _, _ in rows]
    truth.rewards = [reward for _, _, reward in rows]
    truth.truncated = [False] * len(rows)
    truth.prompts = prompts
    truth.excluded = excluded or [False] * len(rows)


# --- aviary_agent: per-step lists of items -------------------------------------------------------------------

CALCULATOR = {
    "name": "calculator",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]},
    "strict": True,
    "type": "function",
    "description": "Calculate a mathematical expression.",
}
SUBMIT = {
    "name": "submit_answer",
    "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    "strict": True,
    "type": "function",
    "description": "Submit the proposed answer and check if it is correct.",
}


def _aviary_rollout(seed_obs: list[dict], steps: list[tuple[list[dict], list[dict]]], collapse: bool) -> list:
    """``agent_state_history``: the state after each step (``update_agent_state``; ``collapse_old_env_states``)."""
    state, history = list(seed_obs), []
    for model_output, obs in steps:
        if collapse:
            state = [_HIDDEN_MSG if m.get("is_env_state") else m for m in state]
        state = state + model_output + obs
        history.append([dict(m) for m in state])
    return history


def write_aviary(tmp: Path) -> Truth:
    """Task 7 (gsm8k) x 2 rollouts, then task 8 with ``collapse_old_env_states`` (a rewritten step)."""
    question = "Weng earns $12 an hour. She babysat 50 minutes. How much did she earn?"
    seed = [{"content": question, "role": "user", "type": "message"}]
    a1, a2 = {"expr": "12 * 50 / 60"}, {"answer": "10"}
    solved = _aviary_rollout(
        seed,
        [
            ([_call("calculator", a1, "c1")], [_output("c1", "10.0")]),
            ([_call("submit_answer", a2, "c2")], [_output("c2", "True")]),
        ],
        collapse=False,
    )
    answered = _aviary_rollout(seed, [([_text_message("She earned $12.")], [])], collapse=False)
    board = {"content": "Board: 3 apples", "role": "user", "type": "message", "is_env_state": True}
    board2 = {"content": "Board: 2 apples", "role": "user", "type": "message", "is_env_state": True}
    a3 = {"expr": "3 - 1"}
    collapsed = _aviary_rollout(
        [board],
        [([_call("calculator", a3, "c3")], [_output("c3", "2"), board2]), ([_text_message("2 apples.")], [])],
        collapse=True,
    )
    params = {"input": [], "tools": []}  # what AviaryAgentRunRequest logs; the tools came from /seed_session

    def result(task: int, output: list, reward: float) -> dict:
        response = _response(output, [CALCULATOR, SUBMIT]) | {
            "env_id": f"env-{task}",
            "group_id": str(task),
            "contains_transitions": True,
        }
        return {"responses_create_params": params, "response": response, "reward": reward, "task_idx": task}

    records = [
        _collected(result(7, solved, 1.0), 7, 0, "gsm8k_aviary_agent"),
        _collected(result(7, answered, 0.0), 7, 1, "gsm8k_aviary_agent"),
        _collected(result(8, collapsed, 1.0), 8, 0, "gsm8k_aviary_agent"),
    ]
    truth = Truth(_dump(records, tmp / "aviary_rollouts.jsonl"))
    truth.segments = [
        [
            ("model", _call_text("calculator", a1) + "<|im_end|>"),
            ("tool", _tool_response("10.0")),
            ("model", _call_text("submit_answer", a2) + "<|im_end|>"),
            ("tool", _tool_response("True", last=True)),
        ],
        [("model", "She earned $12.<|im_end|>")],
        [  # as first written: the board the model saw after its call, then its answer
            ("model", _call_text("calculator", a3) + "<|im_end|>"),
            ("tool", _tool_response("2", last=True)),
            ("user", "\n<|im_start|>user\nBoard: 2 apples<|im_end|>" + ASSISTANT),
            ("model", "2 apples.<|im_end|>"),
        ],
    ]
    tools = "\n".join(json.dumps({"type": "function", "function": _fn(t)}) for t in (CALCULATOR, SUBMIT))
    system = (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
        f"signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\nFor each function call, "
        "return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    )
    gsm8k = f"{system}<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    hidden = f"{system}<|im_start|>user\n{HIDDEN}<|im_end|>\n<|im_start|>assistant\n"  # step 0 already hid it
    _fill(truth, "aviary_rollouts", [(7, 0, 1.0), (7, 1, 0.0), (8, 0, 1.0)], [gsm8k, gsm8k, hidden])
    return truth


def _fn(tool: dict) -> dict:
    return {k: tool[k] for k in ("name", "description", "parameters")}


# --- image_tools_agent: input_image parts ----------------------------------------------------------------------

PNG = (  # a 1x1 PNG as a data URL, the form the prepare/generate_data scripts write
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


def _image(detail: str = "auto") -> dict:
    return {"type": "input_image", "image_url": PNG, "detail": detail}


def write_image_tools(tmp: Path) -> Truth:
    """One image question x 2 rollouts: one zooms in (the crop comes back as a user image), one answers."""
    system, question = "Answer using the image.", "How many circles are there?"
    params = {
        "input": [
            {"role": "system", "type": "message", "content": system},
            {"role": "user", "type": "message", "content": [{"type": "input_text", "text": question}, _image()]},
        ]
    }
    zoom = "<tool_call>\nzoom(0, [0, 0, 1, 1])\n</tool_call>"
    crop_msg = {"role": "user", "type": "message", "content": [{"type": "input_text", "text": "Crop 1:"}, _image()]}
    zoomed = [_text_message(zoom), crop_msg, _text_message("Three.")]
    direct = [_text_message("Two.")]
    records = [
        _collected({"responses_create_params": params, "response": _response(zoomed), "reward": 1.0}, 0, 0, "image"),
        _collected({"responses_create_params": params, "response": _response(direct), "reward": 0.0}, 0, 1, "image"),
    ]
    truth = Truth(_dump(records, tmp / "image_tools_rollouts.jsonl"))
    truth.segments = [
        [
            ("model", zoom + "<|im_end|>"),
            ("user", f"\n<|im_start|>user\nCrop 1:{IMAGE}<|im_end|>" + ASSISTANT),
            ("model", "Three.<|im_end|>"),
        ],
        [("model", "Two.<|im_end|>")],
    ]
    prompt = (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{question}{IMAGE}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    _fill(truth, "image_tools_rollouts", [(0, 0, 1.0), (0, 1, 0.0)], [prompt, prompt])
    return truth


# --- anyswe_agent / conversational_tool_use_simulation: mask_sample ---------------------------------------------


def _should_mask_sample(resolved: bool, agent_error_kind, agent_timed_out: bool, error_kind) -> bool:
    """anyswe_agent's rule (re-stated)."""
    return bool(
        (resolved and agent_error_kind in ("max_iteration", "context_window"))
        or agent_timed_out
        or error_kind in ("eval_timeout", "sandbox")
    )


def write_anyswe(tmp: Path) -> Truth:
    """Task 0 x 3 rollouts: resolved; timed out (masked); resolved at max_iteration (masked)."""
    params = {"input": [{"role": "user", "content": "Fix the bug.", "type": "message"}], "tools": []}
    runs = [  # resolved, agent_error_kind, agent_timed_out, error_kind, answer
        (True, None, False, None, "Patched."),
        (False, None, True, None, "Still looking."),
        (True, "max_iteration", False, None, "Patched at the limit."),
    ]
    records = []
    for rollout, (resolved, agent_error_kind, timed_out, error_kind, answer) in enumerate(runs):
        metrics = {
            "resolved": resolved,
            "patch_exists": resolved,
            "model_patch": "diff --git a/x b/x" if resolved else None,
            "agent_timed_out": timed_out,
            "agent_error_kind": agent_error_kind,
            "eval_timed_out": False,
            "error_kind": error_kind,
            "mask_sample": _should_mask_sample(resolved, agent_error_kind, timed_out, error_kind),
            "agent_run_time": 12.5,
        }
        result = {
            "responses_create_params": params,
            "response": _response([_text_message(answer)]),
            "reward": 1.0 if resolved else 0.0,
            **metrics,
            "instance_config": {"container": "swe.sif", "mask_sample": False},
        }
        records.append(_collected(result, 0, rollout, "anyswe_agent"))
    truth = Truth(_dump(records, tmp / "anyswe_rollouts.jsonl"))
    truth.segments = [[("model", f"{answer}<|im_end|>")] for *_, answer in runs]
    prompt = _user_prompt("Fix the bug.")
    rows = [(0, k, 1.0 if r[0] else 0.0) for k, r in enumerate(runs)]
    _fill(truth, "anyswe_rollouts", rows, [prompt] * 3, excluded=[r["mask_sample"] for r in records])
    return truth


def write_conversation_sim(tmp: Path) -> Truth:
    """Two rollouts; the simulated user failed in the second, so its verifier masks it in instance_config."""
    params = {"input": [{"role": "user", "content": "Book a table.", "type": "message"}], "tools": []}
    records = [
        _collected(
            {
                "responses_create_params": params,
                "response": _response([_text_message(answer)]),
                "reward": reward,
                "instance_config": {"mask_sample": masked},
                "terminal_state": state,
                "num_user_messages": 1,
            },
            0,
            k,
            "conversational_tool_use_simulation",
        )
        for k, (answer, reward, masked, state) in enumerate(
            [("Booked.", 1.0, False, "success"), ("Sorry?", 0.0, True, "user_failure")]
        )
    ]
    truth = Truth(_dump(records, tmp / "conversation_rollouts.jsonl"))
    truth.segments = [[("model", "Booked.<|im_end|>")], [("model", "Sorry?<|im_end|>")]]
    prompt = _user_prompt("Book a table.")
    _fill(truth, "conversation_rollouts", [(0, 0, 1.0), (0, 1, 0.0)], [prompt] * 2, excluded=[False, True])
    return truth
