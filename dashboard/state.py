"""Every session-state key, its default, and the sync with the URL's query parameters (deep links).

Widgets are created with ``key=`` one of these names and never with ``value=``: the value lives in
``st.session_state`` (defaults set by ``init``), so it survives page switches and can be set from a URL.
Query parameters: ``run`` (a sample name, ``data:<path>``), ``step`` (the training step of a run of several, when
one is pinned; a link without it follows the run's latest step),
``traj`` (trajectory id), ``scheme`` (the sidebar scheme as a code, see ``schemes``), ``schemes`` (the compare
page's, ``~``-joined), ``overlay`` (the timeline's second scheme) and ``page`` (url path).
"""

from __future__ import annotations

import numbers
import re

import streamlit as st

from dashboard import schemes, sources
from dashboard.sources import DEFAULT_SAMPLE, RunRef
from engine import config
from engine.config import CreditConfig
from engine.config.scheme import VALUE_STAND_INS
from engine.policy import check_threshold
from engine.runnable import scheme_fixes


class K:
    """Session-state keys (the only place they are spelled)."""

    RUN = "run"  # str(RunRef) of the run shown
    RUN_SOURCE = "run.source"  # "Sample" | "Upload" | "Data directory"
    SAMPLE = "run.sample"
    DATA_FILE = "run.data_file"
    UPLOADER = "run.uploader"
    UPLOADS = "run.uploads"  # {content hash: LoadResult}, this session only
    UPLOAD_IDS = "run.upload_ids"  # {uploader file id: content hash}, so a rerun does not reload
    RESPONSE_LENGTH = "run.response_length"  # the trainer's response length limit for lossy dumps; 0 = unknown
    STEP = "run.step"  # the training step shown, in a run of several steps (None: a run of one step)
    STEP_FOLLOW = "run.step_follow"  # True: the step follows the run's latest (a live run's new steps open)
    STEP_RUN = "run.step_run"  # the run the step picker was last set for (a new run opens at its latest step)
    STEP_VIEWS = "run.step_views"  # {(upload content hash, "step", step): its step as a run}, this session only
    CONTEXT = "page.context"  # widgets.Context, rewritten by app.py on every run
    TRAJ = "traj"  # trajectory id
    LANDING = "nav.landing"  # url path asked for by ?page= on the first run
    URL_READ = "nav.url_read"
    LINK_PROBLEMS = "nav.link_problems"  # what the opening link asked for and did not get (shown until dismissed)
    SCHEME_RUN = "run.scheme_run"  # the run whose default scheme the sidebar was last set to (see sample_scheme)
    SCHEME_RESET = "run.scheme_reset"  # what the sidebar last reset because the scheme refused it (shown once)
    # the sidebar's rollout rejection: its two widgets write cfg.rollout_rs / cfg.rollout_rs_threshold only when
    # together they make a valid scheme (verl needs a threshold per option, or one for all)
    RS_OPTIONS = "sidebar.rs.options"
    RS_THRESHOLDS = "sidebar.rs.thresholds"
    RS_SHOWN = "sidebar.rs.shown"  # the (options, thresholds) the two widgets were last filled from or committed
    RS_ERROR = "sidebar.rs.error"  # why what the widgets say is not applied, or absent
    # prime-rl's length penalty: a toggle and three weights that write cfg.length_penalty (None when off)
    LP_ON = "sidebar.lp.on"
    LP_WEIGHTS = ("sidebar.lp.out", "sidebar.lp.in", "sidebar.lp.turns")
    LP_SHOWN = "sidebar.lp.shown"  # the cfg.length_penalty the widgets were last filled from or committed
    # token view
    QUANTITY = "tokens.quantity"
    OVERLAYS = "tokens.overlays"
    WINDOW = "tokens.window"
    HEAT_ROWS = "tokens.heat_rows"
    HEAT_SHOW = "tokens.heat_show"  # the heatmap toggle
    HEAT_AUTO = "tokens.heat_auto"  # True until the toggle is touched: heatmap on for trajectories over one window
    HIGHLIGHT = "tokens.highlight"  # FindingView.ident of the Diagnostics finding whose tokens are outlined, or None
    # compare
    SCHEMES = "compare.schemes"  # list of scheme codes
    CMP_REF = "compare.reference"
    CMP_TURN_MODE = "compare.turn_mode"
    CMP_NEW_ESTIMATOR = "compare.new.estimator"
    CMP_NEW_PROFILE = "compare.new.profile"
    CMP_NEW_PLACEMENT = "compare.new.placement"
    CMP_NEW_MODE = "compare.new.mode"
    CMP_LOSS_ONLY = "compare.loss_only"  # charts and differences on loss tokens only
    CMP_GRID_START = "compare.grid_start"  # first token of the aligned grid's window
    # designer (every control's key starts with DS_PREFIX, so "reset" can drop them all; no button keys here)
    DS_PREFIX = "designer.ctl."
    DS_WEIGHT_PREFIX = "designer.ctl.w."
    DS_VIEW = "designer.ctl.view"
    DS_PLACEMENT = "designer.ctl.placement"
    DS_KL_COEF = "designer.ctl.kl_coef"
    DS_ESTIMATOR = "designer.ctl.estimator"
    DS_GAMMA = "designer.ctl.gamma"
    DS_LAM = "designer.ctl.lam"
    DS_NORM_STD = "designer.ctl.norm_std"
    DS_MASKING = "designer.ctl.state_masking"
    # analytics
    AN_ESTIMATORS = "analytics.estimators"
    # timeline
    TL_OVERLAY = "timeline.overlay"  # the second scheme's code, or "" (none)
    # learn
    LEARN_NORM_STD = "learn.norm_std"
    # diagnostics
    DIAG_SEVERITIES = "diagnostics.severities"
    DIAG_PICK_PREFIX = "diagnostics.pick."  # + FindingView.ident: the affected trajectory a finding opens


