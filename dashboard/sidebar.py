"""The shared sidebar: which run, which trajectory, which credit scheme; and what the engine did."""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st

from dashboard import badges, bigrun, cache, controls, exports, loading, schemes, services, sources, state
from dashboard import steps as run_steps
from dashboard.sources import DEFAULT_SAMPLE, RunRef
from dashboard.state import K, cfg_key
from dashboard.tables import RunInfo
from dashboard.widgets import Context
from engine import CreditConfig, config, runnable
from engine.config import FIELD_HELP
from engine.perf import release_free_memory
from engine.policy import RS_OPTIONS
from engine.policy_losses import get_policy_loss
from engine.profiles import PROFILES

UPLOADS_KEPT = 3
# The trajectory picker's page and search box on a run of more than bigrun.PICKER_ROWS trajectories. Declared
# here, not in state.K, only because state.py was being edited in parallel when they were added: move them.
PICK_PAGE = "traj.page"
PICK_SEARCH = "traj.search"
LOAD_SHARE = 0.85  # of the sidebar's progress bar: reading the run; the rest is building its batch


def draw() -> Context | None:
    """Draw the sidebar; return the page context, or None when no run could be opened."""
    with st.sidebar:
        st.caption("Where RL trainers for multi-turn agents put credit, token by token.")
        bar = st.empty()
        loading = []  # set by the first progress report: a run already in the cache shows no bar

        def report(fraction: float, message: str) -> None:
            loading.append(True)
            bar.progress(min(max(LOAD_SHARE * fraction, 0.0), 1.0), text=_plain(message))

        handle = _run_picker(report)
        if handle is None:
            bar.empty()
            return None
        if loading:
            bar.progress(LOAD_SHARE, text="Padding the trajectories into one batch…")
        info = services.run_info(handle)
        bar.empty()
        if why := state.apply_run_scheme(str(handle.ref), info.has_values, info.source):
            st.caption(why)
        if info.trajectories == 0:
            st.error(
                state.md(
                    "The loader found no usable trajectory in {} ({} problems; see Run overview).",
                    handle.ref,
                    len(handle.problems),
                )
            )
            return Context(handle, info, state.sidebar_config(), -1)
        traj = _trajectory_picker(info)
        cfg = _scheme_controls(info)
    return Context(handle, info, cfg, traj)


def engine_status(slot, ctx: Context | None, run_seconds: float) -> None:
    """In ``slot``: the device the engine ran on, the time of the sidebar scheme's computation (cached after
    the first time) and how long this whole page run took on the server. Last in every page run, so it also
    hands the run's freed temporaries back to the OS (milliseconds; a big run's pages free hundreds of MB)."""
    release_free_memory()
    page_run = f"page run {run_seconds * 1e3:.0f} ms"
    if ctx is None or ctx.traj < 0 or (services.is_big(ctx.info) and not services.is_cached(ctx.handle, ctx.config)):
        slot.caption(page_run)  # a big run's sampled pages do not need the whole run's credit: not computed here
        return
    try:
        res, wall = services.compute_timed(ctx.handle, ctx.config)
    except (ValueError, NotImplementedError) as e:
        slot.error(state.md("Scheme not computable on this run: {} ({})", e, page_run))
        return
    device = "CUDA" if res.device.startswith("cuda") else "CPU"
    cached = " (cached)" if wall < res.seconds / 2 else ""
    slot.caption(f"Engine on **{device}** · last computation {res.seconds * 1e3:.1f} ms{cached} · {page_run}")


# ------------------------------------------------------------------------------------------------ run
_plain = state.markdown_escape  # loader messages name files: Markdown characters escaped


