#include "train/replay.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/error.h"

namespace orrery::train {
namespace {

const char* kHeader =
    "id,source,arch,params_b,layers,hidden,heads,kv_heads,ffn,vocab,seq,gpu,gpus,tp,pp,dp,cp,ep,vp,mbs,gbs,sp,"
    "recompute,precision,dp_sharding,metric,value,notes\n";

// A Megatron-Core-like GPT row (E1's shape) and a torchtitan-like Llama row (G1's), in training.csv's columns.
const char* kGptRow =
    "X1,megatron-core-r0.8,gpt,1.7,24,2048,16,16,8192,131072,4096,h100-sxm,48,1,1,48,1,1,,,192,,,bf16,distopt,"
    "tflops_per_gpu,408.8,MFU 41%\n";
const char* kLlamaRow =
    "X2,torchtitan-2412,llama,8.03,32,4096,32,8,14336,128256,8192,h100-sxm-96g-500w,8,1,1,8,1,1,1,2,16,no,selective,"
    "bf16,fsdp,tokens_per_s_per_gpu,5762,eager\n";

// A scratch table named after the running test (ctest runs the tests of this file as parallel
// processes, so a shared name would race).
std::string write(const std::string& name, const std::string& text) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::filesystem::path p = std::filesystem::temp_directory_path() / ("orrery_replay_test_" + test + "_" + name + ".csv");
  std::ofstream(p) << text;
  return p.string();
}

// The error a table raises: "file:line: key" and the message.
std::string error_of(const std::string& text) {
  const std::string path = write("err", text);
  try {
    read_measured_runs(path);
  } catch (const InputError& e) {
    const Where& w = e.where();
    return "line " + std::to_string(w.line) + " [" + w.key + "] " + e.message() + (e.hint().empty() ? "" : " | " + e.hint());
  }
  return "no error";
}

std::map<std::string, std::string> flags(const MeasuredRun& r) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : replay_flags(r)) m[k] = v;
  return m;
}

TEST(Replay, ReadsRowsAndFillsWhatTheSourceLeavesUnstated) {
  const std::string path = write("ok", std::string("# comment\n") + kHeader + kGptRow + kLlamaRow);
  const auto runs = read_measured_runs(path);
  ASSERT_EQ(runs.size(), 2u);
  const MeasuredRun& e = runs[0];
  EXPECT_EQ(e.id, "X1");
  EXPECT_EQ(e.line, 3);  // after the comment and the header
  EXPECT_EQ(e.gpus, 48);
  EXPECT_EQ(e.vp, 0);   // not stated
  EXPECT_EQ(e.mbs, 0);  // not stated
  EXPECT_DOUBLE_EQ(e.value, 408.8);
  EXPECT_TRUE(e.scored());
  const auto f = flags(e);
  EXPECT_EQ(f.at("--mbs"), "1");          // mbs empty -> 1
  EXPECT_EQ(f.at("--vp"), "1");           // vp empty -> 1
  EXPECT_EQ(f.at("--schedule"), "1f1b");  // no interleaving
  EXPECT_EQ(f.at("--sp"), "no");          // sp empty, tp 1 -> no
  EXPECT_EQ(f.at("--recompute"), "none");
  EXPECT_EQ(f.at("--tp-comm-overlap"), "yes");  // the Megatron-Core source states TP overlap
  EXPECT_EQ(f.at("--attention-kernel"), "default");
  EXPECT_EQ(f.at("--fusion"), "fused");
  EXPECT_EQ(f.at("--grad-accum-fusion"), "yes");  // Megatron's default gradient-accumulation fusion
  EXPECT_EQ(f.at("--flash-attention"), "yes");
  EXPECT_EQ(f.at("--gpu"), "h100-sxm");
  EXPECT_EQ(f.at("--nic-bandwidth"), "400 Gb/s");

  const auto g = flags(runs[1]);
  EXPECT_EQ(g.at("--recompute"), "selective-op");  // torchtitan's selective is op-level SAC
  EXPECT_EQ(g.at("--attention-kernel"), "fa2");    // PyTorch SDPA's FlashAttention-2
  EXPECT_EQ(g.at("--fusion"), "eager");            // the row's notes say eager
  EXPECT_EQ(g.at("--grad-accum-fusion"), "no");    // autograd writes bf16 gradients (FSDP2 reduces them)
  EXPECT_EQ(g.at("--gpu"), "h100-sxm-96gb");
  EXPECT_EQ(g.at("--tp-comm-overlap"), "no");
}

