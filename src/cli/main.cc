#include <iostream>

#include "cli/app.h"
#include "core/heap.h"

int main(int argc, char** argv) {
  orrery::keep_freed_memory();  // core/heap.h: freed blocks stay in the process between simulated plans
  return orrery::cli::run_app(argc, argv, std::cout, std::cerr);
}
