#!/usr/bin/env python3
"""Makes the model files fgl_infer loads: a TorchScript file (--torchscript)
and/or an AOTInductor package (--aoti) of GatherLinear, whose forward calls
torch.ops.fgl.gather_linear, plus optionally one input with its eager output
(--example).

    examples/export_model.py --torchscript model.pt --aoti model.pt2 \\
        --example example.pt [--device cuda] [--R 4 --H 32 --K 56 --batch 12]

The op library is found by fgl.load_library(): --library, else
$FGL_OPS_LIBRARY, else build/ops/libfgl_ops.so of this repository."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import fgl  # noqa: E402
from fgl import export  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchscript", metavar="PATH",
                        help="write the TorchScript model here (.pt)")
    parser.add_argument("--aoti", metavar="PATH",
                        help="write the AOTInductor package here (.pt2)")
    parser.add_argument("--example", metavar="PATH",
                        help="write {x, out} (torch.save, CPU tensors) here")
    parser.add_argument("--device", default="cpu",
                        help="device the AOTI package is compiled for")
    parser.add_argument("--R", type=int, default=4, help="gathered slices")
    parser.add_argument("--H", type=int, default=32, help="slice width")
    parser.add_argument("--K", type=int, default=56, help="output features")
    parser.add_argument("--batch", type=int, default=12,
                        help="B of the example input (the batch is dynamic)")
    parser.add_argument("--no-bias", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--library", help="path of libfgl_ops.so")
    args = parser.parse_args(argv)
    if not (args.torchscript or args.aoti or args.example):
        parser.error("give at least one of --torchscript, --aoti, --example")

    print(f"fgl: op library {fgl.load_library(args.library)}")
    model = export.make_model(args.R, args.H, args.K, bias=not args.no_bias,
                              device=args.device, seed=args.seed)
    example = export.example_input(model, args.batch, args.device)
    if args.torchscript:
        export.save_torchscript(model, args.torchscript)
        print(f"fgl: TorchScript model -> {args.torchscript}")
    if args.aoti:
        export.save_aoti_package(model, example, args.aoti)
        print(f"fgl: AOTInductor package ({args.device}) -> {args.aoti}")
    if args.example:
        export.save_example(model, example, args.example)
        print(f"fgl: example input and output -> {args.example}")


if __name__ == "__main__":
    main()