def _run_picker(progress: loading.Progress) -> cache.RunHandle | None:
    """The run source and run widgets; the opened run, or None (with a message) when there is none. ``progress``
    is called while a file or an upload is read."""
    ss = st.session_state
    options = ["Sample", "Upload"] + (["Data directory"] if sources.data_dir() is not None else [])
    if ss[K.RUN_SOURCE] not in options:
        ss[K.RUN_SOURCE] = "Sample"
    src = (
        st.segmented_control(
            "Run",
            options,
            key=K.RUN_SOURCE,
            help=f"A bundled sample, a file you upload, or a file under {sources.DATA_DIR_ENV}.",
        )
        or "Sample"
    )
    ref = None
    if src == "Sample":
        samples = list(sources.list_samples())
        if not samples:
            st.error("No sample runs found in sample_runs/.")
            return None
        if ss[K.SAMPLE] not in samples:
            ss[K.SAMPLE] = DEFAULT_SAMPLE if DEFAULT_SAMPLE in samples else samples[0]
        st.selectbox("Sample run", samples, key=K.SAMPLE)
        ref = RunRef("sample", ss[K.SAMPLE])
    elif src == "Upload":
        ref = _upload(progress)
    else:
        files = sources.list_data_files()
        if not files:
            st.warning(f"No run files under {sources.DATA_DIR_ENV}.")
            return None
        if ss[K.DATA_FILE] not in files:
            ss[K.DATA_FILE] = files[0]
        st.selectbox("File", files, key=K.DATA_FILE)
        ref = RunRef("data", ss[K.DATA_FILE])
    if ref is None:
        return None
    ss[K.RUN] = str(ref)
    try:
        handle = _open(ref, progress)
    except KeyError:
        st.error(state.md("No such run: {}", ref))
    except Exception as e:  # noqa: BLE001 - a broken file must not take the app down; say what went wrong
        st.error(state.md("Could not load {}: {}: {}", ref, type(e).__name__, e))
    else:
        if ref.kind != "sample" and "verl_rollout" in handle.run.source.split("+"):
            st.number_input(
                "Response length limit",
                min_value=0,
                step=128,
                key=K.RESPONSE_LENGTH,
                help="verl's data.max_response_length. Its rollout dump drops special tokens, so only this tells a "
                "finished row (its final `<|im_end|>` restored) from one cut at the limit (flagged truncated). "
                "0 = unknown: the token is assumed and the Run overview says so.",
            )
        return handle
    return None


def _open(ref: RunRef, progress: loading.Progress) -> cache.RunHandle:
    """The run ``ref``, or the chosen step of it when it holds several (a step picker is drawn): a folder of step
    files or step folders reads only that step's files; a file whose records name several steps is read whole."""
    ss = st.session_state
    folder = run_steps.folder_steps(ref)
    if folder is not None:
        step = _step_picker(folder.steps, str(ref))
        _follow(str(folder.index.root), run_steps.live_stamp(folder.index))
        for file, why in folder.index.pending:
            st.caption(state.md("{}: {}; read once it is complete.", file.name, why))
        return run_steps.open_step(ref, folder, step, progress, _response_length())
    handle = loading.open_run(ref, ss[K.UPLOADS], progress, _response_length())
    if len(handle.run.steps) > 1:
        return run_steps.narrow(handle, _step_picker(handle.run.steps, str(ref)))
    ss[K.STEP] = None
    return handle


def _step_picker(options: list[int], run: str) -> int:
    """The step picker of a run of several steps; the step chosen. A run opens at its latest step, and follows it
    while "Follow the latest step" is on (a live run's new steps open as they arrive)."""
    ss = st.session_state
    if ss.get(K.STEP_RUN) != run:  # another run: its latest step (a link's own step came with its run)
        ss[K.STEP_RUN], ss[K.STEP_FOLLOW] = run, True
    if not ss[K.STEP_FOLLOW] and ss.get(K.STEP) not in options:
        if ss.get(K.STEP) is not None:
            missing = f"step {ss[K.STEP]} is not in this run; its latest step ({options[-1]}) opened"
            ss[K.LINK_PROBLEMS] = [*ss.get(K.LINK_PROBLEMS, []), missing]
        ss[K.STEP_FOLLOW] = True
    if ss[K.STEP_FOLLOW]:
        ss[K.STEP] = options[-1]
    st.select_slider(
        f"Training step ({len(options):,} in this run)",
        options,
        key=K.STEP,
        on_change=state.step_picked,
        help="Each step is the batch the trainer computed its advantages on: every page shows this step alone "
        "(groups and batch statistics never cross steps). The Timeline page shows all of them.",
    )
    st.toggle(
        "Follow the latest step",
        key=K.STEP_FOLLOW,
        help="On: the pages show the run's latest step, and a live run's new steps as they are written.",
    )
    return ss[K.STEP]


