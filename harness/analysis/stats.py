"""Is a delta beyond noise? One rule, used by every table, the verdict, the report, the bisect, tune and the repeats
that harness.run adds until a rung is decided. Closed form: no random draw decides anything, and no name, order or
cache changes a number (sums are math.fsum, exact whatever their order).

The run (one worker process) is the unit of noise: two runs of one build differ by more than the steps inside one
run do (on the shared 2-core CPU of this project by 5-26%, on an H100 by under 1%), so no interval may rest on
step-to-step noise alone; and two invocations (two venvs, two GPU calls) can differ by more than their runs do.

  value     a run's tokens/s is tokens per step / its median timed step (warm-up excluded); its memory the run's
            peak. A cell's value is the geometric mean of its runs' values (the mean of their logs): the statistic
            whose spread the interval uses.
  spread    how much runs of one configuration differ: the sd of log(per-run value) about its invocation's mean,
            so relative (harness.analysis.noise estimates it per device and metric). A configuration (workload and
            flags) pools its cells across envs; configurations alike in noise (Bartlett's test) share one pooled
            spread, and one clearly noisier than the rest keeps its own; where they are not alike each keeps its
            own, with its own degrees of freedom. A cell of one run borrows the pooled spread only where 2+
            configurations showed it ("borrowed").
  between   invocations of one configuration differ by an offset on top of that (its variance: "between
            invocations", measured where 5+ invocations of a configuration ran). A delta between cells of different
            invocations carries it; a delta inside one invocation carries none (it cancels). Where it is not
            measured the delta says so (`between_unknown`).
  interval  the delta in log space (log b - log a; a geometric mean: the mean of its rungs' log ratios) is a
            linear form of the cells' log values; its variance is a sum of the spreads above, each once (cells
            that share a spread share its estimate), and its degrees of freedom Welch-Satterthwaite's (exactly the
            shared spread's when one spread carries it all). The 99% interval is value +- t * se, mapped back to a
            relative change. Differences of effects (2x2 splits) are linearized the same way.
  verdict   beyond noise: the interval excludes 0 AND |delta| >= the floor (1%); within noise otherwise, with the
            change it could have detected and how many runs a side would decide the delta seen. No spread at all
            (one run a side, none to borrow): "one run a side: run-to-run noise unknown", never beyond noise. A
            per-run counter whose configuration peaks at two levels (memory): "two modes", never beyond noise.

Why 99%: one A/A comparison (a build against itself) is a few dozen deltas; at 95% one in twenty of them would be
called beyond noise by chance alone. tests/test_noise.py holds the rule to at most 1 in 20 on real A/A sets of this
machine, tests/test_noise_simulation.py (scripts/noise_simulation.py) to its stated 1% on synthetic records with a
known truth, and checks that real effects stay beyond noise.

The noise model's values (Spread, Between, Noise, CellRuns, DeviceSpread, modes) are harness.analysis.noise_model; a
cell's Estimate is made from its runs' values by harness.analysis.cell_values (throughput, memory, median, rate).

No numpy draw, no scipy, no torch: harness.analysis.student has the t quantile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from harness.analysis import noise_model
from harness.analysis.student import t_quantile

CONFIDENCE = 0.99
NOISE_FLOOR = 0.01  # relative (1%); for differences of effects, 1 percentage point
MIN_SAMPLES = 5  # fewer timed samples than this in a cell: no noise estimate
REPEATS_TO_KNOW = 3  # what the "noise unknown" verdict tells a user to run
MAX_RUNS_SAID = 1000  # more runs a side than this to decide a delta: "more runs will not decide it"

BEYOND = "beyond noise"
WITHIN = "within noise"
SINGLE = "single sample, no noise estimate"
FEW = "too few samples, no noise estimate"
ONE_RUN = f"one run a side: run-to-run noise unknown (--repeats {REPEATS_TO_KNOW} to know)"
MODES = "two modes: its runs peak at one of two levels, so no delta of it is decided"
NA = "n/a"


def t_critical(df: float) -> float:
    """The two-sided CONFIDENCE critical value of Student's t with df degrees of freedom (inf: the normal's)."""
    return t_quantile(float(df), 1.0 - (1.0 - CONFIDENCE) / 2)


def rule_text(noise_floor: float = NOISE_FLOOR) -> str:
    """The significance rule in one paragraph (footer of every output, and the docs)."""
    return (
        f"Significance: the run is the unit of noise. A cell's value is the geometric mean of its runs' values "
        f"(tokens/s: tokens per step / the run's median timed step, warm-up excluded; memory: the run's peak). "
        f"Run-to-run spread = the sd of log per-run values about their invocation's mean, per device and metric, "
        f"pooled over the configurations alike in noise (and calibration runs); one unlike the rest keeps its own; "
        f"a one-run cell borrows the pooled spread where 2+ configurations showed it ('borrowed'). Invocations "
        f"differ by an offset, measured from 5+ invocations of a configuration; it enters a delta between two "
        f"invocations, and is said where not measured. Interval: {CONFIDENCE:.0%} (a build compared with itself "
        f"must not be called faster by chance), closed form: log ratio +- t * se, Welch-Satterthwaite degrees of "
        f"freedom (one t where both sides share one spread); a geometric mean over rungs: the mean of their log "
        f"ratios. 'beyond noise' when the interval excludes 0 and |delta| >= {noise_floor:.0%} (1 pp for "
        f"differences of effects), else 'within noise'. No spread known: '{ONE_RUN}'. A memory that peaks at two "
        f"levels: 'two modes', never beyond. Fewer than {MIN_SAMPLES} timed steps: no noise estimate."
    )


def interval_name() -> str:
    """What the bounds of a delta are, for legends and headers: '99% interval'."""
    return f"{CONFIDENCE:.0%} interval"


# ------------------------------------------------------------------------------------------- estimates


@dataclass(eq=False)
class Estimate:
    """A cell's value (the geometric mean of its runs') with what its uncertainty rests on; `why` says which case
    has none. Compared by identity: an interval counts a cell once however many parts name it."""

    point: float | None
    n: int  # timed samples behind it (memory: runs)
    repeats: int  # runs behind it
    noise: noise_model.Noise | None = None  # the run-to-run spread it uses (its description)
    why: str | None = None  # no noise estimate: SINGLE, FEW or ONE_RUN
    log: float | None = None  # log(point): the mean of its runs' logs
    within: tuple = ()  # ((Spread, weight), ...): the run-to-run variance of `log` is sum(weight * var)
    loads: tuple = ()  # ((invocation, share of its runs), ...)
    device: noise_model.DeviceSpread | None = None  # whose between-invocation spread its invocations carry
    by_invocations: bool = False  # no run-to-run spread of its own: judged by how its device's invocations differ
    config: object = None  # its configuration on the device (whose two modes, if it has them, decide nothing)

    @property
    def modes(self) -> tuple | None:
        """(low, high): the two levels its configuration's runs peak at on its device, where a cell showed two."""
        return self.device.modes.get(self.config) if self.device is not None else None

    @property
    def known(self) -> bool:
        """Has a noise estimate: an interval can be drawn (for one judged by invocations, only against a cell of
        another invocation)."""
        return self.log is not None and (bool(self.within) or self.by_invocations)

    @property
    def borrowed(self) -> bool:
        return self.repeats < 2 and self.noise is not None

    def bounds(self) -> tuple[float, float] | None:
        """Its own CONFIDENCE interval (low, high) in its units, an invocation's offset included where measured;
        None without a noise estimate."""
        if not self.known:
            return None
        half = Linear(self.log, {self: [1.0]}).half_width()
        return exp(self.log - half), exp(self.log + half)

    def half_width(self) -> float | None:
        """The relative half-width of its run-to-run interval (what --repeats auto drives down: more runs of one
        invocation narrow that part, never its offset); None without a run-to-run spread."""
        if self.log is None or not self.within:
            return None
        var, df = _satterthwaite([(w * s.var, s.df) for s, w in self.within])
        return expm1(t_critical(df) * math.sqrt(var)) if var > 0 else 0.0


