"""Writes the checked-in corpora: tests/corpus/ (bad files fgl_infer must
refuse, with expected.json naming each one's exit code and message) and
tests/fuzz_corpus/<target>/ (the fuzz targets' seeds). Run it again only to
change them: python tests/corpus/make_corpus.py"""
import collections
import io
import json
import os
import pickle
import random
import struct
import zipfile
from typing import Tuple

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FUZZ = os.path.join(HERE, "..", "fuzz_corpus")


def saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def safetensors(tensors, header_extra=None):
    """A safetensors file written by hand: 8-byte little-endian header
    length, the JSON header, the data."""
    header, data = {}, b""
    names = {torch.float32: "F32", torch.float16: "F16",
             torch.bfloat16: "BF16", torch.float64: "F64"}
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header.update(header_extra or {})
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


class _Storage:
    """Pickled as torch.save's persistent id of a storage."""

    def __init__(self, numel):
        self.numel = numel


class _Tensor:
    def __init__(self, storage, size, stride, offset=0):
        self.args = (storage, offset, size, stride, False,
                     collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", torch.FloatStorage, "0", "cpu", obj.numel)
        return None


def forged(tensor, data=b"\0" * 16):
    """A torch.save zip whose pickle says what we like about a storage
    that holds `data`."""
    pkl = io.BytesIO()
    _Pickler(pkl, protocol=2).dump(tensor)
    buf = io.BytesIO()
    records = {"archive/data.pkl": pkl.getvalue(),
               "archive/byteorder": b"little", "archive/data/0": data,
               "archive/version": b"3\n"}
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, content in records.items():  # fixed times: stable bytes
            z.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), content)
    return buf.getvalue()


def raw_pickle(pkl, compress=False):
    """A torch.save zip around a hand-written pickle program (deflated when
    `compress`: the deep ones are megabytes of repeated opcodes)."""
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    records = {"archive/data.pkl": pkl, "archive/byteorder": b"little",
               "archive/version": b"3\n"}
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, content in records.items():
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, content)
    return buf.getvalue()


def crafted_pickles():
    """Pickle programs that build what no torch.save writes: a list inside
    itself, nesting a million deep (readers and destructors recurse), and a
    list holding the previous one twice, 40 times over (2^40 entries when
    walked as a tree), and 17 million Nones from 17 KB (what a pickle
    builds costs memory even if the result drops it)."""
    deep = 10 ** 6
    doubling = b"\x80\x02]q\x000"  # memo 0 = [], popped
    for i in range(40):  # memo i+1 = [memo i, memo i], popped
        doubling += (b"(h" + bytes([i]) + b"h" + bytes([i]) + b"lq" +
                     bytes([i + 1]) + b"0")
    doubling += b"h" + bytes([40])
    return {
        "cyclic_list.pt": raw_pickle(b"\x80\x02]2a."),
        "deep_list.pt": raw_pickle(b"\x80\x02" + b"]" * deep +
                                   b"a" * (deep - 1) + b".", compress=True),
        # The deep list popped: a small result, a million-deep leftover.
        "deep_list_popped.pt": raw_pickle(
            b"\x80\x02" + b"]" * deep + b"a" * (deep - 1) + b"0].",
            compress=True),
        "deep_tuple.pt": raw_pickle(b"\x80\x02)" + b"\x85" * deep + b".",
                                    compress=True),
        "memo_doubling.pt": raw_pickle(doubling + b"."),
        "many_values.pt": raw_pickle(b"\x80\x02" + b"N" * (17 << 20) + b".",
                                     compress=True),
    }


def without_record(data, suffix):
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for item in src.infolist():
            if not item.filename.endswith(suffix):
                z.writestr(item, src.read(item))
    return buf.getvalue()


def declaring_4gb(data):
    """A zip whose first central directory entry declares a 4 GB record:
    libtorch's reader would allocate that much (found by fuzz_torch_save)."""
    data = bytearray(data)
    at = data.find(b"PK\x01\x02")
    data[at + 24:at + 28] = struct.pack("<I", 0xFFFF0002)
    return bytes(data)


