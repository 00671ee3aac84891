"""The distributions the noise rule needs, in closed form and in plain Python (no scipy; no random draw anywhere):
Student's t quantile at any degrees of freedom (the incomplete beta function, Numerical Recipes' continued fraction,
solved by bisection to 1e-13), the F distribution's tail through the same incomplete beta, and the chi-square tail
(the incomplete gamma function) for Bartlett's test of configurations alike in noise (harness.analysis.noise).
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

_TINY = 1e-300


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1.0) < 1e-16:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom, t >= 0."""
    return 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


@lru_cache(maxsize=4096)
def t_quantile(df: float, upper: float) -> float:
    """The `upper` quantile (e.g. 0.995) of Student's t with df degrees of freedom (df > 0; inf: the normal's)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom {df}: must be positive")
    if math.isinf(df) or df > 1e7:
        return NormalDist().inv_cdf(upper)
    tail = 1.0 - upper
    lo, hi = 0.0, 1.0
    while t_tail(hi, df) > tail:
        hi *= 2.0
    while hi - lo > 1e-13 * hi:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if t_tail(mid, df) > tail else (lo, mid)
    return (lo + hi) / 2.0


def chi2_tail(x: float, df: float) -> float:
    """P(X > x) for a chi-square with df degrees of freedom: the regularized upper incomplete gamma Q(df/2, x/2)
    (Numerical Recipes: its series below a + 1, its continued fraction above)."""
    a, x = df / 2.0, x / 2.0
    if x <= 0.0:
        return 1.0
    front = math.exp(-x + a * math.log(x) - math.lgamma(a))
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(1000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * front)
    b = x + 1.0 - a
    c, d = 1.0 / _TINY, 1.0 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = b + an / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-16:
            break
    return front * h
