// The wire layer in isolation, a seeded robustness loop: random byte strings and single byte and bit
// mutations of valid frames go through the header, the dispatcher and every decoder, which never
// crash, fail only with the codes their contract names, and never allocate past the limits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "alloc_watch.hpp"
#include "wire/dispatch.hpp"
#include "wire_samples.hpp"

using namespace pccl;
using namespace pccl::wire;
using namespace pccl::wire::samples;
using pccl::test::AllocWatch;

// ---- robustness -------------------------------------------------------------------------------

namespace {

struct FuzzStats {
  size_t decodes = 0;
  size_t accepted = 0;
  size_t bad_code = 0;          // a failure whose code is not the one the contract names
  size_t empty_message = 0;     // a failure without a message
  size_t not_canonical = 0;     // an accepted payload that does not re-encode to the same bytes
  size_t header_ok = 0;
  size_t dispatched_ok = 0;
};

template <typename M>
void decodeOne(const uint8_t* p, size_t n, FuzzStats& st) {
  ++st.decodes;
  auto m = decodePayload<M>(p, n);
  if (m.isOk()) {
    ++st.accepted;
    const std::vector<uint8_t> again = payloadOf(*m);
    if (again.size() != n || !std::equal(again.begin(), again.end(), p)) ++st.not_canonical;
    return;
  }
  if (m.status().isOk() || m.status().code() != Code::kProtocolError) ++st.bad_code;
  if (m.status().message().empty()) ++st.empty_message;
}

template <typename... Ms>
void decodeAllImpl(std::tuple<Ms...>*, const uint8_t* p, size_t n, FuzzStats& st) {
  (decodeOne<Ms>(p, n, st), ...);
}

void decodeAll(const std::vector<uint8_t>& bytes, FuzzStats& st) {
  decodeAllImpl(static_cast<AllMessages*>(nullptr), bytes.data(), bytes.size(), st);
}

Dispatcher fullDispatcher() {
  Dispatcher d;
  forEachMessage([&](auto tag) {
    using M = typename decltype(tag)::type;
    d.on<M>([](const FrameHeader&, const M&) { return Status::ok(); });
  });
  return d;
}

// Header, then (when the header is good) dispatch of the payload it announces, then every
// decoder on the bytes after the header. Every buffer is exactly sized so ASan sees overreads.
void fuzzFrame(const std::vector<uint8_t>& bytes, const Dispatcher& d, FuzzStats& st) {
  auto h = decodeHeader(bytes.data(), bytes.size(), kMaxControlPayload);
  if (h.isOk()) {
    ++st.header_ok;
  } else {
    const Code c = h.status().code();
    if (c != Code::kProtocolError && c != Code::kVersionMismatch) ++st.bad_code;
    if (h.status().message().empty()) ++st.empty_message;
  }
  if (bytes.size() < kHeaderSize) return;
  const std::vector<uint8_t> payload(bytes.begin() + static_cast<std::ptrdiff_t>(kHeaderSize), bytes.end());
  if (h.isOk() && h->length == payload.size()) {
    Status s = d.dispatch(*h, payload.data(), payload.size());
    if (s.isOk()) {
      ++st.dispatched_ok;
    } else if (s.code() != Code::kProtocolError) {
      ++st.bad_code;
    }
  }
  decodeAll(payload, st);
}

std::vector<std::vector<uint8_t>> validFrames() {
  std::vector<std::vector<uint8_t>> frames;
  forEachMessage([&](auto tag) {
    using M = typename decltype(tag)::type;
    frames.push_back(encodeFrame(sample(tag), static_cast<uint64_t>(M::kType) << 40));
  });
  TopologyUpdate empty_ring;
  empty_ring.epoch = 3;
  frames.push_back(encodeFrame(empty_ring, 3));
  TopologyUpdate one;
  one.epoch = 4;
  one.ring.push_back(member(1, "h", 2, 3, 4));
  frames.push_back(encodeFrame(one, 4));
  return frames;
}

}  // namespace

TEST_CASE("wire: random byte strings never crash any decoder") {
  std::mt19937 rng(0x5EED1234u);
  std::uniform_int_distribution<int> len_dist(0, 200);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  const Dispatcher d = fullDispatcher();
  const HeaderBytes good = encodeHeader(FrameHeader{});
  FuzzStats st;
  size_t biggest = 0;
  {
    AllocWatch watch;
    for (int i = 0; i < 20000; ++i) {
      std::vector<uint8_t> bytes(static_cast<size_t>(len_dist(rng)));
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte_dist(rng));
      // Half the inputs start with a valid magic and version so the later header checks run too.
      if (i % 2 == 1) {
        for (size_t k = 0; k < 6 && k < bytes.size(); ++k) bytes[k] = good[k];
        if (i % 4 == 3 && bytes.size() >= kHeaderSize) {
          const uint32_t len = static_cast<uint32_t>(bytes.size() - kHeaderSize);
          for (size_t k = 0; k < 4; ++k) bytes[16 + k] = static_cast<uint8_t>(len >> (8 * k));
          bytes[6] = static_cast<uint8_t>(byte_dist(rng) % 64);
          bytes[7] = 0;
        }
      }
      fuzzFrame(bytes, d, st);
      decodeAll(bytes, st);  // the whole string as a payload too
    }
    biggest = watch.maxSoFar();
  }
  INFO("decodes " << st.decodes << ", accepted " << st.accepted << ", headers ok " << st.header_ok);
  CHECK(st.decodes > 20000 * 21);
  CHECK(st.bad_code == 0);
  CHECK(st.empty_message == 0);
  CHECK(st.not_canonical == 0);
  CHECK(st.header_ok > 0);
  CHECK(biggest < 64 * 1024);  // hostile lengths and counts never drive a big allocation
}

TEST_CASE("wire: single byte and bit mutations of valid frames never crash any decoder") {
  std::mt19937 rng(0xC0FFEEu);
  const std::vector<std::vector<uint8_t>> frames = validFrames();
  std::uniform_int_distribution<size_t> frame_dist(0, frames.size() - 1);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  std::uniform_int_distribution<int> bit_dist(0, 7);
  const Dispatcher d = fullDispatcher();
  FuzzStats st;
  size_t biggest = 0;
  {
    AllocWatch watch;
    for (int i = 0; i < 20000; ++i) {
      std::vector<uint8_t> bytes = frames[frame_dist(rng)];
      std::uniform_int_distribution<size_t> pos_dist(0, bytes.size() - 1);
      const size_t pos = pos_dist(rng);
      if (i % 2 == 0) {
        bytes[pos] = static_cast<uint8_t>(bytes[pos] ^ (1u << bit_dist(rng)));
      } else {
        bytes[pos] = static_cast<uint8_t>(byte_dist(rng));
      }
      fuzzFrame(bytes, d, st);
    }
    biggest = watch.maxSoFar();
  }
  INFO("decodes " << st.decodes << ", accepted " << st.accepted << ", dispatched " << st.dispatched_ok);
  CHECK(st.decodes >= 20000 * 21);
  CHECK(st.bad_code == 0);
  CHECK(st.empty_message == 0);
  CHECK(st.not_canonical == 0);
  CHECK(st.dispatched_ok > 0);  // mutations inside fixed fields still decode
  CHECK(biggest < 64 * 1024);
}
