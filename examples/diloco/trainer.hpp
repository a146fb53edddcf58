// The DiLoCo loop (inner AdamW for H steps, pseudo-gradient all-reduce through pccl, outer Nesterov
// SGD) and the single-worker baseline without pccl. Both return the process exit status.
#ifndef PCCL_EXAMPLES_DILOCO_TRAINER_HPP_
#define PCCL_EXAMPLES_DILOCO_TRAINER_HPP_

#include "train_config.hpp"

namespace diloco {

int runDiloco(const TrainConfig& config);    // config.workers > 1: joins the pccl run at config.master
int runBaseline(const TrainConfig& config);  // outer_steps × inner_steps AdamW steps, logged every H

}  // namespace diloco

#endif  // PCCL_EXAMPLES_DILOCO_TRAINER_HPP_
