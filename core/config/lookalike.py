"""Is a config key a near miss of a key ropekit reads?

A rope block under ``rope_scalling``, ``Rope_Scaling``, ``"rope_scaling "`` or with a Cyrillic
``о`` is the seed's defect all over again: nobody reads it and the model is served plain RoPE.
:func:`near_miss` names the key meant; :func:`looks_like_rope` flags any name about rotary
positions at all.
"""

from __future__ import annotations

import collections
import functools
import unicodedata
from collections.abc import Iterable

__all__ = ["canonical", "looks_like_rope", "near_miss"]

# Letters of other scripts that render like Latin ones (Unicode's confusables, the ones that occur
# in identifiers). NFKC folds full-width and compatibility forms; this folds the rest.
_CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "ѕ": "s", "і": "i", "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ո": "n", "ց": "g",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "γ": "y", "ℓ": "l", "ı": "i", "ȷ": "j",
    "‐": "_", "‑": "_", "‒": "_", "–": "_", "—": "_", "-": "_", ".": "_", " ": "_",
})

_ROPE_WORDS = ("rope", "rotary", "nope", "rotat")


def canonical(name: str) -> str:
    """``name`` folded for comparison: NFKC, confusable letters to Latin, case-folded, separators
    to ``_``, surrounding whitespace and invisible characters dropped."""
    if name.isascii() and name.isprintable():  # the usual case: no normalisation to do
        return name.strip().lower().translate(_CONFUSABLES).strip("_")
    folded = unicodedata.normalize("NFKC", name)
    folded = "".join(char for char in folded if unicodedata.category(char) not in ("Cf", "Cc", "Zs") or char == " ")
    return folded.strip().casefold().translate(_CONFUSABLES).strip("_")


def looks_like_rope(name: str) -> bool:
    """Whether ``name`` speaks of rotary positions (contains rope, rotary or nope, however spelt)."""
    folded = canonical(name).replace("_", "")
    return any(word in folded for word in _ROPE_WORDS)


def near_miss(name: str, known: Iterable[str], *, distance: int = 2) -> str | None:
    """The known key ``name`` is a misspelling of (``None``: none is close).

    Close means: equal once folded (:func:`canonical`), or within ``distance`` edits
    (insert, delete, substitute, swap two neighbours) of a known key at least 8 characters long.
    """
    folded = canonical(name)
    best: tuple[int, str] | None = None
    for candidate, other in _folded(tuple(known)):
        if candidate == name:
            return None
        if other == folded:
            return candidate
        comparable = len(candidate) >= 8 and abs(len(other) - len(folded)) <= distance
        if comparable and len(set(folded) ^ set(other)) <= 2 * distance and _letters_close(folded, other, distance):
            edits = _edit_distance(folded, other, distance)
            if edits <= distance and (best is None or edits < best[0]):
                best = (edits, candidate)
    return best[1] if best else None


@functools.lru_cache(maxsize=8)
def _folded(known: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((candidate, canonical(candidate)) for candidate in known)


def _letters_close(a: str, b: str, distance: int) -> bool:
    """A cheap necessary condition: ``distance`` edits change at most ``2 * distance`` letter counts."""
    counts = collections.Counter(a)
    counts.subtract(b)
    return sum(abs(value) for value in counts.values()) <= 2 * distance


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Damerau-Levenshtein (optimal string alignment) distance, or ``limit + 1`` once past it."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, char_b in enumerate(b, 1):
            cost = 0 if char_a == char_b else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[-1]
