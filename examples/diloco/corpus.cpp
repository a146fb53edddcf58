#include "corpus.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace diloco {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBlockBytes = 4096;
constexpr size_t kEvalEvery = 20;

bool appendFile(const fs::path& path, std::vector<uint8_t>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.insert(out.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// The files a path stands for: itself, or a directory's regular files in name order.
std::vector<fs::path> expand(const fs::path& path, std::error_code& ec) {
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_symlink() || !entry.is_regular_file() || entry.path().extension() == ".dat") continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

pccl::Result<Corpus> loadCorpus(const std::vector<std::string>& paths) {
  std::vector<uint8_t> all;
  for (const auto& p : paths) {
    std::error_code ec;
    for (const auto& file : expand(p, ec)) {
      if (!appendFile(file, all)) return pccl::Status::invalidArgument("cannot read " + file.string());
    }
    if (ec) return pccl::Status::invalidArgument("cannot list " + p + ": " + ec.message());
  }
  Corpus corpus;
  for (size_t block = 0; block * kBlockBytes < all.size(); ++block) {
    auto begin = all.begin() + static_cast<std::ptrdiff_t>(block * kBlockBytes);
    auto end = all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), (block + 1) * kBlockBytes));
    auto& dst = (block % kEvalEvery == kEvalEvery - 1) ? corpus.eval : corpus.train;
    dst.insert(dst.end(), begin, end);
  }
  if (corpus.train.size() < 16 * kBlockBytes || corpus.eval.empty()) {
    return pccl::Status::invalidArgument("corpus too small: " + std::to_string(all.size()) + " bytes");
  }
  return corpus;
}

std::vector<uint8_t> shardOf(const std::vector<uint8_t>& bytes, uint32_t index, uint32_t count) {
  size_t per = bytes.size() / count;
  auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(per * index);
  return std::vector<uint8_t>(begin, begin + static_cast<std::ptrdiff_t>(per));
}

}  // namespace diloco
