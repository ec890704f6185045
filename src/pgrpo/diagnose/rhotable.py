"""The stored low quantile of the AR(1) estimator `nullmodel.lag1_estimate` on null curves, by
curve length and rho: what `nullmodel.lag1_autocorr` inverts into an upper confidence bound on
a curve's rho, so that no diagnosis simulates it (it was a third of a cold `pgrpo diagnose`:
the run checks' live replay asks for a new length at every poll); and, at rho 0, the high
quantile `nullmodel.autocorrelated` compares a curve's estimate with (`INDEPENDENT`).

Regenerate (about a minute) with `python -m pgrpo.diagnose.rhotable`, which rewrites the table
below from `nullmodel.simulated_quantile` (TABLE_CURVES = 2,000 seeded curves per cell);
tests/test_diagnose_null_rates.py checks stored cells against a fresh simulation.
"""

from __future__ import annotations

Q = 0.1
"""The quantile stored: 1 - nullmodel.RHO_CONFIDENCE."""

# fmt: off
LENGTHS = (
    8, 10, 11, 13, 16, 19, 23, 27, 32, 38, 45, 54,
    64, 76, 91, 108, 128, 152, 181, 215, 256, 304, 362, 431,
    512, 609, 724, 861, 1024, 1218, 1448, 1722, 2048,
)
"""Curve lengths: round(8 x 2^(k/4)) from 8 to 2,048."""

QUANTILES = (
    (-0.5951, -0.5565, -0.5511, -0.5378, -0.5014, -0.4939,
     -0.4922, -0.4835, -0.4719, -0.4719, -0.4719),
    (-0.5290, -0.4794, -0.4584, -0.4567, -0.4048, -0.3821,
     -0.3394, -0.3355, -0.3355, -0.3300, -0.3112),
    (-0.5233, -0.4728, -0.4284, -0.3979, -0.3546, -0.3361,
     -0.3184, -0.2932, -0.2850, -0.2631, -0.2519),
    (-0.4686, -0.4339, -0.3599, -0.3329, -0.2963, -0.2555,
     -0.2281, -0.1881, -0.1845, -0.1615, -0.1615),
    (-0.4076, -0.3715, -0.3020, -0.2464, -0.2171, -0.1443,
     -0.1322, -0.0552, -0.0552, -0.0231, -0.0173),
    (-0.3657, -0.3128, -0.2605, -0.1913, -0.1303, -0.0799,
     -0.0381, 0.0036, 0.0239, 0.0604, 0.0604),
    (-0.3526, -0.2699, -0.1804, -0.1344, -0.0881, -0.0139,
     0.0425, 0.1079, 0.1496, 0.1496, 0.1715),
    (-0.3017, -0.2461, -0.1609, -0.0884, -0.0208, 0.0449,
     0.1157, 0.1749, 0.2173, 0.2386, 0.2633),
    (-0.2867, -0.1968, -0.1152, -0.0382, 0.0123, 0.0859,
     0.1712, 0.2394, 0.3026, 0.3282, 0.3411),
    (-0.2596, -0.1814, -0.1062, -0.0156, 0.0706, 0.1572,
     0.2119, 0.2939, 0.3552, 0.3774, 0.3974),
    (-0.2378, -0.1565, -0.0747, 0.0270, 0.1049, 0.1810,
     0.2711, 0.3459, 0.4173, 0.4477, 0.4824),
    (-0.2086, -0.1200, -0.0358, 0.0410, 0.1233, 0.2225,
     0.3037, 0.3761, 0.4636, 0.4989, 0.5318),
    (-0.1988, -0.1132, -0.0208, 0.0781, 0.1527, 0.2527,
     0.3448, 0.4143, 0.5009, 0.5581, 0.5807),
    (-0.1793, -0.0902, 0.0092, 0.0922, 0.1896, 0.2854,
     0.3679, 0.4558, 0.5387, 0.5905, 0.6205),
    (-0.1558, -0.0734, 0.0259, 0.1231, 0.2081, 0.3038,
     0.3909, 0.4846, 0.5747, 0.6265, 0.6608),
    (-0.1476, -0.0595, 0.0320, 0.1368, 0.2331, 0.3120,
     0.4194, 0.5068, 0.6102, 0.6472, 0.6905),
    (-0.1379, -0.0419, 0.0618, 0.1535, 0.2456, 0.3364,
     0.4347, 0.5256, 0.6301, 0.6709, 0.7141),
    (-0.1193, -0.0315, 0.0675, 0.1655, 0.2612, 0.3537,
     0.4587, 0.5515, 0.6434, 0.6938, 0.7431),
    (-0.1129, -0.0141, 0.0797, 0.1722, 0.2716, 0.3740,
     0.4675, 0.5658, 0.6601, 0.7113, 0.7595),
    (-0.1037, -0.0022, 0.0867, 0.1854, 0.2841, 0.3809,
     0.4786, 0.5800, 0.6755, 0.7240, 0.7780),
    (-0.0946, 0.0018, 0.0992, 0.1970, 0.2957, 0.3983,
     0.4957, 0.5914, 0.6946, 0.7457, 0.7877),
    (-0.0852, 0.0128, 0.1078, 0.2077, 0.3081, 0.4037,
     0.5053, 0.6043, 0.7030, 0.7515, 0.7996),
    (-0.0797, 0.0163, 0.1193, 0.2156, 0.3109, 0.4152,
     0.5120, 0.6120, 0.7091, 0.7631, 0.8114),
    (-0.0729, 0.0312, 0.1216, 0.2233, 0.3263, 0.4203,
     0.5196, 0.6256, 0.7192, 0.7722, 0.8225),
    (-0.0666, 0.0309, 0.1296, 0.2296, 0.3322, 0.4276,
     0.5301, 0.6334, 0.7315, 0.7796, 0.8303),
    (-0.0572, 0.0409, 0.1330, 0.2350, 0.3345, 0.4361,
     0.5341, 0.6350, 0.7366, 0.7847, 0.8353),
    (-0.0534, 0.0423, 0.1425, 0.2426, 0.3398, 0.4406,
     0.5411, 0.6419, 0.7405, 0.7917, 0.8397),
    (-0.0490, 0.0476, 0.1480, 0.2467, 0.3470, 0.4453,
     0.5452, 0.6436, 0.7505, 0.7954, 0.8462),
    (-0.0474, 0.0517, 0.1529, 0.2510, 0.3501, 0.4527,
     0.5479, 0.6505, 0.7512, 0.8035, 0.8541),
    (-0.0428, 0.0567, 0.1587, 0.2537, 0.3571, 0.4553,
     0.5540, 0.6536, 0.7556, 0.8064, 0.8567),
    (-0.0409, 0.0604, 0.1603, 0.2570, 0.3581, 0.4593,
     0.5590, 0.6598, 0.7600, 0.8109, 0.8608),
    (-0.0341, 0.0659, 0.1638, 0.2634, 0.3622, 0.4606,
     0.5634, 0.6643, 0.7648, 0.8157, 0.8653),
    (-0.0326, 0.0673, 0.1659, 0.2660, 0.3636, 0.4665,
     0.5671, 0.6675, 0.7654, 0.8169, 0.8682),
)
"""QUANTILES[i][j]: the Q-quantile at LENGTHS[i] and nullmodel.RHO_GRID[j]."""

