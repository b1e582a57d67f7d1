// A pipeline order read from a file: torch.distributed.pipelining's schedule CSV, the format
// torchtitan's `pipeline_parallel_schedule_csv` loads (PipelineScheduleMulti._load_csv, "compute_only",
// and _PipelineScheduleRuntime's "compute_comms").
//
// Format: one row per pipeline rank (the k-th data row is rank k; blank lines and lines starting with
// '#' are skipped), one action per cell in the order the rank runs them, an empty cell an idle step.
// An action is <stage><type><micro-batch> (torch's _Action: `2F0`): stage the global virtual stage,
// type F (forward), B (whole backward), I (input gradient) or W (weight gradient), e.g. `0F3`, `5I1`.
// `(1F2;6B0)OVERLAP_F_B` is a forward and a whole backward run as an overlapped pair (DualPipeV's,
// PipelinePass::paired). Communication and FSDP actions (SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD,
// RESHARD, REDUCE_GRAD) are skipped: the simulator derives each transfer and collective from the plan.
//
// Checked as torch's _validate_schedule checks it, and more: each stage on one rank, placed as the
// interleaved schedule places chunks (stage c p + s on rank s) or as the V does (stage s and 2p - 1 - s
// on rank s); every (stage, micro-batch) forward once and either one B or one I and one W; the
// micro-batches numbered 0 .. m - 1; and the order runs to its end (a rank waits only on passes that
// can run: a forward on the previous stage's forward, a B or I on the next stage's, the last stage's
// on its own forward, a W on its I). Every violation is an InputError naming the file, the line (the
// rank's row) and the step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/schedule.h"

namespace orrery::train {

struct CustomSchedule {
  std::string file;
  int64_t ranks = 0;         // pp
  int64_t stages = 0;        // pp x vp
  int64_t microbatches = 0;  // m
  bool v = false;            // the V's placement (stage s and 2p - 1 - s on rank s)
  bool split = false;        // some backward runs as I and W
  std::vector<std::vector<PipelinePass>> order;  // per rank, in program order (chunk = the rank's local index)
};

// REQUIRES: nothing; throws InputError on any malformed or inconsistent file.
CustomSchedule read_schedule_csv(const std::string& path);

// The same from text already read (`file` names it in errors).
CustomSchedule parse_schedule_csv(const std::string& text, const std::string& file);

// Runs `plan` on `order`: schedule kCustom, vp = stages / ranks (placement and splitting come from it:
// Plan::v_shape, Plan::splits_backward).
void use_custom_schedule(Plan& plan, std::shared_ptr<const CustomSchedule> order);

// The plan's order in the same format (torch's _dump_csv, "compute_only" plus OVERLAP_F_B pairs), one
// row per pipeline rank: a split backward as I and W, a whole one as B, an overlapped pair as
// (<forward>;<backward>)OVERLAP_F_B. Reading it back gives the same order. REQUIRES: a valid plan.
std::string schedule_csv_text(const Plan& plan);

}  // namespace orrery::train
