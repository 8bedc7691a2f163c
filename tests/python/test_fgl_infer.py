"""fgl_infer end to end: the real binary on fixtures made at test time by
Python torch (tensor, list, tuple and dict inputs; state_dicts with and
without a prefix; a torch.jit.script container) and by C++ torch::save
(FGL_MAKE_FIXTURES). Outputs are read back with torch.load and compared with
a float64 reference computed here. Every error class asserts its exit code,
its message with a hint, and that no output file was left behind."""
import json
import os
import pty
import struct
import subprocess

import pytest
import torch

# The fixtures are made with torch.jit on purpose; its deprecation is noise.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.*deprecated:DeprecationWarning")

# What fgl::gather_linear_route answers on the CPU and on CUDA.
ROUTES = {"dot", "gemm-view", "gemm-cat", "gemm-slices", "warp-dot",
          "warp-mma", "stream", "wgmma", "wgmma-pingpong", "wgmma-split",
          "wgmma-stationary", "wgmma-packed", "tiled", "cublas-view",
          "cublas-cat"}

BINARY = os.environ["FGL_INFER"]
MAKE_FIXTURES = os.environ.get("FGL_MAKE_FIXTURES")

# The README's exit codes.
OK, CHECK_FAILED, USAGE, DATAERR, NOINPUT, UNAVAILABLE, CANTCREAT = (
    0, 1, 64, 65, 66, 69, 73)
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-5,
             torch.float16: 2e-3, torch.bfloat16: 1e-2}