@st.fragment(run_every=run_steps.FOLLOW_EVERY_S)
def _follow(folder: str, drawn: tuple) -> None:
    """A live run: every few seconds, look at the folder again; a step that is new (or rewritten, or finished
    writing) since the page was drawn runs the page again, so it reaches the step picker and the timeline."""
    if run_steps.live_stamp(run_steps.folder_index(Path(folder))) != drawn:
        st.rerun(scope="app")


def _response_length() -> int | None:
    """The response length limit the user gave for lossy dumps (None when unknown)."""
    return int(st.session_state.get(K.RESPONSE_LENGTH) or 0) or None


def _upload(progress: loading.Progress) -> RunRef | None:
    ss = st.session_state
    f = st.file_uploader(
        "Run file",
        key=K.UPLOADER,
        help="JSONL, JSON, Parquet, YAML (OpenPipe ART) or a tensor dump (.pt/.npz); kept in this browser session.",
    )
    upload_id = f"{f.file_id}:{_response_length()}" if f is not None else None
    if f is not None and upload_id not in ss[K.UPLOAD_IDS]:
        try:
            loaded = loading.load_upload(f.name, f.getvalue(), progress, _response_length())
        except Exception as e:  # noqa: BLE001 - report any loader failure next to the uploader
            st.error(state.md("Could not load {}: {}: {}", f.name, type(e).__name__, e))
            return None
        key = loaded.run.content_hash
        ss[K.UPLOADS][key] = loaded
        ss[K.UPLOAD_IDS][upload_id] = key
        for old in list(ss[K.UPLOADS])[:-UPLOADS_KEPT]:
            ss[K.UPLOADS].pop(old)
    if f is not None:
        return RunRef("upload", ss[K.UPLOAD_IDS][upload_id])
    current = RunRef.parse(ss.get(K.RUN, ""))
    if current.kind == "upload" and current.name in ss[K.UPLOADS]:
        return current
    st.info("Upload a run file to look at it.")
    return None


def _trajectory_picker(info: RunInfo) -> int:
    """The trajectory widgets; the index of the trajectory chosen. Above ``bigrun.PICKER_ROWS`` trajectories the
    list is paged, with a search by id (a deep link's ``traj`` opens its page)."""
    ss = st.session_state
    ids = info.trajectory_ids
    if ss.get(K.TRAJ) not in ids:
        ss[K.TRAJ] = ids[0]
    help_text = "Shared by the token, compare and group views."
    if len(ids) <= bigrun.PICKER_ROWS:
        st.selectbox("Trajectory", ids, key=K.TRAJ, help=help_text)
        return ids.index(ss[K.TRAJ])
    i = ids.index(ss[K.TRAJ])
    query = st.text_input(
        f"Find a trajectory ({len(ids):,})",
        key=PICK_SEARCH,
        placeholder="part of an id",
        help=f"Lists the first {bigrun.SEARCH_HITS} ids that contain this text; empty: page through all of them.",
    )
    if query.strip():
        hits = [ids[j] for j in bigrun.search(ids, query)]
        st.caption(f"{len(hits):,} matching ids listed" if hits else "No id contains that text.")
        options = hits if ss[K.TRAJ] in hits else [ss[K.TRAJ], *hits]
    else:
        n_pages = bigrun.pages(len(ids), bigrun.PICKER_ROWS)
        ss[PICK_PAGE] = i // bigrun.PICKER_ROWS + 1  # the page follows the trajectory (deep links, Diagnostics)
        page = st.number_input(
            f"Page of ids (1–{n_pages:,})",
            min_value=1,
            max_value=n_pages,
            key=PICK_PAGE,
            on_change=_first_of_page,
            args=(ids,),
            help=f"{bigrun.PICKER_ROWS:,} trajectories per page, in run order.",
        )
        st.caption(bigrun.paged_note(page, len(ids), bigrun.PICKER_ROWS))
        options = list(ids[bigrun.page_slice(page, len(ids), bigrun.PICKER_ROWS)])
    st.selectbox("Trajectory", options, key=K.TRAJ, help=help_text)
    return ids.index(ss[K.TRAJ])


