// Compute calibration files: the constants of a GPU's compute model (compute/compute_model.h) measured
// on the user's own hardware, read from YAML and laid over the built-in calibration for that GPU.
//
// Format (docs/compute.md, "Calibration files"; every key but gpu optional, unknown keys are errors):
//   gpu: h100-sxm                      # the catalog GPU the constants were measured on (must be the run's)
//   source: "our cluster, 2026-11-26"  # free text, recorded in the results
//   gemm_efficiency: 0.67              # fractions of the datasheet peak / bandwidth, each in (0, 1]
//   gemm_memory_efficiency: 0.78
//   memory_efficiency: 0.90
//   launch_overhead: 3 us              # per kernel, >= 0
//   attention:                         # the fused-attention rates, per pass (both optional)
//     forward:  {efficiency: 0.62, half_length: 1024, ctas_per_sm_half: 0.5}
//     backward: {efficiency: 0.54, half_length: 1024, ctas_per_sm_half: 1.0}
// Errors name the file, line and key (InputError). A calibration from a file takes precedence over
// --attention-kernel for the attention rates it sets.
#pragma once

#include <string>
#include <string_view>

#include "compute/compute_model.h"
#include "hw/hw_catalog.h"

namespace orrery::io {

// `base` with every constant the file sets replaced; its name becomes "file" and its source the
// file's path and `source` text. Throws InputError for a missing or unreadable file, malformed YAML,
// an unknown key (with the nearest known one), a value out of range, or a gpu other than `gpu`.
compute::Calibration read_calibration_file(const std::string& path, const hw::GpuSpec& gpu, compute::Calibration base);

// The same from text already in memory; `file` names it in errors.
compute::Calibration parse_calibration(std::string_view text, const std::string& file, const hw::GpuSpec& gpu,
                                       compute::Calibration base);

}  // namespace orrery::io