def run(*args):
    return subprocess.run([BINARY, *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def reference(x, weight, bias):
    x64 = x.double()
    gathered = torch.cat([x64[r] for r in range(x64.shape[0])], -1)
    b64 = None if bias is None else bias.double()
    return torch.nn.functional.linear(gathered, weight.double(), b64)


def assert_matches(out, ref, dtype=torch.float32):
    assert out.shape == ref.shape and out.dtype == dtype
    scale = ref.abs() + ref.pow(2).mean().sqrt()
    err = (out.double() - ref).abs()
    assert bool((err <= TOLERANCE[dtype] * scale).all()), float(
        (err / scale).max())


def linear_state_dict(R, H, K, bias=True):
    layer = torch.nn.Linear(R * H, K, bias=bias)
    with torch.no_grad():  # fresh normals rather than the small uniform init
        layer.weight.normal_()
        if bias:
            layer.bias.normal_()
    return layer.state_dict()


def load(path):
    return torch.load(path, weights_only=True)


@pytest.fixture
def problem(tmp_path):
    """x (4, 12, 32) and an nn.Linear(128, 56) state_dict on disk."""
    x = torch.randn(4, 12, 32)
    sd = linear_state_dict(4, 32, 56)
    torch.save(x, tmp_path / "x.pt")
    torch.save(sd, tmp_path / "w.pt")
    return x, sd


# ---------------------------------------------------------------- successes

def test_demo_runs_and_passes():
    result = run()
    assert result.returncode == OK, result.stderr
    assert "demo problem" in result.stdout
    assert "R=4 H=32 K=56" in result.stdout
    assert "check passed" in result.stdout


def test_help_and_version():
    result = run("--help")
    assert result.returncode == OK
    for part in ("--input", "--weights", "Examples:", "Exit codes"):
        assert part in result.stdout
    result = run("--version")
    assert result.returncode == OK and "fgl_infer 0.1.0" in result.stdout


@pytest.mark.parametrize("layout", ["tensor", "list", "tuple", "dict"])
def test_python_inputs_in_every_layout(tmp_path, layout):
    R, H, K = 3, 17, 9
    xs = [torch.randn(R, B, H) for B in (5, 1, 8)]
    if layout == "tensor":
        data = xs[0]
    elif layout == "list":
        data = xs
    elif layout == "tuple":
        data = tuple(xs)
    else:
        data = {"first": xs[0], "second": xs[1], "third": xs[2]}
    sd = linear_state_dict(R, H, K)
    torch.save(data, tmp_path / "x.pt")
    torch.save(sd, tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    # Said once, on stdout with the summary.
    assert result.stdout.count("wrote ") == 1 and "wrote " not in result.stderr
    out = load(tmp_path / "y.pt")
    if layout == "tensor":
        assert isinstance(out, torch.Tensor)
        assert_matches(out, reference(xs[0], sd["weight"], sd["bias"]))
        return
    if layout == "dict":
        assert list(out) == list(data)
        outs = list(out.values())
    else:
        assert isinstance(out, list if layout == "list" else tuple)
        outs = list(out)
    assert len(outs) == len(xs)
    for o, x in zip(outs, xs):
        assert_matches(o, reference(x, sd["weight"], sd["bias"]))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_views_of_one_storage_and_pickle_protocols(tmp_path, protocol):
    big = torch.randn(8, 3, 20)  # (B, R, H) buffer
    x = big.transpose(0, 1)  # (R, B, H) view
    batches = [x[:, :5], x[:, 5:]]  # views sharing one storage, offset
    sd = linear_state_dict(3, 20, 7)
    torch.save(batches, tmp_path / "x.pt", pickle_protocol=protocol)
    torch.save(sd, tmp_path / "w.pt", pickle_protocol=protocol)
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    out = load(tmp_path / "y.pt")
    for o, b in zip(out, batches):
        assert_matches(o, reference(b, sd["weight"], sd["bias"]))


def test_weights_without_bias(tmp_path):
    x = torch.randn(2, 6, 8)
    sd = linear_state_dict(2, 8, 5, bias=False)
    torch.save(x, tmp_path / "x.pt")
    torch.save(sd, tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    assert "no bias" in result.stdout
    assert_matches(load(tmp_path / "y.pt"), reference(x, sd["weight"], None))


def test_weights_from_a_bigger_state_dict_with_a_prefix(tmp_path):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(24)
            self.out_proj = torch.nn.Linear(24, 10)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = Block()

    model = Model()
    with torch.no_grad():
        model.encoder.out_proj.weight.normal_()
    sd = model.state_dict()
    x = torch.randn(3, 7, 8)
    torch.save(x, tmp_path / "x.pt")
    torch.save(sd, tmp_path / "ckpt.pt")
    base = ("--input", tmp_path / "x.pt", "--weights", tmp_path / "ckpt.pt",
            "--output", tmp_path / "y.pt")
    result = run(*base)
    assert result.returncode == DATAERR
    assert "--weights-prefix" in result.stderr
    assert "encoder.out_proj.weight" in result.stderr
    assert not (tmp_path / "y.pt").exists()
    for prefix in ("encoder.out_proj", "encoder.out_proj."):
        result = run(*base, "--weights-prefix", prefix)
        assert result.returncode == OK, result.stderr
        assert_matches(load(tmp_path / "y.pt"),
                       reference(x, sd["encoder.out_proj.weight"],
                                 sd["encoder.out_proj.bias"]))


def test_weights_from_a_nested_checkpoint(tmp_path):
    sd = linear_state_dict(2, 4, 3)
    torch.save({"epoch": 7, "model": {"head." + k: v for k, v in sd.items()},
                "lr": 0.1}, tmp_path / "ckpt.pt")
    x = torch.randn(2, 5, 4)
    torch.save(x, tmp_path / "x.pt")
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "ckpt.pt", "--weights-prefix", "model.head",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    assert_matches(load(tmp_path / "y.pt"),
                   reference(x, sd["weight"], sd["bias"]))


def test_proj_prefix_is_found_without_being_named(tmp_path):
    sd = {"proj." + k: v for k, v in linear_state_dict(2, 4, 3).items()}
    x = torch.randn(2, 5, 4)
    torch.save(x, tmp_path / "x.pt")
    torch.save(sd, tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    assert_matches(load(tmp_path / "y.pt"),
                   reference(x, sd["proj.weight"], sd["proj.bias"]))


class TensorContainer(torch.nn.Module):
    """Holds tensors as plain attributes, for torch.jit.script."""

    def __init__(self, tensors):
        super().__init__()
        for name, tensor in tensors.items():
            setattr(self, name, tensor)

    def forward(self):
        return None


def test_torchscript_container_from_python(tmp_path):
    xs = {"alpha": torch.randn(4, 3, 5), "beta": torch.randn(4, 9, 5)}
    torch.jit.script(TensorContainer(xs)).save(str(tmp_path / "x.pt"))
    sd = linear_state_dict(4, 5, 6)
    torch.save(sd, tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    out = load(tmp_path / "y.pt")
    assert list(out) == ["alpha", "beta"]
    for name, x in xs.items():
        assert_matches(out[name], reference(x, sd["weight"], sd["bias"]))


def test_weights_from_a_scripted_linear(tmp_path):
    layer = torch.nn.Linear(12, 5)
    torch.jit.script(layer).save(str(tmp_path / "w.pt"))
    x = torch.randn(3, 4, 4)
    torch.save(x, tmp_path / "x.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    assert_matches(load(tmp_path / "y.pt"),
                   reference(x, layer.weight.detach(), layer.bias.detach()))


@pytest.fixture
def cpp_fixtures(tmp_path):
    if not MAKE_FIXTURES:
        pytest.skip("FGL_MAKE_FIXTURES is not set")
    subprocess.run([MAKE_FIXTURES, str(tmp_path)], check=True, timeout=120)
    return tmp_path


def archive_tensors(path):
    """The tensors of a C++ torch::save archive, by name."""
    return {k: v.detach() for k, v in
            torch.jit.load(str(path)).state_dict().items()}


@pytest.mark.parametrize("name", ["cpp_tensor", "cpp_list"])
def test_cpp_torch_save_fixtures(cpp_fixtures, name):
    weights = archive_tensors(cpp_fixtures / "cpp_module.pt")
    xs = archive_tensors(cpp_fixtures / f"{name}.pt")
    out_path = cpp_fixtures / "y.pt"
    result = run("--input", cpp_fixtures / f"{name}.pt", "--weights",
                 cpp_fixtures / "cpp_module.pt", "--output", out_path)
    assert result.returncode == OK, result.stderr
    out = load(out_path)
    if name == "cpp_tensor":
        outs = [out]
    else:
        assert isinstance(out, list)
        outs = out
    assert len(outs) == len(xs)
    for o, key in zip(outs, sorted(xs, key=int)):
        assert_matches(o, reference(xs[key], weights["proj.weight"],
                                    weights["proj.bias"]))


@pytest.mark.parametrize("dtype_name,dtype", [
    ("float16", torch.float16), ("bfloat16", torch.bfloat16),
    ("float64", torch.float64)])
def test_dtype_conversion(tmp_path, problem, dtype_name, dtype):
    x, sd = problem
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--dtype", dtype_name, "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    # The reference sees the same rounded inputs the op saw.
    ref = reference(x.to(dtype), sd["weight"].to(dtype), sd["bias"].to(dtype))
    assert_matches(load(tmp_path / "y.pt"), ref, dtype)


def test_batch_size_splits_and_reassembles(tmp_path):
    x = torch.randn(3, 23, 6)
    sd = linear_state_dict(3, 6, 4)
    torch.save({"big": x}, tmp_path / "x.pt")
    torch.save(sd, tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--batch-size", 5, "--output", tmp_path / "y.pt", "--json")
    assert result.returncode == OK, result.stderr
    summary = json.loads(result.stdout)
    assert summary["batches"][0]["chunks"] == 5
    assert summary["batches"][0]["rows"] == 23
    # The fused op's route, each distinct one of the chunks once.
    routes = summary["batches"][0]["route"].split(",")
    assert len(set(routes)) == len(routes) and set(routes) <= ROUTES
    assert_matches(load(tmp_path / "y.pt")["big"],
                   reference(x, sd["weight"], sd["bias"]))


def test_json_summary_and_benchmark(tmp_path, problem):
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--json", "--warmup", 1, "--iters", 5)
    assert result.returncode == OK, result.stderr
    summary = json.loads(result.stdout)  # stdout is only the JSON
    assert summary["exit_code"] == OK
    assert (summary["R"], summary["H"], summary["K"]) == (4, 32, 56)
    assert summary["check"]["passed"] and summary["check"]["enabled"]
    assert summary["dtype"] == "float32" and summary["device"] == (
        "cuda:0" if torch.cuda.is_available() else "cpu")
    bench = summary["benchmark"]
    assert bench["fused"]["samples"] == 5
    fused = bench["fused"]
    assert 0 < fused["p10_us"] <= fused["p50_us"] <= fused["p90_us"]
    assert fused["spread"] >= 0
    # Five samples do not make a 99th percentile: left out, not guessed.
    assert fused["p99_us"] is None and bench["reference"]["p99_us"] is None
    assert bench["speedup"] > 0
    on_cpu = summary["device"] == "cpu"
    assert (bench["threads"] or 0) > 0 if on_cpu else bench["threads"] is None
    assert "[info]" in result.stderr  # logs go to stderr


def test_benchmark_reports_p99_from_enough_samples(tmp_path, problem):
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--json", "--warmup", 1, "--iters", 100, "--log-level", "off")
    assert result.returncode == OK, result.stderr
    fused = json.loads(result.stdout)["benchmark"]["fused"]
    assert fused["samples"] == 100
    assert fused["p99_us"] >= fused["p90_us"] > 0


def test_benchmark_text(tmp_path, problem):
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--warmup", 1, "--iters", 3, "--log-level", "off")
    assert result.returncode == OK, result.stderr
    for part in ("p10_us", "p50_us", "p90_us", "p99_us", "rows/s",
                 "speed-up", "p99 from 100 timed calls"):
        assert part in result.stdout
    assert result.stderr == ""


def test_warmup_needs_benchmark_mode(tmp_path, problem):
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--warmup", 3)
    assert result.returncode == USAGE
    assert "--warmup applies to benchmark mode" in result.stderr


def test_progress_on_a_terminal_only(tmp_path):
    batches = {f"b{i}": torch.randn(2, 3, 4) for i in range(6)}
    torch.save(batches, tmp_path / "x.pt")
    torch.save(linear_state_dict(2, 4, 5), tmp_path / "w.pt")
    args = [BINARY, "--input", str(tmp_path / "x.pt"), "--weights",
            str(tmp_path / "w.pt"), "--log-level", "off"]
    assert "\r" not in run(*args[1:]).stderr  # a pipe: no progress line
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=follower,
                              timeout=120)
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal has no writer left
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    assert proc.returncode == OK
    assert b"[1/6]" in drawn and b"[6/6] 100% b5" in drawn


def test_no_check(tmp_path, problem):
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--no-check", "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    assert "check skipped" in result.stdout
    assert (tmp_path / "y.pt").exists()


def test_failed_check_exits_nonzero_and_writes_nothing(tmp_path):
    # Zero tolerance on a long float16 reduction fails wherever the op's CPU
    # route is not the reference's own computation. Which problems those are
    # depends on the CPU (ops/cpu/cpu_route.cpp: on an AMD EPYC many rows take
    # the dot kernel or float32 slices, on an Intel Xeon with AVX-512 FP16
    # only a few rows the dot kernel), so the test takes the first row count
    # whose fused bits differ from cat + Linear's.
    state = linear_state_dict(16, 64, 128)
    w, b = state["weight"].half(), state["bias"].half()
    for rows in (128, 4, 2, 1, 8):
        x = torch.randn(16, rows, 64)
        xh = x.half()
        fused = torch.ops.fgl.gather_linear(xh, w, b)
        reference = torch.nn.functional.linear(torch.cat(list(xh), -1), w, b)
        if not torch.equal(fused, reference):
            break
    else:
        pytest.skip("every problem tried took the reference's own route here")
    torch.save(x, tmp_path / "x.pt")
    torch.save(state, tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--device", "cpu", "--dtype", "float16", "--atol", 0,
                 "--rtol", 0, "--output", tmp_path / "y.pt")
    assert result.returncode == CHECK_FAILED, result.stdout + result.stderr
    assert "check FAILED" in result.stdout
    assert "--no-check" in result.stderr and "differ by more" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.pt", "x.pt"]


def test_nan_in_the_input_fails_the_check_and_says_so(tmp_path):
    x = torch.randn(2, 3, 4)
    x[1, 2, 0] = float("nan")
    torch.save(x, tmp_path / "x.pt")
    torch.save(linear_state_dict(2, 4, 5), tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == CHECK_FAILED
    assert "5 NaN/inf in the result" in result.stdout
    assert "look for NaN/inf in the input" in result.stderr
    assert not (tmp_path / "y.pt").exists()


# ------------------------------------------------------------------ errors

def assert_error(result, code, *parts, tmp_path=None):
    assert result.returncode == code, result.stdout + result.stderr
    assert "fgl_infer: error:" in result.stderr
    assert "fgl_infer: hint:" in result.stderr  # says what to do next
    for part in parts:
        assert part in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "terminate" not in result.stderr
    if tmp_path is not None:  # no output, no temporary file
        assert not any(p.name.startswith(("y.pt", ".y.pt"))
                       for p in tmp_path.iterdir())


def test_missing_input(tmp_path, problem):
    result = run("--input", tmp_path / "nope.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, NOINPUT, "nope.pt does not exist", tmp_path=tmp_path)


def test_missing_weights(tmp_path, problem):
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "nope.pt", "--output", tmp_path / "y.pt")
    assert_error(result, NOINPUT, "weights", "does not exist",
                 tmp_path=tmp_path)


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_output_that_is_not_a_regular_file_is_kept(tmp_path, problem, kind):
    target = tmp_path / "y.pt"
    if kind == "symlink":
        (tmp_path / "elsewhere.pt").write_bytes(b"keep")
        target.symlink_to(tmp_path / "elsewhere.pt")
    else:
        os.mkfifo(target)
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", target)
    assert_error(result, CANTCREAT, "is not a regular file")
    assert target.is_symlink() if kind == "symlink" else target.is_fifo()
    assert not any(p.name.startswith(".y.pt") for p in tmp_path.iterdir())


@pytest.mark.parametrize("option", ["--input", "--weights"])
def test_output_that_is_an_input_is_refused(tmp_path, problem, option):
    name = "x.pt" if option == "--input" else "w.pt"
    before = (tmp_path / name).read_bytes()
    # The same file under another name: a hard link.
    os.link(tmp_path / name, tmp_path / "alias.pt")
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "alias.pt")
    assert_error(result, USAGE, "is the same file as " + option)
    assert (tmp_path / name).read_bytes() == before


def read_safetensors(path):
    """The format by hand: 8-byte little-endian header length, JSON header,
    data; returns (metadata, {name: tensor}) in file order."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    assert (8 + n) % 8 == 0  # the data starts 8-byte aligned
    dtypes = {"F32": torch.float32, "F16": torch.float16,
              "BF16": torch.bfloat16, "F64": torch.float64}
    tensors = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        data = bytearray(raw[8 + n + begin:8 + n + end])
        tensors[name] = torch.frombuffer(data, dtype=dtypes[e["dtype"]]
                                         ).reshape(e["shape"])
    return header.get("__metadata__"), tensors


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_output_named_safetensors_is_safetensors(tmp_path, problem, dtype):
    x, sd = problem
    torch.save({"first": x, "second": x[:, :5]}, tmp_path / "xs.pt")
    result = run("--input", tmp_path / "xs.pt", "--weights", tmp_path / "w.pt",
                 "--dtype", dtype, "--output", tmp_path / "y.safetensors")
    assert result.returncode == OK, result.stderr
    metadata, out = read_safetensors(tmp_path / "y.safetensors")
    assert metadata == {"format": "pt"}
    assert list(out) == ["first", "second"]
    torch_dtype = getattr(torch, dtype)
    for name, xi in (("first", x), ("second", x[:, :5])):
        assert out[name].dtype == torch_dtype
        assert_matches(out[name], reference(xi.to(torch_dtype),
                                            sd["weight"].to(torch_dtype),
                                            sd["bias"].to(torch_dtype)),
                       torch_dtype)


@pytest.mark.parametrize("option", ["--input", "--weights", "--output"])
def test_dash_is_not_a_pipe(tmp_path, problem, option):
    args = {"--input": tmp_path / "x.pt", "--weights": tmp_path / "w.pt",
            "--output": tmp_path / "y.pt", option: "-"}
    result = run(*[a for item in args.items() for a in item])
    assert_error(result, USAGE, option + " - (standard input or output) is "
                 "not supported")
    assert not (tmp_path / "-").exists()


def test_directory_instead_of_file(tmp_path, problem):
    (tmp_path / "dir.pt").mkdir()
    result = run("--input", tmp_path / "dir.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, NOINPUT, "is a directory", tmp_path=tmp_path)


def test_truncated_file(tmp_path, problem):
    data = (tmp_path / "x.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    result = run("--input", tmp_path / "cut.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "cannot read input", tmp_path=tmp_path)


@pytest.mark.parametrize("target", ["input", "weights"])
def test_damaged_files_never_crash(tmp_path, problem, target):
    """Random truncations and byte flips: a clean error or, where the damage
    hit only tensor data, a normal run (whose check may fail on NaN or huge
    values); never a signal or an internal error."""
    import random
    rng = random.Random(1234)
    base = (tmp_path / ("x.pt" if target == "input" else "w.pt")).read_bytes()
    for _ in range(12):
        data = bytearray(base)
        if rng.random() < 0.5:
            data = data[:rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        (tmp_path / "bad.pt").write_bytes(bytes(data))
        files = ([tmp_path / "bad.pt", tmp_path / "w.pt"] if target == "input"
                 else [tmp_path / "x.pt", tmp_path / "bad.pt"])
        result = subprocess.run(
            [BINARY, "--input", files[0], "--weights", files[1], "--json"],
            capture_output=True, timeout=120)
        assert result.returncode in (OK, CHECK_FAILED, DATAERR), result.stderr[
            -500:]
        json.loads(result.stdout)  # a summary even for damaged files


@pytest.mark.parametrize("content,message", [
    (b"", "is empty"),
    (b"this is not a tensor file", "not a PyTorch zip file"),
    (bytes(range(256)) * 8, "not a PyTorch zip file"),
])
def test_corrupted_file(tmp_path, problem, content, message):
    (tmp_path / "bad.pt").write_bytes(content)
    result = run("--input", tmp_path / "bad.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, message, tmp_path=tmp_path)


def test_corrupted_weights(tmp_path, problem):
    data = bytearray((tmp_path / "w.pt").read_bytes())
    (tmp_path / "w.pt").write_bytes(bytes(data[:100]))
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "cannot read weights", tmp_path=tmp_path)


@pytest.mark.parametrize("obj,message", [
    ({"epoch": 3, "name": "run"}, "not a tensor"),
    (42, "not a tensor or a list, tuple or dict of tensors"),
    ([], "holds no tensors"),
    # A whole module, not its state_dict: named, with what to do instead.
    (torch.nn.Linear(3, 2), "pickled torch.nn.modules.linear.Linear object"),
])
def test_pickle_without_tensors(tmp_path, problem, obj, message):
    torch.save(obj, tmp_path / "empty.pt")
    result = run("--input", tmp_path / "empty.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, message, tmp_path=tmp_path)


def test_weights_viewing_one_storage_in_a_bigger_checkpoint(tmp_path, problem):
    # Python's torch.save keeps views as views of one storage: the weight
    # and bias are slices of one buffer, beside entries fgl leaves unread.
    x, _ = problem
    buffer = torch.randn(57, 128)
    weight, bias = buffer[:56], buffer[56, :56]
    torch.save({"embed.weight": torch.randn(1000, 64), "proj.weight": weight,
                "proj.bias": bias, "step": 7}, tmp_path / "ckpt.pt")
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "ckpt.pt", "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    assert_matches(load(tmp_path / "y.pt"), reference(x, weight, bias))


def test_weights_as_a_whole_pickled_module(tmp_path, problem):
    torch.save(torch.nn.Linear(128, 56), tmp_path / "module.pt")
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "module.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "pickled torch.nn.modules.linear.Linear",
                 "state_dict()", tmp_path=tmp_path)


def test_weights_without_tensors(tmp_path, problem):
    torch.save({"epoch": 3}, tmp_path / "empty.pt")
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "empty.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "holds no tensors", tmp_path=tmp_path)


def test_wrong_rank_of_x(tmp_path, problem):
    torch.save(torch.randn(12, 128), tmp_path / "flat.pt")
    result = run("--input", tmp_path / "flat.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "must be 3-D (R, B, H)", "[12, 128]",
                 tmp_path=tmp_path)


def test_wrong_rank_of_weight(tmp_path, problem):
    torch.save({"weight": torch.randn(56, 128, 1)}, tmp_path / "w3.pt")
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "w3.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "weight must be 2-D", tmp_path=tmp_path)


def test_bias_of_the_wrong_length(tmp_path, problem):
    torch.save({"weight": torch.randn(56, 128), "bias": torch.randn(55)},
               tmp_path / "wb.pt")
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "wb.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "bias must be 1-D of length K = 56",
                 tmp_path=tmp_path)


def test_x_and_weights_disagree(tmp_path, problem):
    torch.save(linear_state_dict(4, 30, 56), tmp_path / "w120.pt")
    result = run("--input", tmp_path / "x.pt", "--weights",
                 tmp_path / "w120.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "R=4 and H=32 (R*H=128)", "R*H=120",
                 tmp_path=tmp_path)


def test_batches_that_disagree(tmp_path, problem):
    torch.save({"a": torch.randn(4, 2, 32), "b": torch.randn(2, 2, 64)},
               tmp_path / "mixed.pt")
    result = run("--input", tmp_path / "mixed.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "batch 'b'", "share R and H",
                 tmp_path=tmp_path)


def test_integer_input_needs_a_dtype(tmp_path, problem):
    torch.save(torch.randint(0, 5, (4, 3, 32)), tmp_path / "ints.pt")
    result = run("--input", tmp_path / "ints.pt", "--weights",
                 tmp_path / "w.pt", "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "not floating point", "--dtype float32",
                 tmp_path=tmp_path)
    result = run("--input", tmp_path / "ints.pt", "--weights",
                 tmp_path / "w.pt", "--dtype", "float32")
    assert result.returncode == OK, result.stderr


@pytest.mark.parametrize("args,message", [
    (("--dtype", "float8"), "unknown --dtype 'float8'"),
    (("--device", "tpu"), "unknown --device 'tpu'"),
    (("--device", "cuda:x"), "unknown --device"),
    (("--log-level", "loud"), "unknown --log-level"),
    (("--bogus",), "bogus"),
    (("--batch-size", "-2"), ">= 0"),
])
def test_usage_errors(tmp_path, problem, args, message):
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt", *args)
    assert_error(result, USAGE, message, tmp_path=tmp_path)


def test_input_without_weights_is_a_usage_error(tmp_path, problem):
    assert_error(run("--input", tmp_path / "x.pt"), USAGE,
                 "--input needs --weights")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a GPU-less host")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_requested_without_a_gpu(tmp_path, problem, device):
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--device", device, "--output", tmp_path / "y.pt")
    assert_error(result, UNAVAILABLE, "no usable CUDA GPU", "--device cpu",
                 tmp_path=tmp_path)


def test_cuda_index_past_the_gpus(tmp_path, problem):
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--device", "cuda:99", "--output", tmp_path / "y.pt")
    assert_error(result, UNAVAILABLE, "--device cuda:99", tmp_path=tmp_path)


def test_output_in_a_missing_directory(tmp_path, problem):
    out = tmp_path / "no" / "such" / "y.pt"
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", out)
    assert_error(result, CANTCREAT, "not an existing directory")
    assert not out.exists() and not (tmp_path / "no").exists()


def test_output_under_a_file(tmp_path, problem):
    out = tmp_path / "x.pt" / "y.pt"
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", out)
    assert_error(result, CANTCREAT, "cannot create output")


def test_output_that_is_a_directory(tmp_path, problem):
    (tmp_path / "y.pt").mkdir()
    result = run("--input", tmp_path / "x.pt", "--weights", tmp_path / "w.pt",
                 "--output", tmp_path / "y.pt")
    assert_error(result, CANTCREAT, "is a directory")
    assert not any((tmp_path / "y.pt").iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_output_in_a_read_only_directory(tmp_path, problem):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = run("--input", tmp_path / "x.pt", "--weights",
                     tmp_path / "w.pt", "--output", locked / "y.pt")
        assert_error(result, CANTCREAT, "not writable", tmp_path=locked)
    finally:
        locked.chmod(0o700)


def test_usage_errors_come_as_json_too():
    result = run("--json", "--dtype", "float8")
    assert result.returncode == USAGE
    summary = json.loads(result.stdout)
    assert summary["exit_code"] == USAGE
    assert "unknown --dtype 'float8'" in summary["error"] and summary["hint"]


def test_errors_come_as_json_too(tmp_path, problem):
    result = run("--input", tmp_path / "nope.pt", "--weights",
                 tmp_path / "w.pt", "--json")
    assert result.returncode == NOINPUT
    summary = json.loads(result.stdout)
    assert summary["exit_code"] == NOINPUT
    assert "does not exist" in summary["error"] and summary["hint"]
