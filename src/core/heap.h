// Process-wide heap settings for the simulators' allocation pattern.
//
// The planners build and free a task graph, cost tables and event queues per simulated plan. glibc's
// defaults hand freed memory back to the kernel (the heap top beyond 128 KiB is trimmed; blocks over the
// mmap threshold, 128 KiB rising to at most 32 MiB as they are freed, are mapped and unmapped each
// time), so the next plan starts with page faults. On this project's 2-core VM the 1,024-GPU planner
// spent 13% of its samples in the kernel's fault path and ran 1.3-1.4 times faster with the settings
// below (docs/benchmarks.md, "Heap settings").
#pragma once

namespace orrery {

// Keeps freed memory in the process: blocks up to 256 MiB come from the heap, the heap grows 64 MiB past
// each request and is trimmed only when 256 MiB lie free at its top. The resident set stays near the
// run's peak instead of shrinking between plans. A no-op outside glibc and under the sanitizers (whose
// allocators ignore mallopt). Call once, first thing in main; returns whether the settings took effect.
bool keep_freed_memory();

}  // namespace orrery
