"""The inputs every tie harness shares (references/NAME/generate_policy_ties.py, and the ties/ cases of
references/oldverl/generate_policy_loss.py): float32 log-probs whose ratio, or whose probability difference, lands
exactly on a clip boundary, so that the two values a trainer's min, max or clamp compares are equal and autograd's
rule for ties decides the gradient. Needs torch (every harness environment has it); CreditLens never imports it.

Recipe. A boundary b (1 + ε_high, 1 − ε_low, the dual clip c, ...) is reached through a float32 log-ratio x with
``torch.exp(x) == float32(b)`` in float32. Among the float32 values near log(b) the one whose exact e^x (float64)
lies nearest float32(b) is taken, and it must lie within ``MARGIN`` of a float32 unit in the last place (ulp) of it:
then any exp that rounds to within (0.5 − MARGIN) ulp gives float32(b) too, so the tie holds on another machine
(``exp_exactly``; b is chosen where such an x exists: 2.0 and 4.0 have one, 3.0 only at 0.25 ulp). The log-probs
are ``old`` and ``log_prob = old + x``, ``old`` the first of ``OLDS`` for which both are float32 and
``log_prob - old == x`` exactly, ``log_prob <= -0.01`` (``log_probs_for``). A probability difference
π_θ − π_old == d (DPPO's and IPO's trust regions) takes two such log-probs whose exps are near-exact float32 values
p and p − d (``probs_differing_by``). A row's GSPO ratio s = exp(mean log ρ) == b takes log-ratios x + δ and x − δ,
δ = 2^-10, whose float32 sum is exactly 2x (``row_at``). Masked positions hold log_prob = old = -1.
"""

from __future__ import annotations

import math

import torch

MARGIN = 0.1  # how far, in float32 ulps, the exact e^x may lie from the float32 value it rounds to
WINDOW = 4096  # float32 neighbours of log(b) searched on each side
OLDS = (
    -0.015625,
    -0.0625,
    -0.125,
    -0.25,
    -0.5,
    -0.75,
    -1.0,
    -1.5,
    -2.0,
    -3.0,
    -4.0,
    -6.0,
    -8.0,
    -11.0,
    -16.0,
    -21.0,
    -32.0,
)
DELTA = 2.0**-10  # the split of a GSPO row's log-ratios around its mean
MASKED = (-1.0, -1.0)  # (log_prob, old) at a masked position


def f32(v: float) -> float:
    """``v`` rounded to float32, as a Python float."""
    return torch.tensor(v, dtype=torch.float32).item()


def _exp32(x: float) -> float:
    return torch.exp(torch.tensor(x, dtype=torch.float32)).item()


def _ulp(v: float) -> float:
    t = torch.tensor(v, dtype=torch.float32)
    return (torch.nextafter(t, torch.tensor(math.inf)) - t).item()


def _neighbours(x: float, n: int):
    """``x`` (float32) and its n float32 neighbours on each side, nearest first."""
    t = torch.tensor(x, dtype=torch.float32)
    up, down = t, t
    yield x
    for _ in range(n):
        up = torch.nextafter(up, torch.tensor(math.inf))
        down = torch.nextafter(down, torch.tensor(-math.inf))
        yield up.item()
        yield down.item()


def ulps_off(x: float) -> float:
    """How far the exact e^x lies from float32 torch.exp(x), in ulps of the latter."""
    e = _exp32(x)
    return abs(math.exp(x) - e) / _ulp(e)


def exp_exactly(b: float) -> float:
    """A float32 x with torch.exp(x) == float32(b), the exact e^x within MARGIN ulp of it (nearest such x)."""
    target = f32(b)
    found = [(ulps_off(x), x) for x in _neighbours(f32(math.log(b)), WINDOW) if _exp32(x) == target]
    if not found or min(found)[0] > MARGIN:
        raise ValueError(f"no float32 x near log({b}) with exp(x) == float32({b}) within {MARGIN} ulp")
    return min(found)[1]


def log_probs_for(x: float) -> tuple[float, float]:
    """(log_prob, old), float32, with log_prob - old == x exactly in float32 and log_prob <= -0.01."""
    for old in OLDS:
        lp = f32(old + x)
        if lp <= -0.01 and f32(lp - old) == x and (torch.tensor(lp) - torch.tensor(old)).item() == x:
            return lp, old
    raise ValueError(f"no old in {OLDS} gives log_prob - old == {x} exactly")


