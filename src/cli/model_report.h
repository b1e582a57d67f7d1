// Model reporting shared by `catalog list/show model` and `demo`: parameters (vs published), FLOPs per
// token in the PaLM convention, KV-cache bytes.
#pragma once

#include <string>

#include "cli/app.h"
#include "cli/output.h"
#include "model/model_spec.h"

namespace orrery::cli {

// A video diffusion transformer's sample: {frames, height, width, vae_compression, patch, latent_frames,
// tokens, text_tokens} (docs/cli.md; `train --json` and `catalog show --json` share it).
io::Json video_json(const model::DitSpec& v);

// Parameter and FLOP figures of one model at a sequence length (docs/cli.md, "catalog show model").
io::Json model_json(const model::ModelSpec& m, const std::string& origin, int64_t seq);

io::Json model_list_json(const io::Catalog& c);
Table model_list_table(const io::Catalog& c);
// `seq` is the sequence length of the FLOP figures; for a video diffusion transformer without
// `seq_given` it is the catalog sample's video token count.
void show_model(Context& ctx, const io::Catalog& c, const std::string& name, int64_t seq, bool seq_given = true);

// Relative error (a - b) / b, or NaN when b is 0 (not published).
double relative_error(double a, double b);

}  // namespace orrery::cli
