"""API extraction from syntax trees: aliases, forms, submodules, categories; corpus specs (proposer/catalog.py, corpus.py)."""

import json

import pytest

from kernelzero.proposer.catalog import api_table, extract_modules, forward_apis
from kernelzero.proposer.corpus import CorpusError, build_catalog, load_catalog, mine

SOURCE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import LayerNorm


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.GELU())

    def forward(self, x):
        return self.mlp(self.norm(x))


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.conv = nn.Conv2d(3, d, 3)
        self.block = Block(d)
        self.cache = {}

    def _gate(self, x):
        return torch.sigmoid(x)

    def forward(self, x, w):
        y = F.relu(self.conv(x)) + torch.relu(x).sum() + x.relu_().mean()
        y = self.block(y) @ w
        self.cache.update({})
        return self._gate(y).view(-1)
"""


def test_aliases_resolve_to_one_name_and_keep_their_form():
    apis = forward_apis(SOURCE)
    assert apis["relu"] == {"functional": 1, "torch": 1, "method": 1}  # F.relu, torch.relu, x.relu_()
    assert apis["conv2d"] == {"module": 1}  # self.conv = nn.Conv2d
    assert apis["matmul"] == {"operator": 1}
    assert apis["sigmoid"] == {"torch": 1}  # through the helper method self._gate
    assert {"layer_norm", "linear", "gelu"} <= set(apis)  # through the local class Block and its Sequential
    assert "update" not in apis  # a dict method is not an API


def test_categories_and_glue():
    table = api_table()
    assert table.category_of("conv2d") == "convolution" and table.category_of("layer_norm") == "normalisation"
    assert table.category_of("view") == "layout" and not table.sampled("view")
    assert table.sampled("gelu") and table.category_of("no_such_op") == "other"


def test_extract_modules_lists_classes_with_a_forward():
    names = {u.name for u in extract_modules(SOURCE, "x.py")}
    assert names == {"Block", "Model"}


def test_kernelbench_corpus_needs_the_flag(tmp_path):
    folder = tmp_path / "KernelBench" / "level1"
    folder.mkdir(parents=True)
    (folder / "1_Relu.py").write_text(SOURCE)
    with pytest.raises(CorpusError, match="--kernelbench-corpus"):
        mine(str(tmp_path / "KernelBench"))
    uses, record = mine(str(tmp_path / "KernelBench"), allow_kernelbench=True)
    assert record["kernelbench"] and uses


def test_catalog_of_kz_basic_and_a_folder(tmp_path):
    (tmp_path / "m.py").write_text(SOURCE)
    catalog = build_catalog(["kz-basic", str(tmp_path)], cache_dir=tmp_path / "cache")
    assert catalog["corpus"]["kernelbench_mined"] is False
    assert catalog["apis"]["relu"]["count"] >= 2 and catalog["apis"]["relu"]["in_torch"]
    unused = [n for n, e in catalog["apis"].items() if e["count"] == 0 and e["sampled"]]
    assert "hypot" in unused or "logaddexp" in unused  # torch operators no corpus module uses
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    assert load_catalog(path)["version"] == catalog["version"]
    with pytest.raises(CorpusError):
        load_catalog(tmp_path / "m.py")


def test_unknown_corpus_is_a_clear_error():
    with pytest.raises(CorpusError, match="no-such-suite"):
        build_catalog(["no-such-suite"], with_torch=False)
