# fgl in containers. Build (no GPU needed at build time):
#   docker build -t fgl .
# Run the demo, then your own data (mounted at /data):
#   docker run --rm --gpus all fgl
#   docker run --rm --gpus all -v "$PWD/data:/data" fgl \
#     --input /data/x.pt --weights /data/w.pt --output /data/y.pt

# ---- build stage: CUDA 13.0 toolkit, libtorch from the pinned torch wheel ----
FROM nvidia/cuda:13.0.0-devel-ubuntu24.04 AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates cmake g++ ninja-build python3 python3-venv \
      libgtest-dev libspdlog-dev libcxxopts-dev nlohmann-json3-dev shellcheck \
 && rm -rf /var/lib/apt/lists/*
# The Python environment (pinned torch: libtorch and its CMake config) lives
# outside the source tree, as scripts/setup.sh keeps it. The CUDA
# architectures are CMakeLists.txt's default (no GPU is needed to build).
ENV FGL_VENV=/opt/venv
WORKDIR /src
COPY scripts/ scripts/
RUN scripts/setup.sh
COPY . .
# The CPU test suite runs here; the CUDA tests skip without a GPU.
RUN scripts/build.sh -DCMAKE_INSTALL_PREFIX=/opt/fgl \
 && ctest --test-dir build --output-on-failure --parallel "$(nproc)" \
 && cmake --install build \
 && site="$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && mkdir -p /opt/libtorch \
 && cp -a "$site/torch/lib" /opt/libtorch/torch-lib \
 && cp -a "$site/nvidia" /opt/libtorch/nvidia

# ---- runtime stage: only what fgl_infer needs ----
FROM nvidia/cuda:13.0.0-runtime-ubuntu24.04
# libtorch's CUDA libraries find the NVIDIA wheels' libraries through
# $ORIGIN/../../nvidia, so torch/lib and nvidia/ keep their relative places.
COPY --from=build /opt/libtorch/torch-lib /opt/libtorch/torch/lib
COPY --from=build /opt/libtorch/nvidia /opt/libtorch/nvidia
COPY --from=build /opt/fgl /opt/fgl
ENV PATH=/opt/fgl/bin:$PATH \
    LD_LIBRARY_PATH=/opt/libtorch/torch/lib
RUN groupadd --gid 10001 fgl \
 && useradd --create-home --uid 10001 --gid 10001 fgl
USER 10001:10001
WORKDIR /data
ENTRYPOINT ["fgl_infer"]
CMD []
