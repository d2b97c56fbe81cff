"""Big runs: the memory savings keep every number (row blocks, shared arrays, results without [B, T] extras), the
byte-budgeted cache, the sampling/paging helpers, the streaming writer, and every page through AppTest on a
6,000-trajectory run, where the picker pages and searches and the pages sample and say so."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from synthetic_runs import synthetic_kgqa, synthetic_long
from test_app import APP, PAGES, html_text, no_errors

from benchmarks.big_run import DEFAULT_SCHEME
from dashboard import bigrun, budget, cache, loading, sidebar, state
from dashboard.state import K
from engine import CreditConfig, TrajectoryBatch, compute_credit
from engine.io import load_run, save_run
from engine.io.load import save_trajectories
from engine.io.synth.generic import iter_synth, synth_name, synth_run

SCHEMES = [
    CreditConfig(estimator="gae", value_source=None),
    CreditConfig(estimator="gae", value_source=None, gae_skip_holes=False),
    CreditConfig(estimator="reinforce_plus_plus"),
    CreditConfig(profile="verl-legacy", estimator="reinforce_plus_plus"),
    CreditConfig(estimator="grpo", stepwise_mode="per_step"),
    CreditConfig(estimator="grpo", stepwise_mode="broadcast", mask_truncated_samples=True),
]


# ---------------------------------------------------------------------------------------------- engine
def random_batch(B: int, T: int, seed: int = 0) -> TrajectoryBatch:
    """B rows of 0.75·T to T tokens, tool holes, 3 turns, groups of 8, log-probs, values and an outcome reward."""
    g = torch.Generator().manual_seed(seed)
    n = torch.randint(3 * T // 4, T + 1, (B,), generator=g)
    pos = torch.arange(T)
    attn = (pos[None] < n[:, None]).float()
    turns = torch.where(attn > 0, pos[None] * 3 // n[:, None], -1)
    return TrajectoryBatch(
        token_ids=torch.zeros(B, T, dtype=torch.int32),
        attention_mask=attn,
        action_mask=attn * (torch.rand(B, T, generator=g) > 0.2),
        turn_ids=turns,
        group_ids=torch.arange(B) // 8,
        old_log_probs=-torch.rand(B, T, generator=g) * attn,
        ref_log_probs=-torch.rand(B, T, generator=g) * attn,
        values=torch.rand(B, T, generator=g) * attn,
        global_rewards=(torch.rand(B, 1, generator=g) > 0.5).float(),
        global_reward_names=("reward",),
        truncated=torch.rand(B, generator=g) < 0.05,
    )


@pytest.fixture(scope="module")
def rows_2100() -> TrajectoryBatch:
    return random_batch(2100, 64)  # two row blocks of the default size: 1,024 and 1,076 rows


@pytest.mark.parametrize("cfg", SCHEMES, ids=lambda c: f"{c.estimator}-{c.profile}-{c.stepwise_mode}")
def test_row_blocks_give_the_same_numbers(cfg: CreditConfig, rows_2100, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.scan

    assert engine.scan.ROW_BLOCK * 2 <= 2100
    blocked = compute_credit(rows_2100, cfg)
    monkeypatch.setattr(engine.scan, "ROW_BLOCK", 10**9)
    whole = compute_credit(rows_2100, cfg)
    for name in ("advantages", "returns", "effective_weights", "turn_advantage", "turn_rewards", "turn_tokens"):
        assert torch.equal(getattr(whole, name), getattr(blocked, name)), name
    assert whole.extras.keys() == blocked.extras.keys()
    assert all(torch.equal(whole.extras[k], blocked.extras[k]) for k in whole.extras)
    small = rows_2100.select(list(range(40)))
    monkeypatch.setattr(engine.scan, "ROW_BLOCK", 3)  # blocks of a few rows: a small matmul may round differently
    tiny = compute_credit(small, cfg)
    monkeypatch.setattr(engine.scan, "ROW_BLOCK", 10**9)
    torch.testing.assert_close(tiny.advantages, compute_credit(small, cfg).advantages, rtol=1e-5, atol=1e-5)


def test_int32_turn_ids_give_the_numbers_of_long_ones() -> None:
    """The loader's batches keep turn ids (and token ids) int32; every estimator, rLLM mode, placement and lint
    gives the same numbers as on int64 ids."""
    from engine import list_estimators
    from engine.lint import run_lints

    load = synthetic_kgqa(groups=4, rollouts=4)
    small = load.run.to_batch()
    assert small.turn_ids.dtype == torch.int32 and small.token_ids.dtype == torch.int32
    wide = small.replace(turn_ids=small.turn_ids.long(), token_ids=small.token_ids.long())
    assert wide.turn_ids.dtype == torch.long
    cfgs = [CreditConfig(estimator=e.name) for e in list_estimators()]
    cfgs += [CreditConfig(estimator="grpo", stepwise_mode=m) for m in ("broadcast", "per_step")]
    cfgs += [CreditConfig(estimator="gae", placement=p) for p in ("turn_proportional", "turn_final_token")]
    cfgs += [CreditConfig(profile="kg-r1", estimator="grpo_multiturn")]
    for cfg in cfgs:
        try:
            a = compute_credit(small, cfg)
        except ValueError:  # the run lacks what the estimator needs: the same on both
            with pytest.raises(ValueError):
                compute_credit(wide, cfg)
            continue
        b = compute_credit(wide, cfg)
        for name in ("advantages", "returns", "effective_weights", "turn_advantage", "turn_tokens"):
            assert torch.equal(getattr(a, name), getattr(b, name)), (cfg.estimator, cfg.stepwise_mode, name)
        found = [(f.check, f.rows, f.count) for f in run_lints(small, cfg, result=a, run=load.run)]
        assert found == [(f.check, f.rows, f.count) for f in run_lints(wide, cfg, result=b, run=load.run)]


def test_results_without_token_extras_keep_every_other_number() -> None:
    batch = synthetic_kgqa(groups=3, rollouts=4).run.to_batch()
    for cfg in SCHEMES[:2] + [CreditConfig(estimator="gae", value_source="zeros")]:
        full, slim = compute_credit(batch, cfg), compute_credit(batch, cfg, token_extras=False)
        assert "td_errors" in full.extras and "td_errors" not in slim.extras
        assert all(v.shape != batch.token_ids.shape for v in slim.extras.values())
        for name in ("advantages", "returns", "values", "effective_weights", "kl", "loss_mask", "agg_weights"):
            assert torch.equal(getattr(full, name), getattr(slim, name)), name


def test_all_kept_loss_mask_shares_the_batch_mask() -> None:
    batch = synthetic_kgqa(groups=2, rollouts=4).run.to_batch()
    res = compute_credit(batch, CreditConfig(estimator="grpo"))
    assert res.loss_mask.untyped_storage().data_ptr() == batch.action_mask.untyped_storage().data_ptr()
    cut = compute_credit(batch.replace(truncated=torch.arange(8) == 0), CreditConfig(mask_truncated_samples=True))
    assert cut.loss_mask[0].sum() == 0 and batch.action_mask[0].sum() > 0  # a copy, the batch untouched


def test_shared_memory_batch_keeps_the_run() -> None:
    run = synth_run(12, 48, seed=3)
    before = [
        [(s.token_ids.copy(), None if s.values is None else s.values.copy()) for s in t.segments]
        for t in run.trajectories
    ]
    key = run.content_hash
    batch = run.to_batch(share_memory=True)
    assert batch.token_ids.dtype == torch.int32
    ids, values = batch.token_ids.numpy(), batch.values.numpy()
    for t, segs in zip(run.trajectories, before, strict=True):
        for s, (old_ids, old_values) in zip(t.segments, segs, strict=True):
            assert np.array_equal(s.token_ids, old_ids) and np.shares_memory(s.token_ids, ids)
            assert not s.token_ids.flags.writeable
            if old_values is not None:
                assert np.array_equal(s.values, old_values) and np.shares_memory(s.values, values)
    del run.__dict__["content_hash"]  # computed again from the shared arrays
    assert run.content_hash == key
    assert torch.equal(batch.values, synth_run(12, 48, seed=3).to_batch().values)


def test_streamed_file_equals_the_saved_run(tmp_path) -> None:
    for suffix in (".jsonl", ".parquet"):
        save_trajectories(iter_synth(30, 40, seed=2), tmp_path / f"s{suffix}", synth_name(30, 40, 2))
        save_run(synth_run(30, 40, seed=2), tmp_path / f"r{suffix}")
        assert load_run(tmp_path / f"s{suffix}").run.content_hash == load_run(tmp_path / f"r{suffix}").run.content_hash


def test_a_stream_that_fails_leaves_no_file(tmp_path) -> None:
    def broken():
        yield from iter_synth(3, 32)
        raise RuntimeError("the source went away")

    for suffix in (".jsonl", ".parquet"):
        with pytest.raises(RuntimeError):
            save_trajectories(broken(), tmp_path / f"x{suffix}")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError):
        iter_synth(0, 32)  # checked at once, before any file is opened


def test_benchmark_uses_the_dashboard_default_scheme() -> None:
    assert DEFAULT_SCHEME == state.DEFAULT_SCHEME


# ---------------------------------------------------------------------------------------------- cache and helpers
def test_byte_budget_evicts_least_recent_before_building() -> None:
    cache = budget.ByteBudget(100)
    built = []

    def get(key, size):
        return cache.get(key, lambda: built.append(key) or key, estimate=size, size=lambda _: size)

    get("a", 40), get("b", 40), get("a", 40)  # a used last
    get("c", 40)  # 40 more would not fit: b (least recent) goes before c is built
    assert "b" not in cache and "a" in cache and "c" in cache and cache.used == 80
    get("huge", 500)  # over the budget alone: kept, everything else dropped
    assert len(cache) == 1 and "huge" in cache
    get("huge", 500)
    assert built == ["a", "b", "c", "huge"]


def test_byte_budget_keeps_nothing_when_the_build_fails() -> None:
    cache = budget.ByteBudget(100)
    with pytest.raises(ValueError):
        cache.get("x", lambda: (_ for _ in ()).throw(ValueError("no")), estimate=1, size=lambda _: 1)
    assert "x" not in cache and cache.get("x", lambda: 7, estimate=1, size=lambda _: 1) == 7


def test_cache_budget_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_MB_ENV, "64")
    assert cache.cache_budget_bytes() == 64 << 20
    for bad in ("lots", "-5", "0"):
        monkeypatch.setenv(cache.CACHE_MB_ENV, bad)
        assert cache.cache_budget_bytes() == cache.DEFAULT_CACHE_MB << 20


def test_even_groups_takes_whole_groups_and_the_kept_one() -> None:
    groups = np.repeat(np.arange(1000), 8)[np.random.default_rng(0).permutation(8000)]  # groups interleaved
    rows = bigrun.even_groups(groups, 400, keep=123)
    chosen = np.unique(groups[rows])
    assert all((groups[rows] == g).sum() == 8 for g in chosen)  # whole groups only
    assert groups[123] in chosen and 400 <= len(rows) <= 416
    assert np.all(np.diff(rows) > 0)


def test_paging_and_search_helpers() -> None:
    assert bigrun.pages(6000, 1000) == 6 and bigrun.page_slice(7, 6000, 1000) == slice(5000, 6000)
    assert bigrun.paged_note(3, 50_000, 2000) == "Page 3 of 25: trajectories 4,001–6,000 of 50,000."
    assert bigrun.sampled_note(2000, 50_000) == "Showing 2,000 of 50,000 trajectories, sampled evenly."
    assert list(bigrun.even_rows(10, 4)) == [0, 3, 6, 9] and len(bigrun.even_rows(3, 4)) == 3
    ids = ("a-10", "a-1", "b-1", "A-1")
    assert bigrun.search(ids, "a-1") == [1, 3, 0] and bigrun.search(ids, "  ") == []


def test_progress_reports_reading_then_hashing(tmp_path) -> None:
    save_run(synth_run(40, 32, seed=1), tmp_path / "r.parquet")
    seen = []
    loaded = loading.read_run(str(tmp_path / "r.parquet"), lambda f, msg: seen.append((f, msg)))
    assert len(loaded.run) == 40 and seen[-1] == (1.0, "40 trajectories loaded")
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and any("row 40 of 40" in m for _, m in seen)


# ---------------------------------------------------------------------------------------------- every page
@pytest.fixture(scope="module")
def big_load():
    return synthetic_long(rows=6000, tokens=64, turns=2)


def big_app(load, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    key = load.run.content_hash
    at.session_state[K.UPLOADS] = {key: load}
    at.session_state[K.RUN_SOURCE] = "Upload"
    at.session_state[K.RUN] = f"upload:{key}"
    return at


def notes(at: AppTest) -> str:
    return "\n".join([e.value for e in at.info] + [e.value for e in at.caption] + [html_text(at)])


@pytest.mark.slow  # every page on 6,000 trajectories (6 s)
def test_every_page_samples_or_pages_a_big_run(big_load) -> None:
    assert bigrun.BIG_ROWS < 6000 and bigrun.PICKER_ROWS < 6000 < 4 * bigrun.TABLE_ROWS  # thresholds this test needs
    at = big_app(big_load)
    at.run()
    no_errors(at, "big run landing")
    picker = at.sidebar.selectbox(key=K.TRAJ)
    assert len(picker.options) == bigrun.PICKER_ROWS
    assert "Page 1 of 6: trajectories 1–1,000 of 6,000." in notes(at)
    expected = {
        "overview": ["Showing 2,000 of 6,000 trajectories, sampled evenly.", "Page 1 of 3: trajectories 1–2,000"],
        "compare": ["Big run: this page works on"],
        "group": [],
        "designer": ["Big run: this page works on"],
        "analytics": ["Big run: this page works on"],
        "diagnostics": ["Big run: the lints check"],
        "learn": ["Big run: this page works on"],
        "tokens": [],
        "timeline": ["This run is one step"],  # the whole run: one point, every trajectory (no sample)
    }
    for name, path in {**PAGES, "diagnostics": "dashboard/pages/diagnostics.py"}.items():
        at.switch_page(path).run()
        no_errors(at, f"big run {name}")
        text = notes(at)
        for phrase in expected[name]:
            assert phrase in text, f"{name}: {phrase!r} not on screen"


@pytest.mark.slow  # the picker on 6,000 trajectories (4 s with the run's build)
def test_big_picker_follows_deep_links_pages_and_search(big_load) -> None:
    ids = big_load.run.to_batch().trajectory_ids
    at = big_app(big_load, {"traj": ids[4321], "page": "group"})
    at.run()
    no_errors(at, "deep link into page 5")
    assert at.sidebar.selectbox(key=K.TRAJ).value == ids[4321]
    assert at.sidebar.number_input(key=sidebar.PICK_PAGE).value == 5
    assert at.query_params["traj"] == ids[4321]
    at.sidebar.number_input(key=sidebar.PICK_PAGE).set_value(2).run()
    assert at.sidebar.selectbox(key=K.TRAJ).value == ids[1000]  # a new page opens on its first trajectory
    at.sidebar.text_input(key=sidebar.PICK_SEARCH).input("long-5999").run()
    picker = at.sidebar.selectbox(key=K.TRAJ)
    assert "long-5999" in picker.options
    picker.select("long-5999").run()
    no_errors(at, "searched")
    assert at.session_state[K.TRAJ] == "long-5999"
