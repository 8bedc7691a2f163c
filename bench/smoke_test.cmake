# ctest smoke test of fgl_bench on the CPU: it exits 0 and its --json output
# is an array of records with the expected keys; with --fgl-only the other
# computations' columns are empty; --no-bias runs without one; with --route
# the record names the route that ran; --random draws the same shapes for the
# same seed.
# Usage: cmake -DFGL_BENCH=<fgl_bench> -DJSON=<out.json> -P smoke_test.cmake

# Runs fgl_bench on the CPU with ARGN and --json, failing unless it exits 0;
# leaves what it printed in `out` and the JSON it wrote in `json`.
function(run_bench)
  execute_process(
    COMMAND "${FGL_BENCH}" --device cpu --quick ${ARGN} --json "${JSON}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fgl_bench ${ARGN} exited with ${rc}")
  endif()
  file(READ "${JSON}" json)
  set(out "${out}" PARENT_SCOPE)
  set(json "${json}" PARENT_SCOPE)
endfunction()

run_bench(--shapes 2,3,8,5 --dtypes float32,bfloat16)
if(NOT out MATCHES "shape \\(R,B,H,K\\)")
  message(FATAL_ERROR "fgl_bench printed no table header")
endif()
string(JSON type ERROR_VARIABLE parse_error TYPE "${json}")
if(parse_error OR NOT type STREQUAL "ARRAY")
  message(FATAL_ERROR "${JSON} is not a JSON array: ${parse_error}")
endif()
string(JSON n LENGTH "${json}")
if(NOT n EQUAL 2)
  message(FATAL_ERROR "expected 2 records (float32, bfloat16), got ${n}")
endif()
set(keys device device_name timing tf32 memory_gbps R B H K shape dtype bias route
    bytes flops
    bytes_floor_us flops_floor_us floor_us
    fgl_us fgl_p10_us fgl_p90_us fgl_rel_err
    cat_linear_us cat_linear_p10_us cat_linear_p90_us cat_linear_rel_err
    permute_linear_us permute_linear_p10_us permute_linear_p90_us
    permute_linear_rel_err samples speedup speedup_paired fgl_tbps fgl_tflops
    copies
    calls_per_graph)
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  foreach(key IN LISTS keys)
    string(JSON value ERROR_VARIABLE missing GET "${json}" ${i} ${key})
    if(missing)
      message(FATAL_ERROR "record ${i} lacks \"${key}\": ${missing}")
    endif()
  endforeach()
  string(JSON device GET "${json}" ${i} device)
  string(JSON err GET "${json}" ${i} fgl_rel_err)
  string(JSON us GET "${json}" ${i} fgl_us)
  string(JSON paired GET "${json}" ${i} speedup_paired)
  if(NOT device STREQUAL "cpu" OR NOT us GREATER 0 OR NOT paired GREATER 0)
    message(FATAL_ERROR
            "record ${i}: device ${device}, fgl_us ${us}, paired ${paired}")
  endif()
  # Accuracy is a number well below 1 (bfloat16 is about 1e-3).
  if(NOT err LESS 0.05)
    message(FATAL_ERROR "record ${i}: fgl_rel_err ${err} is too large")
  endif()
endforeach()
message(STATUS "fgl_bench smoke test: ${n} records with every key")

# --fgl-only: the fused op alone, still checked against float64; the other
# computations' times, errors and the speed-up are null, not zero.
run_bench(--shapes 3,5,7,9 --fgl-only)
if(NOT out MATCHES "computations: fgl alone")
  message(FATAL_ERROR "fgl_bench --fgl-only did not say so in its preamble")
endif()
string(JSON us GET "${json}" 0 fgl_us)
string(JSON err GET "${json}" 0 fgl_rel_err)
if(NOT us GREATER 0 OR NOT err LESS 1e-5)
  message(FATAL_ERROR "--fgl-only: fgl_us ${us}, fgl_rel_err ${err}")
endif()
foreach(key cat_linear_us cat_linear_rel_err permute_linear_us
            permute_linear_p90_us speedup speedup_paired)
  string(JSON type TYPE "${json}" 0 ${key})
  if(NOT type STREQUAL "NULL")
    message(FATAL_ERROR "--fgl-only: ${key} is ${type}, expected null")
  endif()