# A log ratio is turned back into a ratio clipped at e^+-700 (about 10^+-304): t with one degree of freedom can make an
# interval's log beyond any float's exp (three records once ended the report with an OverflowError), and a bound that
# far out says only "unbounded", which 10^304 says too.
LOG_LIMIT = 700.0


def exp(x: float) -> float:
    return math.exp(max(min(x, LOG_LIMIT), -LOG_LIMIT))


def expm1(x: float) -> float:
    return math.expm1(max(min(x, LOG_LIMIT), -LOG_LIMIT))
# ------------------------------------------------------------------------------------------- deltas


@dataclass(frozen=True)
class Delta:
    """A relative change (0.12 = +12%) or a difference of effects, with its interval and verdict."""

    value: float | None
    low: float | None = None
    high: float | None = None
    verdict: str = NA
    bounds: str = "ci"  # what low..high are: "ci" (the interval) or "range" (min..max, for the user's logs only)
    borrowed: bool = False  # a side of one run took its device's run-to-run spread
    detectable: float | None = None  # within noise: the smallest change this comparison could have called
    runs_to_decide: int | None = None  # within noise: about how many runs a side would decide the delta seen
    between_unknown: bool = False  # its sides are different invocations whose offset is not measured on the device

    @property
    def beyond(self) -> bool:
        return self.verdict == BEYOND

    def to_dict(self) -> dict:
        low, high = ("range_low", "range_high") if self.bounds == "range" else ("ci_low", "ci_high")
        out = {"value": self.value, low: self.low, high: self.high, "verdict": self.verdict}
        if self.borrowed:
            out["noise"] = "borrowed from the device"
        if self.between_unknown:
            out["between_invocations"] = "not measured"
        if self.detectable is not None:
            out["could_detect"] = self.detectable
            out["runs_a_side_to_decide"] = self.runs_to_decide
        return out


