"""Learn, tab (a): a write-up of KG-R1's structured multi-turn reward pipeline. Its literal reward dict on a tiny
trajectory, every step run by the engine (``services.kgr1_example``, ``dashboard.teach``); then the same steps on
the sidebar's trajectory under the sidebar's scheme."""

import streamlit as st

from dashboard import services, teach, tokens_html, widgets
from dashboard.learn.common import TAIL, f, step, tokens
from dashboard.state import markdown_escape
from dashboard.widgets import Context
from engine import get_estimator


def draw(ctx: Context) -> None:
    ex = services.kgr1_example()
    lit, tok, grp = teach.structured_total(), teach.token_steps_table(ex), teach.group_table(ex)
    _document_rewards(ex, lit, tok, grp)
    _document_credit(ex, lit, tok, grp)
    st.divider()
    res = widgets.result_or_stop(ctx, ctx.config)
    table = services.token_table(ctx.handle, ctx.config, ctx.traj)
    leaks = _your_rewards(ctx, res, table)
    _your_credit(ctx, res, table, leaks)


def _document_rewards(ex: teach.KgExample, lit: teach.StructuredTotal, tok, grp) -> None:
    """Steps 1–3 of the document's example: generation, structured rewards, token-level rewards."""
    n_tok, n_info, n_loss = teach.token_counts(tok)
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
    st.html(teach.value_tokens_html(tok["token"], tok["role"], [0.0] * n_tok, 1.0, labels=turn_labels))

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


def _document_credit(ex: teach.KgExample, lit: teach.StructuredTotal, tok, grp) -> None:
    """Steps 4–6 of the document's example: KL penalty, advantage (GAE or GRPO), score."""
    n_loss = teach.token_counts(tok)[2]
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
    gm, gs = teach.group_stats(ex)
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


def _your_rewards(ctx: Context, res, table) -> list[str]:
    """Steps 1–2 on the sidebar's trajectory: its turns and tokens, its structured rewards; returns the global
    components that leak into G."""
    i, cfg = ctx.traj, ctx.config
    traj = ctx.handle.run.trajectories[i]
    st.markdown("## Your run: the same steps on the sidebar's trajectory and scheme")
    st.html(tokens_html.scheme_line_html(traj.id, cfg.profile, cfg.estimator, res.placement))
    n_turns = int(table["turn"].max()) if len(table) else 0
    c = st.columns(3)
    c[0].metric("Turns with tokens", n_turns)
    c[1].metric("Tokens", len(table))
    c[2].metric("Info tokens", int(table["info"].sum()))

    st.markdown("#### Structured rewards")
    included = dict(zip(ctx.info.global_reward_names, services.global_components_included(ctx.info, cfg), strict=True))
    rw = teach.trajectory_rewards(traj, cfg, res, i, included, n_turns)
    turn_df, glob_df, score_turn, G = rw.turn, rw.glob, rw.turn_score, rw.G
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
    how = "no turn rewards:"
    if len(turn_df) and cfg.turn_score_reduce == "mean":
        k_all, k_tok = rw.turns, rw.turns_with_tokens
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
    _leaks(rw)
    return rw.leaks


def _leaks(rw) -> None:
    """What the profile's exclusion prefixes leave out of G, or let into it, against KG-R1's own code."""
    total = rw.turn_score + rw.G
    if rw.kept_out:
        st.caption(
            "Left out here: "
            + ", ".join(markdown_escape(n) for n in rw.kept_out)
            + " (bookkeeping). KG-R1's own code adds them to G (its bug, KG-R1 7538a53, ray_trainer_kg.py): under "
            "profile kg-r1 this "
            f"trajectory's total would be {f(total + rw.kept_out_sum, 4)} instead of {f(total, 4)}."
        )
    if rw.leaks:
        st.warning(
            "**Pitfall, not the intended reward**: "
            + ", ".join(markdown_escape(n) for n in rw.leaks)
            + f" start with `_` but not `_raw_`. They are bookkeeping, yet KG-R1's code adds them to G "
            f"(KG-R1 7538a53, ray_trainer_kg.py): total **{f(total, 4)}** under profile kg-r1, against "
            f"**{f(total - rw.leak_sum, 4)}** when every `_` key is left out (profile verl). A correct "
            "answer that used fewer KG turns can then score below a wrong one and get a negative advantage. "
            "Choose the verl profile in the sidebar to see the intended reward.",
            icon=":material/warning:",
        )


def _your_credit(ctx: Context, res, table, leaks: list[str]) -> None:
    """Steps 3–6 on the sidebar's trajectory: token rewards, KL, advantage, score, and the per-turn table."""
    i, h, cfg = ctx.traj, ctx.handle, ctx.config
    st.markdown("#### Token-level rewards")
    p = teach.last_loss_token(table)
    if p is not None:
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
        on_loss = teach.loss_token_values(table, "advantage")
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
    adv_loss = teach.loss_token_values(table, "advantage")
    if leaks and len(adv_loss) and float(adv_loss.mean()) < 0:
        st.caption(
            f"This trajectory's mean advantage is negative ({f(adv_loss.mean(), 4)}): the advantage compares it with "
            "the rest of the batch, whose totals include the leaked bookkeeping keys (see the pitfall above)."
        )
    tokens(table, "advantage", tail=TAIL)

    st.markdown("#### Score")
    sr = teach.score_reading(table, res, i)
    n_l, mean_ret, score = sr.loss_tokens, sr.mean_return, sr.score
    why = ""
    if cfg.estimator == "gae" and vs == "zeros" and cfg.gamma == 1.0 and cfg.lam == 1.0:
        why = " With γ = λ = 1 and V = 0 each return is the reward-to-go, so a long trajectory's score is large."
    elif cfg.estimator == "gae":
        why = " GAE's returns are A + V (A before whitening), summed over every loss token."
    elif sr.returns_are_advantages:
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
