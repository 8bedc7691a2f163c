#!/usr/bin/env python3
"""Makes the model files fgl_infer loads: a TorchScript file (--torchscript)
and/or an AOTInductor package (--aoti) of GatherLinear, whose forward calls
torch.ops.fgl.gather_linear, plus optionally one input (--example, a file
fgl_infer --input reads) and its eager output (--example-output).

    examples/export_model.py --torchscript model.pt --aoti model.pt2 \\
        --example x.pt [--device cuda] [--dtype bfloat16] \\
        [--R 4 --H 32 --K 56 | --weights W.pt [--weights-prefix P] --R 32]

The weights are drawn at random (--seed), or taken from a state_dict file
(torch.save or .safetensors) holding <prefix>weight (K, R*H) and, if the
layer has one, <prefix>bias; give --R or --H with them (the other follows).
The op library is found by fgl.load_library(): --library, else
$FGL_OPS_LIBRARY, else build/ops/libfgl_ops.so of this repository."""
import argparse
import pickle
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import fgl  # noqa: E402
from fgl import export  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "float64": torch.float64}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchscript", metavar="PATH",
                        help="write the TorchScript model here (.pt)")
    parser.add_argument("--aoti", metavar="PATH",
                        help="write the AOTInductor package here (.pt2)")
    parser.add_argument("--example", metavar="PATH",
                        help="write one input {x} here (torch.save, CPU), "
                             "for fgl_infer --input")
    parser.add_argument("--example-output", metavar="PATH",
                        help="write the eager result {x: out} for --example "
                             "here, as fgl_infer --output would")
    parser.add_argument("--device", default="cpu",
                        help="device the AOTI package is compiled for")
    parser.add_argument("--dtype", default="float32", choices=DTYPES,
                        help="dtype of the model, its input and the package")
    parser.add_argument("--weights", metavar="PATH",
                        help="state_dict file with the layer's weight "
                             "(default: random weights)")
    parser.add_argument("--weights-prefix", default="", metavar="P",
                        help="names of the layer's tensors in --weights, "
                             "e.g. 'layers.0.attn.out_proj.'")
    parser.add_argument("--R", type=int, help="gathered slices (default 4)")
    parser.add_argument("--H", type=int, help="slice width (default 32)")
    parser.add_argument("--K", type=int,
                        help="output features (default 56; from --weights)")
    parser.add_argument("--batch", type=int, default=12,
                        help="B of the example input (the batch is dynamic)")
    parser.add_argument("--max-batch", type=int,
                        help="the largest B the package accepts "
                             "(default: unbounded)")
    parser.add_argument("--no-bias", action="store_true",
                        help="a layer without bias (random weights)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--library", help="path of libfgl_ops.so")
    args = parser.parse_args(argv)
    if not (args.torchscript or args.aoti or args.example):
        parser.error("give at least one of --torchscript, --aoti, --example")
    if args.example_output and not args.example:
        parser.error("--example-output needs --example")
    if args.weights:
        if args.K is not None or args.no_bias:
            parser.error("--K and --no-bias come from --weights")
        if (args.R is None) == (args.H is None):
            parser.error("with --weights give one of --R and --H")
    elif args.weights_prefix:
        parser.error("--weights-prefix needs --weights")
    for name in ("R", "H", "K", "batch", "max_batch"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    print(f"fgl: op library {fgl.load_library(args.library)}")
    dtype = DTYPES[args.dtype]
    if args.weights:
        try:
            state = export.read_state_dict(args.weights)
            model = export.model_from_weights(
                state, args.weights_prefix, R=args.R, H=args.H,
                device=args.device, dtype=dtype)
        except (OSError, ValueError, RuntimeError,
                pickle.UnpicklingError) as err:  # weights_only refusals
            sys.exit(f"export_model.py: {args.weights}: {err}")
    else:
        model = export.make_model(args.R or 4, args.H or 32, args.K or 56,
                                  bias=not args.no_bias, device=args.device,
                                  seed=args.seed, dtype=dtype)
    print(f"fgl: GatherLinear R={model.R} H={model.H} K={model.K} "
          f"bias={model.proj.bias is not None} {args.dtype} on {args.device}")
    example = export.example_input(model, args.batch, args.device)
    if args.torchscript:
        export.save_torchscript(model, args.torchscript)
        print(f"fgl: TorchScript model -> {args.torchscript}")
    if args.aoti:
        print(f"fgl: compiling the AOTInductor package for {args.device} "
              "(a C++ compile: a minute or more)...", flush=True)
        start = time.monotonic()
        export.save_aoti_package(model, example, args.aoti,
                                 max_batch=args.max_batch)
        print(f"fgl: AOTInductor package ({args.device}, {args.dtype}) -> "
              f"{args.aoti} in {time.monotonic() - start:.0f} s")
    if args.example:
        export.save_example(model, example, args.example, args.example_output)
        print(f"fgl: example input -> {args.example}" +
              (f", eager output -> {args.example_output}"
               if args.example_output else ""))


if __name__ == "__main__":
    main()
