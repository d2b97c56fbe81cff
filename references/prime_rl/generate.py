"""Golden data from prime-rl's orchestrator algorithms (the advantage half), called unmodified.

prime-rl is not on PyPI: this script loads its files from a source checkout at the pinned commit, verifies the
sha256 of every file it executes, and calls the algorithms as prime-rl's orchestrator does. Run it in the separate
environment made by `bash references/setup_env.sh prime_rl` (torch only; CreditLens never imports prime-rl):

    git clone https://github.com/PrimeIntellect-ai/prime-rl /tmp/prime-rl
    git -C /tmp/prime-rl checkout 559b44772e471d1538537b8805cc77f3824a5e64
    .venv-references-prime_rl/bin/python references/prime_rl/generate.py --prime-rl-src /tmp/prime-rl

Writes tests/golden/primerl_advantages.json. Running it again with the pinned versions reproduces the committed
file byte for byte (`--check` compares instead of writing). The submodules (deps/verifiers, ...) are not needed.

What runs: the algorithm classes of src/prime_rl/orchestrator/algo/ that turn rewards into advantages (grpo.py
GRPOAlgorithm with and without its linear length penalty, max_rl.py MaxRLAlgorithm, hierarchical_grpo.py
HierarchicalGRPOAlgorithm, rae.py RAEAlgorithm), through base.py's Algorithm.finalize_episode / finalize_group
hooks, which assign credit with routing.py's assign_advantages; routing.scalar_advantage and routing.is_trainable
read each trace back; three cases call assign_advantages directly. The call order restates the orchestrator's
TrainSink (src/prime_rl/orchestrator/train_sink.py): finalize_episode for every episode as it arrives
(process_episode), then finalize_group once the group is complete, only when iter_trainable_traces finds a
survivor (process_group). Not covered: echo (its score_group is GRPOAlgorithm's, inherited; it adds ce weights on
tool tokens), opd / opsd / sft (they assign no advantage).

prime-rl declares Python ~=3.12 and imports verifiers.v1, its config package and its transports; the executed
files run on Python 3.11 as they are. STUBS lists what is stubbed: the modules these files import only for type
annotations, the config objects (plain namespaces carrying exactly the fields the algorithms read), and the
verifiers Episode / Trace / MessageNode objects, stand-ins carrying the attributes the algorithms read with the
values recorded in each case's inputs.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_io  # noqa: E402  (references/golden_io.py: stdlib only)

OUT_FILE = "primerl_advantages.json"
TORCH_VERSION = "2.13.0+cpu"
PRIME_RL_REPO = "PrimeIntellect-ai/prime-rl"
PRIME_RL_COMMIT = "559b44772e471d1538537b8805cc77f3824a5e64"
PRIME_RL_COMMIT_DATE = "2026-08-21T22:39:59-07:00"
VERIFIERS_COMMIT = "a60a606ecc4d309247edf9ff92c3eabca362781f"  # deps/verifiers at PRIME_RL_COMMIT (not executed)

# Every file of the checkout this script executes, with its sha256 at PRIME_RL_COMMIT.
PINNED_FILES = {
    "src/prime_rl/orchestrator/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "src/prime_rl/orchestrator/algo/base.py": "65ed56bf38ed657e99f7508c9727ad0ad4995b0a8f4fefbebc12a0d24b727f48",
    "src/prime_rl/orchestrator/algo/routing.py": "982f3727cb3bdb59999ed2dcba74bedd25cab6e5d580b27b9c84509af7b84ec4",
    "src/prime_rl/orchestrator/algo/grpo.py": "7ef8ff7b7c640ae9e551354f8c9f82bc7510664efeef179ca7df812bf86d7c5f",
    "src/prime_rl/orchestrator/algo/max_rl.py": "d128d53f51ccfdeca0bd41b7aa1a1af4764f11c338f461c6fe06f258ec751a87",
    "src/prime_rl/orchestrator/algo/hierarchical_grpo.py": (
        "6c7be20b992cb9951e90bc33f42aae640ff024ae47d9b943de10203023c73926"
    ),
    "src/prime_rl/orchestrator/algo/rae.py": "37bf70d6f76f2e90b2847795d982ae61c0fe313f3fe7d8d6c2a9c8350b8b3867",
    "src/prime_rl/utils/logger.py": "3a9583683cdcc66beedd7bd60f3fb93e23a4100164ebb0a9d6000f276eee3dbc",
}
# Read, not executed: the config classes whose defaults CONFIG_DEFAULTS restates (checked like the executed files).
CONFIG_FILE = "packages/prime-rl-configs/src/prime_rl/configs/algorithm.py"
CONFIG_SHA256 = "2419eea0245c3074b76798eb3fd9229c09becf651e24ee5687e12a394ce492e2"

STUBS = [
    "sys.modules['verifiers'] and ['verifiers.v1']: empty modules. The executed files do `import verifiers.v1 as "
    "vf` and use vf only in annotations (all of them start with `from __future__ import annotations`)",
    "sys.modules['prime_rl.configs'] and ['prime_rl.configs.algorithm']: a module holding placeholder names "
    "ActionLossType, AlgoConfig, FrozenModelConfig, GRPOAlgoConfig, HierarchicalGRPOAlgoConfig, RAEAlgoConfig "
    "(imported for annotations only; the real module is pydantic + prime-pydantic-config + renderers + verifiers)",
    "sys.modules['prime_rl.transports.rollouts']: a module holding a placeholder TrainingSample (routing.py imports "
    "it for stamp_loss_routing's annotation; stamp_loss_routing is not called)",
    "sys.modules['prime_rl.orchestrator.algo']: a bare package whose __path__ is the checkout's algo/ directory, "
    "in place of algo/__init__.py (which imports every algorithm, opd/opsd/echo/sft and their teacher clients "
    "included); the submodules load from the checkout's files unmodified",
    "config objects: types.SimpleNamespace carrying exactly the fields the algorithm reads (GRPO: length_penalty "
    "= None or a namespace with num_output_tokens_weight, num_input_tokens_weight, num_turns_weight; RAE: decay; "
    "hierarchical_grpo: episode_agents), recorded in params.config, in place of the pydantic AlgoConfig classes of "
    "packages/prime-rl-configs/src/prime_rl/configs/algorithm.py (their defaults are recorded in "
    "reference.config_defaults); policy_pool = None (never read by these algorithms)",
    "verifiers.v1.Episode / Trace / MessageNode: stand-in objects with the attributes the code reads. Episode: id, "
    "traces. Trace: id, agent.name, agent.trainable, has_error, reward, num_output_tokens, num_total_tokens, "
    "num_turns, nodes (verifiers computes the last five as properties: reward = sum of weighted reward values, "
    "has_error = not ok, num_output_tokens = provider-reported completion tokens summed over branches, "
    "num_total_tokens = each branch's last call's total tokens summed over branches, num_turns = number of sampled "
    "nodes; here they are plain values, given in inputs). MessageNode: message.role, sampled, token_ids "
    "(range(num_tokens)), mask, advantages (None until assigned)",
]

FORMAT = (
    "inputs.episodes lists the episodes of one rollout group in arrival order, each {id, traces}; a trace is "
    "{id, agent, trainable, has_error, reward, num_output_tokens, num_total_tokens, num_turns, nodes}; a node is "
    "{role, sampled, num_tokens, mask} (mask: per token, true = a model-sampled token, the only tokens that take "
    "credit; false = prompt, template scaffold, tool/user/env tokens). outputs.traces has one entry per trace in the "
    "same order: {episode, trace, node_advantages, scalar_advantage, is_trainable}. node_advantages has one entry "
    "per node: null when the node was never assigned (a node with no sampled token, or a trace the algorithm "
    "skipped: errored, untrainable agent, no sampled token), else the list prime-rl's assign_advantages stored, "
    "one value per true entry of the node's mask, in token order. scalar_advantage = routing.scalar_advantage "
    "(mean of the nonzero token advantages, 0.0 when all are zero, null when none was assigned); is_trainable = "
    "routing.is_trainable (any nonzero token advantage). grpo and max_rl compute in torch.float32 and store its "
    "results widened to float64 by tolist(); hierarchical_grpo and rae compute in Python floats (float64). rae "
    "cases run inputs.calls (one group each) through one algorithm instance, in order, and record outputs.calls "
    "(each with its traces and the per-agent baselines after the call). A case whose reference call raised has "
    "outputs={'error': 'ExcType: message'}. Suggested tolerance: atol=1e-6, rtol=1e-6."
)

CONFIG_DEFAULTS = {
    "grpo.length_penalty": None,
    "LinearLengthPenaltyConfig": {
        "num_output_tokens_weight": 0.25,
        "num_input_tokens_weight": 0.1,
        "num_turns_weight": 0.1,
    },
    "rae.decay": 0.95,
    "hierarchical_grpo.episode_agents": "required (proposer-solver: ['solver'])",
}

NOTES = {
    "grpo": "GRPOAlgorithm.score_group: r = [trace.reward for the group's trainable traces] (float32); advantage = "
    "r - mean(r), the same scalar on every sampled token of the trace (every turn); no std normalisation; a "
    "singleton gets 0; every trainable trace of the group's episodes is one pool, whatever its agent",
    "grpo_lp": "GRPOAlgorithm.score_group with length_penalty (weights wo, wi, wt): out = num_output_tokens, in = "
    "num_total_tokens - num_output_tokens, turns = num_turns; frac = wo*out/max(max(out),1) + wi*in/max(max(in),1) "
    "+ wt*turns/max(max(turns),1) (maxima over the group's trainable traces); shaped = r - mean(r)*frac; advantage "
    "= shaped - mean(shaped) (float32)",
    "max_rl": "MaxRLAlgorithm.score_group: m = mean(r) (float32); advantage = 0 for every trace when m <= 0, else "
    "(r - m)/m; a singleton with r > 0 gets 0",
    "hierarchical_grpo": "HierarchicalGRPOAlgorithm.score_group: traces keyed by (agent name, episode id) when the "
    "agent is in episode_agents, else (agent name, None) across the group; advantage = reward - mean reward of "
    "its key's traces (Python floats); a key with one trace gets 0",
    "rae": "RAEAlgorithm.score_group: for each trainable trace in order, advantage = reward - baseline[agent], then "
    "baseline[agent] = decay*baseline + (1-decay)*reward; baselines start at 0 and persist across calls (one "
    "instance per env); no group baseline",
    "routing": "routing.assign_advantages(trace, values) called directly: nodes = the trace's nodes with any sampled "
    "token; a scalar is repeated over all their sampled tokens, a list must have one value per sampled token (in "
    "node order, compact: non-sampled positions skipped); len(mask) != len(token_ids) raises",
}


# ---------------------------------------------------------------------------------------------------------------
# Loading prime-rl from the checkout
# ---------------------------------------------------------------------------------------------------------------


def _verify_checkout(src: Path) -> None:
    """The checkout's executed (and read) files are the pinned ones (``golden_io.verify_checkout``)."""
    golden_io.verify_checkout(src, {**PINNED_FILES, CONFIG_FILE: CONFIG_SHA256}, "prime-rl", PRIME_RL_COMMIT)