def to_zip64(data):
    """The same archive in its zip64 form, as writers emit it past 4 GiB or
    65535 records: every central-directory entry moves its sizes and offset
    into a zip64 extra field (0xffffffff left in the 32-bit slots), and a
    zip64 end record and its locator precede an end record of 0xffff...
    markers. Records and their data stay where they were."""
    end = data.rindex(b"PK\x05\x06")
    entries, cd_size, cd_offset = struct.unpack_from("<HII", data, end + 10)
    directory, at = b"", cd_offset
    for _ in range(entries):
        fixed = bytearray(data[at:at + 46])
        compressed, uncompressed = struct.unpack_from("<II", fixed, 20)
        name, extra, comment = struct.unpack_from("<HHH", fixed, 28)
        offset, = struct.unpack_from("<I", fixed, 42)
        rest = data[at + 46:at + 46 + name + extra + comment]
        zip64 = struct.pack("<HHQQQ", 1, 24, uncompressed, compressed, offset)
        struct.pack_into("<II", fixed, 20, 0xFFFFFFFF, 0xFFFFFFFF)
        struct.pack_into("<H", fixed, 30, extra + len(zip64))
        struct.pack_into("<I", fixed, 42, 0xFFFFFFFF)
        directory += (bytes(fixed) + rest[:name] + zip64 +
                      rest[name:name + extra] + rest[name + extra:])
        at += 46 + name + extra + comment
    end64_at = cd_offset + len(directory)
    end64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, entries,
                        entries, len(directory), cd_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, end64_at, 1)
    end_record = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF,
                             0xFFFFFFFF, 0xFFFFFFFF, 0)
    return data[:cd_offset] + directory + end64 + locator + end_record


class SetstateRuns(torch.nn.Module):
    """A module whose saved state only its own __setstate__ reads (which
    raises here): libtorch's loader runs that code, fgl's reader refuses."""

    def __init__(self):
        super().__init__()
        self.x = torch.ones(2, 3, 4)

    @torch.jit.export
    def __getstate__(self):
        return (self.x, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool]):
        self.x = state[0]
        self.training = state[1]
        raise RuntimeError("the file's __setstate__ ran")


def scripted(module):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    return buf.getvalue()


