// The questions of `orrery demo` that run the three pillars (training, serving, decentralized
// optimization) on built-in defaults. Each returns its table, its JSON and a note; the demo prints and
// writes them (src/cli/demo_cmd.cc). Everything is computed before anything is written, and every
// figure depends only on the inputs and the seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/output.h"
#include "io/catalog_loader.h"
#include "io/json_util.h"

namespace orrery::cli {

struct DemoSection {
  Table table;
  io::Json json;
  std::string note;
};

// Q4. Will `model` train on `gpus` GPUs with TP x PP (DP the rest), no sharding and no recompute, and
// which plans does the planner find instead? (train/train.h, train/planner.h)
struct DemoTraining {
  std::string model = "llama3-70b";
  std::string gpu = "h100-sxm";
  int64_t gpus = 64;
  int64_t tp = 8;
  int64_t pp = 2;
  int64_t seq = 8192;
  int64_t gbs = 256;
  int64_t top = 3;
};
DemoSection demo_training(const io::Catalog& catalog, const DemoTraining& cfg);
// Its inputs alone (cheap): throws the InputError demo_training would, before any work.
void check_demo_training(const io::Catalog& catalog, const DemoTraining& cfg);

// Q5. What each scheduler gives on the Azure-conversation-fitted workload at `rate`, and the largest
// rate at which it stays stable (serve/capacity.h).
struct DemoServing {
  std::string model = "llama3.1-8b";
  std::string gpu = "h100-sxm";
  double rate = 8.0;
  int64_t requests = 2000;
  std::vector<std::string> schedulers = {"vllm", "sarathi", "wait", "orca"};
};
DemoSection demo_serving(const io::Catalog& catalog, const DemoServing& cfg, uint64_t seed);
void check_demo_serving(const io::Catalog& catalog, const DemoServing& cfg);

// Q6. Decentralized training on nodes of unequal speed: what synchronous and asynchronous gossip reach
// in the same simulated time (decentral/runner.h).
struct DemoGossip {
  std::string topology = "exponential:16";
  int64_t iters = 1000;
  std::string heterogeneity = "compute=lognormal:20us:1,latency=50us,bandwidth=1Gb/s";
  double horizon_s = 1.0;  // "in the same simulated time"
};
DemoSection demo_gossip(const DemoGossip& cfg, uint64_t seed);
void check_demo_gossip(const DemoGossip& cfg);

}  // namespace orrery::cli