# The credit-scheme fields the sidebar sets; each is a widget keyed "cfg.<field>", but for the rollout rejection's
# two (K.RS_OPTIONS, K.RS_THRESHOLDS write them) and the length penalty (K.LP_ON, K.LP_WEIGHTS).
CFG_FIELDS = ("estimator", *schemes.SHORT)
CFG_PREFIX = "cfg."


def cfg_key(field: str) -> str:
    return CFG_PREFIX + field


def _cfg_defaults(cfg: CreditConfig) -> dict:
    return {cfg_key(f): getattr(cfg, f) for f in CFG_FIELDS}


DEFAULT_SCHEME = CreditConfig(estimator="gae", value_source=None)
DEFAULTS: dict = {
    K.RUN: DEFAULT_SAMPLE,
    K.RUN_SOURCE: "Sample",
    K.SAMPLE: DEFAULT_SAMPLE,
    K.DATA_FILE: None,
    K.RESPONSE_LENGTH: 0,
    K.STEP: None,
    K.STEP_FOLLOW: True,
    K.TRAJ: None,
    K.TL_OVERLAY: "",
    K.QUANTITY: "advantage",
    K.OVERLAYS: ["info", "loss"],
    K.WINDOW: 1,
    K.HEAT_ROWS: ["token score", "reward", "value", "return", "advantage", "effective weight"],
    K.HEAT_SHOW: False,
    K.HEAT_AUTO: True,
    K.SCHEMES: list(schemes.DEFAULT_COMPARE),
    K.CMP_REF: 0,
    K.CMP_TURN_MODE: "per token",
    K.CMP_NEW_ESTIMATOR: "rloo",
    K.CMP_NEW_PROFILE: "verl",
    K.CMP_NEW_PLACEMENT: "auto",
    K.CMP_NEW_MODE: "trajectory",
    K.CMP_LOSS_ONLY: True,
    K.CMP_GRID_START: 0,
    K.AN_ESTIMATORS: ["grpo", "rloo", "gae", "reinforce_plus_plus"],
    K.LEARN_NORM_STD: False,
    K.HIGHLIGHT: None,
    K.DIAG_SEVERITIES: ["error", "warning", "info"],
    **_cfg_defaults(DEFAULT_SCHEME),
}
# Keys whose widget state must survive a page switch (Streamlit drops state of widgets not drawn in a run).
PERSISTENT = tuple(k for k in DEFAULTS if k not in (K.RUN,))