@dataclass
class Linear:
    """A delta as a linear form of cells' log values: value, and d value / d log(cell) per cell (a list of
    contributions, summed exactly). log: value is a log ratio (a relative change is expm1 of it); otherwise a
    difference in the delta's own units (linearized)."""

    value: float
    grads: dict = field(default_factory=dict)  # Estimate -> [contribution, ...]
    log: bool = True

    def gradient(self) -> list[tuple[Estimate, float]]:
        return [(e, math.fsum(gs)) for e, gs in self.grads.items()]

    def add(self, other: Linear, weight: float, per: float = 1.0) -> None:
        """weight times another form's gradient, over `per`, added to this one's (its value is the caller's to set)."""
        for est, g in other.gradient():
            _add(self.grads, est, weight * g / per)

    def parts(self) -> tuple[dict, dict, bool, bool]:
        """The variance as {Spread: [coefficient, ...]}: the run-to-run part, and the invocation offsets' part
        (each Spread once; an offset's estimate is a difference of spreads, so some coefficients are negative);
        whether an invocation offset that does not cancel is unmeasured; and whether a cell judged by invocations
        meets a cell of its own invocation (then nothing judges the delta)."""
        within: dict[noise_model.Spread, list[float]] = {}
        between: dict[noise_model.Spread, list[float]] = {}
        loads: dict[tuple, list[float]] = {}
        by_invocations: dict[tuple, float] = {}  # its invocations -> the fewest runs a cell has of one
        for est, g in self.gradient():
            for s, w in est.within:
                within.setdefault(s, []).append(g * g * w)
            for inv, share in est.loads:
                loads.setdefault((est.device, inv), []).append(g * share)
                if est.by_invocations:
                    runs = share * est.repeats
                    by_invocations[est.device, inv] = min(by_invocations.get((est.device, inv), runs), runs)
        unknown = unjudged = False
        for key, contributions in loads.items():
            device = key[0]
            load = math.fsum(contributions)
            if abs(load) < 1e-9:  # both sides ran in this invocation: its offset cancels
                unjudged = unjudged or key in by_invocations
                continue
            if device is None or device.between is None:
                unknown = True
                continue
            if key in by_invocations:
                # a cell judged by invocations has no run-to-run term to take the mean square's share from; with
                # fewer runs than the invocations behind it (n0), the mean square scaled by n0 / runs bounds it
                scale = max(1.0, device.between.n0 / by_invocations[key])
                between.setdefault(device.between.mean_square, []).append(load * load * scale)
                continue
            for s, coef in device.between.parts:
                between.setdefault(s, []).append(load * load * coef)
        return within, between, unknown, unjudged

    def variance(self) -> tuple[float, float, bool, float]:
        """(variance, Welch-Satterthwaite df, between_unknown, the run-to-run part of the variance). An offset's
        estimate subtracts run-to-run variance; where that leaves a spread's coefficient below 0 it counts 0 (the
        offset's mean square alone: conservative). A small mean square is not replaced by the run-to-run part:
        its few degrees of freedom already widen t for it (with runs as many as the calibration's, t is exact)."""
        within, between, unknown, unjudged = self.parts()
        if unjudged:
            return math.nan, math.nan, unknown, math.nan
        w_var, w_df = _satterthwaite([(math.fsum(cs) * s.var, s.df) for s, cs in within.items()])
        merged = {s: list(cs) for s, cs in within.items()}
        for s, cs in between.items():
            merged.setdefault(s, []).extend(cs)
        var, df = _satterthwaite([(max(math.fsum(cs), 0.0) * s.var, s.df) for s, cs in merged.items()])
        if not between or var <= 0.0:
            return w_var, w_df, unknown, w_var
        # An offset's mean square rests on few invocations: no other term may lend the sum more degrees of freedom
        # than it has (a run-to-run term kept where a subtraction was dropped would, and t would shrink).
        offset_df = min(s.df for s, cs in between.items() if math.fsum(cs) > 0)
        return var, min(df, offset_df), unknown, w_var

    def half_width(self) -> float:
        var, df, _unknown, _w = self.variance()
        return t_critical(df) * math.sqrt(var) if var > 0 else 0.0  # (nan where unjudged)


