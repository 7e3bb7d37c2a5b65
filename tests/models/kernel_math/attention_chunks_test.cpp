// models/cuda/attention_chunks.h: the CUDA attention's passes over chunks of query rows, run on
// host vectors by an Exec that does what the CUDA one asks cuBLAS and the softmax kernels for:
// each product through column_major() and a column-major strided-batched GEMM as cuBLAS
// defines it (β = 0 never reading C), every access bounds-checked, and every buffer but the
// pass's inputs filled with NaN first, so that a value read before it is written, a stride or
// offset off by one, or a chunk that misses keys shows up as NaN or a wrong number. The results
// are compared with the CPU attention kernel (flash attention's scheme, exact fp32 sums).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "models/cuda/attention_chunks.h"
#include "models/kernel_math/half_math.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;
namespace ac = attention_chunks;
using ac::Buffer;

class HostExec {
 public:
  // `stats`: the layer's kept softmax stats, [N·H, S] (NaN until a forward keeps them), which
  // outlive a pass as the kernel's do.
  HostExec(const km::AttentionShape& s, int64_t chunk_rows, std::optional<km::HalfFormat> half,
           std::vector<km::SoftmaxRowStats>& stats)
      : s_(s), half_(half), stats_(stats) {
    SS_CHECK(static_cast<int64_t>(stats.size()) == s.batch * s.heads * s.seq, "stats of {} rows",
             stats.size());
    // Only the buffers the kernel's workspace has, of its sizes: a pass that touches another
    // throws.
    const ac::Workspace workspace(s, chunk_rows, half.has_value());
    for (int b = 0; b < ac::Workspace::kBuffers; ++b) {
      const auto id = static_cast<Buffer>(b);
      if (!workspace.has(id)) continue;
      const int64_t bytes = workspace.bytes(id);
      buffers_[id].assign(static_cast<size_t>(bytes / (ac::sixteen_bit(id) ? 2 : 4)), kNan);
    }
  }

  bool half() const { return half_.has_value(); }

