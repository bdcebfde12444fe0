// A CUTLASS gemm or bmm module's schedule, named by its -D flag (oasr/jit/gemm_config.py passes
// -DOASR_GEMM_SCHEDULE=PingPong for "pingpong": a name this file lacks fails to compile), and its kernel.
#pragma once

#include "gemm_sm90.h"

#ifndef OASR_GEMM_SCHEDULE
#error "a CUTLASS gemm/bmm module is built for one schedule: oasr/jit/gemm_config.py passes -DOASR_GEMM_SCHEDULE"
#endif

namespace oasr::gemm::config {

using Schedule = oasr::gemm::OASR_GEMM_SCHEDULE;  // Cooperative, PingPong or NonPersistent (sm90_gemm.cuh)

template <class Epilogue>
using Gemm = Sm90Gemm<Element, LayoutB, Tile, Cluster, Schedule, OASR_GEMM_STAGES, Epilogue>;

}  // namespace oasr::gemm::config
