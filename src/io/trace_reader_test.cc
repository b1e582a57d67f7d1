#include "io/trace_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orrery::io {
namespace {

using serve::Request;

std::vector<Request> read_all(const std::string& text, const std::string& name, TraceOptions options = {}) {
  std::unique_ptr<TraceReader> r = read_trace_text(text, name, options);
  std::vector<Request> out;
  while (std::optional<Request> q = r->next()) out.push_back(*q);
  return out;
}

// Expects reading `text` to throw InputError whose what() contains every needle; returns what().
std::string expect_error(const std::string& text, const std::string& name, const std::vector<std::string>& needles,
                         TraceOptions options = {}) {
  try {
    read_all(text, name, options);
  } catch (const InputError& e) {
    for (const std::string& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "missing '" << n << "' in: " << e.what();
    }
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return {};
}

// ---- Azure ----

// Three rows in the Azure format, CRLF line endings and no final line break, as in the real files.
const std::string kAzure =
    "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    "2023-11-16 18:15:46.6805900,374,44\r\n"
    "2023-11-16 18:15:50.9951690,396,109\r\n"
    "2023-11-16 18:16:01.0000000,879,3";

TEST(TraceReaderAzure, ReadsArrivalsRelativeToTheFirstTimestampAndTheTokenCounts) {
  // Arrivals: 0; 50.9951690 - 46.6805900 = 4.3145790 s; 61.0 - 46.68059 = 14.31941 s (exact in ps).
  const std::vector<Request> r = read_all(kAzure, "conv.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].arrival, Time::zero());
  EXPECT_EQ(r[1].arrival, Time::ps(4'314'579'000'000));
  EXPECT_EQ(r[2].arrival, Time::ps(14'319'410'000'000));
  EXPECT_EQ(r[0].prompt_tokens, 374);
  EXPECT_EQ(r[0].output_tokens, 44);
  EXPECT_EQ(r[2].prompt_tokens, 879);
  EXPECT_EQ(r[2].output_tokens, 3);
  EXPECT_EQ(r[2].id, 2);
  EXPECT_TRUE(r[1].prefix_blocks.empty());
}

TEST(TraceReaderAzure, TimestampsCrossMidnightAndMonthEnds) {
  // 2023-11-30 23:59:59.5 -> 2023-12-01 00:00:00.25 is 0.75 s later.
  const std::vector<Request> r = read_all(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-30 23:59:59.5,1,1\n2023-12-01 00:00:00.25,1,1\n", "a.csv");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].arrival, Time::ms(750));
}

TEST(TraceReaderAzure, NonNumericTokenCountNamesFileLineAndColumn) {
  const std::string text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n"
                           "2023-11-16 18:15:47.00,abc,44\n";
  const std::string what = expect_error(text, "conv.csv", {"conv.csv:3: ContextTokens", "column 2", "'abc'"});
  EXPECT_EQ(what.rfind("conv.csv:3:", 0), 0u) << what;
}

TEST(TraceReaderAzure, MissingColumnSuggestsTheNearestHeaderName) {
  // "ContextToken" is one edit from the required "ContextTokens".
  expect_error("TIMESTAMP,ContextToken,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n", "conv.csv",
               {"conv.csv:1: ContextTokens", "missing column 'ContextTokens'", "did you mean 'ContextToken'"},
               TraceOptions{TraceFormat::kAzure});
  // Detection picks azure from the two columns that match (TIMESTAMP, GeneratedTokens), so the
  // same error comes without naming the format.
  expect_error("TIMESTAMP,ContextToken,GeneratedTokens\n", "conv.csv",
               {"conv.csv:1: ContextTokens", "did you mean 'ContextToken'"});
}

TEST(TraceReaderAzure, DecreasingTimestampsAreAnError) {
  expect_error(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:47.0,1,1\n2023-11-16 18:15:46.0,1,1\n", "c.csv",
      {"c.csv:3: TIMESTAMP", "earlier than the previous", "sorted by arrival"});
}

TEST(TraceReaderAzure, MalformedTimestampAndFieldCountAreErrors) {
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023/11/16 18:15:47,1,1\n", "c.csv",
               {"c.csv:2: TIMESTAMP", "YYYY-MM-DD", "column 1"});
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:47,1\n", "c.csv",
               {"c.csv:2:", "expected 3 comma-separated fields", "found 2"});
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:47,0,5\n", "c.csv",
               {"c.csv:2: ContextTokens", ">= 1"});
}

// ---- Mooncake ----

const std::string kMooncake =
    R"({"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]})"
    "\n"
    R"({"timestamp": 0, "input_length": 700, "output_length": 4, "hash_ids": [0, 14]})"
    "\n\n"
    R"({"timestamp": 1999, "input_length": 512, "output_length": 1, "hash_ids": [15]})"
    "\n";