def _placeholder(name: str) -> type:
    return type(name, (), {"__module__": "stub"})


def _load(src: Path):
    """Install the stubs, import the algorithm modules from the checkout, check nothing else of it was executed."""
    verifiers = types.ModuleType("verifiers")
    verifiers.__path__ = []
    v1 = types.ModuleType("verifiers.v1")
    verifiers.v1 = v1
    configs = types.ModuleType("prime_rl.configs")
    configs.__path__ = []
    algorithm_config = types.ModuleType("prime_rl.configs.algorithm")
    for name in (
        "ActionLossType",
        "AlgoConfig",
        "FrozenModelConfig",
        "GRPOAlgoConfig",
        "HierarchicalGRPOAlgoConfig",
        "RAEAlgoConfig",
    ):
        setattr(algorithm_config, name, _placeholder(name))
    configs.algorithm = algorithm_config
    transports = types.ModuleType("prime_rl.transports")
    transports.__path__ = []
    rollouts = types.ModuleType("prime_rl.transports.rollouts")
    rollouts.TrainingSample = _placeholder("TrainingSample")
    transports.rollouts = rollouts
    algo = types.ModuleType("prime_rl.orchestrator.algo")
    algo.__path__ = [str(src / "src/prime_rl/orchestrator/algo")]
    sys.modules.update(
        {
            "verifiers": verifiers,
            "verifiers.v1": v1,
            "prime_rl.configs": configs,
            "prime_rl.configs.algorithm": algorithm_config,
            "prime_rl.transports": transports,
            "prime_rl.transports.rollouts": rollouts,
            "prime_rl.orchestrator.algo": algo,
        }
    )
    sys.path.insert(0, str(src / "src"))  # prime_rl: a namespace package there (no src/prime_rl/__init__.py)
    orchestrator = importlib.import_module("prime_rl.orchestrator")
    orchestrator.algo = algo
    modules = {
        name: importlib.import_module(f"prime_rl.orchestrator.algo.{name}")
        for name in ("base", "routing", "grpo", "max_rl", "hierarchical_grpo", "rae")
    }
    executed = sorted(
        str(Path(m.__file__).resolve().relative_to(src.resolve()))
        for m in list(sys.modules.values())
        if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(src.resolve())
    )
    assert executed == sorted(PINNED_FILES), (
        f"executed files of the checkout {executed} != pinned {sorted(PINNED_FILES)}"
    )
    return modules


