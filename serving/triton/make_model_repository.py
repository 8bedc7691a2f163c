#!/usr/bin/env python3
"""Writes a Triton model repository for fgl: a copy of model_repository/
(config.pbtxt) with the TorchScript model in fgl_gather_linear/1/model.pt,
shaped as config.pbtxt says (R, H, K read from its dims).

    serving/triton/make_model_repository.py OUT_DIR [--library PATH]

Serve it with the op library preloaded:
    LD_PRELOAD=/opt/fgl/lib/libfgl_ops.so tritonserver --model-repository=OUT_DIR
"""
import argparse
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))
import fgl  # noqa: E402
from fgl import export  # noqa: E402

MODEL = "fgl_gather_linear"


def shapes_from_config(config_text):
    """(R, H, K) from the input dims [R, -1, H] and output dims [-1, K]."""
    dims = re.findall(r"dims:\s*\[([^\]]*)\]", config_text)
    if len(dims) != 2:
        raise ValueError(f"expected one input and one output, got dims {dims}")
    x_dims = [int(d) for d in dims[0].split(",")]
    out_dims = [int(d) for d in dims[1].split(",")]
    if len(x_dims) != 3 or x_dims[1] != -1 or len(out_dims) != 2:
        raise ValueError(f"expected x [R, -1, H] and out [-1, K], got "
                         f"{x_dims} and {out_dims}")
    return x_dims[0], x_dims[2], out_dims[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--library", help="path of libfgl_ops.so")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    fgl.load_library(args.library)
    shutil.copytree(HERE / "model_repository", args.out_dir, dirs_exist_ok=True)
    config = (args.out_dir / MODEL / "config.pbtxt").read_text()
    R, H, K = shapes_from_config(config)
    model = export.make_model(R, H, K, seed=args.seed)
    version_dir = args.out_dir / MODEL / "1"
    version_dir.mkdir(parents=True, exist_ok=True)
    export.save_torchscript(model, version_dir / "model.pt")
    print(f"fgl: Triton model repository -> {args.out_dir} (R={R} H={H} K={K})")


if __name__ == "__main__":
    main()
