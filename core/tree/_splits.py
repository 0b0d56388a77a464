"""What the splitter hands the grower: the chosen splits of a level (``Splits``), and the run helper both
split paths use."""

from __future__ import annotations

import numpy as np

__all__ = ["Splits", "run_mask"]


def run_mask(a: np.ndarray) -> np.ndarray:
    """True where a run of equal values of ``a`` starts."""
    m = np.empty(a.size, dtype=bool)
    if a.size:
        m[0] = True
        np.not_equal(a[1:], a[:-1], out=m[1:])
    return m


class Splits:
    """The chosen splits of a level (local node ids, ascending) and their children as CSR:
    ``nch`` children per split node, ``slots`` (-1: a category absent at the node) and ``fracs`` (the
    children's known-weight fractions), flat in node order."""

    __slots__ = ("node", "feat", "cat", "code", "thr", "gain", "nch", "slots", "fracs")

    def __init__(self, node, feat, cat, code, thr, gain, nch, slots, fracs):
        self.node, self.feat, self.cat, self.code, self.thr, self.gain = node, feat, cat, code, thr, gain
        self.nch, self.slots, self.fracs = nch, slots, fracs

    @property
    def size(self) -> int:
        return int(self.node.size)

    @classmethod
    def concat(cls, parts: list) -> Splits:
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, k) for p in parts]) for k in cls.__slots__))

    def take(self, keep: np.ndarray) -> Splits:
        """The splits where ``keep`` (a boolean over split nodes) holds."""
        owner_keep = np.repeat(keep, self.nch)
        return Splits(self.node[keep], self.feat[keep], self.cat[keep], self.code[keep], self.thr[keep],
                      self.gain[keep], self.nch[keep], self.slots[owner_keep], self.fracs[owner_keep])