TEST(Replay, OldMegatronRowsRunWithoutFusedAttentionAndInterleaveWithVp) {
  const std::string row =
      "C2s,korthikanti-t5,gpt,175,96,12288,96,96,49152,51200,2048,a100-80g,64,8,8,1,1,1,3,1,64,,selective,fp16,,"
      "step_time_s,13.75,\n";
  const auto runs = read_measured_runs(write("c", std::string(kHeader) + row));
  const auto f = flags(runs[0]);
  EXPECT_EQ(f.at("--flash-attention"), "no");  // 2021-22 sources predate FlashAttention
  EXPECT_EQ(f.at("--schedule"), "interleaved");
  EXPECT_EQ(f.at("--sp"), "yes");  // sp empty with tp 8 -> yes
  EXPECT_EQ(f.at("--dp-sharding"), "none");
  EXPECT_EQ(f.at("--gpu"), "a100-sxm-80gb");
  EXPECT_EQ(f.at("--nic-bandwidth"), "200 Gb/s");
}

// Tying by the stated size. E1's shape: the token embedding is V h = 131072 x 2048 = 268.4 M parameters and
// GPT's position table s h = 8.4 M; the 24 layers hold 24 (12 h^2 + 13 h) = 1,208.6 M. Tied: 1,485 M;
// untied adds the LM head's V h: 1,754 M. 1.7 B is nearer the untied count, 1.5 B the tied one.
TEST(Replay, EmbeddingTyingFollowsTheNearerParameterCount) {
  auto run_with = [](const std::string& params_b) {
    std::string row = kGptRow;
    row.replace(row.find(",1.7,"), 5, "," + params_b + ",");
    return read_measured_runs(write("tie", std::string(kHeader) + row))[0];
  };
  const model::ModelSpec untied = measured_model(run_with("1.7"));
  const model::ModelSpec tied = measured_model(run_with("1.5"));
  EXPECT_FALSE(untied.tied_embeddings);
  EXPECT_TRUE(tied.tied_embeddings);
  EXPECT_NEAR(static_cast<double>(tied.total_params()), 1.485e9, 0.002e9);
  EXPECT_EQ(untied.total_params() - tied.total_params(), int64_t{131072} * 2048);
  EXPECT_EQ(flags(run_with("1.7")).at("--tie-embeddings"), "no");
  EXPECT_EQ(flags(run_with("1.5")).at("--tie-embeddings"), "yes");
}

// Megatron-Core's FLOP count, by hand: B = 2, s = 1024, L = 2, h = 1024, a = g = 8, f = 4096, V = 1024:
// 12 B s L h^2 (1 + g/a + s/h + f/h + V/(2 L h)) = 12 * 2 * 1024 * 2 * 1024^2 * (1 + 1 + 1 + 4 + 0.25)
// = 5.15396e10 * 7.25 = 3.73662e11 FLOPs; on one GPU in 1 s that is 0.373662 TFLOP/s. The SC'21 count
// 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) = 4.12317e11 * (1 + 1/6 + 1/32) = 4.93921e11 -> 0.493921.
TEST(Replay, MetricsFollowTheirSourcesFlopCounts) {
  MeasuredRun r;
  r.metric = "tflops_per_gpu";
  r.source = "megatron-core-r0.8";
  model::GenericArch g{2, 1024, 8, 8, 4096, 1024, 1024};
  const model::ModelSpec m = model::ModelSpec::gpt(g);
  Plan p;
  p.gbs = 2;
  p.seq = 1024;
  TrainResult res;
  res.step.step_time = Time::seconds(1.0);
  res.tokens_per_s_per_gpu = 2048.0;
  EXPECT_NEAR(measured_metric(r, m, p, res), 0.373662, 1e-5);
  r.source = "megatron-sc21-t1";
  EXPECT_NEAR(measured_metric(r, m, p, res), 0.493921, 1e-5);
  r.metric = "step_time_s";
  EXPECT_DOUBLE_EQ(measured_metric(r, m, p, res), 1.0);
  r.metric = "tokens_per_s_per_gpu";
  EXPECT_DOUBLE_EQ(measured_metric(r, m, p, res), 2048.0);
  // A gated MLP counts 3/2 f: with f' = 6144 the bracket is 1 + 1 + 1 + 6 + 0.25 = 9.25.
  r.metric = "tflops_per_gpu";
  r.source = "other";
  const model::ModelSpec llama = model::ModelSpec::llama(g);
  EXPECT_NEAR(measured_metric(r, llama, p, res), 0.373662 * 9.25 / 7.25, 1e-5);
}

