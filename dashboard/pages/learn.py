"""Learn: a guided walkthrough for teaching, led by the two worked examples' own numbers (docs/TUTORIAL.md §7).

(a) A write-up of KG-R1's structured multi-turn reward pipeline: its literal reward dict on a tiny trajectory,
every step run by the engine (``dashboard.teach``), then the sidebar's trajectory under the sidebar's scheme.
(b) Notes on rLLM's training flow, its three advantage modes: their table beside the engine's numbers on
python_tool_two_rollouts.
(c) ``compute_credit`` and its four stages, each with the engine's own source (``teach.pipeline_code``)."""

import numpy as np
import streamlit as st

from dashboard import analysis, loading, services, tables, teach, tokens_html, widgets
from dashboard.figures.compare import make_scheme_rows_figure
from dashboard.sources import RunRef
from dashboard.state import K, markdown_escape, md
from dashboard.theme import symmetric_range
from engine import CreditConfig, get_estimator

PYTHON_TOOL_SAMPLE = teach.RLLM_SAMPLE
TAIL = 160  # tokens of a long trajectory shown in the "your run" boxes: the last ones, where final_token_only acts

ctx = widgets.sampled_context(widgets.require_context())  # a big run: an even sample of whole groups
widgets.big_text_css()
st.html(  # metric values as big as the projector needs (the value's own element carries the font size)
    "<style>.stMainBlockContainer [data-testid='stMetricValue'],"
    " .stMainBlockContainer [data-testid='stMetricValue'] * {font-size: 2.2rem !important;}</style>"
)
widgets.heading("Learn: how credit reaches the tokens", ctx.info.name, note=ctx.note)


def f(x: float, digits: int = 5) -> str:
    """A number as the page writes it: ``digits`` significant digits, −0 shown as 0."""
    x = float(x)
    return "0" if abs(x) < 1e-9 else f"{x:.{digits}g}"


def tokens(table, quantity, vmax=None, tail=None, labels=None):
    """Coloured tokens of a token table, big type, no fixed-height box; ``tail``: only the last ``tail`` tokens
    (the page says how many are left out); ``labels``: 1-based turn → block heading."""
    v = vmax if vmax is not None else (symmetric_range(table[quantity].to_numpy()) if quantity else 1.0)
    if quantity:
        st.html(tokens_html.legend_html(quantity, v, ("info",)))
    n = len(table)
    start = max(0, n - tail) if tail else 0
    if start:
        st.caption(f"The last {n - start} of {n} tokens (the Token view shows every one).")
    markup = widgets.cached(
        tokens_html.token_html, table, quantity, v, ("info",), (start, n), turn_labels=labels, big=True
    )
    st.html(markup)


def step(n: int, title: str) -> None:
    st.markdown(f"### Step {n} · {title}")


tab_a, tab_b, tab_c = st.tabs(
    [
        "(a) KG-R1 structured rewards worked example",
        "(b) rLLM three advantage modes worked example",
        "(c) The pipeline's code",
    ]
)

