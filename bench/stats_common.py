"""Step-time statistics shared by bench/ (no third-party imports, so any Python can use it)."""
import math


def percentile(values, q):
    """Linear interpolation between closest ranks, as scalescope's reports/analysis/stats.cpp."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


def stats(values):
    return {"n": len(values), "median": percentile(values, 0.5), "p10": percentile(values, 0.1),
            "p90": percentile(values, 0.9)}