def _first_of_page(ids: tuple[str, ...]) -> None:
    """Page changed: show its first trajectory."""
    ss = st.session_state
    ss[K.TRAJ] = ids[bigrun.page_slice(ss[PICK_PAGE], len(ids), bigrun.PICKER_ROWS).start]


# ------------------------------------------------------------------------------------------------ scheme
def _fix_state(info: RunInfo) -> None:
    """Keep the scheme widgets' values valid for this run before they are drawn."""
    ss = st.session_state
    values = {f: ss[cfg_key(f)] for f in state.CFG_FIELDS}
    names = [e.name for e in services.available_estimators(info)]
    fixed = state.fit_scheme(values, info, names)
    reset, notes = state.refusal_fixes({**values, **fixed})  # e.g. a mode the newly chosen profile lacks
    ss.update({cfg_key(f): v for f, v in {**fixed, **reset}.items()})
    if notes:
        ss[K.SCHEME_RESET] = notes


def _scheme_controls(info: RunInfo):
    _fix_state(info)
    ss = st.session_state
    if ss.get(K.TRAJ) in info.trajectory_ids and info.flags:  # the trajectory just picked: its data facts
        flags = info.flags[info.trajectory_ids.index(ss[K.TRAJ])]
        if flags:
            row = st.container(horizontal=True, gap="small")
            for name in flags:
                with row:
                    st.badge(name, color=badges.BADGES[name].color, help=badges.BADGES[name].tip)
    with st.expander("Credit scheme", expanded=True):
        for note in ss.pop(K.SCHEME_RESET, []):
            st.warning(state.md("{}", note), icon=":material/undo:")
        _declared_controls(info)
        cfg = services.effective_config(info, state.sidebar_config(), ss[cfg_key("value_source")])
        st.caption(f"Scheme code `{schemes.encode(cfg)}`")
        st.download_button(
            "⤓ Scheme JSON",
            data=lambda: exports.scheme_json(cfg),
            file_name="scheme.json",
            mime="application/json",
            key="sidebar.scheme_json",
            on_click="ignore",
            help="CreditConfig.to_dict(): the CLI reads it back.",
        )
    return cfg


def _declared_controls(info: RunInfo) -> None:
    """Every field declared with a widget (``dashboard.controls``), section by section, in declared order; the
    widgets of one row side by side. What a declaration cannot say (options and words that come from the run or a
    registry) is in the few tables below, by field."""
    ss = st.session_state

    def values(field: str):
        return ss[cfg_key(field)]

    shown = [(n, w) for n, w in controls.declared() if controls.shown(n, w, values, info)]
    for section in controls.SECTIONS:
        if section in SECTION_HEADINGS:
            st.markdown(**SECTION_HEADINGS[section])
        for row in controls.rows([(n, w) for n, w in shown if w.section == section]):
            targets = st.columns(2) if row[0][1].row else [st]
            for target, (name, w) in zip(targets, row, strict=False):
                _draw_control(target, name, w, info, values)
                if name in AFTER:
                    AFTER[name](info)
    if not info.has_rollout_log_probs:
        st.caption(
            "This run has no rollout-engine log-probs beside the trainer's: the ratio is 1 (the first mini-batch) "
            "and there is no train/inference mismatch to correct."
        )