# ------------------------------------------------------------------------------------------------ (a)
with tab_a:
    ex = teach.kgr1_example()
    lit = teach.structured_total()
    tok = teach.token_steps_table(ex)
    grp = teach.group_table(ex)
    n_loss = int(tok["in loss"].sum())
    n_tok, n_info = len(tok), int((tok["role"] != "model").sum())
    last_pos, last_text, last_val = teach.last_action_token(ex)
    st.markdown(
        "## KG-R1 structured rewards, the document's own numbers\n"
        "Generation → structured rewards → token-level rewards → KL penalty → advantage (GAE or GRPO) → score, "
        "as KG-R1's reward write-up describes it, on the reward values it writes. Every number below is computed "
        "by the CreditLens engine on a tiny trajectory that carries exactly those values. Further down: "
        "**the same steps on your run**."
    )
    st.caption(
        "Source: a write-up of KG-R1's structured multi-turn reward pipeline (KG-R1 7538a53, ray_trainer_kg.py), "
        "summarised with its numbers in docs/TUTORIAL.md §7.1."
    )

    step(1, "Generation")
    st.markdown(
        f"The policy writes a turn (think + a `kg-query`), the KG server answers with an `<information>` block "
        f"(**hatched**: info tokens, not written by the policy), then the policy answers. The document gives "
        f"rewards, not text, so these **{n_tok}** tokens (one word = one token) are made up here to carry its "
        f"rewards: **2** turns, **{n_info}** info tokens, **{n_loss}** policy tokens. `turn_sequence_tensor` says "
        "which turn each token belongs to; `info_mask` marks the info tokens."
    )
    turn_labels = [f"turn {t}" for t in tok["turn"]]
    st.html(teach.value_tokens_html(tok["token"], tok["role"], np.zeros(n_tok), 1.0, labels=turn_labels))

    step(2, "Structured rewards")
    st.markdown("The reward manager returns, as written in the document:")
    st.code(
        "turn_rewards   = {1: 0.15, 2: 0.20, ...}\n"
        "global_rewards = {exact_match: 0.3, retrieval_quality: 0.4, _raw_exact_match: 0.6 (log only), ...}\n"
        "total_score    = 0.65",
        language="python",
    )
    st.latex(
        r"\text{total} = \underbrace{\tfrac{1}{K}\textstyle\sum_k r_k}_{\text{mean turn reward}}"
        r" + \underbrace{\textstyle\sum_{c\,\notin\,\texttt{\_raw\_*}} g_c}_{G}"
    )
    st.dataframe(teach.doc_reward_table(lit), hide_index=True, width="stretch", height="content")
    st.markdown(
        f"For the values written: mean turn reward (0.15 + 0.20) / 2 = **{f(lit.mean_turn)}**; "
        f"G = 0.3 + 0.4 = **{f(lit.global_sum)}** (`_raw_exact_match` = 0.6 starts with `_raw_`, so it is "
        f"logged only and left out); total = {f(lit.mean_turn)} + {f(lit.global_sum)} = **{f(lit.total)}**. "
        f"The engine's Σ of the token rewards agrees: **{f(grp['total (Σ token rewards)'][0])}**."
    )
    st.info(
        f"The document's `total_score` is **{f(teach.DOC_TOTAL_SCORE)}**, not {f(lit.total)}: its values are "
        "illustrative and the `...` stands for more turns and components that are not written, so 0.65 cannot be "
        "reproduced from the values shown. This page uses the values as written and the document's own formula. "
        "They are read as already-weighted contributions (weight 1 each; KG-R1's default weights are exact_match "
        "0.3 and retrieval_quality 0.4, so 0.3 and 0.4 are a full match and full retrieval).",
        icon=":material/info:",
    )

    step(3, "Token-level rewards")
    st.markdown(
        f"**`final_token_only`** (the GAE path): the whole total goes on the last policy token, "
        f"**`{last_text.strip().replace('`', '')}`** (token #{last_pos}), which gets **{f(last_val)}**; every "
        "other token gets 0."
    )
    vmax = max(abs(last_val), 1e-6)
    st.html(teach.value_tokens_html(tok["token"], tok["role"], tok["final_token_only"], vmax, 3))
    pt = teach.placement_turn_table(ex)
    g_n = f(pt["G / n"][0], 4)
    st.markdown(
        f"**`turn_proportional`** (the KL path): each turn's reward is spread over that turn's policy tokens and G "
        f"over all {n_loss} of them. Turn 1: 0.15 / {pt['loss tokens n_k'][0]} + 0.7 / {n_loss} = "
        f"{f(pt['r_k / n_k'][0], 4)} + {g_n} = **{f(pt['each token gets'][0], 4)}** per token; turn 2: 0.20 / "
        f"{pt['loss tokens n_k'][1]} + {g_n} = **{f(pt['each token gets'][1], 4)}**. Info tokens get nothing."
    )
    st.html(teach.value_tokens_html(tok["token"], tok["role"], tok["turn_proportional"], vmax, 3))
    st.dataframe(pt, hide_index=True, width="stretch", height="content")
    st.markdown(
        f"The two placements do not carry the same total: `final_token_only` puts the **mean** turn reward + G = "
        f"**{f(tok['final_token_only'].sum())}** on the trajectory, `turn_proportional` every turn's reward + G = "
        f"0.15 + 0.20 + 0.7 = **{f(tok['turn_proportional'].sum())}** (the sum, not the mean, of the turn rewards)."
    )

    step(4, "KL penalty")
    st.latex(
        r"\text{reward}_t = s_t - \beta\,\mathrm{KL}_t\,m_t,\qquad \mathrm{KL}_t = \log\pi_{old}(a_t) - "
        r"\log\pi_{ref}(a_t)"
    )
    st.markdown(
        "With `use_kl_in_reward`, KG-R1 places the rewards with `turn_proportional` and subtracts β·KL on every "
        "policy token (state masking: info tokens get no KL). The document gives no log-probabilities, so in this "
        "example KL = 0 and the rewards are the token scores of step 3. Your run's KL is shown below when it has "
        "log-probs."
    )

    step(5, "Advantage: GAE or GRPO")
    wm, ws, wn = teach.whitening_stats(ex)
    st.latex(r"\textbf{GAE:}\quad " + get_estimator("gae").formula)
    st.markdown(
        "The document's trainer uses **γ = λ = 1**. It has no critic values for this example, so **V = 0** on "
        "every token (`value_source = zeros`). Then δₜ = rₜ and Aₜ = Σ_{s ≥ t} rₛ: every token "
        "before the "
        f"answer's end sees the reward-to-go, **{f(tok['GAE A before whitening'][0])}** (KG-R1 runs GAE over the "
        f"attention mask, so the info tokens are steps too). Returns = A + V = **{f(tok['GAE return'][0])}**. "
        f"verl then whitens the advantages over the whole batch: here the 3 trajectories of the group below, "
        f"{wn} tokens with mean {f(wm, 4)} and std {f(ws, 4)}, so this trajectory's tokens get "
        f"({f(tok['GAE A before whitening'][0])} − {f(wm, 4)}) / {f(ws, 4)} = "
        f"**{f(tok['GAE A (whitened)'][0], 4)}**. Alone in a batch, every token would have the same raw "
        "advantage and whitening would give 0."
    )
    st.html(teach.value_tokens_html(tok["token"], tok["role"], tok["GAE A (whitened)"], 1.5, 3))
    st.latex(r"\textbf{GRPO:}\quad " + get_estimator("grpo").formula)
    gm, gs = float(ex.grpo.group_mean[0]), float(ex.grpo.group_std[0])
    totals = " + ".join(f(v) for v in grp["total (Σ token rewards)"])
    st.markdown(
        "GRPO needs a group of answers to the same question. The document shows one trajectory, so two made-up "
        "members answer wrongly (only their global rewards differ; turn rewards stay 0.15 and 0.20): "
        f"mean = ({totals}) / 3 = **{f(gm, 4)}**, std (unbiased, as `torch.std`) = **{f(gs, 4)}**, so "
        f"A = ({f(lit.total)} − {f(gm, 4)}) / ({f(gs, 4)} + ε) = **{f(grp['GRPO A'][0], 4)}**, one number copied "
        "to every token. (A trajectory alone in its group gets mean 0 and std 1 in verl: its advantage is its raw "
        "score.)"
    )
    st.dataframe(grp, hide_index=True, width="stretch", height="content")

    step(6, "Score (saved with the trajectory)")
    st.latex(r"\text{score}_i = \sum_t \text{returns}_{i,t}\, m_{i,t}")
    st.markdown(
        f"The score sums the returns over the **{n_loss}** policy tokens (loss mask). With γ = λ = 1 and V = 0 "
        f"GAE's return on each token is the reward-to-go, {f(tok['GAE return'][0])}, so the GAE score is "
        f"{n_loss} × {f(lit.total)} = **{f(grp['GAE score'][0])}**: a sum over tokens, not a reward, which is "
        "why a long trajectory's score is large (300 policy tokens × a total of 1.0 give 300). GRPO's returns "
        "are its advantages, "
        f"so the GRPO score is {n_loss} × {f(grp['GRPO A'][0], 4)} = **{f(grp['GRPO score'][0], 4)}**."
    )
    c = st.columns(3)
    c[0].metric("Total reward", f(lit.total))
    c[1].metric("GAE score", f(grp["GAE score"][0]))
    c[2].metric("GRPO score", f(grp["GRPO score"][0], 4))
    with st.expander("Every token, every number (the document's trajectory)", expanded=False):
        st.dataframe(tok, hide_index=True, width="stretch", height="content")

    # -------------------------------------------------------------------------------------------- your run
    st.divider()
    i, h = ctx.traj, ctx.handle
    traj = h.run.trajectories[i]
    cfg = ctx.config
    res = widgets.result_or_stop(ctx, cfg)
    table = services.token_table(h, cfg, i)
    st.markdown("## Your run: the same steps on the sidebar's trajectory and scheme")
    st.html(
        "<div style='font-size:1.15rem'>Trajectory <code>"
        + tokens_html.escape(traj.id)
        + "</code> under profile <b>"
        + tokens_html.escape(cfg.profile)
        + "</b>, estimator <b>"
        + tokens_html.escape(cfg.estimator)
        + "</b>, placement <b>"
        + tokens_html.escape(res.placement)
        + "</b> (change them in the sidebar).</div>"
    )
    n_turns = int(table["turn"].max()) if len(table) else 0
    c = st.columns(3)
    c[0].metric("Turns with tokens", n_turns)
    c[1].metric("Tokens", len(table))
    c[2].metric("Info tokens", int(table["info"].sum()))

    st.markdown("#### Structured rewards")
    weights_t, weights_g = dict(cfg.turn_weights), dict(cfg.global_weights)
    included = dict(zip(ctx.info.global_reward_names, services.global_components_included(ctx.info, cfg), strict=True))
    turn_df = analysis.turn_components(traj.turn_rewards, weights_t, tables.np_(res.turn_rewards[i]))
    glob_df = analysis.global_components(traj.global_rewards, weights_g, included)
    if len(turn_df):
        st.markdown("**Per turn**: rₖ = Σ_c w_c · x_{k,c} (the weights are in the column names)")
        st.dataframe(turn_df, hide_index=True, width="stretch", height="content")
    if len(glob_df):
        st.markdown(
            "**Global**: G = Σ_c w_c · g_c over the components the profile includes "
            f"(profile {markdown_escape(cfg.profile)} leaves out names starting with "
            + ", ".join(f"`{p}`" for p in cfg.global_exclude_prefixes)
            + ")"
        )
        st.dataframe(glob_df, hide_index=True, width="stretch", height="content")
    score_turn = float(tables.np_(res.extras["turn_score"])[i]) if "turn_score" in res.extras else 0.0
    G = float(tables.np_(res.extras["global_reward"])[i]) if "global_reward" in res.extras else 0.0
    how = "no turn rewards:"
    if len(turn_df) and cfg.turn_score_reduce == "mean":
        k_all = len(traj.turn_rewards)
        k_tok = int((turn_df["turn"] <= n_turns).sum())
        pad = (
            f" (turns {k_tok + 1}–{k_all} have no tokens: KG-R1 keeps placeholder turns for finished samples, "
            "and they still count in the mean)"
            if k_all > k_tok
            else ""
        )
        how = f"mean of the {k_all} turn rewards{pad}, {f(turn_df['r_k'].sum(), 4)} / {k_all} ="
    elif len(turn_df):
        how = f"sum of the {len(turn_df)} turn rewards ="
    if len(turn_df) or len(glob_df):
        st.markdown(
            f"{how} **{f(score_turn, 4)}** + G **{f(G, 4)}** = **{f(score_turn + G, 4)}** "
            f"(the engine's Σ of this trajectory's token scores: {f(float(table['token score'].sum()), 4)})."
        )
    leaks = [n for n, inc in included.items() if inc and n.startswith("_") and n in traj.global_rewards]
    kept_out = [n for n, inc in included.items() if not inc and not n.startswith("_raw_") and n in traj.global_rewards]
    if kept_out:
        out_sum = sum(float(traj.global_rewards[n]) * weights_g.get(n, 1.0) for n in kept_out)
        st.caption(
            "Left out here: "
            + ", ".join(markdown_escape(n) for n in kept_out)
            + " (bookkeeping). KG-R1's own code adds them to G (its bug, KG-R1 7538a53, ray_trainer_kg.py): under "
            "profile kg-r1 this "
            f"trajectory's total would be {f(score_turn + G + out_sum, 4)} instead of {f(score_turn + G, 4)}."
        )
    if leaks:
        leak_sum = sum(float(traj.global_rewards[n]) * weights_g.get(n, 1.0) for n in leaks)
        st.warning(
            "**Pitfall, not the intended reward**: "
            + ", ".join(markdown_escape(n) for n in leaks)
            + f" start with `_` but not `_raw_`. They are bookkeeping, yet KG-R1's code adds them to G "
            f"(KG-R1 7538a53, ray_trainer_kg.py): total **{f(score_turn + G, 4)}** under profile kg-r1, against "
            f"**{f(score_turn + G - leak_sum, 4)}** when every `_` key is left out (profile verl). A correct "
            "answer that used fewer KG turns can then score below a wrong one and get a negative advantage. "
            "Choose the verl profile in the sidebar to see the intended reward.",
            icon=":material/warning:",
        )

    st.markdown("#### Token-level rewards")
    last_loss = np.flatnonzero(table["loss"].to_numpy() > 0)
    if len(last_loss):
        p = int(last_loss[-1])
        st.markdown(
            f"Placement **{markdown_escape(res.placement)}**: the last policy token (#{p}) gets "
            f"**{f(table['token score'].iloc[p], 4)}**; Σ over the trajectory = "
            f"**{f(float(table['token score'].sum()), 4)}**."
        )
    tokens(table, "token score", tail=TAIL)

    st.markdown("#### KL penalty")
    if ctx.info.has_log_probs:
        kl_sum = float(table["KL"].sum())
        st.markdown(
            f"This run has log-probs: Σ KL over the policy tokens = **{f(kl_sum, 4)}** (the `{cfg.kl_penalty}` "
            "estimate can be negative token by token: it is log π_old − log π_ref at the sampled token). "
            "In-reward KL is "
            + (f"**on** (β = {f(cfg.kl_coef)}): rewards = scores − β·KL." if cfg.use_kl_in_reward else "**off** in the "
               "sidebar's scheme, so the rewards are the token scores; turn it on in the sidebar to subtract β·KL.")
        )  # fmt: skip
    else:
        st.markdown("This run has no log-probs, so there is no KL: the rewards are the token scores.")

    st.markdown("#### Advantage")
    vs = res.notes.get("value_source")
    if cfg.estimator == "gae":
        where = {"critic": "the run's critic values", "zeros": "zeros (no critic in this run)"}.get(
            vs or "", f"the {vs} stand-in"
        )
        on_loss = table.loc[table["loss"] > 0, "advantage"]
        span = (
            f" On this trajectory's loss tokens the advantage runs from **{f(on_loss.min(), 4)}** to "
            f"**{f(on_loss.max(), 4)}**."
            if len(on_loss)
            else ""
        )
        st.markdown(
            f"GAE with γ = {f(cfg.gamma)}, λ = {f(cfg.lam)} and V = {where}; advantages whitened over the batch.{span}"
        )
    else:
        me = services.trajectory_summary(h, cfg).iloc[i]
        st.markdown(
            f"{markdown_escape(get_estimator(cfg.estimator).label)}: group of {int(me['group size'])}, mean "
            f"**{f(me['group mean'], 4)}**, std **{f(me['group std'], 4)}**; this trajectory's score "
            f"**{f(me['score'], 4)}** gives the advantage **{f(me['advantage'], 4)}** on its loss tokens."
        )
    adv_loss = table.loc[table["loss"] > 0, "advantage"]
    if leaks and len(adv_loss) and float(adv_loss.mean()) < 0:
        st.caption(
            f"This trajectory's mean advantage is negative ({f(adv_loss.mean(), 4)}): the advantage compares it with "
            "the rest of the batch, whose totals include the leaked bookkeeping keys (see the pitfall above)."
        )
    tokens(table, "advantage", tail=TAIL)

    st.markdown("#### Score")
    loss_mask = table["loss"].to_numpy() > 0
    n_l = int(loss_mask.sum())
    score = float(tables.np_(res.sample_scores)[i])
    mean_ret = float(table.loc[loss_mask, "return"].mean()) if n_l else 0.0
    why = ""
    if cfg.estimator == "gae" and vs == "zeros" and cfg.gamma == 1.0 and cfg.lam == 1.0:
        why = " With γ = λ = 1 and V = 0 each return is the reward-to-go, so a long trajectory's score is large."
    elif cfg.estimator == "gae":
        why = " GAE's returns are A + V (A before whitening), summed over every loss token."
    elif n_l and np.allclose(table.loc[loss_mask, "return"], table.loc[loss_mask, "advantage"], atol=1e-6):
        why = (
            " This estimator's returns are its advantages, so the score is the number of loss tokens × the "
            "trajectory's advantage."
        )
    st.markdown(
        f"score = Σ returns · mask over **{n_l}** loss tokens = {n_l} × {f(mean_ret, 4)} (their mean return) = "
        f"**{f(score, 5)}**.{why}"
    )
    st.markdown("#### Per turn")
    turns = services.turn_table(h, cfg, i)
    turns = turns[[c for c in turns.columns if not c.startswith("· ")]]  # components: in the table above
    st.dataframe(turns, hide_index=True, width="stretch", height="content")

