#include "core/byte_source.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/check.h"
#include "core/fs.h"

namespace scalescope {
namespace {

// Raw bytes read from the file at a time: large enough that reads and inflate calls cost
// nothing beside the decompression (zlib's own default of 8 KiB measurably slowed the 26 MB
// Fashion-MNIST file), small enough to be no memory beside what a reader keeps.
constexpr size_t kBufferBytes = size_t{1} << 20;

bool has_gzip_magic(std::string_view head) {
  return head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
         static_cast<unsigned char>(head[1]) == 0x8b;
}

Bytef* bytes(char* p) {
  return reinterpret_cast<Bytef*>(p);
}

}  // namespace

ByteSource::ByteSource(const std::string& path, std::string what)
    : path_(path), what_(std::move(what)), buffer_(kBufferBytes) {
  check_readable(path);
  in_.open(path, std::ios::binary);
  SS_CHECK_INPUT(in_.is_open(), "cannot read '{}': {}", path, std::strerror(errno));
  refill();
  head_.assign(buffer_.data(), std::min(end_, kHeadBytes));
  gzip_ = has_gzip_magic(head_);
  if (!gzip_) return;
  z_ = new z_stream_s{};
  // 15 + 32: the largest window, and a gzip (or zlib) header expected and checked.
  if (inflateInit2(z_, 15 + 32) != Z_OK) {
    delete z_;
    z_ = nullptr;
    throw_error(fmt::format("{}: zlib could not start inflating (out of memory?)", what_));
  }
}

ByteSource::~ByteSource() {
  if (z_ == nullptr) return;
  inflateEnd(z_);
  delete z_;
}

bool ByteSource::refill() {
  in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  SS_CHECK_INPUT(!in_.bad(), "cannot read '{}': read error", path_);
  next_ = 0;
  end_ = static_cast<size_t>(in_.gcount());
  return end_ > 0;
}

size_t ByteSource::read(char* dst, size_t n) {
  return gzip_ ? inflate_into(dst, n) : read_raw(dst, n);
}

size_t ByteSource::read_raw(char* dst, size_t n) {
  size_t got = 0;
  while (got < n && (next_ < end_ || refill())) {
    const size_t take = std::min(n - got, end_ - next_);
    std::memcpy(dst + got, buffer_.data() + next_, take);
    next_ += take;
    got += take;
  }
  return got;
}

size_t ByteSource::inflate_into(char* dst, size_t n) {
  size_t got = 0;
  while (got < n && !done_) {
    if (next_ == end_ && !refill()) gzip_error(Z_BUF_ERROR);  // the file ended inside a member
    const size_t room = std::min<size_t>(n - got, UINT_MAX);
    z_->next_in = bytes(buffer_.data() + next_);
    z_->avail_in = static_cast<uInt>(end_ - next_);
    z_->next_out = bytes(dst + got);
    z_->avail_out = static_cast<uInt>(room);
    const int rc = inflate(z_, Z_NO_FLUSH);
    next_ = end_ - z_->avail_in;
    got += room - z_->avail_out;
    if (rc == Z_STREAM_END) {
      // Another member may follow; anything else there fails as its header.
      if (next_ == end_ && !refill()) {
        done_ = true;
      } else if (inflateReset(z_) != Z_OK) {
        gzip_error(Z_STREAM_ERROR);
      }
    } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && z_->avail_in == 0)) {
      gzip_error(rc);  // Z_BUF_ERROR with input left: no progress possible
    }
  }
  return got;
}

void ByteSource::gzip_error(int rc) const {
  SS_CHECK_INPUT(rc != Z_BUF_ERROR, "{}: the gzip stream is cut short (the file is truncated)",
                 what_);
  SS_CHECK(rc != Z_MEM_ERROR, "{}: out of memory while decompressing", what_);
  throw_usage_error(fmt::format("{}: the gzip stream is corrupt ({})", what_,
                                z_->msg != nullptr ? z_->msg : zError(rc)));
}

}  // namespace scalescope
