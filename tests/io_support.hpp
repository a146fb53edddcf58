// Tests that drive net objects on their own io_context thread: run a function there and wait for it.
#ifndef PCCL_TESTS_IO_SUPPORT_HPP_
#define PCCL_TESTS_IO_SUPPORT_HPP_

#include <future>

#include "net/asio.hpp"

namespace pccl::test {

// Runs `fn` on `io`'s thread and returns when it has run.
template <typename F>
void onIo(asio::io_context& io, F fn) {
  std::promise<void> done;
  asio::post(io, [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace pccl::test

#endif  // PCCL_TESTS_IO_SUPPORT_HPP_
