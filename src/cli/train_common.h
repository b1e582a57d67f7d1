// Pieces shared by `orrery train` and `orrery plan train`.
#pragma once

#include <string>

#include "hw/hw_catalog.h"

namespace orrery::cli {

// The node a training run or search is placed on: --node (which must hold `gpu`; InputError naming
// the flag otherwise) or the first catalog node with that GPU; nullptr when none has it.
const hw::NodeSpec* training_node(const hw::HwCatalog& hw, const hw::GpuSpec& gpu, const std::string& node_name);

}  // namespace orrery::cli