TEST(Replay, BadTablesNameTheLineAndTheColumn) {
  const std::string h = kHeader;
  std::string row = kGptRow;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string r = row;
    r.replace(r.find(from), from.size(), to);
    return h + r;
  };
  EXPECT_EQ(error_of("# only a comment\n"), "line 0 [] no header line; expected the columns of docs/training.md");
  EXPECT_EQ(error_of(h), "line 0 [] the table has a header but no rows");
  EXPECT_NE(error_of("id,source\nX,y\n").find("line 1 [arch] the header has no column 'arch'"), std::string::npos);
  EXPECT_EQ(error_of(h + "X1,megatron-core-r0.8,gpt\n"), "line 2 [] expected 28 cells as in the header, found 3");
  EXPECT_EQ(error_of(with(",24,2048,", ",24x,2048,")),
            "line 2 [layers] expected an integer in [1, 16777216], found '24x' (row X1)");
  EXPECT_EQ(error_of(with(",48,1,1,48,", ",0,1,1,48,")),
            "line 2 [gpus] expected an integer in [1, 16777216], found '0' (row X1)");
  EXPECT_EQ(error_of(with(",408.8,", ",-3,")), "line 2 [value] expected a positive number, found '-3' (row X1)");
  EXPECT_NE(error_of(with(",gpt,", ",gtp,")).find("line 2 [arch] expected one of gpt | llama, found 'gtp' | did you mean 'gpt'"),
            std::string::npos);
  EXPECT_NE(error_of(with("tflops_per_gpu", "tflop_per_gpu")).find("did you mean 'tflops_per_gpu'"), std::string::npos);
  EXPECT_NE(error_of(with(",h100-sxm,", ",h100-sx,")).find("line 2 [gpu] unknown GPU id 'h100-sx'"), std::string::npos);
  EXPECT_NE(error_of(with(",distopt,", ",distop,")).find("line 2 [dp_sharding]"), std::string::npos);
  EXPECT_EQ(error_of(with(",48,1,1,48,", ",40,1,1,48,")),
            "line 2 [gpus] row X1: tp x pp x dp x cp = 1 x 1 x 48 x 1 = 48, not gpus = 40");
  EXPECT_EQ(error_of(h + kGptRow + kGptRow), "line 3 [id] duplicate id 'X1'");
  try {
    read_measured_runs("/nonexistent/table.csv");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "/nonexistent/table.csv");
  }
}

