"""fgl_infer on files it must refuse, and on safetensors files (the format
for untrusted inputs). The checked-in corpus tests/corpus/ (made by
tests/corpus/make_corpus.py, expected.json says each file's exit code and
message) is run as --input and as --weights; what cannot be checked in (a
directory, a FIFO, an unreadable file, a file over --max-input-bytes, a
TorchScript module without tensors) is made here. Every refusal: the
documented exit code, an error and a hint, no output file, no crash."""
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch

from test_fgl_infer import (BINARY, CHECK_FAILED, DATAERR, NOINPUT, OK, USAGE,
                            assert_error, assert_matches, linear_state_dict,
                            load, reference, run)

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.*deprecated:DeprecationWarning")

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
sys.path.insert(0, str(CORPUS))
from make_corpus import SetstateRuns, to_zip64  # noqa: E402
EXPECTED = json.loads((CORPUS / "expected.json").read_text())
SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16",
                      torch.bfloat16: "BF16", torch.float64: "F64",
                      torch.int64: "I64", torch.float8_e4m3fn: "F8_E4M3"}


def write_safetensors(path, tensors, metadata=None):
    """What the safetensors package writes: 8-byte little-endian header
    length, a JSON header, the tensors' bytes in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype],
                        "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + data)


@pytest.fixture
def good(tmp_path):
    x = torch.randn(4, 6, 8)
    sd = linear_state_dict(4, 8, 5)
    torch.save(x, tmp_path / "x.pt")
    torch.save(sd, tmp_path / "w.pt")
    return tmp_path / "x.pt", tmp_path / "w.pt"


@pytest.mark.parametrize("role", ["input", "weights"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_of_bad_files(tmp_path, good, name, role):
    x, w = good
    bad = CORPUS / name
    args = (["--input", bad, "--weights", w] if role == "input"
            else ["--input", x, "--weights", bad])
    result = run(*args, "--output", tmp_path / "y.pt")
    expected = EXPECTED[name]
    message = expected["message"]
    if role == "weights":
        message = expected.get("weights_message", message.replace(
            "cannot read input", "cannot read weights"))
    assert_error(result, expected["exit_code"], message, tmp_path=tmp_path)


def test_directory(tmp_path, good):
    (tmp_path / "dir.safetensors").mkdir()
    result = run("--input", good[0], "--weights", tmp_path / "dir.safetensors",
                 "--output", tmp_path / "y.pt")
    assert_error(result, NOINPUT, "is a directory", tmp_path=tmp_path)


def test_fifo_is_refused_without_blocking(tmp_path, good):
    os.mkfifo(tmp_path / "pipe.pt")
    result = run("--input", tmp_path / "pipe.pt", "--weights", good[1],
                 "--output", tmp_path / "y.pt")
    assert_error(result, NOINPUT, "is not a regular file", tmp_path=tmp_path)


@pytest.mark.skipif(os.geteuid() == 0,
                    reason="root reads files whatever their permissions")
def test_unreadable_file(tmp_path, good):
    (tmp_path / "x.pt").chmod(0)
    result = run("--input", good[0], "--weights", good[1],
                 "--output", tmp_path / "y.pt")
    assert_error(result, NOINPUT, "is not readable", tmp_path=tmp_path)


def test_file_over_the_size_cap(tmp_path, good):
    size = good[0].stat().st_size
    result = run("--input", good[0], "--weights", good[1],
                 "--max-input-bytes", size - 1, "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, f"has {size} bytes, more than the limit of "
                 f"{size - 1}", "--max-input-bytes", tmp_path=tmp_path)
    assert run("--input", good[0], "--weights", good[1],
               "--max-input-bytes", size * 4).returncode == OK
    assert_error(run("--max-input-bytes", 0), USAGE, "must be > 0")


def test_limit_bounds_materialised_sizes(tmp_path, good):
    """--max-input-bytes bounds what a file makes the run hold: an expanded
    view of 64 stored bytes, x or weight, counts as its shape says, and so do
    the results of small files."""
    x = torch.ones(4, 1, 4).expand(4, 10 ** 8, 4)
    torch.save(x, tmp_path / "wide.pt")
    assert (tmp_path / "wide.pt").stat().st_size < 4096
    result = run("--input", tmp_path / "wide.pt", "--weights", good[1],
                 "--max-input-bytes", "1GiB", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "input batch 'x' [4, 100000000, 4] Float "
                 "takes 6400000000 bytes once materialised",
                 "--max-input-bytes", tmp_path=tmp_path)
    torch.save(torch.ones(4, 1, 4).expand(4, 2 ** 40, 4), tmp_path / "huge.pt")
    result = run("--input", tmp_path / "huge.pt", "--weights", good[1],
                 "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "once materialised", tmp_path=tmp_path)
    torch.save({"weight": torch.ones(1, 32).expand(10 ** 6, 32)},
               tmp_path / "tall.pt")
    result = run("--input", good[0], "--weights", tmp_path / "tall.pt",
                 "--max-input-bytes", "64MiB", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "weight [1000000, 32] Float takes "
                 "128000000 bytes", tmp_path=tmp_path)
    torch.save(torch.randn(4, 4000, 8), tmp_path / "x.pt")
    torch.save(linear_state_dict(4, 8, 100_000), tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--max-input-bytes", "1GiB", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "the results [4000, 100000] Float takes "
                 "1600000000 bytes", tmp_path=tmp_path)


def test_limit_bounds_what_zip_records_expand_to(tmp_path, good):
    """A deflated record stands for up to 1032 times its size: the records'
    expanded sizes count against --max-input-bytes before any is read."""
    torch.save({**torch.load(good[1]), "pad": "a" * 10_000_000},
               tmp_path / "padded.pt")
    with zipfile.ZipFile(tmp_path / "padded.pt") as z:
        records = [(info, z.read(info)) for info in z.infolist()]
    with zipfile.ZipFile(tmp_path / "deflated.pt", "w") as z:
        for info, data in records:
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    assert (tmp_path / "deflated.pt").stat().st_size < 100_000
    result = run("--input", good[0], "--weights", tmp_path / "deflated.pt",
                 "--max-input-bytes", "1MiB", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "expand to more than 1048576 bytes",
                 tmp_path=tmp_path)
    result = run("--input", good[0], "--weights", tmp_path / "deflated.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr


def test_checkpoints_with_other_dtypes_are_read(tmp_path, good):
    """Entries the run does not use may be of any dtype: int64 position
    ids, float8 scales, uint16, a torch.dtype in a config dict, and in
    safetensors a dtype fgl does not know at all (of a safetensors file
    --weights reads only the layer's tensors)."""
    sd = torch.load(good[1])
    extras = {"position_ids": torch.arange(7),
              "scale": torch.randn(3).to(torch.float8_e4m3fn)}
    torch.save({**sd, **extras,
                "u16": torch.tensor([1, 2], dtype=torch.int32).to(torch.uint16),
                "config": {"dtype": torch.float32, "layers": 2}},
               tmp_path / "mixed.pt")
    write_safetensors(tmp_path / "mixed.safetensors", {**sd, **extras})
    raw = (tmp_path / "mixed.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header["packed"] = {"dtype": "Q4_K", "shape": [3],
                        "data_offsets": [len(raw) - 8 - n, len(raw) - 8 - n]}
    text = json.dumps(header).encode()
    (tmp_path / "packed.safetensors").write_bytes(
        struct.pack("<Q", len(text)) + text + raw[8 + n:])
    expected = reference(torch.load(good[0]), sd["weight"], sd["bias"])
    for weights in ("mixed.pt", "mixed.safetensors", "packed.safetensors"):
        result = run("--input", good[0], "--weights", tmp_path / weights,
                     "--output", tmp_path / "y.pt")
        assert result.returncode == OK, result.stderr
        assert_matches(load(tmp_path / "y.pt"), expected)


@pytest.mark.parametrize("kind", ["safetensors", "torch.save"])
def test_sharded_checkpoints_through_their_index(tmp_path, good, kind):
    """--weights takes a sharded checkpoint's index; only the shards holding
    the layer are read, and an index cannot point outside its directory."""
    sd = torch.load(good[1])
    shards = {"model-00001-of-00002": {"encoder.proj.weight": sd["weight"],
                                       "encoder.other": torch.randn(3, 3)},
              "model-00002-of-00002": {"encoder.proj.bias": sd["bias"],
                                       "decoder.w": torch.randn(2)}}
    suffix = ".safetensors" if kind == "safetensors" else ".bin"
    weight_map = {}
    for stem, tensors in shards.items():
        if kind == "safetensors":
            write_safetensors(tmp_path / (stem + suffix), tensors)
        else:
            torch.save(tensors, tmp_path / (stem + suffix))
        weight_map.update({name: stem + suffix for name in tensors})
    index = tmp_path / ("model" + suffix + ".index.json")
    index.write_text(json.dumps({"metadata": {"total_size": 0},
                                 "weight_map": weight_map}))
    result = run("--input", good[0], "--weights", index, "--weights-prefix",
                 "encoder.proj", "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    assert_matches(load(tmp_path / "y.pt"),
                   reference(torch.load(good[0]), sd["weight"], sd["bias"]))
    result = run("--input", good[0], "--weights", index,
                 "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "names no 'weight' or 'proj.weight'",
                 "encoder.proj.weight")
    weight_map["encoder.proj.weight"] = "../elsewhere" + suffix
    index.write_text(json.dumps({"weight_map": weight_map}))
    result = run("--input", good[0], "--weights", index, "--weights-prefix",
                 "encoder.proj", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "not a file beside the index")


def test_torchscript_module_without_tensors(tmp_path, good):
    torch.jit.save(torch.jit.script(torch.nn.Module()), tmp_path / "ts.pt")
    result = run("--input", tmp_path / "ts.pt", "--weights", good[1],
                 "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "holds no tensors", tmp_path=tmp_path)


def test_torchscript_code_never_runs(tmp_path, good):
    hostile = tmp_path / "hostile.pt"
    torch.jit.save(torch.jit.script(SetstateRuns()), hostile)
    with pytest.raises(Exception, match="__setstate__ ran"):
        torch.jit.load(hostile)  # what reading it with libtorch's loader does
    for args in (("--input", hostile, "--weights", good[1]),
                 ("--input", good[0], "--weights", hostile)):
        result = run(*args, "--output", tmp_path / "y.pt")
        assert_error(result, DATAERR, "own __setstate__ code would read that",
                     "--model", tmp_path=tmp_path)
        assert "__setstate__ ran" not in result.stderr


def test_torchscript_module_attributes_are_read_as_data(tmp_path, good):
    """A TorchScript module's tensors are its pickled attributes: --weights
    takes proj.weight and proj.bias of a scripted model without running it."""
    sd = torch.load(good[1])
    model = torch.nn.Module()
    model.proj = torch.nn.Linear(sd["weight"].shape[1], sd["weight"].shape[0])
    model.proj.load_state_dict(sd)
    torch.jit.save(torch.jit.script(model), tmp_path / "model.pt")
    result = run("--input", good[0], "--weights", tmp_path / "model.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    assert_matches(load(tmp_path / "y.pt"),
                   reference(torch.load(good[0]), sd["weight"], sd["bias"]))


@pytest.mark.parametrize("role", ["input", "weights"])
def test_path_swapped_to_a_fifo_never_hangs(tmp_path, good, role):
    """A path flipped between a regular file and a FIFO while fgl_infer
    checks and opens it: the file is opened once, without blocking, and only
    a regular file is read. Every run ends, in success or a refusal."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = good[0] if role == "input" else good[1]
    link = tmp_path / "flipping.pt"
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            for points_to in (target, fifo):
                staged = tmp_path / "staged"
                os.symlink(points_to, staged)
                os.replace(staged, link)

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        args = {"input": good[0], "weights": good[1], role: link}
        for _ in range(15):
            result = subprocess.run(
                [BINARY, "--input", str(args["input"]), "--weights",
                 str(args["weights"]), "--output", str(tmp_path / "y.pt")],
                capture_output=True, text=True, timeout=60)
            assert result.returncode in (OK, DATAERR, NOINPUT), result.stderr
            assert "Traceback" not in result.stderr
    finally:
        stop.set()
        flipper.join()


# ------------------------------------------------------ interrupted writes

@pytest.fixture
def big_output(tmp_path):
    """A run whose output (205 MB) takes seconds to check and write."""
    torch.save(torch.randn(1, 200_000, 8), tmp_path / "x.pt")
    torch.save(linear_state_dict(1, 8, 256), tmp_path / "w.pt")
    return ("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
            "--output", tmp_path / "y.pt")


def assert_nothing_or_whole(tmp_path):
    """No temporary file; the output absent or complete."""
    leftovers = [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert not leftovers, leftovers
    if (tmp_path / "y.pt").exists():
        assert load(tmp_path / "y.pt").shape == (200_000, 256)


@pytest.mark.parametrize("delay", [1.0, 3.0, 6.0, 9.0])
def test_killed_runs_leave_no_partial_output(tmp_path, big_output, delay):
    """SIGKILL cannot be handled: the output is written into an unnamed file
    that is linked into place only once complete."""
    proc = subprocess.Popen([BINARY, *map(str, big_output)],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(delay)
    proc.kill()
    proc.wait(timeout=60)
    assert_nothing_or_whole(tmp_path)


@pytest.mark.parametrize("signal_number,code",
                         [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_runs_exit_as_the_shell_expects(tmp_path, big_output,
                                                    signal_number, code):
    proc = subprocess.Popen([BINARY, *map(str, big_output)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(1.5)  # past loading libtorch, before the run can end
    proc.send_signal(signal_number)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "fgl_infer: interrupted" in stderr
    assert_nothing_or_whole(tmp_path)


# -------------------------------------------------------------------- zip64

def test_zip64_archives_are_read(tmp_path, good):
    x, w = good
    for path in (x, w):
        zip64 = tmp_path / ("zip64_" + path.name)
        zip64.write_bytes(to_zip64(path.read_bytes()))
        # Both of PyTorch's readers take it: the rewrite is a valid archive.
        assert str(torch.load(zip64)) == str(torch.load(path))
    result = run("--input", tmp_path / "zip64_x.pt", "--weights",
                 tmp_path / "zip64_w.pt", "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    sd = torch.load(w)
    assert_matches(load(tmp_path / "y.pt"),
                   reference(torch.load(x), sd["weight"], sd["bias"]))


@pytest.mark.parametrize("damage, message", [
    ("locator", "a zip64 archive without its locator"),
    ("end64_offset", "points past the end of the file"),
    ("end64_signature", "a zip64 archive without its end record"),
    ("entry_offset", "declares"),
])
def test_damaged_zip64_archives_are_refused(tmp_path, good, damage, message):
    data = bytearray(to_zip64(good[0].read_bytes()))
    locator = len(data) - 22 - 20
    end64 = struct.unpack_from("<Q", data, locator + 8)[0]
    if damage == "locator":
        data[locator:locator + 4] = b"PK\x00\x00"
    elif damage == "end64_offset":
        struct.pack_into("<Q", data, locator + 8, len(data))
    elif damage == "end64_signature":
        data[end64:end64 + 4] = b"PK\x00\x00"
    else:  # the first entry's zip64 offset, past the end of the file
        cd_offset = struct.unpack_from("<Q", data, end64 + 48)[0]
        name = struct.unpack_from("<H", data, cd_offset + 28)[0]
        struct.pack_into("<Q", data, cd_offset + 46 + name + 4 + 16,
                         len(data) * 2)
    (tmp_path / "bad.pt").write_bytes(bytes(data))
    result = run("--input", tmp_path / "bad.pt", "--weights", good[1],
                 "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, message, tmp_path=tmp_path)


# -------------------------------------------------------------- safetensors

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16,
                                   torch.bfloat16, torch.float64])
def test_safetensors_input_and_weights(tmp_path, dtype):
    xs = {"a": torch.randn(3, 5, 8), "b": torch.randn(3, 2, 8)}
    sd = linear_state_dict(3, 8, 7)
    write_safetensors(tmp_path / "x.safetensors",
                      {k: v.to(dtype) for k, v in xs.items()})
    write_safetensors(tmp_path / "w.safetensors",
                      {k: v.to(dtype) for k, v in sd.items()},
                      metadata={"format": "pt"})
    result = run("--input", tmp_path / "x.safetensors", "--weights",
                 tmp_path / "w.safetensors", "--output", tmp_path / "y.pt",
                 "--json")
    assert result.returncode == OK, result.stderr
    summary = json.loads(result.stdout)
    assert summary["input_format"] == "safetensors"
    out = load(tmp_path / "y.pt")
    assert list(out) == ["a", "b"]  # file order, dict layout
    for name, x in xs.items():
        ref = reference(x.to(dtype), sd["weight"].to(dtype),
                        sd["bias"].to(dtype))
        assert_matches(out[name], ref, dtype)


def test_safetensors_weights_with_a_prefix(tmp_path, good):
    sd = linear_state_dict(4, 8, 5)
    write_safetensors(tmp_path / "ckpt.safetensors",
                      {"encoder.out_proj.weight": sd["weight"],
                       "encoder.out_proj.bias": sd["bias"],
                       "encoder.other": torch.ones(3)})
    result = run("--input", good[0], "--weights",
                 tmp_path / "ckpt.safetensors", "--weights-prefix",
                 "encoder.out_proj", "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    x = torch.load(good[0])
    assert_matches(load(tmp_path / "y.pt"),
                   reference(x, sd["weight"], sd["bias"]))


def test_damaged_safetensors_never_crash(tmp_path, good):
    """Random truncations and byte flips of a safetensors file: a clean
    refusal or a normal run, never a signal or an internal error."""
    import random
    rng = random.Random(99)
    write_safetensors(tmp_path / "x.safetensors", {"x": torch.randn(4, 6, 8)})
    base = (tmp_path / "x.safetensors").read_bytes()
    for _ in range(16):
        data = bytearray(base)
        if rng.random() < 0.5:
            data = data[:rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        (tmp_path / "bad.safetensors").write_bytes(bytes(data))
        result = run("--input", tmp_path / "bad.safetensors", "--weights",
                     good[1], "--json")
        assert result.returncode in (OK, CHECK_FAILED, DATAERR), result.stderr
        json.loads(result.stdout)