# ---------------------------------------------------------------------------------------------------------------
# Stand-ins for verifiers.v1 Episode / Trace / MessageNode
# ---------------------------------------------------------------------------------------------------------------


class Node:
    """verifiers.v1.MessageNode stand-in."""

    def __init__(self, spec: dict):
        self.message = types.SimpleNamespace(role=spec["role"])
        self.sampled = spec["sampled"]
        self.token_ids = list(range(spec["num_tokens"]))
        self.mask = list(spec["mask"])
        self.advantages = None


class Trace:
    """verifiers.v1.Trace stand-in: the attributes the algorithms read, as plain values."""

    def __init__(self, spec: dict):
        self.id = spec["id"]
        self.agent = types.SimpleNamespace(name=spec["agent"], trainable=spec["trainable"])
        self.has_error = spec["has_error"]
        self.reward = spec["reward"]
        self.num_output_tokens = spec["num_output_tokens"]
        self.num_total_tokens = spec["num_total_tokens"]
        self.num_turns = spec["num_turns"]
        self.nodes = [Node(n) for n in spec["nodes"]]


class Episode:
    """verifiers.v1.Episode stand-in."""

    def __init__(self, spec: dict):
        self.id = spec["id"]
        self.traces = [Trace(t) for t in spec["traces"]]


