// How results are shown: one stdout table row and one JSON record per case.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "runner.h"

namespace fgl::bench {

/// What every record of one run shares.
struct RunInfo {
  std::string device;       // "cpu", "cuda:0"
  std::string device_name;  // "NVIDIA H200", "cpu (2 threads)"
  std::string timing;       // "cuda_graph_replay" or "steady_clock"
  bool tf32 = false;        // at::globalContext().allowTF32CuBLAS()
  bool has_floor = false;   // the H200 floors apply (CUDA runs)
  int64_t memory_gbps = 0;  // the GPU's peak memory bandwidth (0: CPU)
};

void print_table_header(std::FILE* out);
void print_table_row(std::FILE* out, const CaseResult& r, const RunInfo& info);

/// Every table column (and the p10/p90 spread of each path) as one record.
nlohmann::json case_record(const CaseResult& r, const RunInfo& info);

}  // namespace fgl::bench