endforeach()
message(STATUS "fgl_bench smoke test: --fgl-only leaves the others out")

# --no-bias: every computation runs without one (the bytes count none), the
# fused op still checked against float64; the records above had one.
string(JSON with_bias GET "${json}" 0 bias)
run_bench(--shapes 3,5,7,9 --no-bias)
string(JSON bias GET "${json}" 0 bias)
string(JSON bytes GET "${json}" 0 bytes)
string(JSON err GET "${json}" 0 fgl_rel_err)
string(JSON cat_err GET "${json}" 0 cat_linear_rel_err)
# float32: 4 * (x 3*5*7 + weight 9*21 + out 5*9) bytes.
if(NOT out MATCHES "bias: none" OR NOT with_bias OR bias OR NOT bytes EQUAL 1356
   OR NOT err LESS 1e-5 OR NOT cat_err LESS 1e-5)
  message(FATAL_ERROR "--no-bias: bias ${bias} (before: ${with_bias}), "
                      "bytes ${bytes}, errors ${err} / ${cat_err}")
endif()
message(STATUS "fgl_bench smoke test: --no-bias runs without one")

# --route: the forced route ran, and the table and the record say so.
run_bench(--shapes 2,3,8,5 --route gemm-slices)
if(NOT out MATCHES "routing: gemm-slices forced")
  message(FATAL_ERROR "fgl_bench --route did not say so in its preamble")
endif()
string(JSON route GET "${json}" 0 route)
if(NOT route STREQUAL "gemm-slices" OR NOT out MATCHES " gemm-slices +[0-9-]")
  message(FATAL_ERROR "--route gemm-slices: the record names \"${route}\"")
endif()
message(STATUS "fgl_bench smoke test: --route names the route that ran")

# --random: the same seed draws the same shapes on every run, inside the
# decode sweep's ranges, and another seed others; --list prints the cases
# without running them.
function(list_cases out_var)
  execute_process(
    COMMAND "${FGL_BENCH}" --device cpu ${ARGN} --list
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fgl_bench ${ARGN} --list exited with ${rc}: ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
list_cases(first --random 40 --seed 7 --dtypes float32,bfloat16)
list_cases(again --random 40 --seed 7 --dtypes float32,bfloat16)
list_cases(other --random 40 --seed 8 --dtypes float32,bfloat16)
list_cases(default_seed --random 40 --dtypes float32,bfloat16)
if(NOT first STREQUAL again)
  message(FATAL_ERROR "--random 40 --seed 7 drew other shapes the second time")
endif()
if(first STREQUAL other OR first STREQUAL default_seed)
  message(FATAL_ERROR "--seed 7, 8 and the default drew the same shapes")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${first}")
list(LENGTH lines n)
if(NOT n EQUAL 80)
  message(FATAL_ERROR "--random 40 over two dtypes listed ${n} cases, not 80")
endif()
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^([0-9]+),([0-9]+),([0-9]+),([0-9]+) (float32|bfloat16)$")
    message(FATAL_ERROR "--list printed \"${line}\", not \"R,B,H,K dtype\"")
  endif()
  math(EXPR contraction "${CMAKE_MATCH_1} * ${CMAKE_MATCH_3}")
  if(contraction LESS 32 OR contraction GREATER 16384 OR
     CMAKE_MATCH_2 LESS 1 OR CMAKE_MATCH_2 GREATER 256 OR
     CMAKE_MATCH_4 LESS 8 OR CMAKE_MATCH_4 GREATER 32768)
    message(FATAL_ERROR "--random drew ${line}, outside its ranges")
  endif()
endforeach()
# Both lists of cases, or a seed without --random: a usage error.
foreach(args "--random;2;--shapes;1,1,8,8" "--seed;3")
  execute_process(
    COMMAND "${FGL_BENCH}" --device cpu ${args} --list
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "--random")
    message(FATAL_ERROR "fgl_bench ${args}: exit ${rc}, \"${err}\"")
  endif()
endforeach()
message(STATUS "fgl_bench smoke test: --random draws by its seed")