TEST(TraceReaderMooncake, ReadsMillisecondTimestampsLengthsAndHashIds) {
  const std::vector<Request> r = read_all(kMooncake, "conversation.jsonl");
  ASSERT_EQ(r.size(), 3u);  // the blank line is skipped
  EXPECT_EQ(r[0].arrival, Time::zero());
  EXPECT_EQ(r[1].arrival, Time::zero());  // equal timestamps are allowed
  EXPECT_EQ(r[2].arrival, Time::ms(1999));
  EXPECT_EQ(r[0].prompt_tokens, 6758);
  EXPECT_EQ(r[0].output_tokens, 500);
  EXPECT_EQ(r[0].prefix_blocks, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(r[1].prefix_blocks, (std::vector<uint64_t>{0, 14}));
  EXPECT_EQ(r[2].id, 2);
}

TEST(TraceReaderMooncake, MissingFieldSuggestsTheNearestKey) {
  expect_error(R"({"timestamp": 0, "input_len": 5, "output_length": 1})", "m.jsonl",
               {"m.jsonl:1: input_length", "missing field", "did you mean 'input_len'"});
}

TEST(TraceReaderMooncake, MalformedJsonNamesTheColumn) {
  expect_error(std::string(R"({"timestamp": 0, "input_length": 5, "output_length": 1})") + "\n{\"timestamp\": 5,,}\n",
               "m.jsonl", {"m.jsonl:2:", "malformed JSON at column 17"});
}

TEST(TraceReaderMooncake, WrongTypesAndDecreasingTimestampsAreErrors) {
  expect_error(R"({"timestamp": 0, "input_length": "many", "output_length": 1})", "m.jsonl",
               {"m.jsonl:1: input_length", "whole number"});
  expect_error(R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [-1]})", "m.jsonl",
               {"m.jsonl:1: hash_ids", "non-negative"});
  expect_error(std::string(R"({"timestamp": 10, "input_length": 5, "output_length": 1})") + "\n" +
                   R"({"timestamp": 9, "input_length": 5, "output_length": 1})",
               "m.jsonl", {"m.jsonl:2: timestamp", "earlier than the previous"});
}

// ---- Vidur ----

TEST(TraceReaderVidur, LengthOnlyTraceHasZeroArrivalsAndIgnoresExtraColumns) {
  // The arxiv-summarization file's shape: num_prefill_tokens, num_decode_tokens, num_total_tokens, pd_ratio.
  const std::vector<Request> r = read_all(
      "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n3772,54,3826,69.85\n2015,156,2171,12.9\n",
      "arxiv.csv");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].arrival, Time::zero());
  EXPECT_EQ(r[1].arrival, Time::zero());
  EXPECT_EQ(r[0].prompt_tokens, 3772);
  EXPECT_EQ(r[1].output_tokens, 156);
}

TEST(TraceReaderVidur, ArrivedAtGivesArrivalsInSeconds) {
  const std::vector<Request> r = read_all(
      "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,10,2\n1.25,20,3\n", "replay.csv");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].arrival, Time::ms(500));
  EXPECT_EQ(r[1].arrival, Time::ms(1250));
}

TEST(TraceReaderVidur, FeedsSyntheticArrivalsThroughReArrivedSource) {
  // Lengths from the trace, arrivals every 2 s (trace-shaped with one gap at rate 0.5/s).
  serve::ReArrivedSource s(
      read_trace_text("num_prefill_tokens,num_decode_tokens\n100,7\n200,8\n", "l.csv"),
      std::make_unique<serve::TraceShapedArrivals>(std::vector<double>{1.0}, 0.5), 1);
  const std::optional<Request> a = s.next(), b = s.next();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->arrival, Time::seconds(2.0));
  EXPECT_EQ(b->arrival, Time::seconds(4.0));
  EXPECT_EQ(b->prompt_tokens, 200);
  EXPECT_FALSE(s.next().has_value());
}

// ---- Generic ----

TEST(TraceReaderGeneric, ReadsArrivalsLengthsAndOptionalPrefixIds) {
  const std::vector<Request> r = read_all(
      "arrival_s,prompt_tokens,output_tokens,prefix_ids\n0,1024,20,1 2 3\n0.25,512,10,\n1.5,600,30,1;9\n", "g.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].arrival, Time::ms(250));
  EXPECT_EQ(r[2].arrival, Time::ms(1500));
  EXPECT_EQ(r[0].prefix_blocks, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(r[1].prefix_blocks.empty());
  EXPECT_EQ(r[2].prefix_blocks, (std::vector<uint64_t>{1, 9}));
  EXPECT_EQ(r[2].prompt_tokens, 600);
  EXPECT_EQ(r[2].output_tokens, 30);
}

TEST(TraceReaderGeneric, ColumnsMayComeInAnyOrder) {
  const std::vector<Request> r = read_all("output_tokens,arrival_s,prompt_tokens\n7,2.5,99\n", "g.csv");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].arrival, Time::ms(2500));
  EXPECT_EQ(r[0].prompt_tokens, 99);
  EXPECT_EQ(r[0].output_tokens, 7);
}