def init() -> None:
    """Defaults for missing keys, then (once per session) the URL's query parameters on top."""
    ss = st.session_state
    for k, v in DEFAULTS.items():
        if k not in ss:
            ss[k] = list(v) if isinstance(v, list) else v
    ss.setdefault(K.UPLOADS, {})
    ss.setdefault(K.UPLOAD_IDS, {})
    if not ss.get(K.URL_READ):
        ss[K.URL_READ] = True
        ss[K.LINK_PROBLEMS] = apply_query_params(dict(st.query_params))


def landing_page(known: set[str]) -> str:
    """The url path "/" opens: the one a link's ``?page=`` named on the session's first run, else the token view
    (an unknown name is one of the link's problems)."""
    ss = st.session_state
    page = ss.pop(K.LANDING, None)
    if page is not None and page not in known:
        ss[K.LINK_PROBLEMS] = [*ss.get(K.LINK_PROBLEMS, []), f"there is no page {page!r}; the token view opened"]
        page = None
    return page or "tokens"


def show_link_problems() -> None:
    """Above the page: what the link that opened this session asked for and did not get, until dismissed."""
    problems = st.session_state.get(K.LINK_PROBLEMS)
    if not problems:
        return
    with st.container(border=True, key="link-problems"):
        st.warning(
            "This link could not be followed in full:\n\n" + "\n".join(f"- {markdown_escape(p)}" for p in problems),
            icon=":material/link_off:",
        )
        st.button("Dismiss", key="link-problems-dismiss", on_click=dismiss_link_problems, type="tertiary")


def dismiss_link_problems() -> None:
    st.session_state[K.LINK_PROBLEMS] = []


# Plain text inside Streamlit Markdown (every widget label, help tooltip, expander title, tab, metric label, message,
# caption and toast is Markdown). Backslash escapes are invisible once rendered; they stop images and links ([ ]),
# HTML and <autolinks> (< >), code (`), emphasis (* and _ unless inside a word), strikethrough (~), tables (|),
# LaTeX ($), entities (&) and Streamlit's directives (:red[…], :material/icon:, all started by ':'). Streamlit turns
# ':material/' into ':material_' in the raw text before parsing, so that '/' is escaped too. Block syntax matters at
# the start of a line only: headings, lists, quotes, setext underlines. Three things act on the text after escapes
# are resolved, so no escape stops them: GFM links bare URLs and e-mail addresses, and emoji shortcodes (":smile:")
# are replaced, also when the closing ':' is the app's own ("{name}: {error}"). An invisible word joiner (U+2060)
# does: before "http"/"www" and after "@" (GFM links only after a space or punctuation, and a domain starts with a
# letter or digit), and after a ':' that a shortcode name could follow. Checked in a real browser by
# tests/test_browser_markdown.py. (st.badge is the exception: Streamlit puts its label inside a directive, where
# escapes show; give it none of the user's text.)
WORD_JOINER = "\u2060"
_MD_WJ = re.compile(r"(?=(?:https?://|www\.))|(?<=@)(?=[-\w])", re.IGNORECASE)
_MD_ALWAYS = re.compile(r"[\\`*\[\]<>|~$&]|(?<=:material)/|_(?![^\W_])|(?<![^\W_])_")
_MD_COLON = re.compile(r":(?=([\w+-])?)")
_MD_LINE_START = re.compile(r"^([ \t]*)([#+\-=]|\d+[.)])", re.MULTILINE)


def markdown_escape(text: str) -> str:
    """``text`` (user-controlled: a file name, an id, a reward component name, an error message) as Markdown that
    Streamlit renders as exactly that text, in a label or a message (``md`` puts it into the app's own Markdown)."""
    text = _MD_WJ.sub(WORD_JOINER, str(text))
    text = _MD_ALWAYS.sub(lambda m: "\\" + m.group(0), text)
    text = _MD_COLON.sub(lambda m: "\\:" + (WORD_JOINER if m.group(1) else ""), text)
    return _MD_LINE_START.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], text)


def md(template: str, /, *args, **kwargs) -> str:
    """``template.format(*args, **kwargs)`` for a Streamlit label or message: ``template`` is the app's own Markdown,
    every argument is plain text and is escaped (``markdown_escape``); numbers keep their format spec. The one way
    to put a file name, an id, a component name or an exception into Markdown."""

    def plain(v):
        return v if isinstance(v, numbers.Number) else markdown_escape(str(v))

    return template.format(*map(plain, args), **{k: plain(v) for k, v in kwargs.items()})