// The optional columns: a row may name its model (a catalog name, or a config.json beside the table)
// instead of arch and sizes, and state the stack's MoE dispatcher, capacity, gradient bytes and attention
// library; each maps onto its flag, and the bad values name the column.
TEST(Replay, OptionalColumnsNameAModelAndTheStack) {
  const std::string h = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) +
                        ",model,capacity_factor,grad_bytes,attention_kernel,moe_dispatcher,moe_ranks_per_token\n";
  const std::string row =
      "M2,nemo-automodel,,,48,2048,32,4,768,151936,4096,h100-sxm,8,1,1,8,1,8,,4,512,no,full,bf16,fsdp,step_time_s,"
      "21.773,x,qwen3-30b-a3b,,,,deepep,1\n";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "orrery_replay_test_OptionalColumns_dir";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "m.json") << "{}";
  const std::string table = (dir / "t.csv").string();
  std::ofstream(table) << h << row
                       << "M1,nemo,,,,,,,,,8192,h100-sxm,512,4,8,8,2,8,8,1,1024,yes,none,bf16,distopt,step_time_s,20.83,x,"
                          "m.json,1,2,fa2,alltoall,\n";
  const auto runs = read_measured_runs(table);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].model, "qwen3-30b-a3b");  // a catalog name stays as written
  auto f = flags(runs[0]);
  EXPECT_EQ(f.count("--arch"), 0u);
  EXPECT_EQ(f["--model"], "qwen3-30b-a3b");
  EXPECT_EQ(f["--moe-dispatcher"], "deepep");
  EXPECT_EQ(f["--moe-ranks-per-token"], "1");
  EXPECT_EQ(f["--grad-bytes"], "4");
  EXPECT_EQ(f.count("--capacity-factor"), 0u);
  EXPECT_EQ(runs[1].model, (dir / "m.json").string());  // a path is relative to the table's folder
  f = flags(runs[1]);
  EXPECT_EQ(f["--model"], (dir / "m.json").string());
  EXPECT_EQ(f["--capacity-factor"], "1");
  EXPECT_EQ(f["--grad-bytes"], "2");
  EXPECT_EQ(f["--attention-kernel"], "fa2");
  EXPECT_EQ(f["--moe-dispatcher"], "alltoall");
  // The stated sizes are checked against the model: Qwen3-30B-A3B has 48 layers and experts of 768.
  model::ModelSpec q = model::ModelSpec::llama({48, 2048, 32, 4, 6144, 151936, 4096});
  q.family = model::Family::kQwen3Moe;
  q.moe.num_experts = 128;
  q.moe.top_k = 8;
  q.moe.expert_ffn = 768;
  EXPECT_NO_THROW(check_measured_model(runs[0], q));
  q.layers = 47;
  try {
    check_measured_model(runs[0], q);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key, "layers");
    EXPECT_EQ(e.where().line, 2);
  }

  auto bad = [&](const std::string& from, const std::string& to) {
    std::string r = row;
    r.replace(r.find(from), from.size(), to);
    return error_of(h + r);
  };
  EXPECT_NE(bad(",deepep,1", ",deepeep,1").find("[moe_dispatcher]"), std::string::npos);
  EXPECT_NE(bad(",deepep,1", ",alltoall,1").find("[moe_ranks_per_token] row M2: applies to moe_dispatcher deepep"),
            std::string::npos);
  EXPECT_NE(bad(",,,,deepep", ",,3,,deepep").find("[grad_bytes] expected 2 or 4"), std::string::npos);
  EXPECT_NE(bad(",,,,deepep", ",,,fa4,deepep").find("[attention_kernel]"), std::string::npos);
  EXPECT_NE(bad("qwen3-30b-a3b", "nowhere/q.json").find("[model] row M2: no config.json at"), std::string::npos);
  EXPECT_NE(bad("step_time_s", "tflops_per_gpu").find("[metric] row M2: tflops_per_gpu needs arch"), std::string::npos);
  // Without a model, arch and the sizes stay required.
  EXPECT_NE(bad(",qwen3-30b-a3b,", ",,").find("[arch]"), std::string::npos);
}