def bad_files():
    """name -> (bytes, exit code, message fragment[, as weights])."""
    rng = random.Random(7)
    x = saved(torch.randn(2, 3, 4))
    big = 2 ** 40
    crafted = crafted_pickles()
    return {
        "empty.pt": (b"", 65, "is empty"),
        "random.bin": (bytes(rng.randrange(256) for _ in range(512)), 65,
                       "not a PyTorch zip file or a safetensors file"),
        "truncated.pt": (x[: len(x) // 2], 65, "cannot read input"),
        "no_data_pkl.pt": (without_record(x, "data.pkl"), 65,
                           "without data.pkl"),
        "missing_storage.pt": (without_record(x, "data/0"), 65,
                               "storage 0 holds 0 bytes"),
        "no_version.pt": (without_record(x, "/version"), 65,
                          "no record 'archive/version'"),
        "declared_4gb_record.pt": (declaring_4gb(x), 65,
                                   "declares 4294901762 bytes"),
        "string.pt": (saved("just a string"), 65, "holds a String"),
        "int.pt": (saved(42), 65, "holds a Int"),
        # As weights, nested containers are a checkpoint without "weight".
        "nested.pt": (saved({"a": [[{"b": torch.ones(2, 3, 4)}]]}), 65,
                      "not a tensor", "has no 'weight' or 'proj.weight'"),
        "cyclic_list.pt": (crafted["cyclic_list.pt"], 65,
                           "puts a container inside itself"),
        "deep_list.pt": (crafted["deep_list.pt"], 65,
                         "nests containers more than 1000 deep"),
        "deep_list_popped.pt": (crafted["deep_list_popped.pt"], 65,
                                "holds no tensors"),
        "deep_tuple.pt": (crafted["deep_tuple.pt"], 65,
                          "nests tuples more than 1000 deep"),
        "memo_doubling.pt": (crafted["memo_doubling.pt"], 65,
                             "expand to more than 16777216 entries"),
        "many_values.pt": (crafted["many_values.pt"], 65,
                           "builds more than 16777216 values"),
        "absurd_numel.pt": (forged(_Tensor(_Storage(2 ** 40), (big, big),
                                           (big, 1))),
                            65, "storage 0 holds 16 bytes"),
        "absurd_size.pt": (forged(_Tensor(_Storage(4), (big, big, big),
                                          (1, 1, 1))),
                           65, "out of bounds for storage"),
        "negative_numel.pt": (forged(_Tensor(_Storage(-4), (2, 2), (2, 1))),
                              65, "impossible size"),
        "absurd_shape.safetensors": (
            safetensors({}, {"x": {"dtype": "F32", "shape": [big, big, 4],
                                   "data_offsets": [0, 16]}}) + b"\0" * 16,
            65, "overflows"),
        "offsets_past_end.safetensors": (
            safetensors({}, {"x": {"dtype": "F32", "shape": [2, 3, 4],
                                   "data_offsets": [0, 96]}}) + b"\0" * 16,
            65, "outside the 16 data bytes"),
        "truncated_header.safetensors": (
            safetensors({"x": torch.ones(2, 3, 4)})[:40], 65,
            "exceeds the 32 bytes after it"),
        "setstate_code.pt": (scripted(SetstateRuns()), 65,
                             "own __setstate__ code would read that"),
        # A dtype fgl does not know is skipped: here nothing else is left.
        "unknown_dtype.safetensors": (
            safetensors({}, {"x": {"dtype": "Q4_K", "shape": [2],
                                   "data_offsets": [0, 16]}}) + b"\0" * 16,
            65, "holds no tensors", "has no 'weight' or 'proj.weight'"),
    }


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    torch.manual_seed(0)
    expected = {}
    for name, (data, code, *messages) in sorted(bad_files().items()):
        write(os.path.join(HERE, name), data)
        expected[name] = {"exit_code": code, "message": messages[0]}
        if len(messages) > 1:
            expected[name]["weights_message"] = messages[1]
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")

    torch.manual_seed(0)
    x = torch.randn(2, 3, 4)
    sd = torch.nn.Linear(8, 5).state_dict()
    pt = {"tensor.pt": saved(x), "dict.pt": saved({"a": x, "b": x[:, :1]}),
          "list.pt": saved([x, x.half()]), "state_dict.pt": saved(sd),
          "bf16.pt": saved(x.bfloat16()), "zip64.pt": to_zip64(saved(x))}
    st = {"x.safetensors": safetensors({"x": x}),
          "weights.safetensors": safetensors(
              {"weight": sd["weight"], "bias": sd["bias"].double()},
              {"__metadata__": {"format": "pt"}})}
    for name, data in pt.items():
        write(os.path.join(FUZZ, "fuzz_torch_save", name), data)
        write(os.path.join(FUZZ, "fuzz_tensor_file", name), data)
    # TorchScript containers, read as data: one of tensor attributes, one
    # whose state only its __setstate__ code reads.
    holder = torch.nn.Module()
    holder.register_buffer("x", x)
    write(os.path.join(FUZZ, "fuzz_tensor_file", "torchscript.pt"),
          scripted(holder))
    for target in ("fuzz_torch_save", "fuzz_tensor_file"):
        write(os.path.join(FUZZ, target, "setstate_code.pt"),
              scripted(SetstateRuns()))
    for name, data in crafted_pickles().items():
        if name == "many_values.pt":
            continue  # seconds per run: too slow a seed under ASan
        write(os.path.join(FUZZ, "fuzz_torch_save", name), data)
        write(os.path.join(FUZZ, "fuzz_tensor_file", name), data)
    for name, data in st.items():
        write(os.path.join(FUZZ, "fuzz_safetensors_header", name), data)
        write(os.path.join(FUZZ, "fuzz_tensor_file", name), data)


if __name__ == "__main__":
    main()