def keep_widget_state() -> None:
    """Re-assign page widgets' values so Streamlit keeps them while their page is not shown."""
    ss = st.session_state
    for k in list(ss.keys()):
        if k in PERSISTENT or k.startswith(K.DS_PREFIX) or k.startswith(CFG_PREFIX):
            ss[k] = ss[k]


# Widget callbacks (and format_func) live in modules, never as lambdas or functions defined in a page: Streamlit
# keeps them with the widget until the page runs again, and a function defined in a page keeps that page's whole
# globals alive (the last credit result among them, 1 GiB on a 50,000-trajectory run), so a dropped result stayed
# in memory while the sidebar computed the next scheme.
def step_picked() -> None:
    """The step picker was moved: the step stays where the person put it (no longer the latest)."""
    st.session_state[K.STEP_FOLLOW] = False


def overlay_label(code: str) -> str:
    """The timeline's second-scheme picker: a scheme code, or "none"."""
    return code or "none"


def show_step(step: int) -> None:
    """Show training step ``step`` (the timeline's "open this step"): it stays there, no longer following the latest."""
    ss = st.session_state
    ss[K.STEP], ss[K.STEP_FOLLOW] = step, False


def clear_highlight() -> None:
    """Token view's "Clear highlight" button: forget the Diagnostics finding whose tokens are outlined."""
    st.session_state[K.HIGHLIGHT] = None


def heatmap_toggled() -> None:
    """Token view's heatmap toggle was touched: from now on the person decides, not the trajectory's length."""
    st.session_state[K.HEAT_AUTO] = False


def apply_query_params(params: dict[str, str]) -> list[str]:
    """Put a deep link's parameters into session state; returns the problems found, in words (a run that is not
    here, a bad scheme code: each is left out and the view says so)."""
    ss = st.session_state
    problems = []
    if run := params.get("run"):
        ref = RunRef.parse(run)
        if missing := _missing_run(ref):
            problems.append(f"{missing}; {DEFAULT_SAMPLE} opened instead")
        elif ref.kind == "sample":
            ss[K.RUN_SOURCE], ss[K.SAMPLE], ss[K.RUN] = "Sample", ref.name, str(ref)
        else:
            ss[K.RUN_SOURCE], ss[K.DATA_FILE], ss[K.RUN] = "Data directory", ref.name, str(ref)
    if step := params.get("step"):
        if step.isdigit():
            ss[K.STEP], ss[K.STEP_FOLLOW], ss[K.STEP_RUN] = int(step), False, ss.get(K.RUN, DEFAULT_SAMPLE)
        else:
            problems.append(f"step {step!r} is not a step number; the run's latest step opened")
    if traj := params.get("traj"):
        ss[K.TRAJ] = traj
    if overlay := params.get("overlay"):
        try:
            schemes.decode(overlay)
            ss[K.TL_OVERLAY] = overlay
        except ValueError as e:
            problems.append(f"timeline overlay: {e}; no second scheme is drawn")
    if code := params.get("scheme"):
        try:
            cfg = schemes.decode(code)
            ss.update(_cfg_defaults(cfg))
            ss[K.SCHEME_RUN] = ss.get(K.RUN, DEFAULT_SAMPLE)  # the link's scheme wins over the run's default
        except ValueError as e:
            problems.append(f"{e}; the run's default scheme is used")
    if codes := params.get("schemes"):
        try:
            ss[K.SCHEMES] = schemes.decode_many(codes)[:6]
        except ValueError as e:
            problems.append(f"compare schemes: {e}; the default schemes are compared")
    if page := params.get("page"):
        ss[K.LANDING] = page
    return problems


def _missing_run(ref: RunRef) -> str:
    """Why the link's run cannot be opened here ("" when it can)."""
    if ref.kind == "upload":
        return "an uploaded run cannot be opened from a link (upload the file again)"
    if ref.kind == "sample":
        return "" if ref.name in sources.list_samples() else f"there is no sample run {ref.name!r}"
    if sources.data_dir() is None:
        return f"the run {ref.name!r} is in a data directory, and this server has none ({sources.DATA_DIR_ENV})"
    return "" if ref.name in sources.list_data_files() else f"there is no run {ref.name!r} in the data directory"