# ------------------------------------------------------------------------------------------------ (b)
with tab_b:
    st.markdown(
        "## rLLM's three advantage modes, the document's own example\n"
        "One question, an agent with a python tool, two rollouts: rollout 1 answers **4** (reward **1.0**), "
        "rollout 2 answers **5** (reward **0.0**). Each has three steps. The document's numbers stand beside the "
        f"engine's, computed on the sample run **{PYTHON_TOOL_SAMPLE}**."
    )
    st.caption(
        "Source: notes on rLLM's training flow and its three advantage modes (rLLM agent_ppo_trainer.py), "
        "summarised with its numbers in docs/TUTORIAL.md §7.2."
    )
    try:
        h2 = loading.open_run(RunRef("sample", PYTHON_TOOL_SAMPLE), {})
        info2 = services.run_info(h2)
        if info2.trajectories == 0:
            raise ValueError("no usable trajectory")
    except (KeyError, ValueError, OSError) as e:
        h2, info2 = ctx.handle, ctx.info
        st.info(md("Sample {} is not available ({}); using the sidebar run instead.", PYTHON_TOOL_SAMPLE, e))
    b2 = services.batch(h2)
    rows = analysis.group_members(b2, 0 if h2 is not ctx.handle else ctx.traj)
    norm = st.toggle(
        "Divide by the group std",
        key=K.LEARN_NORM_STD,
        help="Off reproduces the document's ±0.5; on gives rLLM's default (r − mean)/(population std + ε).",
    )
    base = CreditConfig(profile="rllm", estimator="grpo", norm_adv_by_std_in_grpo=norm, stepwise_gamma=0.95)
    modes = {"trajectory": "trajectory", "broadcast": "broadcast", "per_step": "per-step"}
    results = {}
    for mode, label in modes.items():
        try:
            results[label] = services.compute(h2, services.effective_config(info2, base.replace(stepwise_mode=mode)))
        except (ValueError, NotImplementedError) as e:
            st.warning(md("{}: {}", label, e))
    if results:
        doc = teach.rllm_doc_table(analysis.step_table(b2, results, rows[:8]), norm)
        config = {c: st.column_config.NumberColumn(lab, help=hlp) for c, (lab, hlp) in doc.attrs["labels"].items()}
        st.dataframe(doc, hide_index=True, width="stretch", height="content", column_config=config)
        st.caption(
            "(doc) = the document's number; the others are the engine's. A = advantage (mean over the step's loss "
            "tokens), Gₖ = the step's Monte-Carlo return, rₖ = the step's reward. Hover a header for more."
        )
        if doc.attrs["matches_returns"]:
            st.success(
                "MC returns: the engine gives the document's 1.0, 0.95, 0.9025 (γ = 0.95) and 0, 0, 0.",
                icon=":material/check:",
            )
        if doc.attrs["matches_advantages"]:
            st.success(
                "Trajectory and broadcast advantages: the engine gives the document's ±0.5 on every step.",
                icon=":material/check:",
            )
        elif norm:
            t_adv = doc["A · trajectory"].to_numpy() if "A · trajectory" in doc else np.zeros(1)
            st.info(
                f"Std division is on: rewards 1 and 0 have mean 0.5 and population std 0.5, so A = ±0.5 / "
                f"(0.5 + ε) = **{f(t_adv.max(), 4)}** / **{f(t_adv.min(), 4)}**, rLLM's default. The document's "
                "±0.5 is the advantage without std division (turn the toggle off).",
                icon=":material/info:",
            )
        st.markdown(
            "**Where the document's numbers come from.** *Trajectory*: A = reward − group mean = 1.0 − 0.5 = "
            "**+0.5** and "
            "0.0 − 0.5 = **−0.5** (no std division; the toggle adds it). *Broadcast*: the same scalar copied to "
            "each of the three steps. *Per-step*: each step's Monte-Carlo return Gₖ = rₖ + γ·Gₖ₊₁ "
            "with γ = 0.95: rollout 1's step rewards are 0, 0, 1, so G₃ = 1.0, G₂ = 0.95 × 1.0 = 0.95, "
            "G₁ = 0.95 × 0.95 = 0.9025; rollout 2's are 0, 0, 0. The k-th steps of the two rollouts form "
            "a group, so step k's advantage is Gₖ minus the mean of the two rollouts' Gₖ: ±0.45125, ±0.475, "
            "±0.5 without std (the document gives no per-step advantages; with std each is ±1)."
        )
        st.caption(
            "The sample's three steps are: call python, read its output and verify with a second call, answer. A "
            "step is a model action plus the tool output that answers it (the document lists the tool run as its "
            "own round). Engine columns: the mean advantage on the step's loss tokens."
        )
    st.latex(
        r"\textbf{trajectory:}\ A_i = \frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R + \epsilon}"
        r"\qquad \textbf{broadcast:}\ A_{i,k} = A_i\ \ \forall k"
    )
    st.latex(
        r"\textbf{per-step:}\ G_{i,k} = r_{i,k} + \gamma\,G_{i,k+1},\quad A_{i,k} = "
        r"\frac{G_{i,k} - \mathrm{mean}_{j} G_{j,k}}{\mathrm{std}_{j} G_{j,k} + \epsilon}\quad(\gamma = 0.95)"
    )
    if results:
        shown = [int(j) for j in rows[:2]]
        labels, mats, losses = [], [], []
        for label, r in results.items():
            for j in shown:
                labels.append(f"{label} · {b2.trajectory_ids[j]}")
                mats.append(analysis.group_advantage_matrix(b2, r, np.array([j]))[0])
                losses.append(analysis.group_loss_matrix(b2, r, np.array([j]))[0])
        width = max(len(m) for m in mats)
        adv = np.stack([np.pad(m, (0, width - len(m)), constant_values=np.nan) for m in mats])
        loss = np.stack([np.pad(m, (0, width - len(m)), constant_values=False) for m in losses])
        turns = services.token_table(h2, next(iter(results.values())).config, shown[0])["turn"].to_numpy()
        st.markdown("**Every token under each mode** (rows: mode · rollout; dotted lines: the first rollout's steps)")
        widgets.chart(
            widgets.cached(make_scheme_rows_figure, labels, adv, [""] * width, turns, loss=loss),
            "learn.modes",
            "rllm_modes",
        )
        last = list(results)[-1]
        st.markdown(f"**{last}**, token by token: each step gets its own advantage")
        vmax = symmetric_range(adv[np.isfinite(adv)])
        for j in shown:
            rid = b2.trajectory_ids[j]
            st.html(f"<div style='font-size:1.15rem;font-weight:600'>{tokens_html.escape(rid)}</div>")
            mine = doc[doc["rollout"] == rid] if "A · per-step" in doc else doc.iloc[:0]
            labels = {
                int(k): f"Step {int(k)} · A = {a:+.4g}"
                for k, a in zip(mine["step"], mine.get("A · per-step", []), strict=True)
            }
            tokens(services.token_table(h2, results[last].config, j), "advantage", vmax=vmax, labels=labels)