def _satterthwaite(terms: list[tuple[float, float]]) -> tuple[float, float]:
    """The variance sum(terms) and its Welch-Satterthwaite degrees of freedom (inf where every term is known)."""
    var = math.fsum(a for a, _df in terms)
    den = math.fsum(a * a / df for a, df in terms if not math.isinf(df))
    return var, (var * var / den if den > 0 else math.inf)


def _add(grads: dict, est: Estimate, g: float) -> None:
    grads.setdefault(est, []).append(g)


def _delta(form: Linear, floor: float, borrowed: bool, runs_now: float | None) -> Delta:
    """The interval and verdict of a delta given as a linear form, with what it could detect where within."""
    var, df, unknown, within = form.variance()
    if math.isnan(var):  # a cell judged by invocations against its own invocation: no spread says anything
        return Delta(form.value if not form.log else expm1(form.value), verdict=ONE_RUN)
    half = t_critical(df) * math.sqrt(var) if var > 0 else 0.0
    if form.log:
        value, low, high = (expm1(x) for x in (form.value, form.value - half, form.value + half))
    else:
        value, low, high = form.value, form.value - half, form.value + half
    verdict = BEYOND if (low > 0 or high < 0) and abs(value) >= floor else WITHIN
    detectable = runs = None
    if verdict == WITHIN:
        detectable = max(expm1(half) if form.log else half, floor)
        runs = _runs_to_decide(value, floor, runs_now, var, df, within, form.log)
    return Delta(value, low, high, verdict, borrowed=borrowed, detectable=detectable, runs_to_decide=runs,
                 between_unknown=unknown)


def _runs_to_decide(value: float, floor: float, runs_now: float | None, var: float, df: float, within: float,
                    log: bool) -> int | None:
    """About how many runs a side would make an interval narrow enough to decide `value` (at least the floor):
    the run-to-run part of the variance shrinks as 1/runs, an invocation offset's does not (None: more runs of
    these invocations cannot decide it, or it would take over MAX_RUNS_SAID)."""
    if not runs_now or within <= 0:
        return None
    target = max(abs(value), floor)
    target = math.log1p(target) if log else target
    room = (target / t_critical(df)) ** 2 - (var - within)
    if room <= 0:
        return None
    runs = math.ceil(runs_now * within / room)
    return runs if runs <= MAX_RUNS_SAID else None