def node(role: str, sampled: bool, scaffold: int, n: int) -> dict:
    """A node of ``scaffold`` unsampled tokens then ``n`` tokens, sampled when ``sampled``."""
    return {"role": role, "sampled": sampled, "num_tokens": scaffold + n, "mask": [False] * scaffold + [sampled] * n}


def trace(tid: str, reward: float, turns, *, prompt: int = 6, tool: int = 4, agent: str = "agent", **over) -> dict:
    """A trace: a user prompt, then per turn an assistant node (2 scaffold tokens + the sampled tokens), with a
    tool node between turns. ``turns``: the sampled-token count of each turn (an int for one turn). The
    token-count fields default to what the nodes hold (``over`` replaces any field)."""
    turns = [turns] if isinstance(turns, int) else list(turns)
    nodes = [node("user", False, prompt, 0)]
    for i, n in enumerate(turns):
        if i:
            nodes.append(node("tool", False, tool, 0))
        nodes.append(node("assistant", True, 2, n))
    spec = {
        "id": tid,
        "agent": agent,
        "trainable": True,
        "has_error": False,
        "reward": float(reward),
        "num_output_tokens": sum(turns),
        "num_total_tokens": sum(n["num_tokens"] for n in nodes),
        "num_turns": len(turns),
        "nodes": nodes,
    }
    spec.update(over)
    return spec


def episodes_one_trace_each(rewards, turns, prefix: str = "e", **over) -> list[dict]:
    return [
        {"id": f"{prefix}{i}", "traces": [trace(f"{prefix}{i}.t0", r, t, **over)]}
        for i, (r, t) in enumerate(zip(rewards, turns, strict=True))
    ]


# ---------------------------------------------------------------------------------------------------------------
# Running a case
# ---------------------------------------------------------------------------------------------------------------


def _read_back(routing, episodes: list[Episode]) -> list[dict]:
    out = []
    for episode in episodes:
        for tr in episode.traces:
            out.append(
                {
                    "episode": episode.id,
                    "trace": tr.id,
                    "node_advantages": [n.advantages for n in tr.nodes],
                    "scalar_advantage": routing.scalar_advantage(tr),
                    "is_trainable": routing.is_trainable(tr),
                }
            )
    return out


async def _process_group(modules, algorithm, episodes: list[Episode]) -> None:
    """TrainSink.process_episode for each episode, then process_group's scoring step."""
    for episode in episodes:
        await algorithm.finalize_episode(episode)
    if any(True for _ in modules["base"].iter_trainable_traces(episodes)):
        await algorithm.finalize_group(episodes)