  void gemm(const ac::Product& product) {
    ++products_;
    const ac::Product p = ac::column_major(product);
    // Column-major: element (i, j) of a matrix with leading dimension ld at i + j·ld.
    for (int64_t batch = 0; batch < s_.batch * s_.heads; ++batch) {
      for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
          float sum = 0.0f;
          for (int64_t l = 0; l < p.k; ++l) {
            const float a = p.transpose_a ? at(p.a, batch, l, i) : at(p.a, batch, i, l);
            const float b = p.transpose_b ? at(p.b, batch, j, l) : at(p.b, batch, l, j);
            sum += a * b;
          }
          float& c = ref(p.c, batch, i, j);
          c = p.beta == 0.0f ? sum : sum + p.beta * c;
        }
      }
    }
    rounded_[p.c.buffer] = false;
    stale_[p.c.buffer] = false;
    scores_[p.c.buffer] = true;
  }

  // Marks buffer b as holding a 16-bit copy (or not), as the test's heads are written in.
  void set_rounded(Buffer b, bool rounded) { rounded_[b] = rounded; }

  // Without `fp32` the scores stay as they are: marked as neither probabilities nor a 16-bit
  // copy, so that a product reading them fails.
  // Keeps each row's stats, as the kernel does for backward.
  void softmax_forward(const km::ScoreBlock& b, Buffer scores, bool fp32,
                       std::optional<Buffer> half) {
    SS_CHECK(scores_[scores], "softmax forward of a buffer that holds no scores");
    for (int64_t r = 0; r < b.count(); ++r) {
      float* row = &ref(scores, r * b.len + b.len - 1) - (b.len - 1);  // bounds-checked
      *stats(b, r) = km::causal_softmax_row(row, fp32 ? row : nullptr, b.query(r), b.len, scale(),
                                            km::RowShare{}, km::SerialReduce{}, half_row(b.len));
      copy_row(half, r, b.len);
    }
    mark_softmax(scores, fp32);
  }

  void softmax_from_stats(const km::ScoreBlock& b, Buffer scores, bool fp32,
                          std::optional<Buffer> half) {
    SS_CHECK(scores_[scores], "softmax from stats of a buffer that holds no scores");
    for (int64_t r = 0; r < b.count(); ++r) {
      float* row = &ref(scores, r * b.len + b.len - 1) - (b.len - 1);
      km::causal_softmax_from_stats_row(row, fp32 ? row : nullptr, b.query(r), b.len, scale(),
                                        kept_stats(b, r), km::RowShare{}, half_row(b.len));
      copy_row(half, r, b.len);
    }
    mark_softmax(scores, fp32);
  }

  // With `from_scores`, P recomputed from the scores in `probs` and the kept stats.
  void softmax_backward(const km::ScoreBlock& b, Buffer probs, Buffer grads, bool fp32,
                        std::optional<Buffer> half, bool from_scores) {
    if (from_scores) {
      SS_CHECK(scores_[probs], "softmax backward from scores read a buffer that holds none");
    } else {
      SS_CHECK(!stale_[probs], "softmax backward read scores that hold no probabilities");
    }
    for (int64_t r = 0; r < b.count(); ++r) {
      const int64_t last = r * b.len + b.len - 1;
      const float* row = &ref(probs, last) - (b.len - 1);
      float* g = &ref(grads, last) - (b.len - 1);
      const auto backward = [&](const auto& read) {
        km::causal_softmax_backward_row_of(read, g, fp32 ? g : nullptr, b.query(r), b.len, scale(),
                                           km::RowShare{}, km::SerialReduce{}, half_row(b.len));
      };
      if (from_scores) {
        backward(km::ProbabilitiesFromScores{row, scale(), kept_stats(b, r)});
      } else {
        backward(km::KeptProbabilities{row});
      }
      copy_row(half, r, b.len);
    }
    mark_softmax(grads, fp32);
  }

  std::vector<float>& buffer(Buffer b) { return buffers_.at(b); }
  int64_t products() const { return products_; }

 private:
  float scale() const { return km::attention_scale(s_.head_dim); }
  // After a softmax in place: buffer b holds its fp32 results, or (not written) stale values
  // (the scores a product wrote, where it was a forward's).
  void mark_softmax(Buffer b, bool written) {
    rounded_[b] = false;
    stale_[b] = !written;
    if (written) scores_[b] = false;
  }
  // Row r's place among the layer's kept stats, bounds-checked.
  km::SoftmaxRowStats* stats(const km::ScoreBlock& b, int64_t r) {
    km::SoftmaxRowStats* at = km::RowStatsAt{stats_.data(), s_.seq}(b, r);
    SS_CHECK(at >= stats_.data() && at < stats_.data() + stats_.size(), "stats of row {}", r);
    return at;
  }
  // Row r's stats as a forward kept them: a pass that reads them before one did fails.
  km::SoftmaxRowStats kept_stats(const km::ScoreBlock& b, int64_t r) {
    const km::SoftmaxRowStats kept = *stats(b, r);
    SS_CHECK(!std::isnan(kept.max) && !std::isnan(kept.sum), "row {}'s stats read unkept", r);
    return kept;
  }
  // A row's 16-bit copy as the kernels write it, here into row_copy_ (nowhere in fp32).
  km::HalfRow half_row(int64_t len) {
    row_copy_.assign(static_cast<size_t>(len), 0);
    return half_ ? km::HalfRow{row_copy_.data(), *half_} : km::HalfRow{};
  }
  // Row r of the copy into buffer `to` (as floats of the 16-bit values), if one is asked for.
  void copy_row(std::optional<Buffer> to, int64_t r, int64_t len) {
    if (!to) return;
    SS_CHECK(half_, "a 16-bit copy asked of an fp32 pass");
    for (int64_t j = 0; j < len; ++j) {
      ref(*to, r * len + j) = km::from_half(row_copy_[static_cast<size_t>(j)], *half_);
    }
    rounded_[*to] = true;
  }
  float& ref(Buffer b, int64_t e) {
    std::vector<float>& v = buffers_.at(b);
    SS_CHECK(e >= 0 && e < static_cast<int64_t>(v.size()), "buffer {} element {} of {}",
             static_cast<int>(b), e, v.size());
    return v[static_cast<size_t>(e)];
  }
  // Element (i, j) of batch `batch` of column-major matrix m.
  float& ref(const ac::Matrix& m, int64_t batch, int64_t i, int64_t j) {
    SS_CHECK(i >= 0 && j >= 0 && i < m.ld, "matrix row {} outside leading dimension {}", i, m.ld);
    return ref(m.buffer, m.offset + batch * m.batch_stride + i + j * m.ld);
  }
  // An operand's element: in a 16-bit pass a 16-bit copy (the heads' or a softmax's), never in
  // fp32.
  float at(const ac::Matrix& m, int64_t batch, int64_t i, int64_t j) {
    SS_CHECK(rounded_[m.buffer] == half(), "operand buffer {} {} in a {} pass",
             static_cast<int>(m.buffer), rounded_[m.buffer] ? "16-bit" : "fp32",
             half() ? "16-bit" : "fp32");
    SS_CHECK(!stale_[m.buffer], "operand buffer {} holds no softmax result",
             static_cast<int>(m.buffer));
    return ref(m, batch, i, j);
  }

  km::AttentionShape s_;
  std::optional<km::HalfFormat> half_;
  std::map<Buffer, std::vector<float>> buffers_;
  std::map<Buffer, bool> rounded_;  // whether a buffer holds a 16-bit copy
  std::map<Buffer, bool> stale_;    // whether a softmax left a buffer without its results
  std::map<Buffer, bool> scores_;   // whether a buffer holds a product's unscaled scores
  std::vector<km::SoftmaxRowStats>& stats_;
  std::vector<uint16_t> row_copy_;
  int64_t products_ = 0;
};

