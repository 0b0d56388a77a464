"""Reference environments as transition tables (data only; the algorithms are Orchard's)."""

from __future__ import annotations

import numpy as np

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
PERP = {"up": ("left", "right"), "down": ("left", "right"), "left": ("up", "down"), "right": ("up", "down")}


def table(rows, terminal=()):
    cols = {k: [] for k in ("state", "action", "next_state", "probability", "reward")}
    for s, a, s2, pr, r in rows:
        for k, v in zip(cols, (s, a, s2, pr, r), strict=True):
            cols[k].append(v)
    out = {k: np.asarray(v, dtype=object if k in ("state", "action", "next_state") else float)
           for k, v in cols.items()}
    out["terminal"] = np.array([s in terminal for s in cols["state"]], dtype=bool)
    return out


def grid_4x3(step_reward=-0.04):
    """Russell & Norvig's 4x3 world ([Passerini §15] follows it): 0.8 intended, 0.1 each side, wall (2,2).

    States are "(x,y)" with x = column 1..4, y = row 1..3; terminals (4,3) = +1 and (4,2) = -1.  The notes'
    R(s) becomes r(s, a, s') = R(s) + [s' terminal] R(s'), so V(s) = U(s) for every non-terminal state.
    """
    cells = [(x, y) for x in range(1, 5) for y in range(1, 4) if (x, y) != (2, 2)]
    term = {(4, 3): 1.0, (4, 2): -1.0}
    d = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}

    def move(c, a):
        n = (c[0] + d[a][0], c[1] + d[a][1])
        return n if n in cells else c

    rows = []
    for c in cells:
        if c in term:
            continue
        for a in d:
            probs = {}
            for b, pr in ((a, 0.8), (PERP[a][0], 0.1), (PERP[a][1], 0.1)):
                n = move(c, b)
                probs[n] = probs.get(n, 0.0) + pr
            for n, pr in probs.items():
                rows.append((str(c), a, str(n), pr, step_reward + term.get(n, 0.0)))
    return table(rows, terminal=()), [str(t) for t in term]


def cliff_walking():
    """Sutton & Barto Example 6.6: 4 x 12 grid, start (3,0), goal (3,11); stepping into the cliff costs -100
    and sends the agent back to the start; every other step costs -1."""
    rows = []
    for i in range(4):
        for j in range(12):
            s = (i, j)
            if s == (3, 11):
                continue
            if i == 3 and 1 <= j <= 10:
                continue  # cliff cells are never occupied
            for a, (di, dj) in MOVES.items():
                ni, nj = min(max(i + di, 0), 3), min(max(j + dj, 0), 11)
                if ni == 3 and 1 <= nj <= 10:
                    rows.append((f"{i},{j}", a, "3,0", 1.0, -100.0))
                else:
                    rows.append((f"{i},{j}", a, f"{ni},{nj}", 1.0, -1.0))
    return table(rows), ["3,11"]


def random_walk():
    """Sutton & Barto Example 6.2: A..E, start C, terminate left (reward 0) or right (reward +1)."""
    names = ["L", "A", "B", "C", "D", "E", "R"]
    rows = []
    for i in range(1, 6):
        for j, pr in ((i - 1, 0.5), (i + 1, 0.5)):
            rows.append((names[i], "step", names[j], pr, 1.0 if j == 6 else 0.0))
    return table(rows), ["L", "R"], np.arange(1, 6) / 6.0


def random_mdp(rng, S=20, A=3, density=0.3):
    rows = []
    for s in range(S):
        for a in range(A):
            nxt = np.flatnonzero(rng.random(S) < density)
            if not len(nxt):
                nxt = np.array([rng.integers(S)])
            pr = rng.dirichlet(np.ones(len(nxt)))
            for n, p in zip(nxt, pr, strict=True):
                rows.append((s, a, int(n), float(p), float(rng.normal())))
    return table(rows)


def dense(tab, S, A):
    """P (A, S, S) and expected R (A, S) of an integer-labelled table."""
    P = np.zeros((A, S, S))
    R = np.zeros((A, S))
    for s, a, n, p, r in zip(tab["state"], tab["action"], tab["next_state"], tab["probability"], tab["reward"],
                             strict=True):
        P[a, s, n] += p
        R[a, s] += p * r
    return P, R