def _no_estimate(*estimates: Estimate) -> str | None:
    whys = [e.why or (SINGLE if e.n <= 1 else FEW) for e in estimates if not e.known]
    return _missing(whys) if whys else None


def _missing(verdicts: list[str]) -> str:
    for why in (MODES, SINGLE, FEW, ONE_RUN):
        if why in verdicts:
            return why
    return FEW


def _harmonic_runs(*estimates: Estimate) -> float:
    """The runs a side of a comparison, as its variance counts them: 2 / (1/runs_a + 1/runs_b)."""
    return len(estimates) / math.fsum(1.0 / max(e.repeats, 1) for e in estimates)


def ratio(a: Estimate, b: Estimate, floor: float = NOISE_FLOOR) -> tuple[Delta, Linear | None]:
    """b relative to a (b/a - 1), and its linear form (for differences of effects and geometric means)."""
    if a.point is None or b.point is None or a.point <= 0 or b.point <= 0:
        return Delta(None), None
    value = b.point / a.point - 1.0
    if a.modes or b.modes:
        return Delta(value, verdict=MODES), None
    missing = _no_estimate(a, b)
    if missing:
        return Delta(value, verdict=missing), None
    form = Linear(b.log - a.log)
    _add(form.grads, b, 1.0)
    _add(form.grads, a, -1.0)
    return replace(_delta(form, floor, a.borrowed or b.borrowed, _harmonic_runs(a, b)), value=value), form


def counter(a: Estimate, b: Estimate, floor: float = NOISE_FLOOR) -> Delta:
    """A per-run counter (peak memory) of b against a's (Estimates from memory()): the same rule as tokens/s, except
    where either side's configuration peaks at two levels on its device (modes()): a run in the other mode is not a
    change, so its delta is said as MODES, never beyond noise."""
    return ratio(a, b, floor)[0]


def combine(parts: list[tuple[float, tuple[Delta, Linear | None]]], floor: float = NOISE_FLOOR) -> Delta:
    """A weighted sum of relative effects (e.g. a 2x2 factor: 0.5*(e22 - e12) + 0.5*(e21 - e11)), in absolute
    units: its interval from the effects' log forms, linearized (d e / d log = 1 + e)."""
    if any(d.value is None for _, (d, _f) in parts):
        return Delta(None)
    value = math.fsum(w * d.value for w, (d, _f) in parts)
    if any(f is None for _, (_d, f) in parts):
        return Delta(value, verdict=_missing([d.verdict for _, (d, _f) in parts]))
    form = Linear(value, log=False)
    for w, (d, f) in parts:
        form.add(f, w * (1.0 + d.value))
    return _delta(form, floor, any(d.borrowed for _, (d, _f) in parts), None)


def geomean(parts: list[tuple[Delta, Linear | None]], floor: float = NOISE_FLOOR) -> Delta:
    """The geometric mean of several ratios (each a Delta b/a - 1 with its log form): exp(mean of the log ratios)
    - 1, its interval from the mean of the log forms (rungs that share a spread share its estimate, and an
    invocation's offset common to every rung is counted once). A part without a form leaves it without a noise
    estimate."""
    values = [d.value for d, _f in parts]
    if not parts or any(v is None or v <= -1 for v in values):
        return Delta(None)
    value = math.expm1(math.fsum(math.log1p(v) for v in values) / len(values))
    forms = [f for _d, f in parts]
    if any(f is None for f in forms):
        return Delta(value, verdict=_missing([d.verdict for d, _f in parts]))
    form = Linear(math.fsum(f.value for f in forms) / len(forms))
    for f in forms:
        form.add(f, 1.0, per=len(forms))
    ests = list(form.grads)
    d = _delta(form, floor, any(d.borrowed for d, _f in parts), _harmonic_runs(*ests) if ests else None)
    return replace(d, value=value)


def difference(first: Linear, second: Linear, floor: float = NOISE_FLOOR) -> Delta:
    """(1 + first) / (1 + second) - 1 of two log forms (a ratio of ratios: one step on one device against the same
    step on another), judged by the rule."""
    form = Linear(first.value - second.value)
    form.add(first, 1.0)
    form.add(second, -1.0)
    return _delta(form, floor, False, None)
