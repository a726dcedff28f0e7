// A temporary directory one multi-rank test shares across the ranks of a communicator.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "collectives/communicator.h"
#include "tensor/tensor.h"

namespace tandem::trainer::testing {

// tandem_<test>_<tag>_<pid of rank 0> under the temp directory: made by rank 0, seen by every
// rank of `comm` after the constructor's barrier, removed by rank 0 once every rank is done.
struct SharedDir {
  SharedDir(collectives::Communicator& comm, const std::string& tag) : comm(comm) {
    Tensor pid = Tensor::scalar(double(getpid()), DType::Int64);
    comm.broadcast(pid, 0);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = (std::filesystem::temp_directory_path() /
            ("tandem_" + std::string(info->name()) + "_" + tag + "_" + std::to_string(int64_t(pid.item()))))
               .string();
    if (comm.rank() == 0) std::filesystem::create_directories(path);
    comm.barrier();
  }
  ~SharedDir() {
    comm.barrier();
    if (comm.rank() == 0) std::filesystem::remove_all(path);
  }
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;

  collectives::Communicator& comm;
  std::string path;
};

}  // namespace tandem::trainer::testing
