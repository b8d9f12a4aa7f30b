"""API co-occurrence: pair and triple counts mined from a catalog, and API sets sampled from them.

    from kernelzero.proposer.cooccur import mine_counts, sample_pool
    counts = mine_counts(catalog)                      # catalog: proposer/corpus.py's build_catalog()
    pool = sample_pool(counts, pairs=2000, triples=2000, seed=0)   # [("gelu", "linear"), ...]

The counts are over the catalog's modules (one nn.Module class's forward each, glue left out): n_a modules use
API a, c_ab use both a and b, c_abc all three. A set is drawn one API at a time. The first comes from the
smoothed unigram `u(a) = (n_a + beta) / sum_x (n_x + beta)`, so an API seen only in torch's operator list
(n = 0) keeps a small chance. Each next API b, given the set S drawn so far, comes from

    P(b | S)  ~  [ (1 - lam) * e(b | S) + lam * k(S, b) * u(b) ] ** (1 / T)

where e(b | S) is the empirical co-occurrence (the mean over a in S of c_ab / sum_x c_ax, averaged with the
triple share c_Sb / sum_x c_Sx when S is a pair seen together), `lam` the smoothing share (unseen but
plausible combinations appear), k(S, b) the product over a in S of the compatibility of a's and b's
categories (`compatibility`: two losses, a recurrent layer beside a convolution, 2d beside 3d ops are
unlikely), and T the temperature (T > 1 flattens towards rarer APIs and combinations). Sets already drawn
are drawn again until the pool holds distinct sets only.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

# Compatibility of two categories (symmetric; unlisted pairs: 1). Low values make a pair rare, never impossible.
_COMPAT = {
    ("loss", "loss"): 0.2,
    ("ranking", "ranking"): 0.3,
    ("ranking", "loss"): 0.2,
    ("recurrent", "convolution"): 0.2,
    ("recurrent", "attention"): 0.3,
    ("recurrent", "pooling"): 0.2,
    ("recurrent", "resampling"): 0.1,
    ("recurrent", "recurrent"): 0.1,
    ("attention", "pooling"): 0.3,
    ("attention", "convolution"): 0.5,
    ("attention", "attention"): 0.1,
    ("attention", "resampling"): 0.3,
    ("convolution", "convolution"): 0.4,
    ("pooling", "pooling"): 0.3,
    ("normalisation", "normalisation"): 0.4,
    ("distance", "convolution"): 0.4,
    ("distance", "distance"): 0.2,
    ("resampling", "resampling"): 0.3,
    ("loss", "resampling"): 0.3,
    ("scan", "scan"): 0.4,
}
_DIMS = re.compile(r"([123])d$")


def compatibility(a: str, cat_a: str, b: str, cat_b: str) -> float:
    """How plausible APIs a and b are in one module, in [0, 1], from their categories and dimensionality."""
    da, db = _DIMS.search(a), _DIMS.search(b)
    if da and db and da.group(1) != db.group(1):
        return 0.05  # conv2d beside max_pool3d needs reshapes no real model does
    return _COMPAT.get((cat_a, cat_b), _COMPAT.get((cat_b, cat_a), 1.0))


@dataclass
class Counts:
    """Co-occurrence counts over a catalog's modules, on the vocabulary of sampled APIs."""

    apis: list[str]  # the vocabulary, sorted
    categories: list[str]  # category of each API
    unigram: np.ndarray  # n_a: modules using API a
    pairs: np.ndarray  # c_ab, a dense symmetric matrix (zero diagonal)
    third: dict[tuple[int, int], Counter]  # (i, j) with i < j -> {k: modules using i, j and k}
    corpus: dict[str, Any]  # the catalog's corpus record (provenance)


def mine_counts(catalog: dict[str, Any], vocabulary: set[str] | None = None, max_triple_apis: int = 40) -> Counts:
    """Counts of the catalog's sampled APIs (optionally only those in `vocabulary`).

    A module with more than `max_triple_apis` APIs (a whole model's forward) adds pairs but no triples: its
    triples would swamp the counts of the small modules that say which ops go together.
    """
    apis = sorted(n for n, e in catalog["apis"].items() if e.get("sampled") and (vocabulary is None or n in vocabulary))
    if len(apis) < 3:
        raise ValueError(f"only {len(apis)} sampleable APIs in the catalog (need at least 3)")
    index = {a: i for i, a in enumerate(apis)}
    unigram = np.zeros(len(apis))
    pairs = np.zeros((len(apis), len(apis)))
    third: dict[tuple[int, int], Counter] = {}
    for module in catalog["modules"]:
        ids = sorted({index[a] for a in module["apis"] if a in index})
        unigram[ids] += 1
        if len(ids) > 1:
            grid = np.ix_(ids, ids)
            pairs[grid] += 1
        if 3 <= len(ids) <= max_triple_apis:
            for i, j, k in itertools.combinations(ids, 3):
                third.setdefault((i, j), Counter())[k] += 1
                third.setdefault((i, k), Counter())[j] += 1
                third.setdefault((j, k), Counter())[i] += 1
    np.fill_diagonal(pairs, 0)
    categories = [catalog["apis"][a]["category"] for a in apis]
    return Counts(apis, categories, unigram, pairs, third, dict(catalog.get("corpus", {})))


