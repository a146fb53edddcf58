// The master's flat-or-two-level choice (master/levels.hpp): what members asked, regions with nothing
// to gain, and the cost model over a synthetic link book shaped like bench/regions.paths (4 + 3 + 2
// members, 500 Mbit/s and 0.5 ms inside a region, 50 Mbit/s and 40 / 70 / 80 ms one way between them),
// including the size below which a two-level group's calls run flat. Pure: no sockets.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "master/levels.hpp"

using namespace pccl;
using master::decideLevels;
using master::LinkBook;

namespace {

wire::Uuid idOf(uint8_t tag) {
  wire::Uuid id{};
  id[0] = tag;
  id[15] = static_cast<uint8_t>(255 - tag);
  return id;
}

// A ring of one group, region by region, with the regions `regions` (one entry per member).
std::vector<wire::MemberInfo> ringOf(const std::vector<std::string>& regions) {
  std::vector<wire::MemberInfo> ring;
  for (size_t i = 0; i < regions.size(); ++i) {
    wire::MemberInfo m;
    m.id = idOf(static_cast<uint8_t>(i + 1));
    m.region = regions[i];
    ring.push_back(m);
  }
  return ring;
}

double oneWayMs(const std::string& a, const std::string& b) {
  if (a == b) return 0.5;
  const std::map<std::pair<std::string, std::string>, double> d = {
      {{"eu", "us"}, 40}, {{"eu", "asia"}, 70}, {{"us", "asia"}, 80}};
  auto it = d.find({a, b});
  return it != d.end() ? it->second : d.at({b, a});
}

// Every ordered pair measured, as a survey of the scenario would leave the book.
LinkBook scenarioBook(const std::vector<wire::MemberInfo>& ring) {
  LinkBook book;
  for (const auto& a : ring) {
    for (const auto& b : ring) {
      if (a.id == b.id) continue;
      const bool lan = a.region == b.region;
      const uint64_t bandwidth = lan ? 500'000'000 / 8 : 50'000'000 / 8;
      book.record(a.id, b.id, master::MeasuredLink{bandwidth, static_cast<uint64_t>(2 * oneWayMs(a.region, b.region) * 1000)});
    }
  }
  return book;
}

std::map<wire::Uuid, uint8_t> asking(const std::vector<wire::MemberInfo>& ring, wire::Levels all) {
  std::map<wire::Uuid, uint8_t> asked;
  for (const auto& m : ring) asked[m.id] = static_cast<uint8_t>(all);
  return asked;
}

const std::vector<std::string> kScenario = {"eu", "eu", "eu", "eu", "us", "us", "us", "asia", "asia"};

}  // namespace

TEST_CASE("levels: the cost model picks two levels for the three-region scenario, from a few MiB up",
          "[levels]") {
  const auto ring = ringOf(kScenario);
  const auto choice = decideLevels(ring, asking(ring, wire::Levels::kAuto), scenarioBook(ring)).at(0);
  INFO(choice.why);
  CHECK(choice.levels == wire::Levels::kTwoLevel);
  // By the model (levels.hpp), at 1 MiB: flat 0.64 s, two levels 0.46 s; at 4 MiB: flat 1.54 s, two
  // levels 0.87 s (the emulator measured 0.70 / 0.47 s and 1.77 / 0.81 s, docs/benchmarks.md, protocol
  // 16); two levels win by the margin from 128 KiB on (an all-reduce that small gathers in two levels).
  CHECK(choice.two_level_bytes == (128u << 10));
  CHECK(choice.why.find("from 128 KiB up") != std::string::npos);
}

