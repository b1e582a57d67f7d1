#include "cli/model_report.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/unit_parse.h"
#include "model/op_inventory.h"

namespace orrery::cli {

using io::Json;

double relative_error(double a, double b) {
  return b == 0 ? std::numeric_limits<double>::quiet_NaN() : (a - b) / b;
}

namespace {

Json or_null(double v) { return std::isnan(v) ? Json(nullptr) : Json(v); }

std::string pct(double rel) { return std::isnan(rel) ? "-" : fmt::format("{:+.2f}%", rel * 100); }

std::string published(double v) { return v > 0 ? format_count(v) : "-"; }

}  // namespace

Json video_json(const model::DitSpec& v) {
  return Json{{"frames", v.frames},
              {"height", v.height},
              {"width", v.width},
              {"vae_compression", {v.vae_t, v.vae_s, v.vae_s}},
              {"patch", {v.patch_t, v.patch_h, v.patch_w}},
              {"latent_frames", v.latent_frames()},
              {"tokens", v.tokens()},
              {"text_tokens", v.text_tokens}};
}

Json model_json(const model::ModelSpec& m, const std::string& origin, int64_t seq) {
  Json j;
  j["name"] = m.name;
  j["family"] = std::string(model::to_string(m.family));
  j["origin"] = origin;
  j["source"] = m.provenance.source;
  Json cfg{{"hidden", m.hidden},         {"layers", m.layers},
           {"heads", m.heads},           {"kv_heads", m.kv_heads},
           {"head_dim", m.head_dim},     {"ffn", m.ffn},
           {"vocab", m.vocab},           {"max_positions", m.max_positions},
           {"attention", std::string(model::to_string(m.attention))},
           {"mlp", std::string(model::to_string(m.mlp))},
           {"activation", std::string(model::to_string(m.activation))},
           {"norm", std::string(model::to_string(m.norm))},
           {"positions", std::string(model::to_string(m.positions))},
           {"tied_embeddings", m.tied_embeddings},
           {"sliding_window", m.sliding_window},
           {"sliding_layers", m.num_sliding_layers()},
           {"attention_sinks", m.attention_sinks}};
  if (m.is_moe()) {
    cfg["moe"] = {{"num_experts", m.moe.num_experts},
                  {"top_k", m.moe.top_k},
                  {"expert_ffn", m.moe.expert_ffn},
                  {"num_shared_experts", m.moe.num_shared_experts},
                  {"shared_expert_ffn", m.moe.shared_expert_ffn},
                  {"moe_layers", m.num_moe_layers()}};
  } else {
    cfg["moe"] = nullptr;
  }
  if (m.attention == model::AttentionKind::kMla) {
    cfg["mla"] = {{"q_lora_rank", m.mla.q_lora_rank},
                  {"kv_lora_rank", m.mla.kv_lora_rank},
                  {"qk_nope_head_dim", m.mla.qk_nope_head_dim},
                  {"qk_rope_head_dim", m.mla.qk_rope_head_dim},
                  {"v_head_dim", m.mla.v_head_dim}};
  } else {
    cfg["mla"] = nullptr;
  }
  j["config"] = cfg;

  const auto total = static_cast<double>(m.total_params());
  j["params"] = {{"total", m.total_params()},
                 {"active", m.active_params()},
                 {"active_excluding_input_embedding", m.active_params(model::ActiveEmbedding::kExclude)},
                 {"embedding", m.embedding_params()},
                 {"non_embedding", m.non_embedding_params()},
                 {"matmul_per_token", m.matmul_params_per_token()}};
  const double pub_total = m.provenance.published_total_params;
  const double pub_active = m.provenance.published_active_params;
  const auto active_as_published = static_cast<double>(m.active_params_as_published());
  j["published"] = {{"total", pub_total > 0 ? Json(pub_total) : Json(nullptr)},
                    {"active", pub_active > 0 ? Json(pub_active) : Json(nullptr)},
                    {"active_convention", m.provenance.published_active_excludes_input_embedding
                                              ? "excluding_input_embedding"
                                              : "including_input_embedding"},
                    {"total_relative_error", or_null(relative_error(total, pub_total))},
                    {"active_relative_error", or_null(relative_error(active_as_published, pub_active))}};

  // PaLM convention (Chowdhery et al. 2022, App. B): 6N + 12·L·H·Q·T per trained token, N the matmul
  // parameters per token, full T×T attention. The causal figure is what kernels actually compute.
  const double n = static_cast<double>(m.matmul_params_per_token());
  const double full = model::training_flops_per_token(m, seq, model::AttentionFlops::kFull).count();
  const double causal = model::training_flops_per_token(m, seq, model::AttentionFlops::kCausal).count();
  j["flops"] = {{"seq", seq},
                {"convention", "PaLM: 6N + 12*L*H*Q*T per trained token (N = matmul params per token)"},
                {"six_n_per_token", 6 * n},
                {"training_per_token", full},
                {"training_per_token_causal", causal},
                {"forward_per_token", full / 3}};
  // A DiT attends without a mask and keeps no KV cache (it is not served autoregressively).
  if (m.is_dit()) j["flops"]["training_per_token_causal"] = nullptr;
  j["kv_cache_bytes_per_token_bf16"] = m.is_dit() ? Json(nullptr) : Json(m.kv_cache_bytes_per_token(2).count());
  j["kv_cache_bytes_per_sequence_bf16"] = m.is_dit() ? Json(nullptr) : Json(m.kv_cache_bytes_per_sequence(seq, 2).count());
  j["video"] = m.is_dit() ? video_json(m.dit) : Json(nullptr);
  return j;
}

Json model_list_json(const io::Catalog& c) {
  Json a = Json::array();
  for (const auto& [name, entry] : c.models()) {
    const model::ModelSpec m = c.model(name, Where{entry.origin, 0, ""});
    a.push_back(Json{{"name", name},
                     {"family", std::string(model::to_string(m.family))},
                     {"layers", m.layers},
                     {"hidden", m.hidden},
                     {"total_params", m.total_params()},
                     {"active_params", m.active_params()},
                     {"origin", entry.origin}});
  }
  return a;
}

Table model_list_table(const io::Catalog& c) {
  Table t({"name", "family", "layers", "hidden", "params", "active", "published", "error"}, "Models");
  for (const auto& [name, entry] : c.models()) {
    const model::ModelSpec m = c.model(name, Where{entry.origin, 0, ""});
    const double total = static_cast<double>(m.total_params());
    t.add_row({name, std::string(model::to_string(m.family)), std::to_string(m.layers), std::to_string(m.hidden),
               format_count(total), m.is_moe() ? format_count(static_cast<double>(m.active_params())) : "-",
               published(m.provenance.published_total_params),
               pct(relative_error(total, m.provenance.published_total_params))});
  }
  return t;
}

void show_model(Context& ctx, const io::Catalog& c, const std::string& name, int64_t seq, bool seq_given) {
  const model::ModelSpec m = c.model(name, Where{"<command line>", 0, "NAME"});
  if (m.is_dit() && !seq_given) seq = m.dit.tokens();
  const auto it = c.models().find(name);
  const std::string origin = it != c.models().end() ? it->second.origin : name;
  const Json j = model_json(m, origin, seq);
  if (ctx.global.json) {
    Json e = envelope("catalog show");
    e["kind"] = "model";
    e["entry"] = j;
    ctx.out << io::dump_json(e);
    return;
  }
  Table cfg({"field", "value"}, fmt::format("{} ({}), from {}", m.name, model::to_string(m.family), origin));
  cfg.add_row({"layers x hidden", fmt::format("{} x {}", m.layers, m.hidden)});
  cfg.add_row({"heads / kv heads / head dim", fmt::format("{} / {} / {}", m.heads, m.kv_heads, m.head_dim)});
  cfg.add_row({"ffn", std::to_string(m.ffn)});
  if (m.is_dit()) {
    const model::DitSpec& v = m.dit;
    cfg.add_row({"video sample", fmt::format("{} frames {}x{}, VAE {}x{}x{}, patch {}x{}x{}", v.frames, v.height, v.width,
                                             v.vae_t, v.vae_s, v.vae_s, v.patch_t, v.patch_h, v.patch_w)});
    cfg.add_row({"video tokens", fmt::format("{} = {} x {} x {}", v.tokens(), v.latent_frames() / v.patch_t,
                                             v.height / v.vae_s / v.patch_h, v.width / v.vae_s / v.patch_w)});
    cfg.add_row({"attention", fmt::format("full self-attention; cross-attention to {} text tokens", v.text_tokens)});
  } else {
    cfg.add_row({"vocab", std::to_string(m.vocab)});
    std::string attention(model::to_string(m.attention));
    if (const int64_t w = m.num_sliding_layers(); w > 0) {
      attention += fmt::format("; window {} on {} of {} layers", m.sliding_window, w, m.layers);
    }
    if (m.attention_sinks) attention += "; sinks";
    cfg.add_row({"attention", attention});
  }
  if (m.is_moe()) {
    cfg.add_row({"experts (top-k, shared)",
                 fmt::format("{} ({}, {}) x ffn {} in {} layers", m.moe.num_experts, m.moe.top_k,
                             m.moe.num_shared_experts, m.moe.expert_ffn, m.num_moe_layers())});
  }
  ctx.out << cfg.render() << "\n";

  Table p({"parameters", "orrery", "published", "error"});
  const double total = static_cast<double>(m.total_params());
  const double active = static_cast<double>(m.active_params_as_published());
  p.add_row({"total", format_count(total), published(m.provenance.published_total_params),
             pct(relative_error(total, m.provenance.published_total_params))});
  p.add_row({m.provenance.published_active_excludes_input_embedding ? "active per token (no input embedding)"
                                                                    : "active per token",
             format_count(active), published(m.provenance.published_active_params),
             pct(relative_error(active, m.provenance.published_active_params))});
  p.add_row({"embedding", format_count(static_cast<double>(m.embedding_params())), "-", "-"});
  ctx.out << p.render() << "\n";

  Table f({"per trained token", "FLOPs"}, fmt::format("FLOPs at sequence length {}{} (PaLM convention)", seq,
                                                     m.is_dit() && !seq_given ? ", the video token count" : ""));
  f.add_row({"6N (N = matmul params per token)", fmt::format("{:.4g}", j["flops"]["six_n_per_token"].get<double>())});
  f.add_row({"training, full attention", fmt::format("{:.4g}", j["flops"]["training_per_token"].get<double>())});
  if (!m.is_dit()) {
    f.add_row({"training, causal attention", fmt::format("{:.4g}", j["flops"]["training_per_token_causal"].get<double>())});
    f.add_row({"KV cache per token (bf16)", format_bytes(m.kv_cache_bytes_per_token(2))});
    // One sequence of `seq` tokens (the title's length); windowed layers keep their last window only.
    f.add_row({m.num_sliding_layers() > 0 ? "KV per sequence (bf16, windowed)" : "KV cache per sequence (bf16)",
               format_bytes(m.kv_cache_bytes_per_sequence(seq, 2))});
  }
  ctx.out << f.render();
  if (!m.provenance.source.empty()) ctx.out << "source: " << m.provenance.source << "\n";
}

}  // namespace orrery::cli
