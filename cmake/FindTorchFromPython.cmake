# Locates libtorch inside the PyTorch wheel of a Python interpreter, unless the
# user already pointed CMake at a libtorch (Torch_DIR or CMAKE_PREFIX_PATH).
#   FGL_PYTHON: the interpreter to ask (set in the top-level CMakeLists).
find_package(Torch CONFIG QUIET)
if(Torch_FOUND)
  return()
endif()

execute_process(
  COMMAND "${FGL_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE _fgl_torch_prefix
  OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _fgl_torch_result
  ERROR_QUIET)
if(NOT _fgl_torch_result EQUAL 0 OR NOT _fgl_torch_prefix)
  message(FATAL_ERROR
    "fgl: no libtorch found. Run scripts/setup.sh (it installs the pinned "
    "torch wheel), pass -DFGL_PYTHON=<python with torch>, or point "
    "CMAKE_PREFIX_PATH at an unpacked libtorch.")
endif()
list(APPEND CMAKE_PREFIX_PATH "${_fgl_torch_prefix}")