// first_stage_layers / last_stage_layers: NeMo's 405B on pp 8 x vp 8 holds one layer in the first and
// the last model chunk; the columns map onto --first-stage-layers / --last-stage-layers, 0 (Llama 3's
// embedding-only first chunk) is a value like any other, and a value below 0 names its column.
TEST(Replay, StageLayerColumnsMapOntoTheirFlags) {
  const std::string h = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",first_stage_layers,last_stage_layers\n";
  const std::string row = "GB5,nemo-dgxc-2505,llama,405.9,126,16384,128,8,53248,128256,8192,h100-sxm,128,4,8,2,2,1,8,1,64,"
                          "yes,,bf16,distopt,step_time_s,9.347,x,1,1\n";
  const std::string table = write("stages", h + row);
  const auto runs = read_measured_runs(table);
  ASSERT_EQ(runs.size(), 1u);
  auto f = flags(runs[0]);
  EXPECT_EQ(f["--first-stage-layers"], "1");
  EXPECT_EQ(f["--last-stage-layers"], "1");
  EXPECT_EQ(f["--vp"], "8");
  std::string zero = row;
  zero.replace(zero.rfind(",1,1"), 4, ",0,1");
  const auto zero_runs = read_measured_runs(write("stages0", h + zero));
  ASSERT_EQ(zero_runs.size(), 1u);
  EXPECT_EQ(flags(zero_runs[0])["--first-stage-layers"], "0");
  std::string negative = row;
  negative.replace(negative.rfind(",1,1"), 4, ",-1,1");
  EXPECT_NE(error_of(h + negative).find("[first_stage_layers]"), std::string::npos);
}

// cp_comm_type: Llama 3's long-context stage gathers K and V (all_gather); the column maps onto
// --cp-comm-type, an empty cell adds no flag (p2p), and a name that is none of p2p, all_gather, a2a names
// the column with the nearest.
TEST(Replay, CpCommColumnMapsOntoItsFlag) {
  const std::string h = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",cp_comm_type\n";
  const std::string row = "L3,llama3-herd-t4,llama,405,126,16384,128,8,53248,128256,131072,h100-sxm,16384,8,16,8,16,1,8,,128,"
                          "yes,none,bf16,zero2,tflops_per_gpu,380,x,all_gather\n";
  const auto runs = read_measured_runs(write("cpcomm", h + row));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(flags(runs[0])["--cp-comm-type"], "all_gather");
  std::string empty = row;
  empty.replace(empty.rfind(",all_gather"), 11, ",");
  EXPECT_EQ(flags(read_measured_runs(write("cpcomm0", h + empty))[0]).count("--cp-comm-type"), 0u);
  std::string bad = row;
  bad.replace(bad.rfind(",all_gather"), 11, ",allgather");
  const std::string e = error_of(h + bad);
  EXPECT_NE(e.find("[cp_comm_type]"), std::string::npos) << e;
  EXPECT_NE(e.find("all_gather"), std::string::npos) << e;
}

