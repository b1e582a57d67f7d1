// The MPI runtime of the decentralized algorithms: the same algorithm code as the in-process simulation,
// one block of nodes per MPI rank, with the same iterates bit for bit.
//
// Model card
//   What      `mpirun -np P orrery gossip run --runtime mpi ...` runs one process per rank; rank r owns the
//             nodes [floor(r n / P), floor((r + 1) n / P)) (one node per rank when P = n; P <= n required).
//             Every rank builds the same problem, graph and mixing schedule from the same command line, and
//             runs the algorithm on full-size n x d matrices of which only its own rows are kept exact
//             (decentral/algorithm.h, GossipExchange): the gradient oracle computes only its nodes'
//             minibatch gradients (each node's minibatch stream is its own, seeded per node), and each
//             gossip round y = M x receives exactly the rows x_j its rows read (M(i, j) != 0, j owned
//             elsewhere) and sends the rows its out-neighbours read.
//   Exchange  MPI-3 neighbourhood collectives: per distinct sparsity pattern of the period's mixing
//             matrices (a time-varying graph has one per round of its period; the pull A and push B of one
//             graph share theirs) one distributed-graph communicator is built once
//             (MPI_Dist_graph_create_adjacent, sources = ranks owning rows this rank reads, destinations =
//             ranks reading rows this rank owns, no reordering; a pattern covered by an earlier plan's
//             uses that plan), and each round is one
//             MPI_Neighbor_alltoallv of whole rows (d doubles each; the n-vector of PULL-DIAG-GT's Diag(A^k)
//             rows travels the same way). A rank then runs SparseMixing::apply, the very kernel of the
//             in-process run, on the matrix restricted to the rows it reads (built once: its own rows with
//             their entries in the same order, the received rows as identity rows), so each of its rows is
//             computed with the same operations in the same order: the same bits.
//   Metrics   At each evaluation point the ranks' rows are gathered to rank 0 in node order (MPI_Gatherv)
//             and rank 0 evaluates them with the in-process code: the metrics, bytes (counted by the
//             algorithms from the matrices, identically on every rank) and simulated time are
//             byte-identical to the in-process run's. Only rank 0 prints and writes files.
//   Federated Every rank keeps the server model and makes the server's value-independent draws; a sampled
//             client trains (and compresses, from its own stream) on its owner, and the round's uploads
//             reach every rank through share() (MPI_Allgatherv), summed in sampling order everywhere.
//   Churn     A matrix rebuilt at a known address (SparseMixing::id changed; churn does so every step) or
//             never seen is restricted anew, over the first plan whose pattern covers its pattern (a plan
//             is created, collectively, only when none does): the choice depends on the matrix and the
//             plan list alone, identical on every rank.
//   Limits    Asynchronous gossip time is refused (InputError: one event queue over all nodes). Each rank
//             holds the whole problem and full-size n x d matrices
//             (memory P times the in-process run's) and runs the algorithms' element-wise updates on every
//             row (O(n d) per step, cheap next to gradients); gradients and gossip arithmetic are its own
//             rows' only.
//   Build     With an MPI implementation found by CMake (Debian: libopenmpi-dev, openmpi-bin) this is
//             compiled in (ORRERY_WITH_MPI); without, MpiRuntime::start throws an InputError saying so.
//             MPI_Init is called only by start(): the orrery binary works without mpirun.
#pragma once

#include <memory>

#include "core/error.h"
#include "decentral/algorithm.h"

namespace orrery::decentral {

// Whether this build has the MPI runtime.
bool mpi_available();

// First node of rank r's block: floor(r n / size).
constexpr NodeIndex block_begin(NodeIndex n, int rank, int size) {
  return static_cast<NodeIndex>(static_cast<int64_t>(n) * rank / size);
}

class MpiRuntime final : public GossipExchange {
 public:
  // Initializes MPI unless it already is (then leaves finalizing to whoever initialized it). Throws
  // InputError at `where` when this build has no MPI, std::runtime_error when MPI was already finalized.
  static std::unique_ptr<MpiRuntime> start(const Where& where);
  ~MpiRuntime() override;  // frees the communicators; MPI_Finalize when start() initialized MPI
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const;
  int size() const;
  // Bytes this rank has sent through neighbourhood exchanges and shares (payload only, a share's counted once
  // per other rank; a measurement, not the model's bytes, which the algorithms count).
  int64_t bytes_sent() const;
  // Blocks until every rank arrives (for timings).
  void barrier() const;

  // GossipExchange. setup throws InputError when there are fewer nodes than ranks or when the ranks'
  // node counts or schedules differ.
  void setup(NodeIndex n, const MixingSchedule& mix, const Where& where) override;
  NodeIndex row_begin() const override;
  NodeIndex row_end() const override;
  bool is_root() const override { return rank() == 0; }
  void mix(const SparseMixing& m, const NodeMatrix& in, NodeMatrix& out) override;
  void gather(const NodeMatrix& x, NodeMatrix& full) override;
  void share(const std::vector<NodeIndex>& nodes, NodeMatrix& rows) override;

  struct Impl;

 private:
  explicit MpiRuntime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery::decentral