def probs_differing_by(d: float, near: float) -> tuple[float, float]:
    """(log_prob, old) with exp(log_prob) - exp(old) == float32(d) exactly in float32 (d may be negative), each exp
    within MARGIN ulp of exact; exp(log_prob) near ``near``."""
    step = f32(d)
    for lp in _neighbours(f32(math.log(near)), WINDOW):
        p = _exp32(lp)
        mu = p - step  # float64: exact when float32 holds it
        if ulps_off(lp) > MARGIN or not 0 < mu < 1 or f32(mu) != mu:
            continue
        for old in _neighbours(f32(math.log(mu)), 8):
            if _exp32(old) == mu and ulps_off(old) <= MARGIN:
                t_lp, t_old = torch.tensor(lp), torch.tensor(old)
                assert (torch.exp(t_lp) - torch.exp(t_old)).item() == step
                return lp, old
    raise ValueError(f"no pair of log-probs near log({near}) whose probabilities differ by float32({d})")


def products_tie(b: float) -> tuple[float, float]:
    """(x, a): a float32 log-ratio x whose ratio is the float32 value just above float32(b) (exp within MARGIN
    ulp of exact), and an advantage a = 1 + k/64 for which a·exp(x) and a·float32(b) round to the same float32: the
    ratio is past the boundary, yet the two loss values a trainer compares are equal."""
    above = torch.nextafter(torch.tensor(f32(b)), torch.tensor(math.inf))
    x = exp_exactly(above.item())
    for k in range(64):
        a = torch.tensor(1 + k / 64)
        if (a * above).item() == (a * torch.tensor(f32(b))).item():
            return x, a.item()
    raise ValueError(f"no advantage 1 + k/64 makes the products with float32({b}) and the next float32 equal")


def row_at(x: float) -> list[tuple[float, float]]:
    """Two tokens (log_prob, old) whose log-ratios are x + DELTA and x - DELTA: their float32 sum is 2x exactly,
    so the row's mean log-ratio is x (GSPO's sequence ratio exp(x))."""
    tokens = [log_probs_for(f32(x + DELTA)), log_probs_for(f32(x - DELTA))]
    assert f32(x + DELTA) + f32(x - DELTA) == 2 * x and f32(2 * x) == 2 * x, x
    return tokens


def batch(name: str, rows: list[tuple[float, list]], note: str, index: list[int] | None = None) -> dict:
    """The shared-input dict the harnesses read (as references/policy_inputs.py's ``variant``): rows is [(A, tokens)],
    one advantage per row and its tokens as (log_prob, old) pairs, None for a masked position (all rows padded to
    the longest). mask, advantages [B, T] (A on the row's valid tokens, 0 elsewhere), row_advantages [B], index
    (one group per row unless given), old, log_prob, rollout = ref = old (float32) and a description."""
    width = max(len(tokens) for _, tokens in rows)
    mask, lp, old, adv = [], [], [], []
    for a, tokens in rows:
        tokens = list(tokens) + [None] * (width - len(tokens))
        mask.append([0.0 if t is None else 1.0 for t in tokens])
        lp.append([(t or MASKED)[0] for t in tokens])
        old.append([(t or MASKED)[1] for t in tokens])
        adv.append([0.0 if t is None else a for t in tokens])
    out = {
        "mask": torch.tensor(mask, dtype=torch.float32),
        "advantages": torch.tensor(adv, dtype=torch.float32),
        "row_advantages": torch.tensor([a for a, _ in rows], dtype=torch.float32),
        "index": index if index is not None else list(range(len(rows))),
        "log_prob": torch.tensor(lp, dtype=torch.float32),
        "old": torch.tensor(old, dtype=torch.float32),
    }
    out["rollout"] = out["old"].clone()
    out["ref"] = out["old"].clone()
    assert all(lp <= -0.01 for row, m in zip(lp, mask, strict=True) for lp, m in zip(row, m, strict=True) if m)
    out["description"] = {
        "name": name,
        "fixture": "ties",
        "source": "references/tie_inputs.py",
        "note": note,
        "recipe": __doc__.split("Recipe. ", 1)[1].split("\n\n", 1)[0].replace("\n", " "),
    }
    return out


# ------------------------------------------------------------------------------------------------ the batches
def _at(b: float) -> tuple[float, float]:
    return log_probs_for(exp_exactly(b))


def _nudged(pair: tuple[float, float], by: float) -> tuple[float, float]:
    """``pair`` with log_prob moved by ``by``: a probability clearly past the boundary the pair sits on."""
    return f32(pair[0] + by), pair[1]


def _ppo() -> dict:
    x, a = products_tie(1.2)
    return batch(
        "ppo",
        [
            (1.0, [_at(1.2), _at(0.8), _at(2.0)]),
            (-1.0, [_at(0.8), _at(1.2), _at(2.0), _at(4.0)]),
            (a, [log_probs_for(x)]),
        ],
        "token ratios exactly 1.2 (= 1 + eps_high), 0.8 (= 1 - eps_low), 2.0 (a dual clip / delta of 2) and 4.0, "
        "with A = 1 and A = -1; row 2: one token at the float32 ratio just above 1.2 with A = "
        f"{a}, whose products A*ratio and A*1.2 round to the same float32 (8 valid tokens)",
    )