// torchtitan's compiled runs: notes naming torch.compile give --fusion compile (the blocks compiled, the
// loss eager), "eager" wins over it, anything else is fused; the tp_comm_overlap column (async TP) replaces
// the source's rule (torchtitan: no), an empty cell keeps it, and a value other than yes or no names the
// column; the microbatch_group_size column likewise maps onto its flag.
TEST(Replay, CompileNotesAndTpOverlapColumnMapOntoTheirFlags) {
  const std::string h = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",tp_comm_overlap\n";
  const std::string row = "DAt,torchtitan-2412,llama,70.6,80,8192,64,8,28672,128256,8192,h100-sxm,256,8,1,32,1,1,1,16,512,"
                          "yes,full,bf16,fsdp,tokens_per_s_per_gpu,876,2D + AsyncTP torch.compile,yes\n";
  auto f = flags(read_measured_runs(write("compile", h + row))[0]);
  EXPECT_EQ(f["--fusion"], "compile");
  EXPECT_EQ(f["--tp-comm-overlap"], "yes");
  std::string plain = row;
  plain.replace(plain.rfind(",yes"), 4, ",");
  plain.replace(plain.find(" torch.compile"), 14, " eager");
  f = flags(read_measured_runs(write("compile0", h + plain))[0]);
  EXPECT_EQ(f["--fusion"], "eager");
  EXPECT_EQ(f["--tp-comm-overlap"], "no");
  std::string bad = row;
  bad.replace(bad.rfind(",yes"), 4, ",maybe");
  EXPECT_NE(error_of(h + bad).find("[tp_comm_overlap]"), std::string::npos);
  // microbatch_group_size maps onto --microbatch-group-size; below 1 names its column.
  const std::string hg = h.substr(0, h.size() - 1) + ",microbatch_group_size\n";
  const std::string grouped = row.substr(0, row.size() - 1) + ",6\n";
  EXPECT_EQ(flags(read_measured_runs(write("group", hg + grouped))[0])["--microbatch-group-size"], "6");
  const std::string zero = row.substr(0, row.size() - 1) + ",0\n";
  EXPECT_NE(error_of(hg + zero).find("[microbatch_group_size]"), std::string::npos);
  // ep_overlap (Megatron's combined 1F1B) maps onto --overlap-moe-expert-parallel-comm; empty passes no
  // flag (the default, off); anything but yes or no names its column.
  const std::string he = h.substr(0, h.size() - 1) + ",ep_overlap\n";
  EXPECT_EQ(flags(read_measured_runs(write("epo", he + row.substr(0, row.size() - 1) + ",yes\n"))[0])
                ["--overlap-moe-expert-parallel-comm"],
            "yes");
  EXPECT_EQ(flags(read_measured_runs(write("epo0", he + row.substr(0, row.size() - 1) + ",\n"))[0])
                .count("--overlap-moe-expert-parallel-comm"),
            0u);
  EXPECT_NE(error_of(he + row.substr(0, row.size() - 1) + ",on\n").find("[ep_overlap]"), std::string::npos);
  // schedule maps onto --schedule by its canonical name (torchtitan's InterleavedZeroBubble, lowercased,
  // is interleaved-zb); empty keeps the vp rule (1f1b here, vp 1); an unknown name names its column and
  // the nearest schedule.
  const std::string hs = h.substr(0, h.size() - 1) + ",schedule\n";
  EXPECT_EQ(flags(read_measured_runs(write("sch", hs + row.substr(0, row.size() - 1) + ",InterleavedZeroBubble\n"))[0])
                ["--schedule"],
            "interleaved-zb");
  EXPECT_EQ(flags(read_measured_runs(write("sch0", hs + row.substr(0, row.size() - 1) + ",\n"))[0])["--schedule"], "1f1b");
  const std::string unknown = error_of(hs + row.substr(0, row.size() - 1) + ",interleaved-zv\n");
  EXPECT_NE(unknown.find("[schedule]"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("interleaved-zb"), std::string::npos) << unknown;
}

// etp: NeMo's DeepSeek-V3 recipe on H100 runs its experts at expert TP 1 beside TP 2 (dgxc-benchmarking
// deepseek_v3/pretraining/launch.sh); the column maps onto --etp, an empty cell adds no flag (tp), and a
// value below 1 names its column.
TEST(Replay, ExpertTpColumnMapsOntoItsFlag) {
  const std::string h = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",model,etp\n";
  const std::string row = "D1,nemo-dgxc-2505,,,61,7168,128,128,18432,129280,4096,h100-sxm,1024,2,16,32,1,64,,1,8192,yes,"
                          ",bf16,distopt,step_time_s,52.04,x,deepseek-v3,1\n";
  const auto runs = read_measured_runs(write("etp", h + row));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(flags(runs[0])["--etp"], "1");
  std::string none = row;
  none.replace(none.rfind(",1\n"), 3, ",\n");
  EXPECT_EQ(flags(read_measured_runs(write("etp_none", h + none))[0]).count("--etp"), 0u);
  std::string zero = row;
  zero.replace(zero.rfind(",1\n"), 3, ",0\n");
  EXPECT_NE(error_of(h + zero).find("[etp]"), std::string::npos);
}

// dropout: NeMo's Nemotron-4 yamls set attention and hidden dropout to 0 where arch gpt would take
// Megatron-LM's 0.1 (N4, N5 of data/published/nemo_h100_bf16.csv; a row of N6's shape here); the column maps onto both
// --attention-dropout and --hidden-dropout, an empty cell adds neither, and a probability outside [0, 1)
// or a word names its column. Every Megatron-based source gets --grad-accum-fusion yes, torchtitan and
// the SC'21 rows no (replay.cc).
TEST(Replay, DropoutColumnMapsOntoBothDropoutFlags) {
  const std::string h = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",dropout\n";
  const std::string row = "N6,nemo-dgxc-2411,gpt,175,96,12288,96,96,49152,51200,2048,h100-sxm,128,4,8,4,1,1,12,1,256,yes,"
                          "none,bf16,distopt,step_time_s,8.91,x,0\n";
  const auto runs = read_measured_runs(write("dropout", h + row));
  ASSERT_EQ(runs.size(), 1u);
  auto f = flags(runs[0]);
  EXPECT_EQ(f["--attention-dropout"], "0");
  EXPECT_EQ(f["--hidden-dropout"], "0");
  EXPECT_EQ(f["--grad-accum-fusion"], "yes");
  std::string none = row;
  none.replace(none.rfind(",0\n"), 3, ",\n");
  f = flags(read_measured_runs(write("dropout_none", h + none))[0]);
  EXPECT_EQ(f.count("--attention-dropout") + f.count("--hidden-dropout"), 0u);
  for (const char* bad : {",1\n", ",-0.1\n", ",some\n"}) {
    std::string b = row;
    b.replace(b.rfind(",0\n"), 3, bad);
    const std::string e = error_of(h + b);
    EXPECT_NE(e.find("[dropout]"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("expected a probability in [0, 1)"), std::string::npos) << bad << ": " << e;
  }
}

// optimizer_dtype / master_weights: NeMo's distributed Adam at optim.dtype bf16 on a bf16 model keeps
// bf16 moments and no master copy (N5 of data/published/nemo_h100_bf16.csv); the columns map onto
// --optimizer-dtype / --master-weights, an empty cell adds no flag (fp32), and a bad value names its column.
TEST(Replay, OptimizerStateColumnsMapOntoTheirFlags) {
  const std::string h = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",optimizer_dtype,master_weights\n";
  const std::string row = "N5,nemo-dgxc-2411,gpt,341,96,18432,96,8,73728,256000,4096,h100-sxm,128,8,8,2,1,1,12,1,32,yes,"
                          "selective,bf16,distopt,step_time_s,4.61,x,bf16,none\n";
  const std::string plain = "N4,nemo-dgxc-2411,gpt,15.7,32,6144,48,8,24576,256000,4096,h100-sxm,16,4,1,4,1,1,,4,64,yes,"
                            "none,bf16,distopt,step_time_s,2.83,x,,\n";
  const auto runs = read_measured_runs(write("optimizer", h + row + plain));
  ASSERT_EQ(runs.size(), 2u);
  auto f = flags(runs[0]);
  EXPECT_EQ(f["--optimizer-dtype"], "bf16");
  EXPECT_EQ(f["--master-weights"], "none");
  f = flags(runs[1]);
  EXPECT_EQ(f.count("--optimizer-dtype"), 0u);
  EXPECT_EQ(f.count("--master-weights"), 0u);
  std::string bad = row;
  bad.replace(bad.rfind(",bf16,none"), 10, ",fp8,none");
  EXPECT_NE(error_of(h + bad).find("[optimizer_dtype]"), std::string::npos);
  bad = row;
  bad.replace(bad.rfind(",bf16,none"), 10, ",bf16,nothing");
  EXPECT_NE(error_of(h + bad).find("[master_weights]"), std::string::npos);
}

// fp8_recipe: NeMo's FP8-CS rows scale by each tensor's own amax (current); the column maps onto
// --fp8-recipe and a bad name names the column.
TEST(Replay, Fp8RecipeColumnMapsOntoItsFlag) {
  const std::string h = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",fp8_recipe\n";
  const std::string row = "B2,mbridge-2511,llama,70.6,80,8192,64,8,28672,128256,8192,h100-sxm,64,4,8,2,1,1,5,1,128,yes,,fp8,"
                          "distopt,tokens_per_s_per_gpu,1602,x,current\n";
  const auto runs = read_measured_runs(write("fp8_recipe", h + row));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(flags(runs[0])["--fp8-recipe"], "current");
  std::string bad = row;
  bad.replace(bad.rfind(",current"), 8, ",currant");
  EXPECT_NE(error_of(h + bad).find("[fp8_recipe]"), std::string::npos);
}

}  // namespace
}  // namespace orrery::train