def write_query_params(page: str) -> None:
    """Mirror the current view into the URL so that it can be shared."""
    ss = st.session_state
    params = {"page": page, "run": ss.get(K.RUN, DEFAULT_SAMPLE)}
    if ss.get(K.RUN, "").startswith("upload:"):
        params.pop("run")  # an upload cannot be linked
    if ss.get(K.STEP) is not None and not ss.get(K.STEP_FOLLOW):  # following: the link means "the latest step"
        params["step"] = str(ss[K.STEP])
    if ss.get(K.TRAJ) is not None:
        params["traj"] = str(ss[K.TRAJ])
    params["scheme"] = schemes.encode(sidebar_config())
    params["schemes"] = schemes.encode_many(ss.get(K.SCHEMES, []))
    if ss.get(K.TL_OVERLAY):
        params["overlay"] = ss[K.TL_OVERLAY]
    if {k: st.query_params.get(k) for k in params} != params or set(st.query_params) != set(params):
        st.query_params.from_dict(params)


def fit_scheme(values: dict, info, estimators: list[str]) -> dict:
    """The sidebar's scheme ``values`` ({CreditConfig field: value}) made valid for a run described by ``info``
    (a ``tables.RunInfo``) whose computable estimators are ``estimators``: only the fields that change."""
    fixed: dict = {}
    if values["estimator"] not in estimators:
        fixed["estimator"] = "gae" if info.has_values else "grpo"
    if info.has_values:
        fixed["value_source"] = None
    elif values["value_source"] not in VALUE_STAND_INS:
        fixed["value_source"] = "zeros"
    for field in ("stepwise_mode", "grpo_std_scope", "policy_ratio_base"):  # cleared controls: their default
        if field in values and values[field] not in config.choices(field):
            fixed[field] = config.FIELDS[field].default
    if "rollout_is_threshold" in values:  # a threshold typed in the sidebar that verl would refuse: the default
        try:
            check_threshold("rollout_is_threshold", str(values["rollout_is_threshold"]))
        except ValueError:
            fixed["rollout_is_threshold"] = config.FIELDS["rollout_is_threshold"].default
    # prime-rl's length penalty reads the trace lengths the verifiers traces carry (GRPO only: the config refuses
    # it elsewhere, and refusal_fixes resets it)
    if values.get("length_penalty") is not None and not getattr(info, "has_trace_lengths", False):
        fixed["length_penalty"] = None
    if not getattr(info, "has_rollout_log_probs", False):  # the rollout correction needs both engines' log-probs
        for field, default in (("rollout_is", None), ("policy_ratio_base", "trainer"), ("rollout_rs", ()),
                               ("rollout_rs_threshold", ())):  # fmt: skip
            if field in values and (tuple(values[field]) if default == () else values[field]) != default:
                fixed[field] = default
    for fix in scheme_fixes({k: values[k] for k in ("use_kl_in_reward", "placement")}, info.run_has):
        fixed[fix.field] = fix.used  # what the run cannot give (engine.runnable)
    return {k: v for k, v in fixed.items() if values[k] != v}


def refusal_fixes(values: dict) -> tuple[dict, list[str]]:
    """Sidebar ``values`` ({CreditConfig field: value}) that the config refuses because of one field's value (a
    value another field rules out: token-sum under a profile without it, a sequence IS weight under OpenRLHF, ...):
    that field back to its default, field by field until the scheme is valid. Returns (the fields that change,
    what was reset and why, in the config's words). A refusal that names no sidebar field is left for the page to
    report."""
    fixed: dict = {}
    notes: list[str] = []
    for _ in range(len(values)):
        try:
            CreditConfig(**{**values, **fixed})
            break
        except ValueError as e:
            hit = re.match(r"CreditConfig\.(\w+): ", str(e))
            field = hit[1] if hit else None
            if field not in values or field in fixed or field in ("estimator", "profile"):
                break
            fixed[field] = config.FIELDS[field].default
            name = config.label(field)
            if not name[1:2].isupper():  # "loss aggregation" → "Loss aggregation"; "rLLM mode" stays
                name = name[:1].upper() + name[1:]
            notes.append(f"{name} reset to its default: {str(e).removeprefix(hit[0])}")
    return fixed, notes