TEST(TraceReaderGeneric, BadArrivalAndPrefixIdsAreErrors) {
  expect_error("arrival_s,prompt_tokens,output_tokens\nsoon,1,1\n", "g.csv",
               {"g.csv:2: arrival_s", "seconds", "column 1", "'soon'"});
  expect_error("arrival_s,prompt_tokens,output_tokens\n-1,1,1\n", "g.csv", {"g.csv:2: arrival_s", "[0, 9e6]"});
  expect_error("arrival_s,prompt_tokens,output_tokens,prefix_ids\n0,1,1,4 x\n", "g.csv",
               {"g.csv:2: prefix_ids", "column 4", "'x'"});
  expect_error("arrival_s,prompt_tokens,output_tokens\n0,1,2.5\n", "g.csv",
               {"g.csv:2: output_tokens", "whole number", "column 3"});
}

TEST(TraceReaderGeneric, SkipBadLinesCountsAndContinues) {
  // Lines 3 and 5 are malformed; with skip_bad_lines the two good requests come through.
  TraceOptions opt;
  opt.skip_bad_lines = true;
  std::unique_ptr<TraceReader> r = read_trace_text(
      "arrival_s,prompt_tokens,output_tokens\n0,1,1\nx,1,1\n1,2,2\n0.5,3,3\n", "g.csv", opt);
  std::vector<Request> got;
  while (std::optional<Request> q = r->next()) got.push_back(*q);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].prompt_tokens, 2);
  EXPECT_EQ(got[1].id, 1);
  EXPECT_EQ(r->skipped_lines(), 2);  // the non-numeric arrival and the decreasing 0.5 s
}

// ---- Format detection ----

TEST(TraceFormatDetection, DetectsEachFormatFromItsFirstLine) {
  EXPECT_EQ(detect_trace_format("TIMESTAMP,ContextTokens,GeneratedTokens", "a.csv"), TraceFormat::kAzure);
  EXPECT_EQ(detect_trace_format(R"({"timestamp": 0})", "m.jsonl"), TraceFormat::kMooncake);
  EXPECT_EQ(detect_trace_format("num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio", "v.csv"),
            TraceFormat::kVidur);
  EXPECT_EQ(detect_trace_format("arrival_s,prompt_tokens,output_tokens", "g.csv"), TraceFormat::kGeneric);
  EXPECT_EQ(read_trace_text(kAzure, "x")->format(), TraceFormat::kAzure);
}

TEST(TraceFormatDetection, UnknownHeaderIsAClearErrorWithTheNearestColumn) {
  // Only prompt_tokens is a generic column: no format has two of its columns here.
  expect_error("arrival,prompt_tokens,tokens_out\n0,1,1\n", "w.csv",
               {"w.csv:1:", "cannot detect the trace format", "'arrival,prompt_tokens,tokens_out'",
                "column 'arrival': did you mean 'arrival_s'"});
  // Two of generic's three columns: read as generic, and the misspelt one is reported as missing.
  expect_error("arrival,prompt_tokens,output_tokens\n0,1,1\n", "w.csv",
               {"w.csv:1: arrival_s", "missing column 'arrival_s'", "did you mean 'arrival'"});
  expect_error("foo,bar\n", "w.csv", {"w.csv:1:", "cannot detect", "pass the format explicitly"});
  expect_error("arrival_s,prompt_tokens,output_tokens\n", "w.jsonl", {"w.jsonl:1:", ".jsonl", "not a JSON object"});
  expect_error("", "empty.csv", {"empty.csv", "empty"});
}

TEST(TraceFormatDetection, FormatNamesRoundTripAndUnknownNamesGetASuggestion) {
  for (TraceFormat f : {TraceFormat::kAzure, TraceFormat::kMooncake, TraceFormat::kVidur, TraceFormat::kGeneric}) {
    EXPECT_EQ(parse_trace_format(to_string(f)), f);
  }
  try {
    parse_trace_format("mooncak", Where{"<command line>", 0, "--trace-format"});
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'mooncake'"), std::string::npos) << e.what();
  }
}

TEST(OpenTrace, MissingFileIsAnInputError) {
  try {
    open_trace("/nonexistent/trace.csv");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "/nonexistent/trace.csv");
  }
}

TEST(TraceReader, StreamsAMillionLinesWithoutKeepingThem) {
  // A generated trace of 10^6 generic rows, read one request at a time: the reader's own state is a
  // line buffer and a few counters, whatever the trace length (the text itself is the test's).
  std::string text = "arrival_s,prompt_tokens,output_tokens\n";
  text.reserve(text.size() + 1'000'000 * 16);
  for (int i = 0; i < 1'000'000; ++i) text += std::to_string(i / 1000) + ",100," + std::to_string(1 + i % 7) + "\n";
  std::unique_ptr<TraceReader> r = read_trace_text(std::move(text), "big.csv");
  int64_t n = 0, outputs = 0;
  while (std::optional<Request> q = r->next()) {
    ++n;
    outputs += q->output_tokens;
  }
  // Output tokens cycle 1..7: 142,857 full cycles sum to 142,857·28 = 3,999,996, plus the last
  // row (i = 999,999, i mod 7 = 0) giving 1: 3,999,997.
  EXPECT_EQ(n, 1'000'000);
  EXPECT_EQ(outputs, 3'999'997);
  EXPECT_EQ(r->line(), 1'000'001);
}

}  // namespace
}  // namespace orrery::io
