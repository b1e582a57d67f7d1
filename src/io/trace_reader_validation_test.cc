// Validation: stream the real request traces in ../shared/data/traces and check counts and means
// against figures computed independently with Python (command beside each expectation).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/stats.h"
#include "io/trace_reader.h"

namespace orrery::io {
namespace {

std::string traces_dir() {
  const char* shared = std::getenv("ORRERY_SHARED_DIR");
  return shared ? std::string(shared) + "/data/traces" : std::string();
}

struct TraceStats {
  int64_t count = 0;
  RunningStats prompt, output;
  int64_t prefix_refs = 0;
  Time first, last;
};

TraceStats stream(const std::string& path) {
  std::unique_ptr<TraceReader> r = open_trace(path);
  TraceStats s;
  while (std::optional<serve::Request> q = r->next()) {
    if (s.count == 0) s.first = q->arrival;
    s.last = q->arrival;
    ++s.count;
    s.prompt.add(static_cast<double>(q->prompt_tokens));
    s.output.add(static_cast<double>(q->output_tokens));
    s.prefix_refs += static_cast<int64_t>(q->prefix_blocks.size());
  }
  return s;
}

#define REQUIRE_TRACE(path)                                                                             \
  if (traces_dir().empty() || !std::filesystem::exists(path))                                           \
  GTEST_SKIP() << "real traces not found (" << (path)                                                   \
               << "): set ORRERY_SHARED_DIR to the shared data folder (ctest sets it to ../shared)"

TEST(RealTraces, AzureConversationTraceStreamsWithItsPublishedCountsAndMeans) {
  const std::string path = traces_dir() + "/AzureLLMInferenceTrace_conv.csv";
  REQUIRE_TRACE(path);
  // python3 -c "import csv,datetime as d;r=list(csv.DictReader(open('AzureLLMInferenceTrace_conv.csv')));
  //   t=lambda s:d.datetime.strptime(s[:26],'%Y-%m-%d %H:%M:%S.%f');print(len(r),
  //   sum(int(x['ContextTokens']) for x in r)/len(r),sum(int(x['GeneratedTokens']) for x in r)/len(r),
  //   (t(r[-1]['TIMESTAMP'])-t(r[0]['TIMESTAMP'])).total_seconds())"
  //   -> 19366 1154.6974078281523 211.12594237323142 3501.721937
  // (the 7th fractional digit is dropped by %f: 18:15:46.6805900 -> 19:14:08.4025270 spans 3501.7219370 s)
  const TraceStats s = stream(path);
  EXPECT_EQ(s.count, 19366);
  EXPECT_NEAR(s.prompt.mean(), 1154.6974078281523, 1e-9);
  EXPECT_NEAR(s.output.mean(), 211.12594237323142, 1e-9);
  EXPECT_EQ(s.first, Time::zero());
  EXPECT_EQ(s.last, Time::ps(3'501'721'937'000'000));
  EXPECT_EQ(s.prefix_refs, 0);
}

TEST(RealTraces, AzureCodeTraceStreamsWithItsPublishedCount) {
  const std::string path = traces_dir() + "/AzureLLMInferenceTrace_code.csv";
  REQUIRE_TRACE(path);
  // python3 -c "import csv;r=list(csv.DictReader(open('AzureLLMInferenceTrace_code.csv')));
  //   print(len(r),sum(int(x['ContextTokens']) for x in r)/len(r))"  -> 8819 2047.848282118154
  const TraceStats s = stream(path);
  EXPECT_EQ(s.count, 8819);
  EXPECT_NEAR(s.prompt.mean(), 2047.848282118154, 1e-9);
}

TEST(RealTraces, MooncakeConversationTraceStreamsWithItsCountsMeansAndBlockReferences) {
  const std::string path = traces_dir() + "/mooncake_conversation_trace.jsonl";
  REQUIRE_TRACE(path);
  // python3 -c "import json;r=[json.loads(l) for l in open('mooncake_conversation_trace.jsonl')];
  //   print(len(r),sum(x['input_length'] for x in r)/len(r),sum(x['output_length'] for x in r)/len(r),
  //   sum(len(x['hash_ids']) for x in r),r[-1]['timestamp'])"
  //   -> 12031 12035.061341534369 342.6189011719724 288500 3536999
  const TraceStats s = stream(path);
  EXPECT_EQ(s.count, 12031);
  EXPECT_NEAR(s.prompt.mean(), 12035.061341534369, 1e-8);
  EXPECT_NEAR(s.output.mean(), 342.6189011719724, 1e-9);
  EXPECT_EQ(s.prefix_refs, 288500);
  EXPECT_EQ(s.last, Time::ms(3'536'999));
}

TEST(RealTraces, VidurArxivLengthTraceStreamsWithItsCount) {
  const std::string path = traces_dir() + "/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv";
  REQUIRE_TRACE(path);
  // python3 -c "import csv;r=list(csv.DictReader(open('arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv')));
  //   print(len(r),sum(int(x['num_prefill_tokens']) for x in r)/len(r))"  -> 28257 2588.0780337615456
  const TraceStats s = stream(path);
  EXPECT_EQ(s.count, 28257);
  EXPECT_NEAR(s.prompt.mean(), 2588.0780337615456, 1e-9);
}

}  // namespace
}  // namespace orrery::io