struct Result {
  std::vector<float> y, din;
  int64_t products = 0;
};

const Buffer kHeadParts[] = {Buffer::kQ, Buffer::kK, Buffer::kV};

// The chunked passes on host for input x [N, S, 3D] and output gradient dout [N, S, D].
Result chunked_attention(const km::AttentionShape& s, int64_t chunk_rows,
                         std::optional<km::HalfFormat> half, const std::vector<float>& x,
                         const std::vector<float>& dout) {
  const int64_t d = s.model_dim();
  // Each pass starts from fresh NaN buffers, as another layer may have used the workspace.
  // As the kernel: under 16 bits only the 16-bit copy (its fp32 buffer stays NaN).
  const auto heads = [&](HostExec& exec, const std::vector<float>& rows, int64_t width,
                         int64_t column, Buffer to) {
    if (half) to = ac::half_copy(to);
    for (int64_t e = 0; e < s.head_elements(); ++e) {
      const float x = rows[static_cast<size_t>(km::head_major_to_rows(s, e, width, column))];
      exec.buffer(to)[static_cast<size_t>(e)] =
          half ? km::from_half(km::to_half(x, *half), *half) : x;
    }
    exec.set_rounded(to, half.has_value());
  };
  Result r;
  r.y.assign(static_cast<size_t>(s.head_elements()), kNan);
  r.din.assign(static_cast<size_t>(3 * s.head_elements()), kNan);
  std::vector<km::SoftmaxRowStats> kept(static_cast<size_t>(s.batch * s.heads * s.seq),
                                        {kNan, kNan});
  HostExec forward(s, chunk_rows, half, kept);
  for (int64_t part = 0; part < 3; ++part) heads(forward, x, 3 * d, part * d, kHeadParts[part]);
  ac::Passes<HostExec>(s, chunk_rows, forward).forward();
  HostExec backward(s, chunk_rows, half, kept);
  for (int64_t part = 0; part < 3; ++part) heads(backward, x, 3 * d, part * d, kHeadParts[part]);
  heads(backward, dout, d, 0, Buffer::kOut);
  ac::Passes<HostExec>(s, chunk_rows, backward).backward();
  const Buffer grads[] = {Buffer::kGradQ, Buffer::kGradK, Buffer::kGradV};
  for (int64_t e = 0; e < s.head_elements(); ++e) {
    const auto at = static_cast<size_t>(e);
    r.y[static_cast<size_t>(km::head_major_to_rows(s, e, d, 0))] = forward.buffer(Buffer::kOut)[at];
    for (int64_t part = 0; part < 3; ++part) {
      r.din[static_cast<size_t>(km::head_major_to_rows(s, e, 3 * d, part * d))] =
          backward.buffer(grads[part])[at];
    }
  }
  r.products = forward.products() + backward.products();
  return r;
}

