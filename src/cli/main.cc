#include <iostream>

#include "cli/app.h"

int main(int argc, char** argv) { return orrery::cli::run_app(argc, argv, std::cout, std::cerr); }
