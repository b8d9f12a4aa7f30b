"""Co-occurrence counts and API-set sampling (proposer/cooccur.py), and the pool's build time."""

from pathlib import Path

import pytest

from kernelzero.proposer.cooccur import Sampler, compatibility, mine_counts, pool_entries, sample_pool, set_key
from kernelzero.proposer.corpus import build_catalog

KERNELBENCH = Path(__file__).resolve().parents[3] / "shared" / "data" / "kernelbench.jsonl"


def _catalog(modules, extra=()):
    apis = {
        a: {"category": c, "sampled": True, "count": 0}
        for a, c in [
            ("linear", "gemm"),
            ("gelu", "elementwise"),
            ("layer_norm", "normalisation"),
            ("conv2d", "convolution"),
            ("max_pool3d", "pooling"),
            ("mse_loss", "loss"),
            ("l1_loss", "loss"),
            *extra,
        ]
    }
    return {"apis": apis, "modules": [{"where": "m", "apis": m} for m in modules], "corpus": {"specs": ["t"]}}


def test_counts_of_pairs_and_triples():
    counts = mine_counts(_catalog([["linear", "gelu", "layer_norm"], ["linear", "gelu"], ["conv2d"]]))
    i = {a: k for k, a in enumerate(counts.apis)}
    assert counts.pairs[i["linear"], i["gelu"]] == 2 and counts.pairs[i["gelu"], i["linear"]] == 2
    assert counts.unigram[i["linear"]] == 2 and counts.unigram[i["conv2d"]] == 1
    assert counts.third[(i["gelu"], i["layer_norm"])][i["linear"]] == 1


def test_sampled_sets_are_distinct_and_follow_the_counts():
    counts = mine_counts(_catalog([["linear", "gelu"]] * 50 + [["conv2d", "max_pool3d"]]))
    pool = sample_pool(counts, pairs=10, triples=10, seed=1)
    assert len(pool) == 20 and len(set(pool)) == 20
    assert all(len(s) == 2 for s in pool[:10]) and all(len(s) == 3 for s in pool[10:])
    draws = [Sampler(counts, smoothing=0.05, seed=s).draw(2) for s in range(200)]
    assert draws.count(("gelu", "linear")) > draws.count(("conv2d", "linear"))


def test_compatibility_penalises_mixed_dimensions_and_two_losses():
    assert compatibility("conv2d", "convolution", "max_pool3d", "pooling") < 0.1
    assert compatibility("mse_loss", "loss", "l1_loss", "loss") < compatibility("gelu", "elementwise", "linear", "gemm")


def test_too_many_sets_and_bad_temperature_raise():
    counts = mine_counts(_catalog([["linear", "gelu"]]))
    with pytest.raises(ValueError, match="distinct sets"):
        sample_pool(counts, pairs=100, triples=0)
    with pytest.raises(ValueError, match="temperature"):
        Sampler(counts, temperature=0)


def test_include_sets_come_first_and_are_not_drawn_again():
    rows = pool_entries(_catalog([["linear", "gelu"]]), pairs=3, triples=2, include=[["gelu", "linear"]])
    assert rows[0]["origin"] == "include" and rows[0]["key"] == set_key(["linear", "gelu"])
    assert [r["key"] for r in rows].count("gelu+linear") == 1 and len(rows) == 6


def test_default_pool_of_2000_pairs_and_2000_triples():
    """Its speed is a benchmark (bench/proposer.md), not a test: under CI load this took 110 s once, 60 s on an idle
    machine."""
    catalog = build_catalog(["default"])
    rows = pool_entries(catalog, pairs=2000, triples=2000, seed=0)
    assert len({r["key"] for r in rows}) == 4000
    assert any(catalog["apis"][a]["count"] == 0 for r in rows for a in r["apis"])  # unseen APIs appear


@pytest.mark.skipif(not KERNELBENCH.exists(), reason="../shared/data/kernelbench.jsonl is absent")
def test_kernelbench_levels_1_2_as_corpus_with_the_flag():
    catalog = build_catalog([str(KERNELBENCH)], allow_kernelbench=True, levels=(1, 2))
    rows = pool_entries(catalog, pairs=2000, triples=2000, seed=0)
    assert len(rows) == 4000
    assert all(r["corpus"]["kernelbench_mined"] for r in rows)
