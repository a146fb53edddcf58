// Corpus: the training text as bytes, split into a training part and a held-out part, and sharded.
#ifndef PCCL_EXAMPLES_DILOCO_CORPUS_HPP_
#define PCCL_EXAMPLES_DILOCO_CORPUS_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "pccl/status.hpp"

namespace diloco {

struct Corpus {
  std::vector<uint8_t> train;
  std::vector<uint8_t> eval;  // every 20th 4 KiB block: the same for every worker
};

// Reads every path (a directory contributes its regular files, sorted, skipping symlinks and *.dat).
pccl::Result<Corpus> loadCorpus(const std::vector<std::string>& paths);

// The index-th of `count` contiguous, equally sized pieces of `bytes`.
std::vector<uint8_t> shardOf(const std::vector<uint8_t>& bytes, uint32_t index, uint32_t count);

}  // namespace diloco

#endif  // PCCL_EXAMPLES_DILOCO_CORPUS_HPP_
