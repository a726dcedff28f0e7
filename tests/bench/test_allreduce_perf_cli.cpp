// bench/allreduce_perf's command line: nccl-tests' flags, short and long, with the values its
// users type; what cannot apply exits 2 naming the flag and the reason; sizes that overflow or
// hold no element are errors; -d half / bfloat16 reduce exactly at 2 and 3 ranks.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/run_command.h"

namespace {

CommandResult perf(const std::string& args, int ranks = 0, const char* program = ALLREDUCE_PERF_PATH) {
  const std::string launcher = ranks == 0 ? "" : std::string(TANDEM_MPIEXEC_PATH) + " -np " + std::to_string(ranks) + " ";
  return run_command("env OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                     "OMPI_MCA_rmaps_base_oversubscribe=1 " + launcher + program + " " + args);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(AllreducePerfCli, FlagsThatCannotApplyExit2SayingWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {"-g 2", "-g 2: one device per process"},
      {"--nthreads=4", "-t 4: one thread per process"},
      {"-r 0", "-r 0: an allreduce has no root"},
      {"-G 10", "-G 10: capturing the collectives in CUDA graphs is not implemented"},
      {"-R 1", "-R 1: buffer registration"},
      {"-p 1", "-p 1: parallel initialization"},
      {"-o mulsum", "-o mulsum: NCCL's pre-multiplied sum"},
      {"-d uint32", "-d uint32: Tandem's tensors have no uint32"},
      {"-b 99999999999G", "-b 99999999999G: more than the largest size allowed"},
      {"-b 3 -e 3 -d double", "holds no whole double element (8 bytes)"},
      {"-i 1 -b 5M", "-b 5242880 -e 33554432 -i 1 makes 28311553 sizes, more than the 10000 a run may hold"},
      {"-z 0 --backend nccl", "-z 0: every allreduce runs to completion"},
      {"-x 1", "-x: unknown flag"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = perf(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
    EXPECT_TRUE(r.err_has(message)) << args << ":\n" << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
  const CommandResult help = perf("-h");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(help.out_has("-a,--average 0|1|2|3")) << help.out;
}

// The plain-MPI peer's usage offers only what it takes: every choice it lists runs.
TEST(AllreducePerfCli, ThePeersUsageOffersOnlyWhatItAccepts) {
  const CommandResult help = perf("-h", 0, PEER_PATH);
  EXPECT_EQ(help.exit_code, 0) << help.out << help.err;
  EXPECT_TRUE(help.out_has("-d,--datatype float|double|int32|int64 (float)")) << help.out;
  for (const char* refused : {"mpi|nccl", "|local", "half", "bfloat16", "|all", "--agg_iters", "--run_cycles", "--average",
                              "--timeout"}) {
    EXPECT_FALSE(help.out_has(refused)) << refused << " is offered:\n" << help.out;
  }
  const CommandResult bad = perf("--backend nccl", 0, PEER_PATH);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(bad.err_has("--backend mpi\n")) << bad.err;
  for (const char* type : {"float", "double", "int32", "int64"}) {
    const CommandResult r = perf(std::string("-b 64 -e 64 -n 1 -w 0 -d ") + type, 2, PEER_PATH);
    EXPECT_EQ(r.exit_code, 0) << type << r.out << r.err;
  }
}

TEST(AllreducePerfCli, NcclTestsFlagsAsUsersTypeThem) {
  // 3 sizes x 5 ops x 2 cycles of half precision, 2 operations per timed iteration, the slowest
  // rank's time; the accepted "off" values of the thread/device flags change nothing.
  const CommandResult r = perf("-b 1K -e 4K -f 2 -d half -o all -n 2 -w 1 -c 2 -a 3 -m 2 -N 2 -z 1 -C 1 -g 1 -t 1 "
                               "-T 60 --backend mpi", 2);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(r.out_has("agg iters: 2 validation: 2")) << r.out;
  EXPECT_EQ(count(r.out, "    half  "), 30) << r.out;
  EXPECT_TRUE(r.out_has("# Out of bounds values : 0 OK")) << r.out;

  const CommandResult bf16 = perf("--minbytes=1000 --maxbytes 3000 --stepbytes=1000 -d bfloat16 -o avg -n 1 -w 0", 3);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.out << bf16.err;
  EXPECT_TRUE(bf16.out_has("step: 1000(bytes)")) << bf16.out;
  EXPECT_TRUE(bf16.out_has("        1000           500  bfloat16     avg")) << bf16.out;
  EXPECT_TRUE(bf16.out_has("        3000          1500  bfloat16     avg")) << bf16.out;
  EXPECT_TRUE(bf16.out_has("# Out of bounds values : 0 OK")) << bf16.out;

  const CommandResult all_types = perf("-b 64 -e 64 -d all -n 1 -w 0 --backend local");
  ASSERT_EQ(all_types.exit_code, 0) << all_types.out << all_types.err;
  for (const char* type : {" float ", " double ", " int32 ", " int64 ", " half ", " bfloat16 "}) {
    EXPECT_TRUE(all_types.out_has(type)) << type << "\n" << all_types.out;
  }
}

TEST(AllreducePerfCli, ThePeerRefusesWhatItDoesNotImplement) {
  const CommandResult half = perf("-d half", 0, PEER_PATH);
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_TRUE(half.err_has("-d half: the plain-MPI peer reduces float, double, int32 and int64 only")) << half.err;
  const CommandResult agg = perf("-m 4", 0, PEER_PATH);
  EXPECT_EQ(agg.exit_code, 2);
  EXPECT_TRUE(agg.err_has("--agg_iters: the plain-MPI peer does not implement it")) << agg.err;
}