// The largest |got − want| over the largest |want| (NaN if any value is NaN).
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double error = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    if (std::isnan(diff)) return NAN;
    error = std::max(error, diff);
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return error / scale;
}

struct Reference {
  std::vector<float> x, dout, y, din;
};

// The CPU attention kernel's forward and backward on random inputs.
Reference cpu_attention(const km::AttentionShape& s) {
  const int64_t d = s.model_dim();
  CpuLayer layer(CausalSelfAttentionSpec{s.heads}, Shape{s.batch, s.seq, 3 * d});
  Reference r;
  r.x = random_floats(s.batch * s.seq * 3 * d, 70, -2.0f, 2.0f);
  r.dout = random_floats(s.batch * s.seq * d, 71);
  r.y = layer.forward(r.x);
  r.din = layer.backward(r.x, r.y, r.dout);
  return r;
}

// N = 2, S = 11, H = 2, hd = 4: chunks of 11 (the whole matrix, as the kernel was before
// chunks, and the default for hd = 4: 32 rows past S), 8 (a full chunk and a partial one), 4, 3
// and 1.
TEST(AttentionChunks, Fp32PassesOverAnyChunkSizeAreTheCpuKernelsAttention) {
  const km::AttentionShape s{2, 11, 2, 4};
  ASSERT_EQ(ac::default_chunk_rows(s), 11);
  const Reference want = cpu_attention(s);
  const Result whole = chunked_attention(s, s.seq, std::nullopt, want.x, want.dout);
  for (int64_t rows : {s.seq, int64_t{8}, int64_t{4}, int64_t{3}, int64_t{1}}) {
    SCOPED_TRACE(::testing::Message() << rows << " rows a chunk");
    const Result got = chunked_attention(s, rows, std::nullopt, want.x, want.dout);
    EXPECT_LT(relative_error(got.y, want.y), 1e-6);
    EXPECT_LT(relative_error(got.din, want.din), 1e-6);
    // Forward only re-slices the whole matrix's products: the keys a chunk skips are masked,
    // exact zeros in P, so every sum and every output bit is the same.
    EXPECT_EQ(bit_mismatches(got.y, whole.y), "");
    // Two products a chunk forward, five backward.
    EXPECT_EQ(got.products, 7 * ac::chunk_count(s.seq, rows));
  }
}

// The CUDA layer tests' attention_4heads_s40 (hd = 4): chunks of 32 and 8 rows.
TEST(AttentionChunks, TheLayerTestsShapeRunsInTwoChunks) {
  const km::AttentionShape s{2, 40, 4, 4};
  ASSERT_EQ(ac::default_chunk_rows(s), 32);
  const Reference want = cpu_attention(s);
  const Result got = chunked_attention(s, 32, std::nullopt, want.x, want.dout);
  EXPECT_LT(relative_error(got.y, want.y), 1e-6);
  EXPECT_LT(relative_error(got.din, want.din), 1e-6);
  EXPECT_EQ(got.products, 7 * 2);
}

// 16-bit operands with fp32 results: within 2 (forward) and 3 (backward) units of the 16-bit
// type's roundoff of the fp32 attention (0.6 to 1 seen), for any chunk.
TEST(AttentionChunks, SixteenBitPassesStayWithinTheirRoundoffOfFp32) {
  const km::AttentionShape s{2, 11, 2, 4};
  const Reference want = cpu_attention(s);
  for (km::HalfFormat format : {km::HalfFormat::kBf16, km::HalfFormat::kFp16}) {
    for (int64_t rows : {s.seq, ac::default_chunk_rows(s), int64_t{3}}) {
      SCOPED_TRACE(::testing::Message() << (format == km::HalfFormat::kBf16 ? "bf16 " : "fp16 ")
                                        << rows << " rows a chunk");
      const Result got = chunked_attention(s, rows, format, want.x, want.dout);
      const double u = km::unit_roundoff(format);
      EXPECT_LT(relative_error(got.y, want.y), 2 * u);
      EXPECT_LT(relative_error(got.din, want.din), 3 * u);
    }
  }
}

