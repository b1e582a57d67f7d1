// The MPI runtime in a build without MPI (CMake found no MPI implementation, or ORRERY_WITH_MPI=OFF):
// start() reports it unavailable; see mpi_runtime.h.
#include "decentral/mpi_runtime.h"

#include "core/assert.h"

namespace orrery::decentral {

struct MpiRuntime::Impl {};

bool mpi_available() { return false; }

MpiRuntime::MpiRuntime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MpiRuntime::~MpiRuntime() = default;

std::unique_ptr<MpiRuntime> MpiRuntime::start(const Where& where) {
  throw InputError(where, "this orrery was built without MPI, so the MPI runtime is unavailable",
                   "install libopenmpi-dev and openmpi-bin (scripts/setup.sh), reconfigure with -DORRERY_WITH_MPI=ON "
                   "and rebuild, or run in-process");
}

// Unreachable: no MpiRuntime exists without MPI.
int MpiRuntime::rank() const { return 0; }
int MpiRuntime::size() const { return 1; }
int64_t MpiRuntime::bytes_sent() const { return 0; }
void MpiRuntime::barrier() const {}
void MpiRuntime::setup(NodeIndex, const MixingSchedule&, const Where&) { ORRERY_CHECK(false); }
NodeIndex MpiRuntime::row_begin() const { return 0; }
NodeIndex MpiRuntime::row_end() const { return 0; }
void MpiRuntime::mix(const SparseMixing&, const NodeMatrix&, NodeMatrix&) { ORRERY_CHECK(false); }
void MpiRuntime::gather(const NodeMatrix&, NodeMatrix&) { ORRERY_CHECK(false); }
void MpiRuntime::share(const std::vector<NodeIndex>&, NodeMatrix&) { ORRERY_CHECK(false); }

}  // namespace orrery::decentral