def apply_run_scheme(run: str, has_values: bool, source: str = "") -> str:
    """The first time the sidebar shows ``run`` (a ``RunRef`` string), set its scheme to the run's default: a
    sample's source conventions (``sources.sample_scheme``). A link's own ``scheme`` and uploads or data files keep
    the current scheme, except that a run whose format (``source``) implies a trainer's profile
    (``sources.format_scheme``: TRL's completion logs, prime-rl's traces) opens under it. Returns why ("" when
    nothing applies)."""
    ss = st.session_state
    ref = RunRef.parse(run)
    if ref.kind != "sample":
        first = ss.get(K.SCHEME_RUN) != run
        ss[K.SCHEME_RUN] = run
        implied = sources.format_scheme(source)
        if implied is None:
            return ""
        fields, why = implied
        if first:
            ss.update({cfg_key(f): v for f, v in fields.items()})
        shown = {f: ("on" if v else "off") if isinstance(v, bool) else v for f, v in fields.items()}
        said = ", ".join(f"{config.label(f)} `{v}`" for f, v in shown.items())  # the app's own words and values
        return f"This run opens with {said}: {why}."
    code, why = sources.sample_scheme(ref.name, has_values)
    if ss.get(K.SCHEME_RUN) != run:
        ss[K.SCHEME_RUN] = run
        ss.update(_cfg_defaults(schemes.decode(code)))
    return f"{markdown_escape(ref.name)} opens with `{code}`: {why}."  # code and why: the app's own


def sidebar_config() -> CreditConfig:
    """The scheme the sidebar's widgets describe (conventions filled from its profile)."""
    ss = st.session_state
    values = {f: ss.get(cfg_key(f), getattr(DEFAULT_SCHEME, f)) for f in CFG_FIELDS}
    return CreditConfig(**values)


# ------------------------------------------------------------------------------------------------ designer
DESIGN_FIELDS = {  # designer widget key → CreditConfig field it sets directly
    K.DS_PLACEMENT: "placement",
    K.DS_ESTIMATOR: "estimator",
    K.DS_GAMMA: "gamma",
    K.DS_LAM: "lam",
    K.DS_NORM_STD: "norm_adv_by_std_in_grpo",
    K.DS_MASKING: "state_masking",
}


def weight_key(kind: str, name: str) -> str:
    """Designer slider key of reward component ``name`` (kind: turn | global)."""
    return f"{K.DS_WEIGHT_PREFIX}{kind}.{name}"


def init_designer(base: CreditConfig, turn_names: tuple[str, ...], global_names: tuple[str, ...]) -> None:
    """Designer controls start from ``base`` (the sidebar scheme) the first time, and after a reset."""
    ss = st.session_state
    for key, field in DESIGN_FIELDS.items():
        ss.setdefault(key, getattr(base, field))
    ss.setdefault(K.DS_KL_COEF, base.kl_coef if base.use_kl_in_reward else 0.0)
    ss.setdefault(K.DS_VIEW, "advantage")
    for kind, names, table in (("turn", turn_names, base.turn_weights), ("global", global_names, base.global_weights)):
        weights = dict(table)
        for name in names:
            ss.setdefault(weight_key(kind, name), float(weights.get(name, 1.0)))


def reset_designer() -> None:
    ss = st.session_state
    for k in [k for k in ss if str(k).startswith(K.DS_PREFIX)]:
        del ss[k]


def designer_config(base: CreditConfig, turn_names: tuple[str, ...], global_names: tuple[str, ...]) -> CreditConfig:
    """The scheme the designer's controls describe: ``base`` with their weights, placement, β, estimator, γ, λ, std
    normalisation and masking (β = 0 means no in-reward KL)."""
    ss = st.session_state
    beta = ss[K.DS_KL_COEF]
    return base.replace(
        turn_weights=tuple((n, ss[weight_key("turn", n)]) for n in turn_names) or base.turn_weights,
        global_weights=tuple((n, ss[weight_key("global", n)]) for n in global_names) or base.global_weights,
        use_kl_in_reward=beta > 0,
        kl_coef=beta if beta > 0 else base.kl_coef,
        **{field: ss[key] for key, field in DESIGN_FIELDS.items()},
    )