// The chunks cover every query once and each sees every key up to its last query.
TEST(AttentionChunks, ChunksPartitionTheQueriesAndSeeTheirKeys) {
  for (int64_t seq : {1, 7, 8, 9, 1024}) {
    for (int64_t rows : {1, 3, 8, 128}) {
      int64_t next = 0;
      for (int64_t i = 0; i < ac::chunk_count(seq, rows); ++i) {
        const ac::Chunk c = ac::chunk(seq, rows, i);
        EXPECT_EQ(c.first, next);
        EXPECT_GT(c.rows, 0);
        EXPECT_LE(c.rows, rows);
        EXPECT_EQ(c.keys, c.first + c.rows);
        next = c.first + c.rows;
      }
      EXPECT_EQ(next, seq) << seq << " queries in chunks of " << rows;
    }
  }
}

// GPT-2 small at 8 sequences of 1024: chunks of 512 rows, each score buffer half the whole
// [N·H, S, S] (201 MB instead of 403), and the score buffers linear in S: an eighth of the
// whole at 4096.
TEST(AttentionChunks, ScoreBuffersAreLinearInTheSequence) {
  const km::AttentionShape gpt2{8, 1024, 12, 64};
  EXPECT_EQ(ac::default_chunk_rows(gpt2), 512);
  EXPECT_EQ(ac::score_elements(gpt2, 512), 8 * 12 * 512 * 1024);
  EXPECT_EQ(ac::score_elements(gpt2, 1024), 8 * 12 * 1024 * 1024);
  const km::AttentionShape longer{8, 4096, 12, 64};
  EXPECT_EQ(ac::score_elements(longer, ac::default_chunk_rows(longer)),
            4 * ac::score_elements(gpt2, 512));
  EXPECT_EQ(8 * ac::score_elements(longer, ac::default_chunk_rows(longer)),
            ac::score_elements(longer, longer.seq));
  // Short sequences and narrow heads: 8·hd rows, a multiple of 8, at most S.
  EXPECT_EQ(ac::default_chunk_rows({1, 5, 2, 2}), 5);
  EXPECT_EQ(ac::default_chunk_rows({1, 64, 2, 1}), 8);
  EXPECT_EQ(ac::default_chunk_rows({1, 200, 2, 13}), 104);
}

// The workspace's buffers: which each precision has, of what sizes, each starting 256-byte
// aligned, none overlapping another, the whole no larger than their padded sum. Shapes whose
// packed buffers would be misaligned (N·S·hd = 165, scores of 33 and 99 values) and GPT-2
// small's.
TEST(AttentionChunks, WorkspaceBuffersAreAlignedAndApart) {
  for (const km::AttentionShape& s : {km::AttentionShape{1, 11, 3, 5}, {8, 1024, 12, 64}}) {
    for (const bool half : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << s.head_elements() << " head elements, " << (half ? "16" : "32") << " bits");
      const int64_t rows = ac::default_chunk_rows(s);
      const ac::Workspace w(s, rows, half);
      std::vector<std::pair<int64_t, int64_t>> spans;
      int64_t padded = 0;
      for (int i = 0; i < ac::Workspace::kBuffers; ++i) {
        const auto b = static_cast<Buffer>(i);
        const bool score = b >= Buffer::kScores;
        const bool sixteen_bit = (b >= Buffer::kHalfQ && !score) || b == Buffer::kHalfScores;
        const bool fp32_qkv = b < Buffer::kOut;
        EXPECT_EQ(w.has(b), sixteen_bit ? half : !(half && fp32_qkv)) << "buffer " << i;
        if (!w.has(b)) {
          EXPECT_EQ(w.bytes(b), 0);
          EXPECT_THROW(w.offset(b), Error);
          continue;
        }
        const int64_t elements = score ? ac::score_elements(s, rows) : s.head_elements();
        EXPECT_EQ(w.bytes(b), elements * (sixteen_bit ? 2 : 4)) << "buffer " << i;
        EXPECT_EQ(w.offset(b) % ac::Workspace::kAlignment, 0) << "buffer " << i;
        spans.emplace_back(w.offset(b), w.offset(b) + w.bytes(b));
        padded += (w.bytes(b) + 255) / 256 * 256;
      }
      std::sort(spans.begin(), spans.end());
      for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
      EXPECT_LE(spans.back().second, w.size());
      EXPECT_EQ(w.size(), padded);
    }
  }
}