def _draw_control(target, name: str, w, info: RunInfo, values) -> None:
    """Field ``name``'s declared widget ``w`` in ``target`` (the sidebar or one of its columns)."""
    if w.kind in DRAWERS:
        DRAWERS[w.kind](w.label)
        return
    ss = st.session_state
    key = cfg_key(name)
    common = dict(key=key, help=HELP[name](info) if name in HELP else FIELD_HELP[name])
    if w.kind in ("select", "segmented"):
        options = list(OPTIONS[name](info) if name in OPTIONS else w.options or config.choices(name))
        if w.options is not None and ss[key] not in options:
            ss[key] = config.FIELDS[name].default
        if w.none_label:
            options = [None, *options]
            common |= dict(format_func=lambda v: w.none_label if v is None else v, placeholder=w.none_label)
        elif name in FORMAT:
            common["format_func"] = FORMAT[name](info)
        elif w.value_labels:
            common["format_func"] = lambda v: dict(w.value_labels).get(v, v)
        if w.kind == "select":
            target.selectbox(w.label, options, **common)
            return
        if w.compact:  # the options on one row: Streamlit's button padding wraps "per step" in the sidebar's width
            css_key = badges.css_key_class(key)
            st.html(f"<style>.{css_key} button {{padding: 2px 6px; min-height: 2rem; font-size: 0.85rem;}}</style>")
        target.segmented_control(w.label, options, width=w.width or "content", **common)
    elif w.kind == "slider":
        target.slider(w.label, *config.bounds(name), step=w.step, **common)
    elif w.kind == "number":
        lo, hi = config.bounds(name) if w.bounded else (w.min_value, w.max_value)
        target.number_input(w.label, min_value=lo, max_value=hi, step=w.step, format=w.format, **common)
    elif w.kind in ("toggle", "checkbox"):
        draw = target.toggle if w.kind == "toggle" else target.checkbox
        draw(w.label, disabled=not controls.enabled(name, w, values, info), **common)
    elif w.kind == "text":
        target.text_input(w.label, **common)
    else:
        raise ValueError(f"CreditConfig.{name}: no sidebar widget of kind {w.kind!r}")


def loss_option(name: str) -> str:
    """A policy loss in the selector: its name and its label."""
    return f"{name} · {get_policy_loss(name).label}"


def loss_help(loss) -> str:
    """The loss selector's help: the chosen loss in words, what it computes (its docstring's first sentence), the
    trainer code it reproduces and the fields it reads; then the field's own help."""
    summary = loss.summary.replace("\n", " ").replace("``", "`")
    reads = ", ".join(f"`{f}`" for f in loss.reads) or "nothing beyond A"
    return (
        f"**{loss.label}** (`{loss.name}`): {summary}\n\nReproduces {loss.reference}. Reads {reads}.\n\n"
        f"{FIELD_HELP['policy_loss']}"
    )


def _estimator_format(info: RunInfo):
    ss = st.session_state
    return functools.partial(
        badges.estimator_option,
        labels={e.name: e.label for e in services.estimator_catalogue()},
        norm_by_std=bool(ss[cfg_key("norm_adv_by_std_in_grpo")]),
        info=info,
        value_source=ss[cfg_key("value_source")],
    )


def _estimator_note(info: RunInfo) -> None:
    ss = st.session_state
    if note := badges.estimator_note(ss[cfg_key("estimator")], info, ss[cfg_key("value_source")]):
        st.caption(note)


# What a field's declaration cannot say, by field: options that come from the run, words that come from a registry or
# the run, a note after the widget. Everything else about a widget is in its declaration (engine/config/scheme.py).
OPTIONS = {
    "estimator": lambda info: [e.name for e in services.available_estimators(info)],
    "placement": lambda info: runnable.placements(info.run_has),
}
FORMAT = {"estimator": _estimator_format, "policy_loss": lambda info: loss_option}
HELP = {
    "profile": lambda info: (
        FIELD_HELP["profile"] + "\n\n" + "\n\n".join(f"**{p.name}**: {p.help}" for p in PROFILES.values())
    ),
    "estimator": lambda info: (
        FIELD_HELP["estimator"]
        + "\n\nGRPO-family names follow the *Divide by group std* toggle (off: Dr.GRPO-style); GAE without a "
        "critic names the values it bootstraps from."
    ),
    "use_kl_in_reward": lambda info: FIELD_HELP["use_kl_in_reward"] + badges.log_prob_note(info),
    "policy_loss": lambda info: loss_help(get_policy_loss(st.session_state[cfg_key("policy_loss")])),
}
AFTER = {"estimator": _estimator_note}
SECTION_HEADINGS = {
    "policy": dict(
        body="**Policy loss**",
        help="What each token's gradient is after the advantage (Token view: gradient weight, PPO ratio, IS weight, "
        "train/inference mismatch).",
    )
}


