"""The judge's comparison and the worker -> judge channel (no pickles from the candidate)."""

import os
import threading

import pytest
import torch

from kernelzero.verify.judge.compare import compare, same_inputs
from kernelzero.verify.sandbox.channel import ChannelError, _write_frame, recv_msg, recv_obj, send_msg, send_obj


def test_compare_statuses():
    exp = [torch.tensor([1.0, 2.0, 3.0])]
    assert compare(exp, [exp[0].clone()], 1e-2, 1e-2) is None
    assert compare(exp, [], 1e-2, 1e-2).status == "shape_mismatch"
    assert compare(exp, [torch.zeros(4)], 1e-2, 1e-2).status == "shape_mismatch"
    assert compare(exp, [exp[0].double()], 1e-2, 1e-2).status == "dtype_mismatch"
    assert compare(exp, [torch.tensor([1.0, float("nan"), 3.0])], 1e-2, 1e-2).status == "nan_or_inf"
    bad = compare(exp, [torch.tensor([1.0, 2.5, 3.0])], 1e-2, 1e-2)
    assert bad.status == "mismatch" and bad.mismatch.index == (1,) and bad.mismatch.got == 2.5
    assert bad.mismatch.bad_fraction == pytest.approx(1 / 3)


def test_relative_tolerance_scales_with_the_reference_not_the_candidate():
    exp = [torch.tensor([1.0])]
    # |got - exp| = 0.5 <= atol + rtol * |got| would pass for a huge rtol on the candidate's side only
    assert compare(exp, [torch.tensor([1.5])], 0.0, 0.4).status == "mismatch"
    assert compare(exp, [torch.tensor([1.3])], 0.0, 0.4) is None


def test_integer_outputs_must_match_exactly():
    exp = [torch.tensor([1, 2, 3])]
    assert compare(exp, [torch.tensor([1, 2, 4])], 1.0, 1.0).status == "mismatch"


def test_same_inputs_names_the_changed_input():
    a = [torch.ones(3), torch.zeros(2)]
    assert same_inputs(a, [torch.ones(3), torch.zeros(2)]) == ""
    assert "input 1" in same_inputs(a, [torch.ones(3), torch.ones(2)])


def _pipe_roundtrip(send, recv):
    r, w = os.pipe()
    result = {}

    def reader():
        try:
            result["v"] = recv(r)
        except Exception as exc:  # re-raised in the test's thread
            result["e"] = exc

    t = threading.Thread(target=reader)
    t.start()
    send(w)
    os.close(w)
    t.join(10)
    os.close(r)
    if "e" in result:
        raise result["e"]
    return result["v"]


def test_tensors_roundtrip_as_raw_bytes():
    tensors = [torch.randn(3, 4), torch.arange(5), torch.randn(2, 2).to(torch.bfloat16), torch.empty(0, 3)]
    header, got = _pipe_roundtrip(lambda w: send_msg(w, {"ok": True}, tensors), recv_msg)
    assert header.pop("_cpu_s") > 0  # every reply says the sending process's CPU seconds so far (a diagnosis)
    assert header == {"ok": True}
    for a, b in zip(tensors, got):
        assert a.dtype == b.dtype and torch.equal(a, b)


def test_judge_to_worker_objects():
    obj = {"cmd": "run", "inputs": [torch.ones(2), 3]}
    got = _pipe_roundtrip(lambda w: send_obj(w, obj), recv_obj)
    assert got["cmd"] == "run" and torch.equal(got["inputs"][0], torch.ones(2))


@pytest.mark.parametrize(
    "payload",
    [b"not json", b'{"no": "tensors key"}', b'{"_tensors": [["object", [1]]]}', b'{"_tensors": [["float32", [-1]]]}'],
)
def test_malformed_messages_are_rejected_not_executed(payload):
    with pytest.raises(ChannelError):
        _pipe_roundtrip(lambda w: _write_frame(w, payload), recv_msg)


def test_tensor_with_wrong_byte_count_is_rejected():
    def send(w):
        _write_frame(w, b'{"_tensors": [["float32", [4]]]}')
        _write_frame(w, b"\x00" * 3)

    with pytest.raises(ChannelError, match="expected 16"):
        _pipe_roundtrip(send, recv_msg)


def test_closed_channel_is_an_error():
    with pytest.raises(ChannelError, match="closed"):
        _pipe_roundtrip(lambda w: None, recv_msg)


def test_large_tensors_go_through_the_transfer_folder_both_ways(tmp_path):
    from kernelzero.verify.sandbox import channel

    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    big = torch.randn(600, 1000)  # 2.4 MB: over FILE_MIN_BYTES
    sink = channel.FileSink(tmp_path / "in")
    got = _pipe_roundtrip(lambda w: send_obj(w, {"inputs": [big, torch.ones(2)]}, sink), recv_obj)
    assert torch.equal(got["inputs"][0], big) and len(list((tmp_path / "in").iterdir())) == 1
    sink.clear()
    assert not list((tmp_path / "in").iterdir())
    channel.use_out_dir(str(tmp_path / "out"))
    try:
        header, back = _pipe_roundtrip(
            lambda w: send_msg(w, {"ok": True}, [big, torch.arange(3)]),
            lambda r: recv_msg(r, file_dir=tmp_path / "out"),
        )
    finally:
        channel.use_out_dir(None)
    assert (
        header.pop("_cpu_s") > 0
        and header == {"ok": True}
        and torch.equal(back[0], big)
        and torch.equal(back[1], torch.arange(3))
    )
    assert not list((tmp_path / "out").iterdir())  # the judge deleted what it read


@pytest.mark.parametrize(
    "name,make", [("../x.bin", None), ("1.bin", "symlink"), ("2.bin", "short"), ("3.bin", "missing")]
)
def test_hostile_tensor_files_are_rejected(tmp_path, name, make):
    secret = tmp_path / "secret"
    secret.write_bytes(b"\x01" * 16)
    out = tmp_path / "out"
    out.mkdir()
    if make == "symlink":
        (out / name).symlink_to(secret)
    elif make == "short":
        (out / name).write_bytes(b"\x00" * 8)

    def send(w):
        _write_frame(w, ('{"_tensors": [["float32", [4], "%s"]]}' % name).encode())

    with pytest.raises(ChannelError):
        _pipe_roundtrip(send, lambda r: recv_msg(r, file_dir=out))
    with pytest.raises(ChannelError):  # no transfer folder: a named file is refused outright
        _pipe_roundtrip(send, recv_msg)


def test_packed_tensors_are_freed_when_the_last_reference_goes_without_the_cyclic_collector():
    """pack_values must not hold what it packs in a reference cycle: on a GPU every input set the reference drew
    stayed allocated until Python's cyclic collector ran (22-27 GB for a 512 MiB-input task on the H200)."""
    import gc
    import weakref

    import torch

    from kernelzero.verify.sandbox.values import pack_values, unpack_values

    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        sets = [[torch.ones(4), (torch.zeros(2), 3)], {"x": torch.ones(1)}]
        watched = [weakref.ref(t) for t in (sets[0][0], sets[0][1][0], sets[1]["x"])]
        structure, tensors = pack_values(sets)
        assert unpack_values(structure, tensors)[0][1][1] == 3
        del sets, structure, tensors
        assert all(w() is None for w in watched), "a packed tensor outlived its last reference"
    finally:
        if enabled:
            gc.enable()