def _build(modules, algo: str, config: dict):
    ns = types.SimpleNamespace
    if algo == "grpo":
        lp = config["length_penalty"]
        return modules["grpo"].GRPOAlgorithm(ns(length_penalty=None if lp is None else ns(**lp)), None)
    if algo == "max_rl":
        return modules["max_rl"].MaxRLAlgorithm(ns(), None)
    if algo == "hierarchical_grpo":
        return modules["hierarchical_grpo"].HierarchicalGRPOAlgorithm(ns(episode_agents=config["episode_agents"]), None)
    if algo == "rae":
        return modules["rae"].RAEAlgorithm(ns(decay=config["decay"]), None)
    raise ValueError(algo)


def _run(modules, case: dict) -> dict:
    params, inputs = case["params"], case["inputs"]
    routing = modules["routing"]
    try:
        if params["algorithm"] == "routing.assign_advantages":
            episodes = [Episode(e) for e in inputs["episodes"]]
            routing.assign_advantages(episodes[0].traces[0], inputs["values"])
            return {"traces": _read_back(routing, episodes)}
        algorithm = _build(modules, params["algorithm"], params["config"])
        if params["algorithm"] == "rae":
            calls = []
            for call in inputs["calls"]:
                episodes = [Episode(e) for e in call["episodes"]]
                asyncio.run(_process_group(modules, algorithm, episodes))
                calls.append({"traces": _read_back(routing, episodes), "baselines_after": dict(algorithm.baselines)})
            return {"calls": calls}
        episodes = [Episode(e) for e in inputs["episodes"]]
        asyncio.run(_process_group(modules, algorithm, episodes))
        return {"traces": _read_back(routing, episodes)}
    except Exception as exc:  # recorded as the reference's answer
        return {"error": f"{type(exc).__name__}: {exc}"}


# ---------------------------------------------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------------------------------------------

LP_DEFAULT = CONFIG_DEFAULTS["LinearLengthPenaltyConfig"]


def _grpo(lp=None) -> dict:
    return {"algorithm": "grpo", "config": {"length_penalty": None if lp is None else dict(lp)}}