// With the fused passes the workspace has no chunk of scores: kScores holds each row's delta,
// the other score buffers are absent, the head buffers as with the chunks. For GPT-2 small at 8
// in bf16 that leaves out 480 MiB of score chunks.
TEST(AttentionChunks, TheFusedPassesWorkspaceHoldsDeltasNotScores) {
  const km::AttentionShape s{8, 1024, 12, 64};
  const int64_t rows = ac::default_chunk_rows(s);
  const ac::Workspace chunks(s, rows, true);
  const ac::Workspace flash(s, rows, true, true);
  EXPECT_EQ(flash.bytes(Buffer::kScores), s.score_rows() * 4);
  EXPECT_FALSE(flash.has(Buffer::kGradScores));
  EXPECT_FALSE(flash.has(Buffer::kHalfScores));
  for (const Buffer b : {Buffer::kOut, Buffer::kGradQ, Buffer::kGradK, Buffer::kGradV,
                         Buffer::kHalfQ, Buffer::kHalfK, Buffer::kHalfV, Buffer::kHalfOut}) {
    EXPECT_EQ(flash.bytes(b), chunks.bytes(b)) << static_cast<int>(b);
    EXPECT_LE(flash.offset(b) + flash.bytes(b), flash.offset(Buffer::kScores));
  }
  EXPECT_EQ(flash.offset(Buffer::kScores) + s.score_rows() * 4, flash.size());
  EXPECT_EQ(chunks.size() - flash.size(), ac::score_elements(s, rows) * 10 - s.score_rows() * 4);
  EXPECT_EQ(ac::score_elements(s, rows) * 10, int64_t{480} << 20);
}

// SCALESCOPE_ATTENTION_CHUNK_ROWS: unset or 0 the default, a number of rows up to S, past S
// the whole matrices; anything else an error naming the variable.
TEST(AttentionChunks, TheEnvironmentChoosesTheChunk) {
  const km::AttentionShape s{2, 1024, 12, 64};
  struct Unset {
    ~Unset() { unsetenv("SCALESCOPE_ATTENTION_CHUNK_ROWS"); }
  };
  const auto rows = [&](const char* value) {
    const Unset unset;
    setenv("SCALESCOPE_ATTENTION_CHUNK_ROWS", value, 1);
    return ac::chunk_rows(s, ac::chunk_rows_from_environment());
  };
  EXPECT_EQ(ac::chunk_rows(s, ac::chunk_rows_from_environment()), 512);
  EXPECT_EQ(rows("0"), 512);
  EXPECT_EQ(rows("64"), 64);
  EXPECT_EQ(rows("4096"), 1024);
  for (const char* bad : {"-8", "12x", "lots", "99999999999999999999"}) {
    try {
      rows(bad);
      ADD_FAILURE() << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SCALESCOPE_ATTENTION_CHUNK_ROWS"), std::string::npos)
          << e.what();
    }
  }
}

// SCALESCOPE_ATTENTION: unset, empty or "chunks" the chunks, "flash" the fused passes; anything
// else an error naming the variable and the two words.
TEST(AttentionChunks, TheEnvironmentChoosesChunksOrFlash) {
  struct Unset {
    ~Unset() { unsetenv("SCALESCOPE_ATTENTION"); }
  };
  const auto kind = [&](const char* value) {
    const Unset unset;
    setenv("SCALESCOPE_ATTENTION", value, 1);
    return ac::kind_from_environment();
  };
  EXPECT_EQ(ac::kind_from_environment(), ac::Kind::kChunks);
  EXPECT_EQ(kind(""), ac::Kind::kChunks);
  EXPECT_EQ(kind("chunks"), ac::Kind::kChunks);
  EXPECT_EQ(kind("flash"), ac::Kind::kFlash);
  for (const char* bad : {"Flash", "fused", "1"}) {
    try {
      kind(bad);
      ADD_FAILURE() << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SCALESCOPE_ATTENTION=" + std::string(bad) +
                                           ": give chunks or flash"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
