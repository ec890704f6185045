"""The stored low quantile of the AR(1) estimator `curvestats.lag1_estimate` on null curves, by
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
    (-0.6232, -0.5932, -0.5836, -0.5836, -0.5581, -0.5581,
     -0.5581, -0.5581, -0.5581, -0.5581, -0.5581),
    (-0.5649, -0.5295, -0.4988, -0.4988, -0.4835, -0.4777,
     -0.4449, -0.4449, -0.4449, -0.4447, -0.4447),
    (-0.5513, -0.5201, -0.4812, -0.4552, -0.4421, -0.4170,
     -0.3964, -0.3964, -0.3964, -0.3859, -0.3812),
    (-0.5100, -0.4724, -0.4209, -0.4102, -0.3751, -0.3435,
     -0.3158, -0.3158, -0.3141, -0.2976, -0.2976),
    (-0.4469, -0.4160, -0.3485, -0.3156, -0.2914, -0.2358,
     -0.2303, -0.1911, -0.1796, -0.1700, -0.1621),
    (-0.4051, -0.3552, -0.2996, -0.2479, -0.1979, -0.1533,
     -0.1313, -0.1061, -0.0870, -0.0589, -0.0589),
    (-0.3814, -0.3087, -0.2296, -0.1832, -0.1381, -0.0812,
     -0.0422, 0.0083, 0.0183, 0.0183, 0.0412),
    (-0.3321, -0.2848, -0.2006, -0.1367, -0.0787, -0.0122,
     0.0423, 0.0799, 0.1016, 0.1131, 0.1477),
    (-0.3167, -0.2298, -0.1609, -0.0751, -0.0315, 0.0246,
     0.1027, 0.1676, 0.1923, 0.2207, 0.2213),
    (-0.2862, -0.2077, -0.1402, -0.0622, 0.0251, 0.1064,
     0.1663, 0.2087, 0.2720, 0.2870, 0.2983),
    (-0.2612, -0.1846, -0.1036, -0.0087, 0.0634, 0.1398,
     0.2058, 0.2823, 0.3430, 0.3574, 0.3849),
    (-0.2285, -0.1454, -0.0575, 0.0089, 0.0909, 0.1826,
     0.2635, 0.3264, 0.3999, 0.4264, 0.4478),
    (-0.2184, -0.1336, -0.0442, 0.0511, 0.1212, 0.2199,
     0.3013, 0.3741, 0.4422, 0.4897, 0.5054),
    (-0.1906, -0.1083, -0.0129, 0.0717, 0.1633, 0.2534,
     0.3339, 0.4176, 0.4933, 0.5401, 0.5618),
    (-0.1708, -0.0900, 0.0042, 0.1013, 0.1861, 0.2759,
     0.3615, 0.4460, 0.5350, 0.5803, 0.6050),
    (-0.1588, -0.0737, 0.0177, 0.1219, 0.2139, 0.2905,
     0.3922, 0.4786, 0.5732, 0.6117, 0.6448),
    (-0.1485, -0.0531, 0.0483, 0.1391, 0.2304, 0.3168,
     0.4105, 0.5017, 0.6010, 0.6381, 0.6744),
    (-0.1299, -0.0424, 0.0566, 0.1491, 0.2439, 0.3386,
     0.4401, 0.5288, 0.6177, 0.6661, 0.7121),
    (-0.1214, -0.0246, 0.0701, 0.1625, 0.2584, 0.3604,
     0.4518, 0.5471, 0.6365, 0.6842, 0.7319),
    (-0.1096, -0.0092, 0.0786, 0.1746, 0.2724, 0.3699,
     0.4632, 0.5651, 0.6575, 0.7052, 0.7550),
    (-0.1017, -0.0046, 0.0910, 0.1876, 0.2849, 0.3863,
     0.4843, 0.5776, 0.6802, 0.7296, 0.7673),
    (-0.0901, 0.0067, 0.1012, 0.2000, 0.2998, 0.3947,
     0.4968, 0.5932, 0.6904, 0.7383, 0.7837),
    (-0.0846, 0.0111, 0.1120, 0.2104, 0.3049, 0.4068,
     0.5036, 0.6021, 0.7001, 0.7500, 0.8001),
    (-0.0763, 0.0265, 0.1165, 0.2175, 0.3199, 0.4143,
     0.5123, 0.6182, 0.7098, 0.7623, 0.8124),
    (-0.0706, 0.0270, 0.1257, 0.2249, 0.3276, 0.4226,
     0.5237, 0.6274, 0.7250, 0.7705, 0.8200),
    (-0.0602, 0.0374, 0.1301, 0.2316, 0.3305, 0.4321,
     0.5290, 0.6302, 0.7306, 0.7775, 0.8287),
    (-0.0557, 0.0399, 0.1394, 0.2390, 0.3364, 0.4365,
     0.5365, 0.6371, 0.7340, 0.7862, 0.8336),
    (-0.0507, 0.0441, 0.1450, 0.2436, 0.3446, 0.4416,
     0.5411, 0.6394, 0.7448, 0.7898, 0.8411),
    (-0.0492, 0.0495, 0.1501, 0.2488, 0.3475, 0.4496,
     0.5454, 0.6472, 0.7472, 0.7997, 0.8492),
    (-0.0443, 0.0551, 0.1562, 0.2515, 0.3544, 0.4525,
     0.5510, 0.6503, 0.7530, 0.8032, 0.8529),
    (-0.0422, 0.0585, 0.1581, 0.2557, 0.3560, 0.4568,
     0.5558, 0.6571, 0.7572, 0.8077, 0.8574),
    (-0.0354, 0.0644, 0.1627, 0.2615, 0.3606, 0.4579,
     0.5618, 0.6619, 0.7626, 0.8130, 0.8630),
    (-0.0335, 0.0660, 0.1648, 0.2650, 0.3620, 0.4650,
     0.5656, 0.6660, 0.7630, 0.8147, 0.8655),
)
"""QUANTILES[i][j]: the Q-quantile at LENGTHS[i] and nullmodel.RHO_GRID[j]."""

INDEPENDENT_Q = 0.95
"""The quantile stored at rho 0: 1 - nullmodel.INDEPENDENCE_LEVEL."""

INDEPENDENT = (
    0.3448, 0.3654, 0.3663, 0.3782, 0.3457, 0.3325,
    0.2932, 0.2922, 0.2742, 0.2479, 0.2313, 0.2256,
    0.1983, 0.1859, 0.1682, 0.1570, 0.1415, 0.1276,
    0.1254, 0.1080, 0.1042, 0.0952, 0.0901, 0.0836,
    0.0758, 0.0696, 0.0614, 0.0634, 0.0553, 0.0480,
    0.0438, 0.0429, 0.0390,
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