# ------------------------------------------------------------------------------------------------ (c)
with tab_c:
    st.markdown(
        "## compute_credit, stage by stage\n"
        "Every number on these pages comes from one call, `compute_credit(batch, config)`, which runs four "
        "stages in order. Each stage is a short function of the engine; its code is below, as the engine runs it."
    )
    st.code(
        "batch ─► (1) place_scores ─► (2) subtract_kl ─► (3) estimate ─► (4) weigh_loss ─► CreditResult",
        language=None,
    )
    for part in teach.pipeline_code():
        st.markdown(f"### {part.title}")  # the engine's own docstrings (reST ``code`` shown as Markdown `code`)
        st.markdown(part.summary.replace("``", "`"))
        with st.expander("Show the code", expanded=False):
            st.code(part.source, language="python")
    st.markdown(
        "## The policy losses stage 4 can apply\n"
        "After the aggregation weights, the policy loss decides each token's gradient: "
        "`grad_weight = −a_t · w_t · g_t`, with g below (ρ = π_θ/π_old, ε the clip range, c the dual clip), a_t the "
        "aggregation weight and w_t the rollout-correction weight. Every loss is one registered function "
        "(`engine/policy_losses.py`); the sidebar's choice is open."
    )
    chosen = ctx.config.policy_loss
    for loss, source in teach.policy_loss_code():
        mark = " · the sidebar's choice" if loss.name == chosen else ""
        with st.expander(f"`{loss.name}` · {loss.label}{mark}", expanded=loss.name == chosen):
            st.latex(loss.formula)
            st.markdown(loss.summary.replace("``", "`"))
            reads = ", ".join(f"`{f}`" for f in loss.reads) or "nothing beyond the advantage"
            checked = ", ".join(f"`{f}`" for f in loss.checked_by)
            st.caption(f"Reproduces {loss.reference}. Reads {reads}. Checked against {checked}.")
            st.code(source, language="python")