class Sampler:
    """Draws API sets from Counts (see the module docstring for the distribution)."""

    def __init__(
        self, counts: Counts, temperature: float = 1.0, smoothing: float = 0.2, beta: float = 1.0, seed: int = 0
    ):
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if not 0 <= smoothing <= 1:
            raise ValueError(f"smoothing must lie in [0, 1], got {smoothing}")
        self.c, self.t, self.lam = counts, temperature, smoothing
        self.rng = np.random.default_rng(seed)
        u = counts.unigram + beta
        self.u = u / u.sum()
        rows = counts.pairs.sum(axis=1, keepdims=True)
        self.cond = np.divide(counts.pairs, rows, out=np.zeros_like(counts.pairs), where=rows > 0)
        pairs = list(zip(counts.apis, counts.categories))
        self.compat = np.array([[compatibility(a, ca, b, cb) for b, cb in pairs] for a, ca in pairs])
        self._triple_rows: dict[tuple[int, int], np.ndarray] = {}

    def _triple_share(self, i: int, j: int) -> np.ndarray | None:
        key = (min(i, j), max(i, j))
        if key not in self._triple_rows:
            row = np.zeros(len(self.c.apis))
            for k, count in self.c.third.get(key, {}).items():
                row[k] = count
            self._triple_rows[key] = row
        row = self._triple_rows[key]
        return row / row.sum() if row.sum() > 0 else None

    def _draw(self, weights: np.ndarray) -> int:
        w = np.power(np.clip(weights, 0, None), 1.0 / self.t)
        return int(self.rng.choice(len(w), p=w / w.sum()))

    def draw(self, size: int) -> tuple[str, ...]:
        """One set of `size` distinct APIs."""
        chosen = [self._draw(self.u)]
        while len(chosen) < size:
            empirical = self.cond[chosen].mean(axis=0)
            if len(chosen) == 2:
                share = self._triple_share(*chosen)
                if share is not None:
                    empirical = 0.5 * empirical + 0.5 * share
            compat = np.prod(self.compat[chosen], axis=0)
            weights = (1 - self.lam) * empirical + self.lam * compat * self.u
            weights[chosen] = 0
            chosen.append(self._draw(weights))
        return tuple(sorted(self.c.apis[i] for i in chosen))


def sample_pool(
    counts: Counts,
    pairs: int = 2000,
    triples: int = 2000,
    max_size: int = 3,
    temperature: float = 1.0,
    smoothing: float = 0.2,
    seed: int = 0,
    exclude: set[tuple[str, ...]] | None = None,
) -> list[tuple[str, ...]]:
    """`pairs` distinct pairs and `triples` distinct triples (sets of size 4..max_size are not drawn here;
    use `sample_sets`); sets in `exclude` are skipped. Raises ValueError when the vocabulary cannot give that
    many distinct sets."""
    if max_size < 3 and triples:
        raise ValueError("triples need max_size >= 3")
    sampler = Sampler(counts, temperature, smoothing, seed=seed)
    taken = set(exclude or ())
    out = sample_sets(sampler, 2, pairs, taken) + sample_sets(sampler, 3, triples, taken)
    return out


def sample_sets(sampler: Sampler, size: int, count: int, taken: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """`count` new distinct sets of `size` APIs (added to `taken`)."""
    if size < 2:
        raise ValueError(f"an API set has at least 2 APIs, got size {size}")
    out: list[tuple[str, ...]] = []
    attempts = 0
    while len(out) < count:
        attempts += 1
        if attempts > 50 * count + 1000:
            raise ValueError(
                f"could draw only {len(out)} distinct sets of {size} APIs out of {count} asked for "
                f"(vocabulary of {len(sampler.c.apis)}); ask for fewer or raise the temperature"
            )
        drawn = sampler.draw(size)
        if drawn not in taken:
            taken.add(drawn)
            out.append(drawn)
    return out


def set_key(apis: tuple[str, ...] | list[str]) -> str:
    """The pool key of an API set: its sorted names joined by '+'."""
    return "+".join(sorted(apis))


def pool_entries(
    catalog: dict[str, Any],
    pairs: int,
    triples: int,
    temperature: float = 1.0,
    smoothing: float = 0.2,
    seed: int = 0,
    include: list[list[str]] | None = None,
    vocabulary: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Pool lines: the `include` sets first (origin "include"), then sampled pairs and triples."""
    entries, taken = [], set()
    for apis in include or ():
        key = tuple(sorted(set(apis)))
        if len(key) >= 2 and key not in taken:
            taken.add(key)
            entries.append({"key": set_key(key), "apis": list(key), "origin": "include"})
    counts = mine_counts(catalog, vocabulary)
    sets = sample_pool(counts, pairs, triples, temperature=temperature, smoothing=smoothing, seed=seed, exclude=taken)
    entries += [{"key": set_key(s), "apis": list(s), "origin": "cooccurrence"} for s in sets]
    corpus = {
        "specs": catalog.get("corpus", {}).get("specs", []),
        "kernelbench_mined": bool(catalog.get("corpus", {}).get("kernelbench_mined")),
    }
    return [{**e, "size": len(e["apis"]), "corpus": corpus} for e in entries]
