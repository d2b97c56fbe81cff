"""What every Learn tab draws with: numbers as the page writes them, coloured tokens in big type, step headings."""

import streamlit as st

from dashboard import tokens_html, widgets
from dashboard.theme import symmetric_range

TAIL = 160  # tokens of a long trajectory shown in the "your run" boxes: the last ones, where final_token_only acts


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