LENGTH_PENALTY_DEFAULT = (0.25, 0.1, 0.1)  # prime-rl's LengthPenaltyConfig defaults (CONFIG.md length_penalty)


def _length_penalty_controls(label: str) -> None:
    """prime-rl's length penalty (GRPO on a run that carries each trace's lengths): on or off, and its three
    weights, prime-rl's defaults when first turned on."""
    ss = st.session_state
    committed = ss[cfg_key("length_penalty")]
    committed = None if committed is None else tuple(committed)
    if ss.get(K.LP_SHOWN, "unset") != committed or K.LP_ON not in ss:  # set elsewhere (a link, fit_scheme)
        ss[K.LP_ON] = committed is not None
        for key, w in zip(K.LP_WEIGHTS, committed or LENGTH_PENALTY_DEFAULT, strict=True):
            ss[key] = float(w)
        ss[K.LP_SHOWN] = committed
    st.toggle(label, key=K.LP_ON, on_change=_commit_length_penalty, help=FIELD_HELP["length_penalty"])
    if ss[K.LP_ON]:
        for col, key, name in zip(st.columns(3), K.LP_WEIGHTS, ("w out", "w in", "w turns"), strict=True):
            col.number_input(name, min_value=0.0, step=0.05, key=key, on_change=_commit_length_penalty)


def _commit_length_penalty() -> None:
    ss = st.session_state
    value = tuple(float(ss[k]) for k in K.LP_WEIGHTS) if ss[K.LP_ON] else None
    ss[cfg_key("length_penalty")] = ss[K.LP_SHOWN] = value


def _rejection_controls(label: str) -> None:
    """Rollout rejection (verl ``rollout_rs``): the options, and their thresholds typed as verl's config takes
    them (comma-separated, one for all or one per option). They reach the scheme together, once valid."""
    ss = st.session_state
    committed = (tuple(ss[cfg_key("rollout_rs")]), tuple(ss[cfg_key("rollout_rs_threshold")]))
    if ss.get(K.RS_SHOWN) != committed or K.RS_OPTIONS not in ss:  # set elsewhere (a link, a sample's scheme)
        ss[K.RS_OPTIONS] = list(committed[0])
        ss[K.RS_THRESHOLDS] = ", ".join(committed[1])
        ss[K.RS_SHOWN] = committed
        ss.pop(K.RS_ERROR, None)
    st.multiselect(
        label,
        RS_OPTIONS,
        key=K.RS_OPTIONS,
        on_change=_commit_rejection,
        placeholder="off",
        help=FIELD_HELP["rollout_rs"],
    )
    if ss[K.RS_OPTIONS] or ss[K.RS_THRESHOLDS]:
        st.text_input(
            "Rejection thresholds",
            key=K.RS_THRESHOLDS,
            on_change=_commit_rejection,
            placeholder="e.g. 0.5_2.0 (k1: ratio bounds), 0.01 (k2, k3)",
            help=FIELD_HELP["rollout_rs_threshold"] + " Comma-separated, as verl's rollout_rs_threshold.",
        )
    if K.RS_ERROR in ss:
        st.warning(f"Rollout rejection not applied: {ss[K.RS_ERROR]}", icon=":material/block:")


DRAWERS = {"length_penalty": _length_penalty_controls, "rollout_rs": _rejection_controls}  # widget kind → drawer


def _commit_rejection() -> None:
    """The rejection widgets' values into the scheme when they make a valid one; otherwise why not (shown)."""
    ss = st.session_state
    options = tuple(ss[K.RS_OPTIONS])
    specs = tuple(s.strip() for s in ss.get(K.RS_THRESHOLDS, "").split(",") if s.strip()) if options else ()
    try:
        CreditConfig(rollout_rs=options, rollout_rs_threshold=specs)
    except ValueError as e:
        ss[K.RS_ERROR] = str(e).removeprefix("CreditConfig.")
        return
    ss[cfg_key("rollout_rs")], ss[cfg_key("rollout_rs_threshold")] = options, specs
    ss[K.RS_SHOWN] = (options, specs)
    ss.pop(K.RS_ERROR, None)