def _cases() -> list[dict]:
    cases = []

    def add(name, params, inputs, note):
        cases.append({"name": name, "note": note, "params": params, "inputs": inputs})

    # --- grpo, no length penalty ---
    add(
        "grpo/group4_binary",
        _grpo(),
        {"episodes": episodes_one_trace_each([1, 0, 1, 1], [5, 3, 8, 2])},
        "four single-turn traces, binary rewards, different lengths (the length is not read)",
    )
    add(
        "grpo/group5_real_rewards_tie",
        _grpo(),
        {"episodes": episodes_one_trace_each([-1.0, 0.5, 0.5, 2.25, -0.25], [4, 4, 6, 3, 5])},
        "five traces, real rewards of both signs, a tie",
    )
    add(
        "grpo/all_tied_exact",
        _grpo(),
        {"episodes": episodes_one_trace_each([1, 1, 1, 1], [3, 4, 5, 6])},
        "a group whose rewards are all 1: advantages are assigned zeros (not null); is_trainable false",
    )
    add(
        "grpo/all_tied_float32_noise",
        _grpo(),
        {"episodes": episodes_one_trace_each([0.9, 0.9, 0.9], [3, 4, 5])},
        "a group tied at 0.9: the float32 mean differs from float32(0.9) by one ulp, so every trace gets "
        "+5.96e-08, not 0 (is_trainable true; prime-rl's zero-advantage pruning compares with 0.0 exactly)",
    )
    add(
        "grpo/singleton",
        _grpo(),
        {"episodes": episodes_one_trace_each([0.7], [5])},
        "a group of one: advantage 0",
    )
    add(
        "grpo/skipped_traces",
        _grpo(),
        {
            "episodes": [
                {"id": "e0", "traces": [trace("e0.t0", 1.0, 4)]},
                {"id": "e1", "traces": [trace("e1.t0", 0.0, 4, has_error=True)]},
                {"id": "e2", "traces": [trace("e2.t0", 0.5, 4, trainable=False)]},
                {
                    "id": "e3",
                    "traces": [
                        trace(
                            "e3.t0",
                            0.25,
                            0,
                            nodes=[node("user", False, 6, 0), node("assistant", True, 2, 0)],
                            num_output_tokens=0,
                        )
                    ],
                },
                {"id": "e4", "traces": [trace("e4.t0", 0.0, 3)]},
            ]
        },
        "an errored trace (reward 0), an untrainable agent's trace and a trace with no sampled token are left "
        "out of the group mean and get no advantage (null); the mean is over e0 and e4 only",
    )
    add(
        "grpo/multiturn_tool_tokens",
        _grpo(),
        {"episodes": episodes_one_trace_each([1.0, 0.0, 0.5], [[3, 2, 4], [5], [2, 2]])},
        "multi-turn traces (user prompt, assistant turns separated by tool nodes, each assistant node 2 scaffold "
        "tokens then its sampled tokens): the trace's one scalar lands on every sampled token of every turn; "
        "prompt, tool and scaffold tokens get nothing",
    )
    add(
        "grpo/multi_agent_episodes",
        _grpo(),
        {
            "episodes": [
                {
                    "id": f"e{i}",
                    "traces": [trace(f"e{i}.a", ra, 3, agent="player_0"), trace(f"e{i}.b", rb, 4, agent="player_1")],
                }
                for i, (ra, rb) in enumerate([(1.0, -1.0), (-1.0, 1.0), (1.0, -1.0)])
            ]
        },
        "three episodes with two agents each: GRPO pools all six traces into one mean, whatever the agent",
    )
    # --- grpo with the linear length penalty ---
    lp_group = [
        trace("e0.t0", 1.0, [30, 10], prompt=20, tool=15),
        trace("e1.t0", 1.0, [12], prompt=20),
        trace("e2.t0", 0.0, [40, 20, 25], prompt=20, tool=10),
        trace("e3.t0", 1.0, [8, 8], prompt=20, tool=30),
    ]
    lp_episodes = [{"id": f"e{i}", "traces": [t]} for i, t in enumerate(lp_group)]
    for name, lp, note in [
        ("defaults", LP_DEFAULT, "the LinearLengthPenaltyConfig defaults (0.25, 0.1, 0.1)"),
        (
            "output_only",
            {"num_output_tokens_weight": 1.0, "num_input_tokens_weight": 0.0, "num_turns_weight": 0.0},
            "the output-token term alone",
        ),
        (
            "input_only",
            {"num_output_tokens_weight": 0.0, "num_input_tokens_weight": 1.0, "num_turns_weight": 0.0},
            "the input-token term alone (input = num_total_tokens - num_output_tokens: prompt, tool and scaffold)",
        ),
        (
            "turns_only",
            {"num_output_tokens_weight": 0.0, "num_input_tokens_weight": 0.0, "num_turns_weight": 1.0},
            "the turns term alone",
        ),
    ]:
        add(
            f"grpo_length_penalty/{name}",
            _grpo(lp),
            {"episodes": lp_episodes},
            f"{note}; rewards [1, 1, 0, 1], multi-turn traces of different lengths",
        )
    add(
        "grpo_length_penalty/ties_broken_by_length",
        _grpo(LP_DEFAULT),
        {"episodes": episodes_one_trace_each([1, 1, 1], [[10], [20, 5], [40]])},
        "rewards all 1: without the penalty every advantage would be 0; the penalty (scaled by the pass rate 1) "
        "makes shorter traces positive",
    )
    add(
        "grpo_length_penalty/zero_mean_reward",
        _grpo(LP_DEFAULT),
        {"episodes": episodes_one_trace_each([0, 0, 0], [[10], [20, 5], [40]])},
        "mean reward 0: the penalty is mean * frac = 0, advantages 0",
    )
    add(
        "grpo_length_penalty/negative_mean_reward",
        _grpo({"num_output_tokens_weight": 0.5, "num_input_tokens_weight": 0.1, "num_turns_weight": 0.1}),
        {"episodes": episodes_one_trace_each([-1.0, 0.0, -0.5], [[10], [20, 5], [40]])},
        "mean reward < 0: the penalty mean * frac is negative, so longer traces gain (a length bonus)",
    )
    add(
        "grpo_length_penalty/missing_usage",
        _grpo(LP_DEFAULT),
        {
            "episodes": episodes_one_trace_each(
                [1.0, 0.0, 1.0], [[10], [20, 5], [40]], num_output_tokens=0, num_total_tokens=0
            )
        },
        "num_output_tokens = num_total_tokens = 0 on every trace (verifiers reads them from provider usage, 0 "
        "when absent): the token maxima clamp to 1, those terms vanish, only the turns term shapes",
    )
    # --- max_rl ---
    add(
        "max_rl/binary_half",
        {"algorithm": "max_rl", "config": {}},
        {"episodes": episodes_one_trace_each([1, 0, 0, 1], [3, 4, 5, 6])},
        "pass rate 0.5: (r - 0.5)/0.5 = +-1",
    )
    add(
        "max_rl/low_pass_rate",
        {"algorithm": "max_rl", "config": {}},
        {"episodes": episodes_one_trace_each([1, 0, 0, 0, 0, 0, 0, 0], [3] * 8)},
        "pass rate 1/8: the success gets (1 - 1/8)/(1/8) = 7, each failure -1",
    )
    add(
        "max_rl/all_zero",
        {"algorithm": "max_rl", "config": {}},
        {"episodes": episodes_one_trace_each([0, 0, 0], [3, 4, 5])},
        "mean 0 (<= 0): zeros everywhere",
    )
    add(
        "max_rl/real_rewards_one_negative",
        {"algorithm": "max_rl", "config": {}},
        {
            "episodes": episodes_one_trace_each([0.2, 0.5, 0.9], [3, 4, 5], prefix="p")
            + episodes_one_trace_each([-1.0, 0.5], [3, 4], prefix="n")
        },
        "one group of five episodes: rewards [0.2, 0.5, 0.9, -1.0, 0.5], mean 0.22 > 0, so (r - m)/m for all "
        "(including the negative reward)",
    )
    add(
        "max_rl/singleton",
        {"algorithm": "max_rl", "config": {}},
        {"episodes": episodes_one_trace_each([0.6], [3])},
        "a group of one with reward 0.6: (r - r)/r = 0",
    )
    # --- hierarchical_grpo ---
    proposer_solver = [
        {
            "id": f"e{i}",
            "traces": [trace(f"e{i}.proposer", rp, 5, agent="proposer")]
            + [trace(f"e{i}.solver{j}", rs, 4, agent="solver") for j, rs in enumerate(solvers)],
        }
        for i, (rp, solvers) in enumerate([(0.5, [1, 0, 1]), (1.0, [0, 0]), (0.0, [1])])
    ]
    add(
        "hierarchical_grpo/proposer_solver",
        {"algorithm": "hierarchical_grpo", "config": {"episode_agents": ["solver"]}},
        {"episodes": proposer_solver},
        "three episodes, each a proposer and 3, 2, 1 solvers: solvers are compared within their episode (the lone "
        "solver of e2 gets 0), proposers across the three episodes",
    )
    add(
        "hierarchical_grpo/other_roles_and_skipped",
        {"algorithm": "hierarchical_grpo", "config": {"episode_agents": ["solver", "critic"]}},
        {
            "episodes": [
                {
                    "id": "e0",
                    "traces": [
                        trace("e0.proposer", 0.25, 5, agent="proposer"),
                        trace("e0.solver0", 1.0, 4, agent="solver"),
                        trace("e0.solver1", 0.0, 4, agent="solver", has_error=True),
                        trace("e0.solver2", 0.5, 4, agent="solver"),
                        trace("e0.critic0", 0.3, 2, agent="critic"),
                    ],
                },
                {
                    "id": "e1",
                    "traces": [
                        trace("e1.proposer", 0.75, 5, agent="proposer"),
                        trace("e1.solver0", 0.0, 4, agent="solver"),
                        trace("e1.critic0", 0.9, 2, agent="critic", trainable=False),
                        trace("e1.judge", 0.2, 3, agent="judge"),
                    ],
                },
            ]
        },
        "two episode-scoped roles; the errored solver and the untrainable critic are skipped; the judge (not "
        "episode-scoped, alone in the group) gets 0",
    )
    # --- rae ---
    zero_sum = [(1.0, -1.0), (-1.0, 1.0), (1.0, -1.0)]
    add(
        "rae/two_agents_three_calls",
        {"algorithm": "rae", "config": {"decay": CONFIG_DEFAULTS["rae.decay"]}},
        {
            "calls": [
                {
                    "episodes": [
                        {
                            "id": f"c{c}e{i}",
                            "traces": [
                                trace(f"c{c}e{i}.p0", ra, 3, agent="player_0"),
                                trace(f"c{c}e{i}.p1", rb, 3, agent="player_1"),
                            ],
                        }
                        for i, (ra, rb) in enumerate(zero_sum[c:] + zero_sum[:c])
                    ]
                }
                for c in range(3)
            ]
        },
        "a zero-sum two-player game, three groups of three episodes through one instance (decay 0.95): each "
        "trace is scored against its agent's baseline before its reward updates it",
    )
    add(
        "rae/single_agent_singletons",
        {"algorithm": "rae", "config": {"decay": 0.5}},
        {
            "calls": [
                {"episodes": [{"id": f"c{c}", "traces": [trace(f"c{c}.t0", r, 3)]}]}
                for c, r in enumerate([1.0, 0.0, 1.0, 1.0])
            ]
            + [{"episodes": [{"id": "c4", "traces": [trace("c4.t0", 0.5, 3, has_error=True)]}]}]
        },
        "one agent, groups of one (REINFORCE with an EMA baseline, decay 0.5); the last call's only trace is "
        "errored: the group is not scored and the baseline is unchanged",
    )
    # --- assign_advantages directly ---
    routed = trace("e0.t0", 0.0, [2, 3])
    add(
        "routing/per_token_list",
        {"algorithm": "routing.assign_advantages", "config": {}},
        {"episodes": [{"id": "e0", "traces": [routed]}], "values": [0.1, 0.2, 0.3, 0.4, 0.5]},
        "five values for the five sampled tokens of a two-turn trace: the first two land on turn 1, the rest on "
        "turn 2, in order, scaffold and tool tokens skipped",
    )
    add(
        "routing/list_length_mismatch",
        {"algorithm": "routing.assign_advantages", "config": {}},
        {"episodes": [{"id": "e0", "traces": [routed]}], "values": [0.1, 0.2, 0.3]},
        "three values for five sampled tokens: ValueError",
    )
    misaligned = trace("e0.t0", 0.0, 3)
    misaligned["nodes"][1] = dict(misaligned["nodes"][1], num_tokens=4)
    add(
        "routing/mask_token_mismatch",
        {"algorithm": "routing.assign_advantages", "config": {}},
        {"episodes": [{"id": "e0", "traces": [misaligned]}], "values": 1.0},
        "an assistant node whose mask (5) and token_ids (4) differ in length: ValueError",
    )

    for case in cases:
        kind = case["params"]["algorithm"]
        key = "grpo_lp" if kind == "grpo" and case["params"]["config"]["length_penalty"] else kind
        key = "routing" if kind == "routing.assign_advantages" else key
        case["note"] = f"{case['note']}. {NOTES[key]}"
    return cases