def _ppo_delta_low() -> dict:
    return batch(
        "ppo_delta_low",
        [(1.0, [_at(1.1), _at(1.2), _at(0.8)]), (-1.0, [_at(1.1), _at(1.2), _at(0.8)])],
        "token ratios exactly 1.1 (a delta below 1 + eps_high), 1.2 and 0.8, with A = 1 and A = -1",
    )


def _gspo_own() -> dict:
    x, a = products_tie(1.2)
    return batch(
        "gspo_own",
        [
            (-1.0, [log_probs_for(10.5), log_probs_for(9.5)]),
            (-1.0, [log_probs_for(11.0), log_probs_for(10.0)]),
            (1.0, row_at(exp_exactly(1.2))),
            (a, row_at(x)),
        ],
        "rows of two tokens: mean log-ratio exactly 10 (GSPO's cap) and 10.5 with A = -1; sequence ratio exactly "
        f"1.2 with A = 1; the float32 sequence ratio just above 1.2 with A = {a} (A*s and A*1.2 round alike)",
    )


def _gspo_row() -> dict:
    x, a = products_tie(1.2)
    return batch(
        "gspo_row",
        [
            (-1.0, row_at(exp_exactly(2.0))),
            (-1.0, row_at(exp_exactly(4.0))),
            (1.0, row_at(exp_exactly(1.2))),
            (a, row_at(x)),
        ],
        "rows of two tokens: sequence ratio exactly 2.0 (a dual clip / delta of 2) and 4.0 with A = -1, exactly 1.2 "
        f"with A = 1, the float32 value just above 1.2 with A = {a} (A*s and A*1.2 round alike)",
    )


def _geo_mean() -> dict:
    at = {v: log_probs_for(f32(v)) for v in (0.25, -0.25, 0.3, -0.3)}
    return batch(
        "geo_mean",
        [(1.0, [at[0.25], at[-0.25], at[0.3]]), (-1.0, [at[-0.25], at[0.25], at[-0.3]])],
        "token log-ratios exactly 0.25 and -0.25 (the clip bounds with clip_ratio 0.25), and 0.3 / -0.3 past them",
    )


def _trust_region(d: float, near: float) -> dict:
    up, down = probs_differing_by(d, near), probs_differing_by(-d, near - d)
    return batch(
        f"trust_region_{d}",
        [(1.0, [up, _nudged(up, 1e-3), down]), (-1.0, [down, _nudged(down, -1e-3), up])],
        f"token probability differences exp(log_prob) - exp(old) exactly {d} and -{d} (float32), and each moved "
        "past it by 1e-3 in log_prob, with A = 1 and A = -1",
    )


def _rollout_band() -> dict:
    tokens = [_at(1.2), _at(0.8), log_probs_for(0.0)]
    return batch(
        "rollout_band",
        [(1.0, tokens), (-1.0, tokens)],
        "token ratios exactly 1.2, 0.8 and 1, with A = 1 and A = -1",
    )


def _safety(beyond: bool) -> dict:
    v = 20.5 if beyond else 20.0
    return batch(
        f"safety_{'beyond' if beyond else 'at'}",
        [(-1.0, [log_probs_for(v)]), (1.0, [log_probs_for(-v)])],
        f"token log-ratio exactly {v} with A = -1 and -{v} with A = 1 (the ±20 clamp on log-ratios)",
    )


def _log_ratio(v: float) -> dict:
    """log ρ exactly ±v (no exponential lands on a bound: the clamp on log ρ itself is the boundary)."""
    return batch(
        f"log_ratio_{v:g}",
        [(-1.0, [log_probs_for(v)]), (1.0, [log_probs_for(-v)])],
        f"token log-ratio exactly {v:g} with A = -1 and -{v:g} with A = 1 (a clamp of log-ratios at ±10: KG-R1's "
        "vendored verl)",
    )


BATCHES = {
    "ppo": _ppo,
    "ppo_delta_low": _ppo_delta_low,
    "gspo_own": _gspo_own,
    "gspo_row": _gspo_row,
    "geo_mean": _geo_mean,
    "dppo": lambda: _trust_region(0.2, 0.33),
    "ipo": lambda: _trust_region(0.1, 0.2),
    "rollout_band": _rollout_band,
    "safety_at": lambda: _safety(False),
    "safety_beyond": lambda: _safety(True),
    "log_ratio_10": lambda: _log_ratio(10.0),
    "log_ratio_10.5": lambda: _log_ratio(10.5),
}


def variant(name: str) -> dict:
    """The batch ``name`` of ``BATCHES`` (a fresh copy)."""
    return BATCHES[name]()