INDEPENDENT_Q = 0.95
"""The quantile stored at rho 0: 1 - nullmodel.INDEPENDENCE_LEVEL."""

INDEPENDENT = (
    0.4217, 0.4407, 0.4282, 0.4254, 0.3998, 0.3822,
    0.3296, 0.3225, 0.3075, 0.2762, 0.2602, 0.2470,
    0.2149, 0.2025, 0.1834, 0.1709, 0.1521, 0.1377,
    0.1338, 0.1144, 0.1112, 0.1008, 0.0956, 0.0867,
    0.0791, 0.0733, 0.0638, 0.0654, 0.0569, 0.0498,
    0.0447, 0.0443, 0.0401,
)
"""INDEPENDENT[i]: the INDEPENDENT_Q-quantile at LENGTHS[i] and rho 0 (curves of independent
steps), which `nullmodel.autocorrelated` compares a curve's estimate with."""
# fmt: on


def _row(values, fmt: str = "{:.4f}") -> str:  # noqa: ANN001
    """One table row, six values a line."""
    cells = [fmt.format(v) for v in values]
    lines = [", ".join(cells[i : i + 6]) for i in range(0, len(cells), 6)]
    return "    (" + ",\n     ".join(lines) + "),\n"


def main() -> None:
    """Rewrite LENGTHS and QUANTILES in this file from a fresh simulation."""
    import re
    from pathlib import Path

    import numpy as np

    from pgrpo.diagnose.nullmodel import (
        INDEPENDENCE_LEVEL,
        RHO_CONFIDENCE,
        RHO_GRID,
        simulated_quantile,
    )

    q = round(1.0 - RHO_CONFIDENCE, 6)
    lengths = sorted({round(8 * 2 ** (k / 4)) for k in range(33)})
    # non-decreasing in rho (the bisection's premise; sampling noise can break it by ~0.01)
    rows = [np.maximum.accumulate([simulated_quantile(n, r, q) for r in RHO_GRID]) for n in lengths]
    path = Path(__file__)
    text = path.read_text()
    body = "".join(_row(row) for row in rows)
    text = re.sub(r"\nQ = .*?\n", f"\nQ = {q}\n", text, count=1)
    chunks = [lengths[i : i + 12] for i in range(0, len(lengths), 12)]
    lengths_text = "LENGTHS = (\n" + "".join(f"    {', '.join(map(str, c))},\n" for c in chunks)
    lengths_text += ")"
    text = re.sub(r"\nLENGTHS = \(.*?\)\n", f"\n{lengths_text}\n", text, count=1,
                  flags=re.S)  # fmt: skip
    text = re.sub(r"\nQUANTILES = \(\n.*?\n\)\n", f"\nQUANTILES = (\n{body})\n", text,
                  count=1, flags=re.S)  # fmt: skip
    q_ind = round(1.0 - INDEPENDENCE_LEVEL, 6)
    cells = [f"{simulated_quantile(n, 0.0, q_ind):.4f}" for n in lengths]
    independent = "".join(f"    {', '.join(cells[i : i + 6])},\n" for i in range(0, len(cells), 6))
    text = re.sub(r"\nINDEPENDENT_Q = .*?\n", f"\nINDEPENDENT_Q = {q_ind}\n", text, count=1)
    text = re.sub(r"\nINDEPENDENT = \(.*?\n\)\n", f"\nINDEPENDENT = (\n{independent})\n", text,
                  count=1, flags=re.S)  # fmt: skip
    path.write_text(text)
    print(f"wrote {len(rows)} lengths x {len(RHO_GRID)} rho, and rho 0 at {q_ind}, to {path}")


if __name__ == "__main__":
    main()