def _reference() -> dict:
    return {
        "repo": PRIME_RL_REPO,
        "commit": PRIME_RL_COMMIT,
        "commit_date": PRIME_RL_COMMIT_DATE,
        "path": "src/prime_rl/orchestrator/algo/",
        "function": "GRPOAlgorithm, MaxRLAlgorithm, HierarchicalGRPOAlgorithm, RAEAlgorithm (.finalize_episode, "
        ".finalize_group -> .score_group -> routing.assign_advantages); routing.scalar_advantage, "
        "routing.is_trainable",
        "sha256": dict(PINNED_FILES),
        "config_file": CONFIG_FILE,
        "config_sha256": CONFIG_SHA256,
        "config_defaults": CONFIG_DEFAULTS,
        "verifiers_submodule_commit": VERIFIERS_COMMIT,
        "glue": "the call order restates TrainSink.process_episode / process_group "
        "(src/prime_rl/orchestrator/train_sink.py): finalize_episode per episode, then finalize_group when "
        "iter_trainable_traces finds a survivor",
        "python": "3.11 (prime-rl declares ~=3.12; the executed files need nothing newer)",
        "torch": torch.__version__,
        "stubs": STUBS,
    }


def main() -> int:
    def add_arguments(parser):
        parser.add_argument(
            "--prime-rl-src",
            type=Path,
            required=True,
            help=f"a checkout of {PRIME_RL_REPO} at {PRIME_RL_COMMIT}",
        )

    args = golden_io.parse_args(__doc__, add_arguments)
    if not golden_io.pinned({"torch": (torch.__version__, TORCH_VERSION)}, "references/prime_rl/requirements.txt"):
        return 2
    _verify_checkout(args.prime_rl_src)
    modules = _load(args.prime_rl_src)
    torch.use_deterministic_algorithms(True)

    cases = _cases()
    for case in cases:
        case["outputs"] = _run(modules, case)
    text = golden_io.dump({"reference": _reference(), "format": FORMAT, "cases": cases})
    return golden_io.write_or_check({OUT_FILE: text}, args.out_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