TEST_CASE("levels: one WAN link measured low among a region's many does not move the size", "[levels]") {
  // Probes of one path differ by up to half (docs/benchmarks.md, protocol 15). Asia's 14 links out: one
  // of them, off the flat ring, at half its rate. Priced by the slowest link, asia's WAN level would
  // be twice as slow and two levels would start at 2 MiB; its median rate leaves the size at 128 KiB.
  const auto ring = ringOf(kScenario);
  LinkBook book = scenarioBook(ring);
  book.record(ring[7].id, ring[0].id, master::MeasuredLink{25'000'000 / 8, 140'000});
  const auto choice = decideLevels(ring, asking(ring, wire::Levels::kAuto), book).at(0);
  INFO(choice.why);
  CHECK(choice.levels == wire::Levels::kTwoLevel);
  CHECK(choice.two_level_bytes == (128u << 10));
  // Half of asia's links that slow (all of member 7's, none on the flat ring): its WAN level is.
  for (size_t b = 0; b < 7; ++b) book.record(ring[7].id, ring[b].id, master::MeasuredLink{25'000'000 / 8, 140'000});
  const auto slow = decideLevels(ring, asking(ring, wire::Levels::kAuto), book).at(0);
  INFO(slow.why);
  CHECK(slow.two_level_bytes > (1u << 20));
}

TEST_CASE("levels: asked, unmeasured, one region and one member per region", "[levels]") {
  const auto ring = ringOf(kScenario);
  const LinkBook book = scenarioBook(ring);
  // A member asking for two levels: every size, whatever the model says.
  auto asked = asking(ring, wire::Levels::kAuto);
  asked[ring[3].id] = static_cast<uint8_t>(wire::Levels::kTwoLevel);
  auto c = decideLevels(ring, asked, book).at(0);
  CHECK(c.levels == wire::Levels::kTwoLevel);
  CHECK(c.two_level_bytes == 0);
  // A member asking for flat wins over one asking for two levels.
  asked[ring[5].id] = static_cast<uint8_t>(wire::Levels::kFlat);
  CHECK(decideLevels(ring, asked, book).at(0).levels == wire::Levels::kFlat);
  // Links not measured: two levels at every size.
  c = decideLevels(ring, asking(ring, wire::Levels::kAuto), LinkBook{}).at(0);
  CHECK(c.levels == wire::Levels::kTwoLevel);
  CHECK(c.two_level_bytes == 0);
  // Nothing to gain: flat.
  const auto one = ringOf({"eu", "eu", "eu"});
  CHECK(decideLevels(one, asking(one, wire::Levels::kTwoLevel), scenarioBook(one)).at(0).levels == wire::Levels::kFlat);
  const auto spread = ringOf({"eu", "us", "asia"});
  c = decideLevels(spread, asking(spread, wire::Levels::kAuto), scenarioBook(spread)).at(0);
  CHECK(c.levels == wire::Levels::kFlat);
  CHECK(c.why == "flat (one member per region)");
}

TEST_CASE("levels: a WAN as fast as the LAN leaves nothing to gain, a slower one wins from smaller sizes",
          "[levels]") {
  const auto ring = ringOf(kScenario);
  LinkBook same;
  for (const auto& a : ring) {
    for (const auto& b : ring) {
      if (a.id != b.id) same.record(a.id, b.id, master::MeasuredLink{500'000'000 / 8, 1000});
    }
  }
  CHECK(decideLevels(ring, asking(ring, wire::Levels::kAuto), same).at(0).levels == wire::Levels::kFlat);
  // A ten times slower WAN (5 Mbit/s per pair): bandwidth counts from smaller sizes on (here from the
  // smallest: every size).
  LinkBook slow = scenarioBook(ring);
  for (const auto& a : ring) {
    for (const auto& b : ring) {
      if (a.id != b.id && a.region != b.region) {
        slow.record(a.id, b.id, master::MeasuredLink{5'000'000 / 8, static_cast<uint64_t>(2 * oneWayMs(a.region, b.region) * 1000)});
      }
    }
  }
  const auto c = decideLevels(ring, asking(ring, wire::Levels::kAuto), slow).at(0);
  CHECK(c.levels == wire::Levels::kTwoLevel);
  CHECK(c.two_level_bytes < (128u << 10));
}
