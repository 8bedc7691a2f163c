# Locates CUTLASS's C++ headers (CuTe, the sm90 pipelines) in the PyPI package
# nvidia-cutlass of FGL_PYTHON, unless FGL_CUTLASS_INCLUDE_DIR is given.
# Leaves FGL_CUTLASS_INCLUDE_DIR empty where there are none: the Hopper
# tensor-core kernel is then not built and cuBLAS keeps its problems.
set(FGL_CUTLASS_INCLUDE_DIR "" CACHE PATH
    "CUTLASS include directory (default: nvidia-cutlass in FGL_PYTHON)")
if(NOT FGL_CUTLASS_INCLUDE_DIR)
  # find_spec locates the package without importing it (its Python side
  # needs modules the build does not).
  execute_process(
    COMMAND "${FGL_PYTHON}" -c
            "import importlib.util, pathlib; s = importlib.util.find_spec('cutlass_library'); print(pathlib.Path(s.origin).parent / 'source' / 'include' if s else '')"
    OUTPUT_VARIABLE _fgl_cutlass_include
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET)
  if(_fgl_cutlass_include AND EXISTS "${_fgl_cutlass_include}/cute/tensor.hpp")
    set(FGL_CUTLASS_INCLUDE_DIR "${_fgl_cutlass_include}" CACHE PATH
        "CUTLASS include directory (default: nvidia-cutlass in FGL_PYTHON)"
        FORCE)
  endif()
endif()
